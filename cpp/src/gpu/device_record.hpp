// Internal (not public API): what the device did, decoded from CUPTI activity records.
#pragma once

#include <cstdint>

namespace steptrace::detail {

enum class device_activity : std::uint8_t { kernel, memcpy, memset, sync };
enum class copy_kind : std::uint8_t { h2d, d2h, d2d, other };

struct device_record {
  device_activity kind = device_activity::kernel;
  copy_kind copy = copy_kind::other;  // memcpy only
  bool pageable = false;              // memcpy: the host side was pageable (not pinned) memory
  std::uint32_t device = 0;
  std::uint32_t stream = 0;
  std::uint64_t start = 0, end = 0;  // host clock, nanoseconds (host_clock::to_monotonic_ns scale)
  std::uint64_t bytes = 0;           // memcpy, memset
};

}  // namespace steptrace::detail
