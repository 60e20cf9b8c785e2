#include "analysis/step_series.hpp"

#include <algorithm>

#include "steptrace/phase.hpp"

namespace steptrace::detail {

void step_series_builder::merge(point& into, const point& from) {
  into.steps += from.steps;
  into.ticks += from.ticks;
  into.aside += from.aside;
  into.rss = from.rss;  // the later point's: memory at the end of the merged run
  if (into.phase_ticks.size() < from.phase_ticks.size()) into.phase_ticks.resize(from.phase_ticks.size(), 0);
  for (std::size_t i = 0; i < from.phase_ticks.size(); ++i) into.phase_ticks[i] += from.phase_ticks[i];
}

void step_series_builder::add(const built_step& s, std::uint64_t length) {
  if (points_.empty() || points_.back().steps >= per_point_) {
    if (points_.size() == max_points) {  // full: neighbours merge, each point now covers twice the steps
      for (std::size_t i = 0; i < max_points / 2; ++i) {
        point merged = std::move(points_[2 * i]);
        merge(merged, points_[2 * i + 1]);
        points_[i] = std::move(merged);
      }
      points_.resize(max_points / 2);
      per_point_ *= 2;
    }
    if (points_.empty() || points_.back().steps >= per_point_) {
      point& p = points_.emplace_back();
      p.first = counted_;
    }
  }
  point& p = points_.back();
  ++p.steps;
  ++counted_;
  p.ticks += length;
  p.rss = rss_;
  p.aside += aside_pending_;
  aside_pending_ = 0;
  for (const phase_slice& ph : s.phases) {
    if (ph.id >= p.phase_ticks.size()) p.phase_ticks.resize(ph.id + 1, 0);
    p.phase_ticks[ph.id] += ph.ticks;
  }
}

void step_series_builder::fill(step_series& out, double ns_per_tick) const {
  out = step_series{};
  out.steps_per_point = per_point_;
  const double ms_per_tick = ns_per_tick * 1e-6;
  // Phases by id, with `other` (id 0) last, as the table lists them.
  std::size_t ids = 0;
  for (const point& p : points_) ids = std::max(ids, p.phase_ticks.size());
  std::vector<std::uint32_t> used;
  for (std::uint32_t id = 1; id < ids; ++id) {
    if (std::any_of(points_.begin(), points_.end(),
                    [&](const point& p) { return id < p.phase_ticks.size() && p.phase_ticks[id] > 0; })) {
      used.push_back(id);
    }
  }
  if (ids > 0) used.push_back(0);
  for (std::uint32_t id : used) out.phases.emplace_back(phase_label(phase_id{id}));
  for (const point& p : points_) {
    series_point& o = out.points.emplace_back();
    const std::uint64_t aside = p.aside + (&p == &points_.back() ? aside_pending_ : 0);
    o.set_aside_ms = static_cast<double>(aside) * ms_per_tick;
    o.first_step = p.first;
    o.steps = p.steps;
    const double n = p.steps ? static_cast<double>(p.steps) : 1.0;
    o.step_ms = static_cast<double>(p.ticks) * ms_per_tick / n;
    for (std::uint32_t id : used) {
      const std::uint64_t t = id < p.phase_ticks.size() ? p.phase_ticks[id] : 0;
      o.phase_ms.push_back(static_cast<double>(t) * ms_per_tick / n);
    }
    o.rss_mb = p.rss ? static_cast<double>(p.rss) / (1024.0 * 1024.0) : -1.0;
  }
}

}  // namespace steptrace::detail
