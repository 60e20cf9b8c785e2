// Internal (not public API): a trace's costed ops (trace_events::op_costs) over the counted steps,
// with the device time of the kernels each launched, for the ceiling (analysis/ceiling.hpp).
#pragma once

#include <cstdint>
#include <vector>

#include "analysis/ceiling.hpp"
#include "profiler/launch_sites.hpp"
#include "profiler/trace_device.hpp"
#include "profiler/trace_events.hpp"
#include "profiler/trace_steps.hpp"

namespace steptrace::detail {

// The costed ops of process `pid` that start in one of `counted` (in order). Each kernel's time
// goes to the outermost costed op open around its launch (aten::linear, not the aten::addmm inside
// it), so no FLOP counts twice; an op that launched no kernel is left out (its work ran on the
// host). `sites`: the process's launches; nullptr for a trace without a device, whose ops are
// timed by their host duration.
ceiling_table read_op_ceiling(const trace_events& t, const trace_device& device, std::uint32_t pid,
                              const std::vector<step_interval>& counted, const launch_sites* sites);

}  // namespace steptrace::detail
