// Internal (not public API): the whole run as a bounded series of points, each the mean of a
// run of consecutive counted steps. When the points are full, neighbours merge in pairs and each
// point covers twice as many steps, so memory stays fixed however long the run.
#pragma once

#include <cstdint>
#include <vector>

#include "analysis/step_builder.hpp"
#include "steptrace/timeline.hpp"

namespace steptrace::detail {

class step_series_builder {
 public:
  static constexpr std::size_t max_points = 240;

  // length: the step's time less what was set aside in it (ticks).
  void add(const built_step& step, std::uint64_t length);
  // A set-aside span just ended: it goes with the next step added (the last point at the end).
  void note_set_aside(std::uint64_t ticks) noexcept { aside_pending_ += ticks; }
  // The process's resident memory now (bytes): the current point's figure.
  void note_rss(std::uint64_t bytes) noexcept { rss_ = bytes; }
  void clear() { *this = step_series_builder{}; }
  void fill(step_series& out, double ns_per_tick) const;

 private:
  struct point {
    std::uint64_t first = 0, steps = 0, ticks = 0, rss = 0, aside = 0;
    std::vector<std::uint64_t> phase_ticks;  // by phase id
  };
  static void merge(point& into, const point& from);
  std::vector<point> points_;
  std::uint64_t per_point_ = 1, counted_ = 0, rss_ = 0, aside_pending_ = 0;
};

}  // namespace steptrace::detail
