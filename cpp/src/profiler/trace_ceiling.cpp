#include "profiler/trace_ceiling.hpp"

#include <algorithm>
#include <map>

namespace steptrace::detail {

ceiling_table read_op_ceiling(const trace_events& t, const trace_device& device, std::uint32_t pid,
                              const std::vector<step_interval>& counted, const launch_sites* sites) {
  ceiling_table out;
  if (t.op_costs.empty() || counted.empty()) return out;
  auto in_counted = [&](std::uint64_t ts) {
    auto it = std::upper_bound(counted.begin(), counted.end(), ts,
                               [](std::uint64_t x, const step_interval& s) { return x < s.begin; });
    return it != counted.begin() && ts < std::prev(it)->end;
  };
  // Each thread's costed ops as a forest: its roots are the outermost, the ones counted.
  std::map<std::uint32_t, std::vector<std::uint32_t>> by_thread;
  for (const trace_events::costed_op& c : t.op_costs) {
    const trace_event& e = t.events[c.event];
    if (e.pid == pid && !e.tid_negative) by_thread[e.tid].push_back(c.event);
  }
  struct thread_ops {
    forest ops;
    std::vector<std::uint64_t> ns;  // by node: its kernels' time (roots only)
    std::vector<bool> launched;
  };
  std::map<std::uint32_t, thread_ops> threads;
  for (auto& [tid, nodes] : by_thread) {
    forest f(t.events, std::move(nodes));
    const std::size_t n = f.size();
    threads.emplace(tid, thread_ops{std::move(f), std::vector<std::uint64_t>(n, 0), std::vector<bool>(n, false)});
  }
  auto root_at = [](const forest& f, std::uint64_t ts) {
    std::uint32_t i = innermost_at(f, ts);
    while (i != forest::npos && f.parent[i] != forest::npos) i = f.parent[i];
    return i;
  };
  if (sites != nullptr && device.present) {
    for (const trace_event& e : t.events) {
      if (e.cat != event_cat::kernel || e.pid != device.pid) continue;
      if (in_counted(e.ts)) out.add_kernel_time(e.dur);
      const trace_event* launch = sites->launch_of(e.correlation);
      if (launch == nullptr || launch->pid != pid) continue;
      const auto th = threads.find(launch->tid);
      if (th == threads.end()) continue;
      const std::uint32_t r = root_at(th->second.ops, launch->ts);
      if (r == forest::npos) continue;
      th->second.ns[r] += e.dur;
      th->second.launched[r] = true;
    }
  }
  const bool host_timed = sites == nullptr || !device.present;
  for (auto& [tid, th] : threads) {
    for (std::uint32_t r : th.ops.roots) {
      const trace_event& e = th.ops.event(r);
      if (!in_counted(e.ts) || (!host_timed && !th.launched[r])) continue;
      const std::uint32_t index = th.ops.node[r];
      const auto c = std::lower_bound(t.op_costs.begin(), t.op_costs.end(), index,
                                      [](const trace_events::costed_op& x, std::uint32_t i) { return x.event < i; });
      const op_cost& cost = c->cost;
      out.add(t.names[e.name], op_kind_name(cost.kind), cost.dtype, cost.flops, cost.bytes,
              host_timed ? e.dur : th.ns[r]);
    }
  }
  return out;
}

}  // namespace steptrace::detail
