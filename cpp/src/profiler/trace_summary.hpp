// Internal (not public API): a trace's reading through the one analysis, as read_profiler_trace
// does it; apart so that a test can hold the figures of given steps to a peer's reading.
#pragma once

#include <string>

#include "profiler/trace_events.hpp"
#include "profiler/trace_rules.hpp"
#include "steptrace/summary.hpp"

namespace steptrace::detail {

summary summarise_trace(const trace_events& events, const trace_reading& reading, const std::string& path);

}  // namespace steptrace::detail
