// Internal (not public API): a torch.profiler trace as the records the live path produces.
// The rules (docs/architecture.md, "Reading torch.profiler traces"):
// - steps: the ProfilerStep#N ranges of the thread that has most of them (or, when the trace
//   holds steptrace's own `steptrace:step` annotations, those, with their `steptrace:<phase>`
//   ranges as the phases: the live rules then apply to them unchanged);
// - phases: the innermost categorised host node decides: `input` for DataLoader/DataPipe
//   fetches, `h2d` for a runtime call whose copy is host-to-device and the copy ops around it,
//   `wait` for blocking syncs, .item() and device-to-host copies; any other op takes its nearest
//   categorised ancestor's phase, else `compute`; record_function ranges are custom phases.
//   Main-thread time in no node takes the innermost phase of the process's other threads
//   (autograd's backward), else it is `other`;
// - device: kernels, copies and memsets of the GPU with the most kernels, and the blocking syncs.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gpu/device_record.hpp"
#include "profiler/trace_events.hpp"
#include "steptrace/detail/ring.hpp"

namespace steptrace::detail {

struct trace_reading {
  std::vector<record> records;         // one thread's, in order; ticks are the trace's ns
  std::vector<device_record> device;   // sorted by start
  bool has_device = false;             // the trace holds device activity
  bool own_annotations = false;        // steps and phases from steptrace's own annotations
  std::uint64_t steps = 0;             // steps found (the first is warm-up)
  std::uint64_t steps_without_device = 0;
  std::uint64_t kernels_without_launch = 0;  // a sampled trace: kernels whose launch is absent
  std::uint64_t custom_phases_folded = 0;    // record_function names past the cap, folded in
  std::vector<std::pair<std::string, std::string>> facts;
};

// A step's window: the ProfilerStep#N range itself; or, to compare with the TensorBoard
// profiler plugin's overview, the plugin's window: from the end of the step before to the end
// of the device work launched inside the range, whichever is later.
enum class step_window : std::uint8_t { profiler_step, tensorboard_plugin };

// Throws std::invalid_argument naming `name` when the trace has no steps.
trace_reading apply_trace_rules(const trace_events& t, const std::string& name,
                                step_window window = step_window::profiler_step);

// The prefix of steptrace's own annotations in a profiler's trace: `steptrace:step` for a step,
// `steptrace:<phase>` for a phase.
inline constexpr const char* annotation_prefix = "steptrace:";

}  // namespace steptrace::detail
