// Internal (not public API): gives each kernel record the host time its launch call began, from
// CUPTI's launch-call records (correlation ids join the two). Plain C++, no CUDA: tested directly.
//
// CUPTI may deliver a kernel's record and its launch call's record in different buffers, in
// either order (with only the launch calls recorded, CUPTI 12.6 and later, the calls' buffer
// fills slower than the kernels'). So a kernel whose launch has not come yet waits here, until
// its launch comes or it has waited `hold_ns` (then it goes on with none: launched 0).
//
// Usage (gpu/activity.cpp, under one lock):
//   launch_matcher m;
//   m.take(decoded_buffer, now_ns, ready);  // launches noted; what is ready appended
//   m.release(now_ns, /*all=*/false, ready);  // kernels that waited too long (all: after a flush)
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "gpu/device_record.hpp"

namespace steptrace::detail {

class launch_matcher {
 public:
  // Longer than two of CUPTI's flush periods (200 ms, gpu/activity.cpp), well inside the second
  // a step waits for its records (core/recording/device_reading.cpp).
  static constexpr std::uint64_t hold_ns = 500'000'000;
  static constexpr std::size_t max_waiting = std::size_t{1} << 16;  // beyond: the oldest go on unmatched
  // Kernels in plenty and not one launch-call record: none is coming (CUPTI 13.0 choosing the
  // launch calls alone gave none on an H100, 2026-11-27), so kernels no longer wait for one.
  static constexpr std::uint64_t give_up_after = 1000;

  // One buffer's decoded records: launch calls are noted (never passed on); kernels with a known
  // launch, and every other record, go to `ready` in their order; kernels whose launch is not
  // known wait. Then the waiting kernels whose launch came, or whose time is up, go to `ready`.
  void take(const std::vector<device_record>& records, std::uint64_t now_ns, std::vector<device_record>& ready);
  // Waiting kernels that have waited hold_ns (every one if `all`) go to `ready`, unmatched.
  void release(std::uint64_t now_ns, bool all, std::vector<device_record>& ready);
  std::size_t waiting() const { return waiting_.size(); }
  // Since the start: launch-call records seen, and kernels (with a correlation id) sent on with
  // no launch found.
  std::uint64_t launches_seen() const { return launches_seen_; }
  std::uint64_t unmatched() const { return unmatched_; }
  bool launches_absent() const { return launches_seen_ == 0 && unmatched_ >= give_up_after; }

 private:
  struct waiting_kernel {
    device_record record;
    std::uint64_t since;
  };
  // When each recent launch call began, by correlation id (ids rise by one per call):
  // direct-mapped, so bounded; an entry a later call took over is not found.
  struct slot {
    std::uint32_t correlation = 0;
    bool graph = false;  // a graph's replay: its kernels are marked so
    std::uint64_t start = 0;
  };
  // Gives `k` its launch's start (0 when not known) and whether a graph's replay ran it.
  void find(device_record& k) const {
    const slot& s = launches_[k.correlation % launches_.size()];
    k.launched = s.correlation == k.correlation ? s.start : 0;
    k.graph = s.correlation == k.correlation && s.graph;
  }
  void sweep(std::uint64_t now_ns, bool all, std::vector<device_record>& ready);

  std::array<slot, std::size_t{1} << 16> launches_{};
  std::vector<waiting_kernel> waiting_;  // in arrival order
  std::uint64_t launches_seen_ = 0, unmatched_ = 0;
};

}  // namespace steptrace::detail
