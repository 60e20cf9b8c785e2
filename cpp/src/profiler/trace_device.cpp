#include "profiler/trace_device.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "profiler/trace_names.hpp"
#include "record/collective_kernels.hpp"

namespace steptrace::detail {
namespace {}  // namespace

trace_device find_device(const trace_events& t) {
  trace_device d;
  std::map<std::uint32_t, std::uint64_t> kernels;
  for (const trace_event& e : t.events) {
    if (e.cat == event_cat::kernel) ++kernels[e.pid];
  }
  for (const auto& [pid, n] : kernels) {
    if (!d.present || n > kernels[d.pid]) d.pid = pid;
    d.present = true;
  }
  for (const trace_event& e : t.events) {
    if (d.present && e.pid == d.pid && e.cat == event_cat::memcpy && e.correlation != 0) {
      d.copy_by_correlation[e.correlation] = copy_of(t.names[e.name]);
    }
    if (d.present && e.pid == d.pid && is_device_work(e.cat) && e.dur > 0) d.busy.push_back({e.ts, e.ts + e.dur});
  }
  std::sort(d.busy.begin(), d.busy.end(),
            [](const step_interval& a, const step_interval& b) { return a.begin < b.begin; });
  std::vector<step_interval> merged;
  for (const step_interval& s : d.busy) {
    if (!merged.empty() && s.begin <= merged.back().end) {
      merged.back().end = std::max(merged.back().end, s.end);
    } else {
      merged.push_back(s);
    }
  }
  d.busy = std::move(merged);
  return d;
}

std::uint64_t busy_within(const trace_device& d, std::uint64_t begin, std::uint64_t end) {
  auto it = std::lower_bound(d.busy.begin(), d.busy.end(), begin,
                             [](const step_interval& x, std::uint64_t t) { return x.end <= t; });
  std::uint64_t covered = 0;
  for (; it != d.busy.end() && it->begin < end; ++it) covered += std::min(it->end, end) - std::max(it->begin, begin);
  return covered;
}

device_reading read_device(const trace_events& t, const trace_device& device, std::uint32_t pid,
                           const std::vector<step_interval>& steps) {
  device_reading out;
  // Sized once, from a count: no copy of the records while they grow (cpp/src/profiler/README.md, "Memory").
  std::size_t syncs = 0, work = 0, calls = 0;
  for (const trace_event& e : t.events) {
    if (e.pid == pid && e.cat == event_cat::runtime) {
      calls += e.correlation != 0 ? 1 : 0;
      syncs += is_sync(t.names[e.name]) ? 1 : 0;
    }
    work += device.present && e.pid == device.pid && is_device_work(e.cat) ? 1 : 0;
  }
  out.records.reserve(syncs + work);
  std::vector<std::uint64_t> launched;  // the launch calls' correlation ids, sorted
  std::vector<std::uint64_t> replays;   // of them, graphs' replays
  launched.reserve(calls);
  for (const trace_event& e : t.events) {
    if (e.pid != pid || e.cat != event_cat::runtime) continue;
    if (e.correlation != 0) launched.push_back(e.correlation);
    if (e.correlation != 0 && is_graph_launch(t.names[e.name])) replays.push_back(e.correlation);
    if (is_sync(t.names[e.name])) {
      device_record r;
      r.kind = device_activity::sync;
      r.start = e.ts;
      r.end = e.ts + e.dur;
      out.records.push_back(r);
    }
  }
  std::sort(launched.begin(), launched.end());
  std::sort(replays.begin(), replays.end());
  std::vector<signed char> collective(t.names.size(), -1);  // by name: each name is classified once
  for (const trace_event& e : t.events) {
    if (!device.present || e.pid != device.pid || !is_device_work(e.cat)) continue;
    device_record r;
    r.kind = e.cat == event_cat::kernel   ? device_activity::kernel
             : e.cat == event_cat::memcpy ? device_activity::memcpy
                                          : device_activity::memset;
    const std::string_view n = t.names[e.name];
    if (r.kind == device_activity::memcpy) {
      r.copy = copy_of(n);
      r.pageable = n.find("Pageable") != std::string_view::npos;
    }
    if (r.kind == device_activity::kernel) {
      signed char& c = collective[e.name];
      if (c < 0) c = is_collective_kernel(n) ? 1 : 0;
      r.nccl = c == 1;
      r.graph = e.correlation != 0 && std::binary_search(replays.begin(), replays.end(), e.correlation);
      if (r.graph) r.correlation = static_cast<std::uint32_t>(e.correlation);  // one replay's kernels share it
    }
    const activity_args& where = t.args_of(e);
    r.device = where.device;
    r.context = where.context;
    r.stream = where.stream;
    r.start = e.ts;
    r.end = e.ts + e.dur;
    r.bytes = where.bytes;
    out.records.push_back(r);
    if (r.kind == device_activity::kernel &&
        (e.correlation == 0 || !std::binary_search(launched.begin(), launched.end(), e.correlation))) {
      ++out.kernels_without_launch;
    }
  }
  std::stable_sort(out.records.begin(), out.records.end(),
                   [](const device_record& a, const device_record& b) { return a.start < b.start; });
  // Steps in which the device did nothing at all (no record starts or runs in them).
  std::vector<std::uint64_t> starts, reach_by;  // reach_by: the latest end among records up to each
  std::uint64_t reach = 0;
  for (const device_record& r : out.records) {
    if (r.kind == device_activity::sync) continue;
    starts.push_back(r.start);
    reach = std::max(reach, r.end);
    reach_by.push_back(reach);
  }
  for (const step_interval& w : steps) {
    const auto k = std::lower_bound(starts.begin(), starts.end(), w.end) - starts.begin();
    if (k == 0 || reach_by[static_cast<std::size_t>(k) - 1] <= w.begin) ++out.steps_without_device;
  }
  out.coverage = launch_coverage(t, pid, steps);
  return out;
}

launch_coverage_reading launch_coverage(const trace_events& t, std::uint32_t pid,
                                        const std::vector<step_interval>& steps) {
  launch_coverage_reading out;
  if (steps.empty()) return out;
  std::vector<std::uint64_t> recorded;  // the correlations of every device record, any device
  for (const trace_event& e : t.events) {
    if (is_device_work(e.cat) && e.correlation != 0) recorded.push_back(e.correlation);
  }
  std::sort(recorded.begin(), recorded.end());
  // A stream's capture, by thread: the kernels launched into it run only when the graph replays.
  std::unordered_map<std::uint32_t, std::uint64_t> capturing;                           // tid -> when its capture began
  std::vector<std::pair<std::uint64_t, std::uint64_t>> launched(steps.size(), {0, 0});  // launched, recorded
  for (const trace_event& e : t.events) {  // file order: a thread's calls in time order
    if (e.pid != pid || e.cat != event_cat::runtime) continue;
    const std::string_view n = t.names[e.name];
    if (is_capture_begin(n)) capturing[e.tid] = e.ts;
    if (is_capture_end(n)) capturing.erase(e.tid);
    if (e.correlation == 0 || !is_device_work_call(n) || is_copy_call(n) || capturing.count(e.tid) != 0) continue;
    const auto w = std::upper_bound(steps.begin(), steps.end(), e.ts,
                                    [](std::uint64_t at, const step_interval& x) { return at < x.begin; });
    if (w == steps.begin() || e.ts >= std::prev(w)->end) continue;
    auto& [calls, kept] = launched[static_cast<std::size_t>(std::prev(w) - steps.begin())];
    ++calls;
    kept += std::binary_search(recorded.begin(), recorded.end(), e.correlation) ? 1 : 0;
  }
  for (const auto& [calls, kept] : launched) {
    if (calls < coverage_min_launches) continue;
    ++out.steps_weighed;
    if (2 * kept >= calls) continue;
    ++out.steps_under_recorded;
    out.launches += calls;
    out.recorded += kept;
  }
  return out;
}

void stretch_to_device_work(const trace_events& t, const trace_device& device, std::uint32_t pid,
                            std::vector<step_interval>& steps) {
  if (steps.empty()) return;
  std::unordered_map<std::uint64_t, std::uint64_t> device_end;  // by correlation
  for (const trace_event& e : t.events) {
    if (device.present && e.pid == device.pid && e.correlation != 0 && is_device_work(e.cat)) {
      auto& end = device_end[e.correlation];
      end = std::max(end, e.ts + e.dur);
    }
  }
  std::vector<std::uint64_t> launched_end(steps.size(), 0);
  for (const trace_event& e : t.events) {
    if (e.pid != pid || e.cat != event_cat::runtime || e.correlation == 0) continue;
    const auto d = device_end.find(e.correlation);
    if (d == device_end.end()) continue;
    auto w = std::upper_bound(steps.begin(), steps.end(), e.ts,
                              [](std::uint64_t at, const step_interval& x) { return at < x.begin; });
    if (w == steps.begin()) continue;
    --w;
    if (e.ts + e.dur <= w->end) {
      auto& end = launched_end[static_cast<std::size_t>(w - steps.begin())];
      end = std::max(end, d->second);
    }
  }
  std::uint64_t previous_end = steps.front().begin;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    steps[i].begin = std::max(previous_end, steps[i].begin);
    steps[i].end = std::max({steps[i].end, launched_end[i], steps[i].begin});
    previous_end = steps[i].end;
  }
}

