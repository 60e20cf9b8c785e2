// Internal (not public API): which intervals of a torch.profiler trace are its steps, and which
// host thread is the main one (cpp/src/profiler/README.md, "Reading torch.profiler traces"), in order:
// a range the user names (their explicit choice wins); steptrace's own `steptrace:step`
// annotations; the ProfilerStep#N ranges; a training loop's iterations, found by its DataLoader
// fetches or optimizer steps; else the whole trace as one window.
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
  loop_iterations,  // no step ranges: a training loop's iterations, by its fetches or optimizer steps
  whole_trace,      // no steps: one window from the main thread's first host event to the trace's end
};

struct step_interval {
  std::uint64_t begin, end;
};

// A loop's iterations (loop_iterations): what marked them ("fetch": each from one DataLoader
// fetch to the next; "optimizer": each ending with an optimizer step), and whether the first
// lasted at least twice as long as the others' (upper) median: the program's start-up (lazy
// module loads, algorithm search, the allocator's growth) ran in it, so it is warm-up.
struct loop_marks {
  const char* marked_by = "";
  bool first_is_start = false;
  std::uint64_t first_ns = 0, others_median_ns = 0;
};

// Start-up by the program's own words: the ranges on the main thread it names warm-up
// (trace_names.hpp, names_warmup; the outermost of nested ones). A whole-trace window begins
// after them when the thread runs an op after them; the steps they cover at least half of,
// from the first on, are warm-up steps (one step at least is left to count).
struct named_warmup {
  std::string name;          // the first such range's name
  std::uint64_t ranges = 0;  // whole_trace: the ranges the window begins after (0: none)
  std::uint64_t ns = 0;      // their time
  std::uint32_t steps = 0;   // steps and iterations: the leading steps such ranges cover half of
};

struct step_choice {
  step_source source = step_source::profiler_steps;
  std::uint32_t pid = 0, tid = 0;    // the main thread (interned ids)
  std::vector<step_interval> steps;  // in time order, none nested in or overlapping another
  std::uint64_t dropped = 0;         // ranges of the step's name nested in or overlapping a step kept
  std::uint64_t stubs = 0;           // ProfilerStep ranges holding nothing, left out (below)
  loop_marks loop;                   // loop_iterations only
  named_warmup warmup;               // the program's own warm-up, by its ranges' names
};

// A ProfilerStep#N range inside which the process ran no op, range or runtime call and the device
// started nothing is the profiler's stub (the range the last `prof.step()` opens, closed at exit):
// not a step. A trace whose ranges are all stubs has no steps, and nothing to diagnose.
// A training loop's iterations, when the trace holds no step range: on the host thread with the
// most DataLoader fetches, at least 3 of them, each iteration runs from one fetch's start to the
// next's; the last to the trace's end, or to the loop's closing fetch (its StopIteration: the
// thread runs no op after it), which is in no iteration. With optimizer steps
// (`Optimizer.step#...`) too, an iteration holding none is left out. Without fetches, or with
// several a step (gradient accumulation), at least 3 optimizer steps mark them: each iteration
// ends where one ends.
// By name id: whether the name says warm-up (trace_names.hpp, names_warmup), each name read once.
std::vector<std::uint8_t> warmup_names(const trace_events& t);
// Whether the thread's first ProfilerStep is numbered past 0 (`ProfilerStep#5`): the program ran
// steps before the profiler recorded, so work launched before the trace is shown to exist.
bool steps_ran_before(const trace_events& t, std::uint32_t pid, std::uint32_t tid);

// Whether warm-up ranges covering `covered` ns of step `s` make it a warm-up step (half of it or
// more) rather than a part to set aside (trace_facts.hpp, one_time_costs).
inline bool warmup_holds(std::uint64_t covered, step_interval s) { return 2 * covered >= s.end - s.begin; }

// The whole trace's window begins where the last range its main thread names warm-up ends, when
// the thread runs an op after it (a benchmark harness's warm-up iterations, then its measured
// ones): what came before is the program's start-up.
// `step_name`: the range the user named ("" for none). Throws std::invalid_argument naming
// `file` when a named range does not occur, or when the trace has no host events at all.
step_choice choose_steps(const trace_events& t, const std::string& file, const std::string& step_name);

}  // namespace steptrace::detail
