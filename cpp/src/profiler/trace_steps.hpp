// Internal (not public API): which intervals of a torch.profiler trace are its steps, and which
// host thread is the main one (docs/architecture.md, "Reading torch.profiler traces"), in order:
// a range the user names (their explicit choice wins); steptrace's own `steptrace:step`
// annotations; the ProfilerStep#N ranges; else the whole trace as one window.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiler/trace_events.hpp"

namespace steptrace::detail {

enum class step_source : std::uint8_t {
  own_annotations,  // steptrace:step ranges: their phases are steptrace's too
  named_range,      // each range of the name the user gave (step="execute_model")
  profiler_steps,   // ProfilerStep#N
  whole_trace,      // no steps: one window from the main thread's first host event to the trace's end
};

struct step_interval {
  std::uint64_t begin, end;
};

struct step_choice {
  step_source source = step_source::profiler_steps;
  std::uint32_t pid = 0, tid = 0;     // the main thread (interned ids)
  std::vector<step_interval> steps;   // in time order, none nested in or overlapping another
  std::uint64_t dropped = 0;          // ranges of the step's name nested in or overlapping a step kept
  std::uint64_t stubs = 0;            // ProfilerStep ranges holding nothing, left out (below)
};

// A ProfilerStep#N range inside which the process ran no op, range or runtime call and the device
// started nothing is the profiler's stub (the range the last `prof.step()` opens, closed at exit):
// not a step. A trace whose ranges are all stubs has no steps, and nothing to diagnose.
// `step_name`: the range the user named ("" for none). Throws std::invalid_argument naming
// `file` when a named range does not occur, or when the trace has no host events at all.
step_choice choose_steps(const trace_events& t, const std::string& file, const std::string& step_name);

}  // namespace steptrace::detail