std::vector<step_interval> untraced_busy(const trace_events& t, const trace_device& device, std::uint32_t pid,
                                         const std::vector<device_record>& records, step_interval step) {
  std::vector<std::vector<step_interval>> one = untraced_busy_in(t, device, pid, records, {step}, true);
  return one.empty() ? std::vector<step_interval>{} : std::move(one.front());
}

std::vector<std::vector<step_interval>> untraced_busy_in(const trace_events& t, const trace_device& device,
                                                         std::uint32_t pid, const std::vector<device_record>& records,
                                                         const std::vector<step_interval>& steps, bool graph_nodes) {
  std::vector<std::vector<step_interval>> out(steps.size());
  if (!device.present || steps.empty()) return out;
  // The step holding instant `at` (steps are in order and disjoint), or steps.size().
  auto step_of = [&](std::uint64_t at) {
    const auto k = std::upper_bound(steps.begin(), steps.end(), at,
                                    [](std::uint64_t x, const step_interval& s) { return x < s.begin; });
    if (k == steps.begin()) return steps.size();
    const std::size_t i = static_cast<std::size_t>(k - steps.begin()) - 1;
    return at < steps[i].end ? i : steps.size();
  };
  // The launches made inside a step, by correlation: from when each can be evidence. A call that
  // waits on the stream (a pageable copy runs inside it) from when it began; any other from when it
  // returned: a launch that itself blocked (a first call loading its module) is host time, and its
  // kernel starting late after the call began says nothing of untraced device work. 24 bytes a
  // launch, sorted, never a map node each.
  struct launch_at {
    std::uint64_t correlation, from;
    std::size_t step;
    bool operator<(const launch_at& o) const { return correlation < o.correlation; }
  };
  std::vector<launch_at> launched;
  for (const trace_event& e : t.events) {
    if (e.pid != pid || e.cat != event_cat::runtime || e.correlation == 0) continue;
    if (!graph_nodes && is_graph_launch(t.names[e.name])) continue;
    if (const std::size_t k = step_of(e.ts); k < steps.size()) {
      launched.push_back({e.correlation, is_copy_call(t.names[e.name]) ? e.ts : e.ts + e.dur, k});
    }
  }
  std::stable_sort(launched.begin(), launched.end());  // the first in file order of a correlation first
  // The traced busy union, to find the time before each late record in which nothing traced ran.
  std::vector<step_interval> busy;
  for (const device_record& r : records) {
    if (r.kind == device_activity::sync) continue;
    if (!busy.empty() && r.start <= busy.back().end) {
      busy.back().end = std::max(busy.back().end, r.end);
    } else {
      busy.push_back({r.start, r.end});
    }
  }
  for (const trace_event& e : t.events) {
    if (e.pid != device.pid || !is_device_work(e.cat) || e.correlation == 0) continue;
    const auto launch = std::lower_bound(launched.begin(), launched.end(), launch_at{e.correlation, 0, 0});
    if (launch == launched.end() || launch->correlation != e.correlation || e.ts < launch->from + untraced_wait_ns) {
      continue;
    }
    const std::size_t k = launch->step;
    // The idle-looking stretch just before the record: from the end of the last traced work
    // before it (or the launch, if later). Traced work running up to its start (the
    // record queued behind it) is no evidence.
    const auto b = std::lower_bound(busy.begin(), busy.end(), e.ts,
                                    [](const step_interval& x, std::uint64_t at) { return x.end < at; });
    if (b == busy.end() || b->begin < e.ts) continue;
    std::uint64_t from = launch->from;
    if (b != busy.begin()) from = std::max(from, std::prev(b)->end);
    from = std::max(from, steps[k].begin);
    const std::uint64_t to = std::min(e.ts, steps[k].end);
    if (to >= from + untraced_wait_ns) out[k].push_back({from, to});
  }
  for (std::vector<step_interval>& v : out) merge_intervals(v);
  return out;
}

