// Internal (not public API): when the collector polls next. One rule, kept apart from the
// collector's loop so that a test can hold it without a clock.
//
// Each poll is timed for the rate records came at since the last one: the next comes when the
// fullest ring would be half full, or the fullest event pool a quarter full (a full pool loses
// device time; a full ring only costs its thread a drain). A wake-up costs the collector tens of
// microseconds of CPU on a VM, so a poll should find thousands of records, not a few hundred.
// The interval grows at most twofold a poll, shrinks at once, and stays between 0.1 and 50 ms;
// it is the fastest when a thread had to drain its own ring, found its event pool full, or woke
// the collector with a pool half full (event_timer.hpp) or began a step with its ring half full
// (recorder.hpp, ask_drain_if_half_full). See cpp/src/core/README.md, "Threads: who runs what".
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace steptrace::detail {

struct poll_interval {
  static constexpr std::chrono::microseconds fastest{100}, slowest{50000}, first{1000};
  static constexpr double ring_aim = 0.5, pool_aim = 0.25;

  // current: the interval this poll waited for; since: the time from the last poll to this one;
  // ring_fill and pool_fill: how full (0 to 1) this poll found the fullest ring and the fullest
  // event pool; outran: a thread filled its ring or pool, or asked for this poll, since the last.
  static std::chrono::microseconds next(std::chrono::microseconds current, std::chrono::microseconds since,
                                        double ring_fill, double pool_fill, bool outran) noexcept {
    if (outran) return fastest;
    const double at = std::chrono::duration<double, std::micro>(since).count();
    double next = 2.0 * static_cast<double>(current.count());
    if (ring_fill > 0) next = std::min(next, at * ring_aim / ring_fill);
    if (pool_fill > 0) next = std::min(next, at * pool_aim / pool_fill);
    return std::clamp(std::chrono::microseconds(static_cast<std::int64_t>(next)), fastest, slowest);
  }
};

}  // namespace steptrace::detail
