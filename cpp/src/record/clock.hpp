// Internal (not public API): the host clock every record is stamped with.
//
// Ticks are TSC cycles where the TSC is invariant, otherwise CLOCK_MONOTONIC nanoseconds.
// Durations stay in ticks until a report converts them, so the hot path never multiplies.
#pragma once

#include <cstdint>

#include "steptrace/detail/tsc.hpp"

namespace steptrace::detail {

class host_clock {
 public:
  // Decides once which source to use; safe to call from any thread.
  static void init() noexcept;
  static bool uses_tsc() noexcept { return use_tsc_; }

  static std::uint64_t now() noexcept { return read_ticks(use_tsc_); }

  // Nanoseconds per tick, measured against CLOCK_MONOTONIC from init() to the first call
  // (at least 20 ms apart, spinning out the rest if needed) and fixed from then on.
  static double ns_per_tick() noexcept;

  // Converts a tick value to CLOCK_MONOTONIC nanoseconds (for device timestamps).
  static std::uint64_t to_monotonic_ns(std::uint64_t ticks) noexcept;

 private:
  static bool use_tsc_;
};

}  // namespace steptrace::detail
