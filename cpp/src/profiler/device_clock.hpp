// Internal (not public API): the device's clock against the host's in a torch.profiler trace
// (cpp/src/profiler/README.md, "A device clock offset"). A trace stamps host calls and device
// records on two clocks; when they disagree by a constant, the trace's own causality says by how
// much: a device-wide sync returns as the last work launched before it ends, and no kernel starts
// before it was launched. An offset both agree on is taken out of the device records before any
// rule reads them; one they do not agree on is no offset.
#pragma once

#include <cstdint>
#include <optional>

#include "profiler/trace_events.hpp"

namespace steptrace::detail {

struct device_clock_reading {
  std::uint32_t syncs = 0;     // the blocking syncs that measured the clocks; 0: not measured
  std::int64_t offset_ns = 0;  // the device's clock minus the host's (ahead: positive); 0: they agree
};

// An offset under this is the clocks agreeing (a sync returns some microseconds after its work).
inline constexpr std::int64_t clock_offset_min_ns = 1'000'000;

// What the trace's blocking syncs say of the two clocks. A sync counts when it blocked (50 us or
// more) and waits for all the work launched before it: a device-wide sync (cuda/hip/cu
// DeviceSynchronize, CtxSynchronize), or a stream's sync while every record launched before it
// ran on one stream. Two thirds of them must agree on the offset (within 0.2 ms or 5%), and one
// of clock_offset_min_ns or more must agree with the launches too: ahead, no kernel starts sooner
// after its launch; behind, kernels start before their launch by no more. Otherwise not measured.
device_clock_reading read_device_clock(const trace_events& t);

// Moves the device records (kernels, copies, memsets) of every pid back by `offset_ns`; false
// (nothing moved) where a record would move before the trace's zero.
bool remove_device_clock_offset(trace_events& t, std::int64_t offset_ns);

}  // namespace steptrace::detail
