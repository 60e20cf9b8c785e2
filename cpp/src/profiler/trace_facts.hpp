// Internal (not public API): what a trace's rules note beside the records for the diagnosis
// (cpp/src/profiler/README.md, "Reading torch.profiler traces"): one-time costs to set aside, the host's
// stretches outside every op (HOST-BOUND's shape), and where the first step and its first
// collective began (a late rank in a job).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpu/device_record.hpp"
#include "profiler/host_forest.hpp"
#include "profiler/trace_device.hpp"
#include "profiler/trace_events.hpp"

namespace steptrace::detail {

// What the trace says of the setup: dataloader.num_workers=0 (`_SingleProcessDataLoaderIter`),
// dataloader.multiprocessing (`_MultiProcessingDataLoaderIter`), gpu.amd (the runtime is `hip*`),
// gpu.name (the device of the first kernel, from deviceProperties); trace.pid (the main pid as
// written) and trace.host (host_name), which tell one process's cycle files apart from ranks';
// trace.device_unrecorded (below).
void setup_facts(const trace_events& t, std::uint32_t pid, const std::vector<device_record>& device,
                 std::vector<std::pair<std::string, std::string>>& facts);

// A trace with no device record whose host still put work on a GPU: trace.device_unrecorded is
// "N calls" (runtime or driver calls that launch, copy or set: CUPTI recorded the API but not
// the activity, as its range profiler does) or "op NAME" (an op only a GPU runs, with no runtime
// call at all: recorded with activities=[ProfilerActivity.CPU]), or "N mtia" (records of Meta's
// MTIA accelerator, which the reader does not read). setup_facts adds it.
void device_unrecorded_fact(const trace_events& t, std::uint32_t pid,
                            std::vector<std::pair<std::string, std::string>>& facts);

inline constexpr std::uint64_t one_time_min_ns = 1'000'000;  // a runtime call blocking this long, device idle

// One-time costs: runtime calls of a host thread (`nodes`) in the first step (or window), neither
// a sync nor a copy, that block the host at least one_time_min_ns while the device runs nothing
// traced for most of the call: driver work a process does once (context creation, a first launch
// loading its module, a graph's first upload). A call whose name blocks like that in a later step
// is no one-time cost: it is the step's. A range the program names warm-up (trace_names.hpp,
// names_warmup) is one in any step (`steps`: in time order) it covers less than half of: its
// own words say it runs before the measured work. So is the range that holds a step's graph
// captures (its launches record a graph and run nothing), unless every step captures; their
// count is added to `out.captures`. So are ranges whose names say they compile or autotune
// (names_compile_work) and, on the main thread (`main_thread`), first calls far longer than the
// later ones of their name (first_call_ratio below). Returns a mark per node (a node inside one
// already marked is not marked) and adds each found (ns, name) to `out.found`.
// By name id, what a name says of start-up: warm-up (names_warmup), a graph capture's begin or end.
// Built once a trace (start_up_names_of), for every thread's forest.
struct start_up_names {
  static constexpr std::uint8_t warmup = 1, capture_begin = 2, capture_end = 4, compile = 8;
  std::vector<std::uint8_t> of;
  bool jit = false;  // the trace holds a JIT's or compiler's run (trace_names.hpp, names_jit_run)
};
start_up_names start_up_names_of(const trace_events& t);

// A first call far longer than the later ones of its name is one-time work (a JIT's first run,
// a compiler's, an autotuning search): at least this many calls of the name in the steps, the
// first this many times their median and first_call_min_ns over it.
inline constexpr std::size_t first_call_min_calls = 3;
inline constexpr std::uint64_t first_call_ratio = 10, first_call_min_ns = 1'000'000;

// What one_time_costs found, over every thread: (ns, name) of each node set aside, and the graph
// captures among them.
struct one_time_found {
  std::vector<std::pair<std::uint64_t, std::string_view>> found;
  std::uint64_t captures = 0;
};
std::vector<std::uint8_t> one_time_costs(const trace_events& t, const forest& nodes, const trace_device& device,
                                         const std::vector<step_interval>& steps, const start_up_names& names,
                                         bool main_thread, one_time_found& out);
// The longest three with their ms ("cudaDeviceGetStreamPriorityRange 29927, cudaFree 6009 and
// 36 more"); empty when none was found.
std::string one_time_said(std::vector<std::pair<std::uint64_t, std::string_view>> found);

// A step's stretches of `other` (the main thread outside every op): the longest, where it began,
// and how many lasted min_gap_ns or more.
struct host_gaps {
  std::uint64_t step_begin, longest, longest_begin, count;
};
inline constexpr std::uint64_t min_gap_ns = 10'000;

// trace.host_gap_longest_ms, _at_ms (from its step's start), _before_device (1: it ended before
// the step's first device work) and trace.host_gaps_per_step, over the counted steps' gaps.
void host_gap_facts(const std::vector<host_gaps>& steps, const std::vector<device_record>& device,
                    std::vector<std::pair<std::string, std::string>>& facts);

// trace.step_begin_us (the first counted step's begin) and trace.first_collective_us (its first
// NCCL kernel or gloo range), on the trace's clock, exact to the nanosecond.
void start_facts(const trace_events& t, std::uint32_t pid, const std::vector<device_record>& device,
                 step_interval first, std::vector<std::pair<std::string, std::string>>& facts);

}  // namespace steptrace::detail
