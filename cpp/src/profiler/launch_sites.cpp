#include "profiler/launch_sites.hpp"

#include <algorithm>

#include "profiler/trace_names.hpp"

namespace steptrace::detail {
namespace {

bool is_op(const trace_events& t, const trace_event& e) {
  if (e.cat != event_cat::op && e.cat != event_cat::user_annotation) return false;
  const std::string_view n = t.names[e.name];
  return !is_profiler_step(n) && n != own_step_name;
}

}  // namespace

launch_sites::launch_sites(const trace_events& t, std::uint32_t pid) : t_(t) {
  auto is_launch = [pid](const trace_event& e) {
    return e.pid == pid && e.cat == event_cat::runtime && e.correlation != 0;
  };
  launches_.reserve(static_cast<std::size_t>(std::count_if(t.events.begin(), t.events.end(), is_launch)));
  for (std::uint32_t i = 0; i < t.events.size(); ++i) {
    if (is_launch(t.events[i])) launches_.push_back(i);
  }
  auto ops =
      nodes_by_thread(t.events, [&](const trace_event& e) { return e.pid == pid && !e.tid_negative && is_op(t, e); });
  // By correlation, the first in file order first: a repeated correlation is its first launch.
  std::stable_sort(launches_.begin(), launches_.end(), [&t](std::uint32_t a, std::uint32_t b) {
    return t.events[a].correlation < t.events[b].correlation;
  });
  for (auto& [tid, nodes] : ops) {
    threads_.emplace(tid, forest(t.events, std::move(nodes)));
    std::vector<std::uint32_t>().swap(nodes);
  }
}

const trace_event* launch_sites::launch_of(std::uint64_t correlation) const {
  if (correlation == 0) return nullptr;
  const auto l = std::lower_bound(launches_.begin(), launches_.end(), correlation,
                                  [this](std::uint32_t i, std::uint64_t c) { return t_.events[i].correlation < c; });
  if (l == launches_.end() || t_.events[*l].correlation != correlation) return nullptr;
  return &t_.events[*l];
}

std::string_view launch_sites::op_of(std::uint64_t correlation) const {
  const trace_event* launch = launch_of(correlation);
  if (launch == nullptr) return {};
  const auto f = threads_.find(launch->tid);
  if (f == threads_.end()) return {};
  const std::uint32_t i = innermost_at(f->second, launch->ts);
  return i == forest::npos ? std::string_view() : std::string_view(t_.names[f->second.event(i).name]);
}

std::uint32_t innermost_at(const forest& f, std::uint64_t ts) {
  std::uint32_t lo = 0, hi = static_cast<std::uint32_t>(f.size());  // the first node beginning after ts
  while (lo < hi) {
    const std::uint32_t mid = lo + (hi - lo) / 2;
    if (f.begin(mid) <= ts) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo == 0) return forest::npos;
  std::uint32_t i = lo - 1;
  while (i != forest::npos && f.end[i] <= ts) i = f.parent[i];
  return i;
}

}  // namespace steptrace::detail
