// Internal (not public API): the JSON field rules the summary's writers and readers share.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

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

// Reading a file, which may hold anything. A summary nests 6 levels deep; a text nested deeper
// than max_json_depth is refused before it is parsed (nothing downstream recurses into
// unbounded depth, and the error stays one short line).
inline constexpr std::size_t max_json_depth = 64;
// Whether arrays and objects in `text` nest deeper than `limit`, counted outside strings.
bool nests_deeper_than(std::string_view text, std::size_t limit);
// Every string and key of `v` with control characters and bytes outside UTF-8 escaped, as
// recorded names are: text read from a file reaches a terminal only printable.
json_doc printable(const json_doc& v);
// Why a file was refused, in one short line: nlohmann's "last read: '...'" can quote a whole
// long string, and a name in a file may be any length.
std::string cut_reason(std::string why);
// A JSON library's exception in steptrace's own words (its text never reaches the user): where
// the text stops being JSON, the field that is missing, or a field of the wrong kind.
std::string json_words(const nlohmann::json::exception& e);

// Throws std::invalid_argument when a summary read from a file does not hold together: shares
// above 1 or not summing to 1, percentiles out of order (p50 <= p95 <= p99 <= max, mean <= max),
// a label that is none of diagnosis_labels() (json_checks.cpp).
void check_figures(const summary& s);

// The rank and ranks sections (ranks_json.cpp).
json_doc rank_json(const rank_info& r);
rank_info rank_from(const json_doc& j);
json_doc ranks_json(const ranks_view& v);
ranks_view ranks_from(const json_doc& j);

// The device's kernels, ops and kinds (kernels.cpp).
json_doc kernels_json(const kernel_stats& k);
kernel_stats kernels_from(const json_doc& j);

// The cycles section (cycles.cpp).
json_doc cycles_json(const std::vector<cycle_row>& cycles);
std::vector<cycle_row> cycles_from(const json_doc& j);

// The timeline, series and host memory sections (timeline_json.cpp).
json_doc timeline_json(const timeline_view& t);
timeline_view timeline_from(const json_doc& j);
json_doc series_json(const step_series& s);
step_series series_from(const json_doc& j);
json_doc host_memory_json(const host_memory_stats& m);
host_memory_stats host_memory_from(const json_doc& j);

// One rank's row, and live rank windows (ranks_json.cpp).
json_doc row_json(const rank_row& r);
rank_row row_from(const json_doc& j);
json_doc live_ranks_json(const live_ranks_view& v);
live_ranks_view live_ranks_from(const json_doc& j);

// A hang, or the steps open now (hang_json.cpp).
json_doc hang_json(const hang_view& h);
hang_view hang_from(const json_doc& j);

// The device view: busy and idle, copies, syncs, kernels, NCCL, memory (gpu_json.cpp).
json_doc gpu_json(const gpu_stats& g);
gpu_stats gpu_from(const json_doc& j);

// The ceiling: FLOPs, MFU, each costed op on the roofline (ceiling_json.cpp).
json_doc ceiling_json(const ceiling_stats& c);
ceiling_stats ceiling_from(const json_doc& j);

// Captures on trouble (captures_json.cpp).
json_doc captures_json(const std::vector<capture_record>& captures);
std::vector<capture_record> captures_from(const json_doc& j);

}  // namespace steptrace::detail
