// Internal (not public API): a trace's collective calls, for the ranks' arrival at them
// (cpp/src/report/README.md, "Arrival at the collectives").
//
// Usage:
//   trace_calls c = read_collective_calls(events, device_pid, pid, reading.device, reading.records);
//
// A call is a collective kernel of the traced GPU (NCCL, RCCL, ...: its start and end on the
// device) or, in a trace with none, a CPU backend's collective range (`gloo:all_reduce`: the host
// itself waits, so its range is the call). Its group and number are the kernel's args where the
// trace has them ("Process Group Name", "Seq"); else its stream (gloo: one group) and its place
// in the trace. What it ran before: the innermost phase open on the main thread when the call was
// launched other than `wait` and the collective, else the last such phase that ended before it.
#pragma once

#include <cstdint>
#include <vector>

#include "gpu/device_record.hpp"
#include "profiler/trace_events.hpp"
#include "steptrace/detail/ring.hpp"
#include "steptrace/summary.hpp"

namespace steptrace::detail {

struct trace_calls {
  std::vector<collective_call> calls;  // in order of start
  bool numbered = false;               // every call carried the trace's sequence number
};

// `device`: the reading's device records (their launch times); `records`: its main thread's.
trace_calls read_collective_calls(const trace_events& t, std::uint32_t device_pid, std::uint32_t pid,
                                  const std::vector<device_record>& device, const std::vector<record>& records);

}  // namespace steptrace::detail
