#include "profiler/trace_kernels.hpp"

#include <algorithm>
#include <map>

#include "analysis/device_spans.hpp"
#include "profiler/launch_sites.hpp"
#include "record/collective_kernels.hpp"

namespace steptrace::detail {

kernel_table read_kernels(const trace_events& t, const trace_device& device, const launch_sites& sites,
                          const std::vector<step_interval>& counted, const std::vector<device_record>& records) {
  kernel_table out;
  if (!device.present || counted.empty()) return out;
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
    const auto from = std::lower_bound(u.begin(), u.end(), e.ts,
                                       [](const spans::interval& x, std::uint64_t ts) { return x.end <= ts; });
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
