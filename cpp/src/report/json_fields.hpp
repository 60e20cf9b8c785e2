// Internal (not public API): the JSON field rules the summary's writers and readers share.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

#include "steptrace/summary.hpp"

namespace steptrace::detail {

using json_doc = nlohmann::ordered_json;

// A count as json() writes it: a non-negative integer, and not an absurd one.
std::uint64_t count_at(const json_doc& j, const char* key);
// A time, rate or share as json() writes it: a finite number, never negative.
double number_at(const json_doc& j, const char* key);
// A change, or a time that may precede an origin: a finite number.
double signed_at(const json_doc& j, const char* key);
// A value as an error message shows it: its JSON, cut to 40 characters.
std::string shown(const json_doc& v);
json_doc stat_json(const stat_ms& m);
stat_ms stat_from(const json_doc& j);

// The timeline, series and host memory sections (timeline_json.cpp).
json_doc timeline_json(const timeline_view& t);
timeline_view timeline_from(const json_doc& j);
json_doc series_json(const step_series& s);
step_series series_from(const json_doc& j);
json_doc host_memory_json(const host_memory_stats& m);
host_memory_stats host_memory_from(const json_doc& j);

}  // namespace steptrace::detail
