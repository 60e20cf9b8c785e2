// One step's device view (busy, idle by host phase, counts) and the aggregate of many steps.
#include "analysis/device_view.hpp"

#include <algorithm>
#include <map>

#include "analysis/device_spans.hpp"
#include "record/kernel_names.hpp"
#include "steptrace/phase.hpp"

namespace steptrace::detail {
namespace spans {

void attribute(interval idle, const std::vector<host_segment>& segments, std::size_t& cursor,
               std::vector<std::uint64_t>& out) {
  while (cursor < segments.size() && segments[cursor].end <= idle.begin) ++cursor;
  for (std::size_t i = cursor; i < segments.size() && segments[i].begin < idle.end; ++i) {
    const std::uint64_t lo = std::max(idle.begin, segments[i].begin), hi = std::min(idle.end, segments[i].end);
    if (hi <= lo) continue;
    if (segments[i].phase >= out.size()) out.resize(segments[i].phase + 1, 0);
    out[segments[i].phase] += hi - lo;
  }
}

namespace {

// The phase of the step's host segment in which `at` falls (segments tile the step's window in
// time order), launched_outside when none holds it.
std::uint32_t phase_at(std::uint64_t at, const std::vector<host_segment>& segments) {
  if (at == 0) return step_device_view::launch_not_seen;
  auto s = std::upper_bound(segments.begin(), segments.end(), at,
                            [](std::uint64_t t, const host_segment& x) { return t < x.begin; });
  if (s == segments.begin() || at >= std::prev(s)->end) return step_device_view::launched_outside;
  return std::prev(s)->phase;
}

}  // namespace

void list_launched(step_device_view& v, const device_record& r, std::uint64_t begin, std::uint64_t end,
                   const std::vector<host_segment>& segments) {
  if (r.kind != device_activity::kernel || r.name == 0 || r.launched < begin || r.launched >= end) return;
  v.kernel_calls.push_back({r.name, phase_at(r.launched, segments), r.end - r.start});
  if (r.nccl) v.collectives.push_back({{r.context, r.stream}, r.start, r.end, v.kernel_calls.back().phase});
}

void count(step_device_view& v, const device_record& r, const std::vector<host_segment>& /*segments*/) {
  switch (r.kind) {
    case device_activity::kernel:
      ++v.kernels;
      if (r.graph) {
        ++v.graph_kernels;
        if (v.graph_launches.empty() || v.graph_launches.back() != r.correlation)
          v.graph_launches.push_back(r.correlation);
      }
      v.kernel_ns.push_back(r.end - r.start);
      if (r.name != 0 && r.launched == 0)
        v.kernel_calls.push_back({r.name, step_device_view::launch_not_seen, r.end - r.start});
      if (r.nccl) {
        ++v.nccl_kernels;
        v.nccl_ns += r.end - r.start;
        v.nccl.push_back(r);
      }
      break;
    case device_activity::memcpy:
      v.copy_ns += r.end - r.start;
      if (r.copy == copy_kind::h2d) {
        v.h2d_bytes += r.bytes;
        v.h2d_pageable_bytes += r.pageable ? r.bytes : 0;
        v.h2d_ns += r.end - r.start;
        v.h2d_copies.push_back(r);
        ++v.h2d_count;
      } else if (r.copy == copy_kind::d2h) {
        v.d2h_bytes += r.bytes;
        v.d2h_pageable_bytes += r.pageable ? r.bytes : 0;
        v.d2h_ns += r.end - r.start;
        ++v.d2h_count;
      }
      break;
    case device_activity::sync:
      ++v.syncs;
      v.sync_ns += r.end - r.start;
      break;
    case device_activity::memory:
      if (r.freed) {
        v.mem_freed += r.bytes;
      } else {
        ++v.mem_allocs;
        v.mem_allocated += r.bytes;
      }
      v.mem_ops.emplace_back(r.start,
                             r.freed ? -static_cast<std::int64_t>(r.bytes) : static_cast<std::int64_t>(r.bytes));
      break;
    case device_activity::memset:
      v.memset_ns += r.end - r.start;
      break;
    case device_activity::untraced:
    case device_activity::launch:
      break;
  }
}

void memory_peak(step_device_view& v) {
  std::stable_sort(v.mem_ops.begin(), v.mem_ops.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::int64_t held = 0, peak = 0;
  for (const auto& op : v.mem_ops) peak = std::max(peak, held += op.second);
  v.mem_peak = static_cast<std::uint64_t>(peak);
  v.mem_ops.clear();
}

}  // namespace spans

using namespace spans;

namespace {

// The kernel table's op for a live kernel: the phase open on the host when it was launched.
std::string launch_phase(std::uint32_t phase) {
  if (phase == step_device_view::launch_not_seen) return "(launch not seen)";
  if (phase == step_device_view::launched_outside) return "(launched outside the step's phases)";
  return phase_label(phase_id{phase});
}

}  // namespace

step_device_view view_step(std::uint64_t begin, std::uint64_t end, const std::vector<host_segment>& segments,
                           const std::vector<device_record>& records, const std::vector<stream_key>& streams) {
  step_device_view v;
  v.window = end > begin ? end - begin : 0;
  v.all_streams = streams.empty();
  // Records are sorted by start: the unions of those that occupy the device, and the counts of
  // those that start in the window (each counted in the step in which it starts, never twice).
  std::vector<interval> busy, device;
  std::map<std::uint32_t, std::vector<interval>> compute;  // kernels but NCCL's, by context
  for (const device_record& r : records) {
    const bool own = in_scope(r, streams);
    if (own && r.kind == device_activity::kernel && !r.nccl) extend(compute[r.context], r.start, r.end);
    if (own) list_launched(v, r, begin, end, segments);
    if (r.start >= end) continue;
    if (own && r.start >= begin) count(v, r, segments);
    if (!occupies_device(r) || r.end <= begin) continue;
    if (own) extend(busy, r.start, r.end);
    if (on_devices_of(r, streams)) extend(device, r.start, r.end);
  }
  busy_and_idle(v, begin, end, busy.begin(), busy.end(), segments);
  v.device_busy = overlap(begin, end, device.begin(), device.end());
  memory_peak(v);
  exposure(v, [&](std::uint32_t c) {
    const auto it = compute.find(c);
    return it == compute.end() ? nullptr : &it->second;
  });
  return v;
}

void device_aggregate::add(const step_device_view& v) {
  ++steps_;
  all_streams_ += v.all_streams ? 1 : 0;
  device_busy_total_ += v.device_busy;
  busy_.add(v.busy);
  idle_.add(v.window - v.busy);
  busy_total_ += v.busy;
  idle_total_ += v.window - v.busy;
  if (v.idle_by_phase.size() > idle_by_phase_.size()) idle_by_phase_.resize(v.idle_by_phase.size(), 0);
  for (std::size_t i = 0; i < v.idle_by_phase.size(); ++i) idle_by_phase_[i] += v.idle_by_phase[i];
  for (std::uint64_t k : v.kernel_ns) kernel_.add(k);
  if (!v.kernel_calls.empty()) {
    // By kernel and phase, each group added at once: a name is looked up once a step, not per call.
    auto calls = v.kernel_calls;
    std::sort(calls.begin(), calls.end(),
              [](const auto& a, const auto& b) { return a.name != b.name ? a.name < b.name : a.phase < b.phase; });
    std::vector<std::uint64_t> durations;
    for (std::size_t i = 0; i < calls.size();) {
      durations.clear();
      std::size_t j = i;
      for (; j < calls.size() && calls[j].name == calls[i].name && calls[j].phase == calls[i].phase; ++j) {
        durations.push_back(calls[j].ns);
      }
      kernel_table_.add_kernels(kernel_name(calls[i].name), launch_phase(calls[i].phase), durations.data(),
                                durations.size());
      i = j;
    }
    if (v.copy_ns) kernel_table_.add_transfer(false, v.copy_ns);
    if (v.memset_ns) kernel_table_.add_transfer(true, v.memset_ns);
  }
  for (const step_device_view::collective_launch& c : v.collectives) {
    auto [at, added] = collective_streams_.try_emplace(
        c.stream, collective_stream{static_cast<std::uint32_t>(collective_streams_.size()), 0});
    collective_call call;
    call.group = "c" + std::to_string(at->second.group);
    call.seq = at->second.next++;
    call.start_us = static_cast<double>(c.start) * 1e-3;
    call.end_us = static_cast<double>(c.end) * 1e-3;
    if (c.phase < step_device_view::launched_outside) call.before = phase_label(phase_id{c.phase});
    recent_collectives_.push_back(std::move(call));
    if (recent_collectives_.size() > nccl_stats::recent_collectives) recent_collectives_.pop_front();
  }
  totals_.nccl_kernels += v.nccl_kernels;
  totals_.nccl_ns += v.nccl_ns;
  totals_.nccl_exposed_ns += v.nccl_exposed_ns;
  totals_.h2d_bytes += v.h2d_bytes;
  totals_.h2d_pageable_bytes += v.h2d_pageable_bytes;
  totals_.h2d_ns += v.h2d_ns;
  totals_.h2d_exposed_ns += v.h2d_exposed_ns;
  totals_.h2d_count += v.h2d_count;
  totals_.d2h_bytes += v.d2h_bytes;
  totals_.d2h_pageable_bytes += v.d2h_pageable_bytes;
  totals_.d2h_ns += v.d2h_ns;
  totals_.d2h_count += v.d2h_count;
  totals_.syncs += v.syncs;
  totals_.sync_ns += v.sync_ns;
  totals_.kernels += v.kernels;
  totals_.graph_kernels += v.graph_kernels;
  std::vector<std::uint32_t> replays = v.graph_launches;
  std::sort(replays.begin(), replays.end());
  totals_.graph_replays += static_cast<std::uint64_t>(std::unique(replays.begin(), replays.end()) - replays.begin());
  totals_.mem_allocs += v.mem_allocs;
  totals_.mem_allocated += v.mem_allocated;
  totals_.mem_freed += v.mem_freed;
  mem_peak_.add(v.mem_peak);
}

void device_aggregate::fill(gpu_stats& out) const {
  const double per_step = steps_ ? 1.0 / static_cast<double>(steps_) : 0.0;
  auto ms = [](std::uint64_t ns) { return static_cast<double>(ns) * 1e-6; };
  auto stats = [&](const histogram& h, std::uint64_t total) {
    return stat_ms{ms(total),  ms(total) * per_step, ms(h.quantile(0.5)), ms(h.quantile(0.95)), ms(h.quantile(0.99)),
                   ms(h.max())};
  };
  auto copies = [&](std::uint64_t bytes, std::uint64_t pageable, std::uint64_t ns, std::uint64_t count) {
    copy_stats c;
    c.count = count;
    c.bytes_per_step = static_cast<double>(bytes) * per_step;
    c.ms_per_step = ms(ns) * per_step;
    c.gb_per_s = ns ? static_cast<double>(bytes) / static_cast<double>(ns) : 0.0;  // bytes/ns = GB/s
    c.pageable_share = bytes ? static_cast<double>(pageable) / static_cast<double>(bytes) : 0.0;
    return c;
  };
  out.busy_ms = stats(busy_, busy_total_);
  out.idle_ms = stats(idle_, idle_total_);
  const std::uint64_t windows = busy_total_ + idle_total_;
  out.busy_share = windows ? static_cast<double>(busy_total_) / static_cast<double>(windows) : 0.0;
  out.device_busy_share = windows ? static_cast<double>(device_busy_total_) / static_cast<double>(windows) : 0.0;
  out.steps_all_streams = all_streams_;
  out.idle_by_phase.clear();
  for (std::uint32_t id = 0; id < idle_by_phase_.size(); ++id) {
    if (idle_by_phase_[id] == 0 || idle_total_ == 0) continue;
    out.idle_by_phase.emplace_back(phase_label(phase_id{id}),
                                   static_cast<double>(idle_by_phase_[id]) / static_cast<double>(idle_total_));
  }
  std::stable_sort(out.idle_by_phase.begin(), out.idle_by_phase.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  out.h2d = copies(totals_.h2d_bytes, totals_.h2d_pageable_bytes, totals_.h2d_ns, totals_.h2d_count);
  out.h2d.exposed_ms_per_step = ms(totals_.h2d_exposed_ns) * per_step;
  out.d2h = copies(totals_.d2h_bytes, totals_.d2h_pageable_bytes, totals_.d2h_ns, totals_.d2h_count);
  out.syncs_per_step = static_cast<double>(totals_.syncs) * per_step;
  out.sync_ms_per_step = ms(totals_.sync_ns) * per_step;
  out.kernels_per_step = static_cast<double>(totals_.kernels) * per_step;
  out.graph_kernels_per_step = static_cast<double>(totals_.graph_kernels) * per_step;
  out.graph_replays_per_step = static_cast<double>(totals_.graph_replays) * per_step;
  out.kernel_median_us = static_cast<double>(kernel_.quantile(0.5)) * 1e-3;
  out.kernel_time_median_us = static_cast<double>(kernel_.weighted_quantile(0.5)) * 1e-3;
  out.nccl.kernels_per_step = static_cast<double>(totals_.nccl_kernels) * per_step;
  out.nccl.ms_per_step = ms(totals_.nccl_ns) * per_step;
  out.nccl.exposed_ms_per_step = ms(totals_.nccl_exposed_ns) * per_step;
  out.nccl.recent.assign(recent_collectives_.begin(), recent_collectives_.end());
  auto mb = [](double bytes) { return bytes * 1e-6; };
  out.memory.allocations_per_step = static_cast<double>(totals_.mem_allocs) * per_step;
  out.memory.allocated_mb_per_step = mb(static_cast<double>(totals_.mem_allocated)) * per_step;
  out.memory.freed_mb_per_step = mb(static_cast<double>(totals_.mem_freed)) * per_step;
  out.memory.net_mb = mb(static_cast<double>(totals_.mem_allocated) - static_cast<double>(totals_.mem_freed));
  out.memory.step_peak_mb_p50 = mb(static_cast<double>(mem_peak_.quantile(0.5)));
  out.memory.step_peak_mb_p95 = mb(static_cast<double>(mem_peak_.quantile(0.95)));
  out.memory.step_peak_mb_max = mb(static_cast<double>(mem_peak_.max()));
  if (!kernel_table_.empty()) out.kernels = kernel_table_.stats(steps_);
  out.incomplete_records = incomplete;
  out.dropped_records = dropped;
  out.steps_viewed = steps_;
  out.steps_without_records = uncovered;
  out.steps_sampled_out = sampled_out;
}

}  // namespace steptrace::detail
