#include "profiler/trace_kernels.hpp"

#include <algorithm>
#include <map>

#include "analysis/device_spans.hpp"
#include "profiler/host_forest.hpp"
#include "profiler/trace_names.hpp"
#include "record/collective_kernels.hpp"

namespace steptrace::detail {
namespace {

bool is_op(const trace_events& t, const trace_event& e) {
  if (e.cat != event_cat::op && e.cat != event_cat::user_annotation) return false;
  const std::string_view n = t.names[e.name];
  return !is_profiler_step(n) && n != own_step_name;
}

// The ops of one process on every thread, as forests over event indices, and its launches by
// correlation: 4 bytes a launch and 32 an op, never a map node per event.
class launch_sites {
 public:
  launch_sites(const trace_events& t, std::uint32_t pid) : t_(t) {
    auto is_launch = [pid](const trace_event& e) {
      return e.pid == pid && e.cat == event_cat::runtime && e.correlation != 0;
    };
    launches_.reserve(static_cast<std::size_t>(std::count_if(t.events.begin(), t.events.end(), is_launch)));
    for (std::uint32_t i = 0; i < t.events.size(); ++i) {
      if (is_launch(t.events[i])) launches_.push_back(i);
    }
    auto ops = nodes_by_thread(t.events, [&](const trace_event& e) { return e.pid == pid && !e.tid_negative && is_op(t, e); });
    // By correlation, the first in file order first: a repeated correlation is its first launch.
    std::stable_sort(launches_.begin(), launches_.end(),
                     [&t](std::uint32_t a, std::uint32_t b) { return t.events[a].correlation < t.events[b].correlation; });
    for (auto& [tid, nodes] : ops) {
      threads_.emplace(tid, forest(t.events, std::move(nodes)));
      std::vector<std::uint32_t>().swap(nodes);
    }
  }

  // The name of the innermost op open where the kernel with this correlation was launched, or "".
  std::string_view op_of(std::uint64_t correlation) const {
    if (correlation == 0) return {};
    const auto l = std::lower_bound(launches_.begin(), launches_.end(), correlation,
                                    [this](std::uint32_t i, std::uint64_t c) { return t_.events[i].correlation < c; });
    if (l == launches_.end() || t_.events[*l].correlation != correlation) return {};
    const trace_event& launch = t_.events[*l];
    const auto f = threads_.find(launch.tid);
    if (f == threads_.end()) return {};
    const std::uint32_t i = innermost_at(f->second, launch.ts);
    return i == forest::npos ? std::string_view() : std::string_view(t_.names[f->second.event(i).name]);
  }

 private:
  // The innermost node of `f` open at `ts`, or forest::npos.
  static std::uint32_t innermost_at(const forest& f, std::uint64_t ts) {
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

  const trace_events& t_;
  std::vector<std::uint32_t> launches_;  // runtime calls with a correlation, by correlation
  std::map<std::uint32_t, forest> threads_;
};

}  // namespace

kernel_table read_kernels(const trace_events& t, const trace_device& device, std::uint32_t pid,
                          const std::vector<step_interval>& counted, const std::vector<device_record>& records) {
  kernel_table out;
  if (!device.present || counted.empty()) return out;
  const launch_sites sites(t, pid);
  // Each context's union of its kernels other than collectives: what hides a collective, as in
  // the device view (spans::exposed).
  std::map<std::uint32_t, std::vector<spans::interval>> compute;
  for (const device_record& r : records) {
    if (r.kind == device_activity::kernel && !r.nccl) spans::extend(compute[r.context], r.start, r.end);
  }
  std::vector<signed char> collective(t.names.size(), -1);  // by name: each name is classified once
  auto exposed = [&](const trace_event& e) -> std::uint64_t {
    signed char& c = collective[e.name];
    if (c < 0) c = is_collective_kernel(t.names[e.name]) ? 1 : 0;
    if (c == 0) return 0;
    const auto it = compute.find(t.args_of(e).context);
    if (it == compute.end()) return e.dur;
    const auto& u = it->second;
    const auto from = std::lower_bound(u.begin(), u.end(), e.ts, [](const spans::interval& x, std::uint64_t ts) { return x.end <= ts; });
    return e.dur - spans::overlap(e.ts, e.ts + e.dur, from, u.end());
  };
  auto in_counted = [&](std::uint64_t ts) {
    auto it = std::upper_bound(counted.begin(), counted.end(), ts,
                               [](std::uint64_t x, const step_interval& s) { return x < s.begin; });
    return it != counted.begin() && ts < std::prev(it)->end;
  };
  for (const trace_event& e : t.events) {
    if (e.pid != device.pid || !in_counted(e.ts)) continue;
    if (e.cat == event_cat::memcpy || e.cat == event_cat::memset) {
      out.add_transfer(e.cat == event_cat::memset, e.dur);
      continue;
    }
    if (e.cat != event_cat::kernel) continue;
    out.add_kernel(t.names[e.name], sites.op_of(e.correlation), e.dur, exposed(e));
  }
  return out;
}

}  // namespace steptrace::detail