std::string late_steps(const trace_events& t, const trace_device& device, std::uint32_t pid,
                       const std::vector<device_record>& records, const std::vector<step_interval>& steps) {
  const std::vector<std::vector<step_interval>> late = untraced_busy_in(t, device, pid, records, steps, false);
  std::uint64_t steps_late = 0, late_ns = 0;
  for (std::size_t k = 0; k < steps.size(); ++k) {
    std::uint64_t ns = 0;
    for (const step_interval& s : late[k]) ns += s.end - s.begin;
    if (10 * ns < steps[k].end - steps[k].begin) continue;  // under a tenth of the step
    ++steps_late;
    late_ns += ns;
  }
  if (steps_late == 0 || 2 * steps_late < steps.size()) return "";
  return fmt::format("{} {} {:.3f}", steps_late, steps.size(), static_cast<double>(late_ns) / 1e6 / steps_late);
}

void merge_intervals(std::vector<step_interval>& v) {
  std::sort(v.begin(), v.end(), [](const step_interval& a, const step_interval& b) { return a.begin < b.begin; });
  std::vector<step_interval> merged;
  for (const step_interval& s : v) {
    if (!merged.empty() && s.begin <= merged.back().end) {
      merged.back().end = std::max(merged.back().end, s.end);
    } else {
      merged.push_back(s);
    }
  }
  v.swap(merged);
}

}  // namespace steptrace::detail
