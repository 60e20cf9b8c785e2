// Internal (not public API): the host clock every record is stamped with.
//
// Ticks are TSC cycles where the TSC is invariant, otherwise CLOCK_MONOTONIC nanoseconds.
// Durations stay in ticks until a report converts them, so the hot path never multiplies.
#pragma once

#include <cstdint>

#include "steptrace/detail/tsc.hpp"

namespace steptrace::detail {

// Both clocks read at one instant: the nanosecond clock read between two tick reads, tried
// `tries` times, keeping the try whose two tick reads were closest (its tick is their middle). A
// thread preempted between reads shows as a wide pair and is not kept; taking one read of each
// clock instead, a 1.4 ms preemption skewed a 20 ms calibration by 7% (seen under TSan and load).
struct clock_pair {
  std::uint64_t tick = 0, ns = 0;
};
template <class Ticks, class Ns>
clock_pair read_both(Ticks&& ticks, Ns&& ns, int tries = 16) {
  clock_pair best;
  std::uint64_t narrowest = UINT64_MAX;
  for (int i = 0; i < tries; ++i) {
    const std::uint64_t a = ticks();
    const std::uint64_t n = ns();
    const std::uint64_t b = ticks();
    if (b >= a && b - a < narrowest) {
      narrowest = b - a;
      best = {a + (b - a) / 2, n};
    }
  }
  return best;
}

class host_clock {
 public:
  // Decides once which source to use; safe to call from any thread.
  static void init() noexcept;
  static bool uses_tsc() noexcept { return use_tsc_; }

  static std::uint64_t now() noexcept { return read_ticks(use_tsc_); }

  // Nanoseconds per tick, measured against CLOCK_MONOTONIC from init() to the first call
  // (at least 20 ms apart, spinning out the rest if needed) and fixed from then on. Each end is a
  // paired reading (below), so a preemption between two clock reads cannot skew the ratio.
  static double ns_per_tick() noexcept;

  // Converts a tick value to CLOCK_MONOTONIC nanoseconds (for device timestamps).
  static std::uint64_t to_monotonic_ns(std::uint64_t ticks) noexcept;

 private:
  static bool use_tsc_;
};

}  // namespace steptrace::detail
