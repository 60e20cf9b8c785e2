#include "profiler/trace_kernels.hpp"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "profiler/host_forest.hpp"
#include "profiler/trace_names.hpp"

namespace steptrace::detail {
namespace {

bool is_op(const trace_events& t, const trace_event& e) {
  if (e.cat != event_cat::op && e.cat != event_cat::user_annotation) return false;
  const std::string_view n = t.names[e.name];
  return !is_profiler_step(n) && n != own_step_name;
}

// The innermost node of `f` open at `ts`, or forest::npos.
std::uint32_t innermost_at(const forest& f, std::uint64_t ts) {
  auto it = std::upper_bound(f.begin.begin(), f.begin.end(), ts);
  if (it == f.begin.begin()) return forest::npos;
  std::uint32_t i = static_cast<std::uint32_t>(it - f.begin.begin() - 1);
  while (i != forest::npos && f.end[i] <= ts) i = f.parent[i];
  return i;
}

}  // namespace

kernel_table read_kernels(const trace_events& t, const trace_device& device, std::uint32_t pid,
                          const std::vector<step_interval>& counted) {
  kernel_table out;
  if (!device.present || counted.empty()) return out;
  struct launch {
    std::uint32_t tid;
    std::uint64_t ts;
  };
  std::unordered_map<std::uint64_t, launch> launches;  // by correlation
  std::map<std::uint32_t, std::vector<const trace_event*>> ops;  // by thread
  for (const trace_event& e : t.events) {
    if (e.pid != pid) continue;
    if (e.cat == event_cat::runtime && e.correlation != 0) launches.emplace(e.correlation, launch{e.tid, e.ts});
    if (!e.tid_negative && is_op(t, e)) ops[e.tid].push_back(&e);
  }
  std::map<std::uint32_t, forest> threads;
  for (auto& [tid, nodes] : ops) threads.emplace(tid, forest(std::move(nodes)));
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
    std::string_view op;
    if (auto l = launches.find(e.correlation); e.correlation != 0 && l != launches.end()) {
      if (auto f = threads.find(l->second.tid); f != threads.end()) {
        const std::uint32_t i = innermost_at(f->second, l->second.ts);
        if (i != forest::npos) op = t.names[f->second.node[i]->name];
      }
    }
    out.add_kernel(t.names[e.name], op, e.dur);
  }
  return out;
}

}  // namespace steptrace::detail
