#include "analysis/back_ring.hpp"

#include <algorithm>

namespace steptrace::detail {

void back_ring::configure(std::uint32_t steps) {
  if (steps == steps_) return;
  steps_ = steps;
  recent_.configure(steps, 0);
  recent_.keep_phases(true);
  recent_.clear();
  for (flight_recorder& w : slowest_) {
    w.configure(0, steps);
    w.keep_phases(true);
    w.clear();
  }
}

void back_ring::on_step(const built_step& s) {
  if (steps_ == 0) return;
  recent_.on_step(s);
  slowest_[now_].on_step(s);
}

void back_ring::on_set_aside(std::uint32_t thread, std::uint32_t id, std::uint64_t begin, std::uint64_t end) {
  if (steps_ == 0) return;
  recent_.on_set_aside(thread, id, begin, end);
  slowest_[now_].on_set_aside(thread, id, begin, end);
}

void back_ring::attach_device(const device_join& join, std::uint64_t settled_ns,
                              std::uint64_t (*to_ns)(std::uint64_t)) {
  if (steps_ == 0) return;
  recent_.attach_device(join, settled_ns, to_ns);
  for (flight_recorder& w : slowest_) w.attach_device(join, settled_ns, to_ns);
}

void back_ring::next_window() {
  if (steps_ == 0) return;
  now_ = (now_ + 1) % windows;
  slowest_[now_].clear();
  // The byte bound: the oldest closed windows go first; the one just closed and the recent steps stay.
  for (std::size_t back = windows - 1; back >= 2 && bytes() > max_bytes; --back) {
    slowest_[(now_ + windows - back) % windows].clear();
  }
}

std::uint64_t back_ring::bytes() const noexcept {
  std::uint64_t n = recent_.bytes();
  for (const flight_recorder& w : slowest_) n += w.bytes();
  return n;
}

std::size_t back_ring::kept() const {
  std::vector<flight_recorder::kept_ref> found;
  recent_.list(found);
  std::size_t n = found.size();
  for (const flight_recorder& w : slowest_) {
    w.list(found);
    n += found.size();
  }
  return n;
}

std::vector<std::uint64_t> back_ring::choose(choice which, const std::vector<std::uint64_t>& indices,
                                             flight_recorder& into, std::uint64_t& lead) const {
  using ref = flight_recorder::kept_ref;
  std::vector<ref> found, chosen;
  auto take = [&](const flight_recorder& from) {
    from.list(found);
    for (const ref& r : found) {
      const bool there = std::any_of(chosen.begin(), chosen.end(),
                                     [&](const ref& c) { return c.thread == r.thread && c.index == r.index; });
      if (!there) chosen.push_back(r);
    }
  };
  if (which == choice::recent) {
    take(recent_);
    std::sort(chosen.begin(), chosen.end(), [](const ref& a, const ref& b) { return a.end > b.end; });
  } else {
    if (which == choice::window) {
      take(slowest_[now_]);
      take(slowest_[(now_ + windows - 1) % windows]);
    } else {
      for (const flight_recorder& w : slowest_) take(w);
    }
    if (which == choice::numbered) {
      take(recent_);
      chosen.erase(std::remove_if(chosen.begin(), chosen.end(),
                                  [&](const ref& r) {
                                    return std::find(indices.begin(), indices.end(), r.index) == indices.end();
                                  }),
                   chosen.end());
    } else {
      chosen.erase(std::remove_if(chosen.begin(), chosen.end(), [](const ref& r) { return !r.counted; }), chosen.end());
    }
    std::sort(chosen.begin(), chosen.end(), [](const ref& a, const ref& b) { return a.length > b.length; });
  }
  if (chosen.size() > steps_ && which != choice::numbered) chosen.resize(steps_);
  lead = chosen.empty() ? 0 : chosen.front().index;
  into.configure(static_cast<std::uint32_t>(std::max<std::size_t>(chosen.size(), 1)), 0);
  into.keep_phases(true);
  into.clear();
  recent_.copy_to(into, chosen);
  for (const flight_recorder& w : slowest_) w.copy_to(into, chosen);
  std::sort(chosen.begin(), chosen.end(), [](const ref& a, const ref& b) { return a.end < b.end; });
  std::vector<std::uint64_t> out;
  for (const ref& r : chosen) out.push_back(r.index);
  return out;
}

}  // namespace steptrace::detail
