// Internal (not public API): what the device did, decoded from CUPTI activity records.
#pragma once

#include <cstdint>

namespace steptrace::detail {

// memory: an allocation or release of device memory through CUDA (cudaMalloc, cudaFree, the
// stream-ordered pools), a point in time (start == end) that names no stream.
// untraced: a span in which a profiler's trace shows the device busy with work the trace does not
// hold (launched before the profiler started): busy time, and nothing else.
// launch: a runtime or driver API call (its host start and end): only read to give kernels their
// launch time (gpu/activity.cpp), never stored.
enum class device_activity : std::uint8_t { kernel, memcpy, memset, sync, memory, untraced, launch };
// The streams one thread can name for its steps' device view (gpu/stream_ids.hpp).
inline constexpr std::uint32_t max_thread_streams = 64;

// A device record's stream, or a step's: CUPTI's ids, a stream id being unique within its
// context only. `stream` is no_stream for a sync with none (context and event synchronise).
inline constexpr std::uint32_t no_stream = 0xffffffffu;
struct stream_key {
  std::uint32_t context = 0, stream = no_stream;
  friend bool operator==(stream_key a, stream_key b) { return a.context == b.context && a.stream == b.stream; }
  friend bool operator<(stream_key a, stream_key b) {
    return a.context != b.context ? a.context < b.context : a.stream < b.stream;
  }
};
enum class copy_kind : std::uint8_t { h2d, d2h, d2d, other };

struct device_record {
  device_activity kind = device_activity::kernel;
  copy_kind copy = copy_kind::other;  // memcpy only
  bool pageable = false;              // memcpy: the host side was pageable (not pinned) memory
  bool freed = false;                 // memory: a release (else an allocation)
  bool nccl = false;                  // kernel: a collective's (record/collective_kernels.hpp)
  bool graph = false;                 // launch: a graph's replay (cudaGraphLaunch); kernel: run by one
  std::uint32_t device = 0;           // unknown (0) for syncs
  std::uint32_t context = 0;          // CUPTI's context id
  std::uint32_t stream = no_stream;
  std::uint32_t name = 0;            // kernel: its interned name (record/kernel_names.hpp), 0 if none
  std::uint32_t correlation = 0;     // kernel, launch: CUPTI's id joining a kernel to its launch call
  std::uint64_t launched = 0;        // kernel: host time its launch call began, 0 if not seen
  std::uint64_t start = 0, end = 0;  // host clock, nanoseconds (host_clock::to_monotonic_ns scale)
  std::uint64_t bytes = 0;           // memcpy, memset, memory
};

// A time [begin, end) on the host clock (ns) when steptrace recorded no device activity: another
// tool held CUPTI, or (`sampled`) device_sample left the window out. end UINT64_MAX: still so.
struct cupti_gap {
  std::uint64_t begin = 0, end = UINT64_MAX;
  bool sampled = false;
};

}  // namespace steptrace::detail
