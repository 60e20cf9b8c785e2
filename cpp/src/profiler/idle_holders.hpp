// Internal (not public API): what held the GPU idle in a torch.profiler trace's steps, by name
// (cpp/src/profiler/README.md, "Reading torch.profiler traces"): the main thread's outermost ops (the
// calls the program's Python made: `aten::randn`, `aten::linear`), the blocking runtime calls of
// any of the process's threads (allocation and release, event and stream creation, module loads:
// trace_names.hpp), and the host's launches with a graph's replay counted once. Read from the host forests
// before they are freed; said as trace.* facts for the counted steps.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "profiler/host_forest.hpp"
#include "profiler/trace_device.hpp"
#include "profiler/trace_events.hpp"
#include "profiler/trace_steps.hpp"

namespace steptrace::detail {

struct idle_holder {
  std::uint64_t idle_ns = 0;  // the GPU's idle time while the host was in it
  std::uint64_t host_ns = 0;  // the host's time in it
  std::uint64_t calls = 0;
};

struct step_holders {
  std::unordered_map<std::uint32_t, idle_holder> ops;    // by name (trace_events::names)
  std::unordered_map<std::uint32_t, idle_holder> calls;  // blocking runtime calls, by name
  std::uint64_t graph_replays = 0;                       // graph launch calls made in the step
  std::uint64_t launches = 0;                            // the host's kernel and graph launch calls (copies left out)
};

struct idle_holders {
  std::vector<step_holders> steps;       // index-aligned with the steps
  std::vector<step_interval> set_aside;  // one-time work, sorted and disjoint: counted in no step
};

// Nodes set aside as one-time work are left out (`main_one_time` by main-thread node,
// `one_time_kind` in another forest's `kind`), and their time too.
idle_holders read_idle_holders(const trace_events& t, const forest& main,
                               const std::vector<std::uint8_t>& main_one_time, const std::vector<forest>& others,
                               std::uint32_t one_time_kind, const trace_device& device, std::uint32_t pid,
                               const std::vector<step_interval>& steps);

// The steps from `from` on, as facts (shares of the steps' summed length):
//   trace.blocking_calls       "`cudaFree` 15 calls 8310 ms, `cudaMalloc` 24 calls 298 ms" (most idle first)
//   trace.blocking_call        the call holding the most idle time
//   trace.blocking_idle_share  GPU idle while the host was in any of them
//   trace.blocking_ms_per_step, trace.blocking_calls_per_step
//   trace.idle_op, trace.idle_op_share (of the GPU's idle time), trace.idle_op_step_share,
//   trace.idle_op_calls_per_step, trace.idle_op_ms_per_step: the outermost op holding the most
//   trace.launches_per_step: the host's launch calls, a graph's replay one (with replays only;
//   the kernels they ran are the device view's, gpu_stats::graph_*)
void idle_holder_facts(const trace_events& t, const idle_holders& holders, const std::vector<step_interval>& steps,
                       const trace_device& device, std::size_t from,
                       std::vector<std::pair<std::string, std::string>>& facts);

}  // namespace steptrace::detail
