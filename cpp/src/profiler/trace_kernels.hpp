// Internal (not public API): a trace's device time by kernel, by the op that launched it and by
// kind, over the counted steps (cpp/src/analysis/README.md, "Kernels and ops").
#pragma once

#include <cstdint>
#include <vector>

#include "analysis/kernel_table.hpp"
#include "profiler/launch_sites.hpp"
#include "profiler/trace_device.hpp"
#include "profiler/trace_events.hpp"
#include "profiler/trace_steps.hpp"

namespace steptrace::detail {

// The kernels, copies and memsets of `device` that start in one of `counted` (in order), each
// kernel with the innermost host op (an op or a record_function range, not a step range) open
// around its launch on the launching thread, found by the launch's correlation; a
// collective kernel also with its time that no other kernel of its context overlaps (from
// `records`, read_device's, sorted by start). `sites`: the launches of `pid`.
kernel_table read_kernels(const trace_events& t, const trace_device& device, const launch_sites& sites,
                          const std::vector<step_interval>& counted, const std::vector<device_record>& records);

}  // namespace steptrace::detail
