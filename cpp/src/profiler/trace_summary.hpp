// Internal (not public API): a trace's reading through the one analysis, as read_profiler_trace
// does it; apart so that a test can hold the figures of given steps to a peer's reading.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "profiler/bytes/byte_source.hpp"
#include "profiler/trace_events.hpp"
#include "profiler/trace_rules.hpp"
#include "steptrace/summary.hpp"

namespace steptrace::detail {

// The readings' steps through one aggregate and flight recorder, in the order given, each with its
// own warm-up: the figures, timeline and unbalanced phases; the rest is the caller's to fill.
summary summarise_readings(const std::vector<const trace_reading*>& readings);
// What trace.steps_from says of a source: "annotations", "named range", "ProfilerStep", "training loop",
// "window".
const char* steps_from(step_source s);

// A trace's whole summary: the reading's figures, its facts, rank and source, the diagnosis.
summary summarise_trace(const trace_events& events, const trace_reading& reading, const std::string& path);
// The same, the reading given up: its device records are moved into the summary's device view
// and its host records freed once read (never a copy of either beside the summary).
summary summarise_trace(const trace_events& events, trace_reading&& reading, const std::string& path);

// A trace's events read from `source` (closed once read, its buffers freed) through the rules.
// The events themselves are freed before returning: `about` keeps only what summarise_trace
// reads of them (skipped events, rank, host), so a summary is never built beside them.
trace_reading read_trace_reading(std::unique_ptr<byte_source> source, const std::string& name,
                                 const std::string& step_name, trace_events& about);

}  // namespace steptrace::detail
