// Internal (not public API): the device side of a torch.profiler trace as the device records a
// live run's CUPTI gives (cpp/src/profiler/README.md, "Reading torch.profiler traces"): kernels, copies
// and memsets of the GPU with the most kernels, the main process's blocking syncs, and the
// evidence that the first traced step's device was still busy with work launched before the trace.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "gpu/device_record.hpp"
#include "profiler/trace_events.hpp"
#include "profiler/trace_steps.hpp"

namespace steptrace::detail {

struct trace_device {
  bool present = false;                                              // the trace holds kernels
  std::uint32_t pid = 0;                                             // the device's pid: the one with the most kernels
  std::unordered_map<std::uint64_t, copy_kind> copy_by_correlation;  // its copies, by launch
  std::vector<step_interval> busy;  // the union of its kernels, copies and memsets, in order
};

// How much of [begin, end) the device's traced work covers.
std::uint64_t busy_within(const trace_device& d, std::uint64_t begin, std::uint64_t end);

trace_device find_device(const trace_events& t);

// How much of each step's device work the trace recorded: its kernel launches (outside a stream's
// capture, whose kernels run only when the graph replays; copies and memsets left out, as traces
// keep no record of some) against those with a device record by correlation. A step with
// coverage_min_launches or more of them is weighed; under half recorded, it is under-recorded.
struct launch_coverage_reading {
  std::uint64_t steps_weighed = 0, steps_under_recorded = 0;
  std::uint64_t launches = 0, recorded = 0;  // in the under-recorded steps
};
inline constexpr std::uint64_t coverage_min_launches = 4;
launch_coverage_reading launch_coverage(const trace_events& t, std::uint32_t pid,
                                        const std::vector<step_interval>& steps);

struct device_reading {
  std::vector<device_record> records;  // sorted by start
  std::uint64_t kernels_without_launch = 0;
  std::uint64_t steps_without_device = 0;
  launch_coverage_reading coverage;
};

// The device records of `device` and the blocking syncs of the host process `pid`; which of
// `steps` hold no device activity at all.
device_reading read_device(const trace_events& t, const trace_device& device, std::uint32_t pid,
                           const std::vector<step_interval>& steps);

// A device record that starts this long after its launch began, with no traced device work in
// between, waited for work the trace does not hold (launched before the profiler started). From
// the launch's beginning, not its return: a pageable copy's call returns after its copy ran.
// The TensorBoard profiler plugin's windows (to compare with its figures): each step ends where
// the device work launched inside it ends (if later), and starts where the step before ended (if
// later). `steps` in order.
void stretch_to_device_work(const trace_events& t, const trace_device& device, std::uint32_t pid,
                            std::vector<step_interval>& steps);

inline constexpr std::uint64_t untraced_wait_ns = 1'000'000;

// Steps whose device started work long after its launch with nothing traced before it (another
// process's work, or a device clock offset), a tenth of the step or more, in half of `steps` or
// more: the fact trace.device_late ("late steps, steps weighed, the late ms a late step"); empty
// when the device view holds.
std::string late_steps(const trace_events& t, const trace_device& device, std::uint32_t pid,
                       const std::vector<device_record>& records, const std::vector<step_interval>& steps);

// Sorts `v` by start and merges the intervals that touch or overlap, in place.
void merge_intervals(std::vector<step_interval>& v);

// The spans of `step` in which the device was busy with untraced work: before each record
// launched in the step that started at least untraced_wait_ns after its launch began, the part
// of that wait in which no traced record ran. Sorted, disjoint; empty without evidence.
std::vector<step_interval> untraced_busy(const trace_events& t, const trace_device& device, std::uint32_t pid,
                                         const std::vector<device_record>& records, step_interval step);
// The same for each of `steps` (in order, disjoint) in one pass over the trace: a record counts
// for the step its launch was made in. `graph_nodes` false: the nodes a graph's replay runs are
// no evidence (a node waits on the graph's own dependencies, another stream's or another
// process's, not on untraced work).
std::vector<std::vector<step_interval>> untraced_busy_in(const trace_events& t, const trace_device& device,
                                                         std::uint32_t pid, const std::vector<device_record>& records,
                                                         const std::vector<step_interval>& steps, bool graph_nodes);

}  // namespace steptrace::detail
