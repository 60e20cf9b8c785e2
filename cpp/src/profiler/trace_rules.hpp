// Internal (not public API): a torch.profiler trace as the records the live path produces.
// The rules (cpp/src/profiler/README.md, "Reading torch.profiler traces"):
// - steps (profiler/trace_steps.hpp): steptrace's own `steptrace:step` annotations, with their
//   `steptrace:<phase>` ranges as the phases (the live rules then apply to them unchanged); else
//   the ranges the user names; else the ProfilerStep#N ranges; else a training loop's iterations
//   (by its DataLoader fetches or optimizer steps); else the whole trace as one window;
// - warm-up by evidence: the first step is left out only when its device was still busy with
//   work launched before the trace and other steps exist (or, for a loop's iterations, when it
//   lasted at least twice the others' median: the program's start-up ran in it); a trace's only
//   step always counts, the untraced busy span kept out of its idle time;
// - phases: the innermost categorised host node decides: `input` for DataLoader/DataPipe
//   fetches, `h2d` for a runtime call whose copy is host-to-device and the copy ops around it,
//   `wait` for blocking syncs, .item() and device-to-host copies; any other op takes its nearest
//   categorised ancestor's phase, else `compute`; record_function ranges are custom phases.
//   Main-thread time in no node takes the innermost phase of the process's other threads
//   (autograd's backward; a collective there is `wait`), else it is `other`;
// - device (profiler/trace_device.hpp): kernels, copies and memsets of the GPU with the most
//   kernels, and the blocking syncs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "analysis/ceiling.hpp"
#include "analysis/kernel_table.hpp"
#include "gpu/device_record.hpp"
#include "profiler/trace_events.hpp"
#include "profiler/trace_steps.hpp"
#include "steptrace/detail/ring.hpp"

namespace steptrace::detail {

struct trace_reading {
  std::vector<record> records;        // one thread's, in order; ticks are the trace's ns
  std::optional<step_interval> span;  // the first and the last record's ticks (none: no records)
  std::vector<device_record> device;  // sorted by start
  // Of the first step: busy with work launched before the trace, sorted. Apart from `device`, so
  // the records are never grown (and copied) once counted; the summary adds them as device_activity::untraced.
  std::vector<step_interval> untraced;
  bool has_device = false;  // the trace holds device activity
  step_source source = step_source::profiler_steps;
  std::string step_name;            // the range the user named, for a named_range source
  std::uint64_t steps = 0;          // steps found (windows for a whole_trace source)
  std::uint64_t steps_dropped = 0;  // step ranges nested in or overlapping a step kept
  std::uint64_t stub_steps = 0;     // ProfilerStep ranges holding nothing (trace_steps.hpp)
  std::uint32_t warmup_steps = 0;   // 1 when the first step is left out (by evidence), else 0
  loop_marks loop;                  // loop_iterations (trace_steps.hpp): the marks, the start-up's evidence
  named_warmup warmup;              // whole_trace (trace_steps.hpp): the warm-up the window begins after
  std::uint64_t untraced_ns = 0;    // of the first step: busy with work launched before the trace
  std::uint64_t steps_without_device = 0;
  std::uint64_t kernels_without_launch = 0;  // a sampled trace: kernels whose launch is absent
  // The trace shows work launched before it: kernels whose launch it lacks, or steps numbered past
  // the first (ProfilerStep#5: the program ran steps before the profiler recorded). Without it,
  // untraced_ns is not said to be work launched before the trace.
  bool launched_before = false;
  std::uint64_t custom_phases_folded = 0;  // record_function names past the cap, folded in
  std::vector<std::pair<std::string, std::string>> facts;
  // Its collective calls (trace_collectives.hpp): the ranks' arrival at them, in a job's folder.
  std::vector<collective_call> calls;
  bool calls_numbered = false;
  kernel_table kernels;   // the counted steps' device time by kernel, op and kind (trace_kernels.hpp)
  ceiling_table ceiling;  // the counted steps' costed ops (trace_ceiling.hpp)
};

// A step's window: the step's range itself; or, to compare with the TensorBoard profiler
// plugin's overview, the plugin's window: from the end of the step before to the end of the
// device work launched inside the range, whichever is later.
enum class step_window : std::uint8_t { profiler_step, tensorboard_plugin };

// `step_name`: a range whose occurrences are the steps ("" for the default order). Throws
// std::invalid_argument naming `name` when that range does not occur or the trace has no host
// events.
trace_reading apply_trace_rules(const trace_events& t, const std::string& name,
                                step_window window = step_window::profiler_step, const std::string& step_name = "");

}  // namespace steptrace::detail
