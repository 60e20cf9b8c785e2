#include "analysis/device_view.hpp"

#include <algorithm>
#include <map>

#include "steptrace/phase.hpp"

namespace steptrace::detail {
namespace {

struct interval {
  std::uint64_t begin, end;
};

bool occupies_device(const device_record& r) {
  return r.kind == device_activity::kernel || r.kind == device_activity::memcpy || r.kind == device_activity::memset ||
         r.kind == device_activity::untraced;
}

// Adds the part of [begin, end) that overlaps each host segment to idle[segment.phase].
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

void count(step_device_view& v, const device_record& r) {
  switch (r.kind) {
    case device_activity::kernel:
      ++v.kernels;
      v.kernel_ns.push_back(r.end - r.start);
      if (r.nccl) {
        ++v.nccl_kernels;
        v.nccl_ns += r.end - r.start;
        v.nccl.push_back(r);
      }
      break;
    case device_activity::memcpy:
      if (r.copy == copy_kind::h2d) {
        v.h2d_bytes += r.bytes;
        v.h2d_pageable_bytes += r.pageable ? r.bytes : 0;
        v.h2d_ns += r.end - r.start;
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
      v.mem_ops.emplace_back(r.start, r.freed ? -static_cast<std::int64_t>(r.bytes) : static_cast<std::int64_t>(r.bytes));
      break;
    case device_activity::memset:
    case device_activity::untraced:
      break;
  }
}

// The step's peak device memory above its start, from its allocations and releases in time order.
void memory_peak(step_device_view& v) {
  std::stable_sort(v.mem_ops.begin(), v.mem_ops.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::int64_t held = 0, peak = 0;
  for (const auto& op : v.mem_ops) peak = std::max(peak, held += op.second);
  v.mem_peak = static_cast<std::uint64_t>(peak);
  v.mem_ops.clear();
}

// Busy and idle time of the window [begin, end) from the device's busy intervals [first, last):
// sorted, disjoint, possibly reaching outside the window. Idle gaps are cut along the host phases.
template <class It>
void busy_and_idle(step_device_view& v, std::uint64_t begin, std::uint64_t end, It first, It last,
                   const std::vector<host_segment>& segments) {
  std::size_t cursor = 0;
  std::uint64_t at = begin;
  for (It b = first; b != last && b->begin < end; ++b) {
    if (b->end <= begin) continue;
    const std::uint64_t lo = std::max(b->begin, begin), hi = std::min(b->end, end);
    v.busy += hi - lo;
    if (lo > at) attribute({at, lo}, segments, cursor, v.idle_by_phase);
    at = hi;
  }
  if (end > at) attribute({at, end}, segments, cursor, v.idle_by_phase);
}

// Whether a record belongs to a step with these streams (empty: every stream).
bool in_scope(const device_record& r, const std::vector<stream_key>& streams) {
  if (streams.empty()) return true;
  for (const stream_key& k : streams) {
    if (k.context == r.context && (r.stream == no_stream || k.stream == r.stream)) return true;
  }
  return false;
}

bool on_devices_of(const device_record& r, const std::vector<stream_key>& streams) {
  if (streams.empty()) return true;
  for (const stream_key& k : streams) {
    if (k.context == r.context) return true;
  }
  return false;
}

// Appends [begin, end) to a union built in order of begin.
template <class Union>
void extend(Union& u, std::uint64_t begin, std::uint64_t end) {
  if (!u.empty() && begin <= u.back().end) {
    u.back().end = std::max(u.back().end, end);
  } else {
    u.push_back({begin, end});
  }
}

// The time [begin, end) overlaps a union.
template <class It>
std::uint64_t overlap(std::uint64_t begin, std::uint64_t end, It first, It last) {
  std::uint64_t sum = 0;
  for (It b = first; b != last && b->begin < end; ++b) {
    if (b->end > begin) sum += std::min(b->end, end) - std::max(b->begin, begin);
  }
  return sum;
}

// NCCL time that no other kernel of its context overlaps. compute(context) gives that context's
// union of other kernels (sorted, disjoint), or nullptr.
template <class Lookup>
void nccl_exposure(step_device_view& v, Lookup&& compute) {
  for (const device_record& r : v.nccl) {
    std::uint64_t hidden = 0;
    if (const auto* u = compute(r.context)) {
      const auto from = std::lower_bound(u->begin(), u->end(), r.start,
                                         [](const auto& x, std::uint64_t t) { return x.end <= t; });
      hidden = overlap(r.start, r.end, from, u->end());
    }
    v.nccl_exposed_ns += (r.end - r.start) - hidden;
  }
  v.nccl.clear();
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
    if (r.start >= end) continue;
    if (own && r.start >= begin) count(v, r);
    if (!occupies_device(r) || r.end <= begin) continue;
    if (own) extend(busy, r.start, r.end);
    if (on_devices_of(r, streams)) extend(device, r.start, r.end);
  }
  busy_and_idle(v, begin, end, busy.begin(), busy.end(), segments);
  v.device_busy = overlap(begin, end, device.begin(), device.end());
  memory_peak(v);
  nccl_exposure(v, [&](std::uint32_t c) { const auto it = compute.find(c); return it == compute.end() ? nullptr : &it->second; });
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
  totals_.nccl_kernels += v.nccl_kernels;
  totals_.nccl_ns += v.nccl_ns;
  totals_.nccl_exposed_ns += v.nccl_exposed_ns;
  totals_.h2d_bytes += v.h2d_bytes;
  totals_.h2d_pageable_bytes += v.h2d_pageable_bytes;
  totals_.h2d_ns += v.h2d_ns;
  totals_.h2d_count += v.h2d_count;
  totals_.d2h_bytes += v.d2h_bytes;
  totals_.d2h_pageable_bytes += v.d2h_pageable_bytes;
  totals_.d2h_ns += v.d2h_ns;
  totals_.d2h_count += v.d2h_count;
  totals_.syncs += v.syncs;
  totals_.sync_ns += v.sync_ns;
  totals_.kernels += v.kernels;
  totals_.mem_allocs += v.mem_allocs;
  totals_.mem_allocated += v.mem_allocated;
  totals_.mem_freed += v.mem_freed;
  mem_peak_.add(v.mem_peak);
}

void device_aggregate::fill(gpu_stats& out) const {
  const double per_step = steps_ ? 1.0 / static_cast<double>(steps_) : 0.0;
  auto ms = [](std::uint64_t ns) { return static_cast<double>(ns) * 1e-6; };
  auto stats = [&](const histogram& h, std::uint64_t total) {
    return stat_ms{ms(total), ms(total) * per_step, ms(h.quantile(0.5)), ms(h.quantile(0.95)),
                   ms(h.quantile(0.99)), ms(h.max())};
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
  out.d2h = copies(totals_.d2h_bytes, totals_.d2h_pageable_bytes, totals_.d2h_ns, totals_.d2h_count);
  out.syncs_per_step = static_cast<double>(totals_.syncs) * per_step;
  out.sync_ms_per_step = ms(totals_.sync_ns) * per_step;
  out.kernels_per_step = static_cast<double>(totals_.kernels) * per_step;
  out.kernel_median_us = static_cast<double>(kernel_.quantile(0.5)) * 1e-3;
  out.kernel_time_median_us = static_cast<double>(kernel_.weighted_quantile(0.5)) * 1e-3;
  out.nccl.kernels_per_step = static_cast<double>(totals_.nccl_kernels) * per_step;
  out.nccl.ms_per_step = ms(totals_.nccl_ns) * per_step;
  out.nccl.exposed_ms_per_step = ms(totals_.nccl_exposed_ns) * per_step;
  auto mb = [](double bytes) { return bytes * 1e-6; };
  out.memory.allocations_per_step = static_cast<double>(totals_.mem_allocs) * per_step;
  out.memory.allocated_mb_per_step = mb(static_cast<double>(totals_.mem_allocated)) * per_step;
  out.memory.freed_mb_per_step = mb(static_cast<double>(totals_.mem_freed)) * per_step;
  out.memory.net_mb = mb(static_cast<double>(totals_.mem_allocated) - static_cast<double>(totals_.mem_freed));
  out.memory.step_peak_mb_p50 = mb(static_cast<double>(mem_peak_.quantile(0.5)));
  out.memory.step_peak_mb_p95 = mb(static_cast<double>(mem_peak_.quantile(0.95)));
  out.memory.step_peak_mb_max = mb(static_cast<double>(mem_peak_.max()));
  out.incomplete_records = incomplete;
  out.dropped_records = dropped;
  out.steps_viewed = steps_;
  out.steps_without_records = uncovered;
}

void device_join::add_step(std::uint64_t begin, std::uint64_t end, std::vector<host_segment> segments,
                           std::vector<stream_key> streams) {
  if (waiting_.size() >= max_pending) join(waiting_.front().end + 1);  // view the oldest now
  waiting_.push_back({begin, end, std::move(segments), std::move(streams)});
}

namespace {

// Merges `added` (sorted, disjoint) into `u`: only the part of `u` it can touch is rebuilt.
template <class Interval>
void merge_union(std::deque<Interval>& u, const std::vector<Interval>& added) {
  if (added.empty()) return;
  const auto from = std::lower_bound(u.begin(), u.end(), added.front().begin,
                                     [](const Interval& x, std::uint64_t t) { return x.end < t; });
  std::vector<Interval> kept(from, u.end());
  u.erase(from, u.end());
  std::size_t i = 0, j = 0;
  while (i < kept.size() || j < added.size()) {
    const Interval& x = j == added.size() || (i < kept.size() && kept[i].begin < added[j].begin) ? kept[i++] : added[j++];
    extend(u, x.begin, x.end);
  }
}

// Adds `batch` (sorted by start) to records kept sorted by start: only the kept ones that start
// after the batch's first are merged with it.
template <class It>
void merge_records(std::deque<device_record>& kept, It first, It last) {
  auto by_start = [](const device_record& a, const device_record& b) { return a.start < b.start; };
  const auto old_end = static_cast<std::ptrdiff_t>(kept.size());
  if (kept.empty() || !by_start(*first, kept.back())) {  // the common case: all after what is kept
    kept.insert(kept.end(), first, last);
    return;
  }
  const auto tail = std::upper_bound(kept.begin(), kept.end(), *first, by_start) - kept.begin();
  kept.insert(kept.end(), first, last);
  std::inplace_merge(kept.begin() + tail, kept.begin() + old_end, kept.end(), by_start);
}

}  // namespace

void device_join::add_records(const std::vector<device_record>& records) {
  if (records.empty()) return;
  std::vector<device_record> batch(records);
  std::stable_sort(batch.begin(), batch.end(), [](const device_record& a, const device_record& b) {
    const stream_key ka{a.context, a.stream}, kb{b.context, b.stream};
    return ka < kb || (ka == kb && a.start < b.start);
  });
  // One run per stream, each sorted by start: into its track, its stream's and context's unions.
  std::vector<interval> all;
  for (std::size_t i = 0; i < batch.size();) {
    const stream_key key{batch[i].context, batch[i].stream};
    std::size_t j = i;
    std::vector<interval> added, compute;
    while (j < batch.size() && stream_key{batch[j].context, batch[j].stream} == key) {
      const device_record& r = batch[j++];
      newest_ = std::max(newest_, r.end);
      if (occupies_device(r) && r.end > r.start) extend(added, r.start, r.end);
      if (r.kind == device_activity::kernel && !r.nccl && r.end > r.start) extend(compute, r.start, r.end);
    }
    merge_union(compute_busy_[key.context], compute);
    track& t = streams_[key];
    merge_records(t.records, batch.begin() + static_cast<std::ptrdiff_t>(i), batch.begin() + static_cast<std::ptrdiff_t>(j));
    merge_union(t.busy, added);
    merge_union(context_busy_[key.context], added);
    all.insert(all.end(), added.begin(), added.end());
    i = j;
  }
  // Every device: the streams' unions, merged in order of begin.
  std::sort(all.begin(), all.end(), [](const interval& a, const interval& b) { return a.begin < b.begin; });
  std::vector<interval> joined;
  for (const interval& x : all) extend(joined, x.begin, x.end);
  merge_union(busy_, joined);
}

void device_join::count_in(const track& t, const waiting& w, step_device_view& v) const {
  auto first = std::lower_bound(t.records.begin(), t.records.end(), w.begin,
                                [](const device_record& r, std::uint64_t at) { return r.start < at; });
  for (auto r = first; r != t.records.end() && r->start < w.end; ++r) count(v, *r);
}

step_device_view device_join::view(const waiting& w) const {
  auto compute_of = [this](std::uint32_t c) {
    const auto it = compute_busy_.find(c);
    return it == compute_busy_.end() ? nullptr : &it->second;
  };
  step_device_view v;
  v.window = w.end > w.begin ? w.end - w.begin : 0;
  v.all_streams = w.streams.empty();
  auto in_window = [&](const busy_union& u) {
    return std::lower_bound(u.begin(), u.end(), w.begin, [](const interval& x, std::uint64_t t) { return x.end <= t; });
  };
  if (v.all_streams) {
    for (const auto& [key, t] : streams_) count_in(t, w, v);
    busy_and_idle(v, w.begin, w.end, in_window(busy_), busy_.end(), w.segments);
    v.device_busy = v.busy;
    memory_peak(v);
    nccl_exposure(v, compute_of);
    return v;
  }
  // The step's streams, the syncs of their contexts that name no stream, and the unions of both.
  std::vector<std::uint32_t> contexts;
  for (const stream_key& k : w.streams) {
    if (std::find(contexts.begin(), contexts.end(), k.context) == contexts.end()) contexts.push_back(k.context);
  }
  std::vector<interval> busy, device;
  auto gather = [&](const busy_union& u, std::vector<interval>& out) {
    for (auto b = in_window(u); b != u.end() && b->begin < w.end; ++b) out.push_back(*b);
  };
  for (const stream_key& k : w.streams) {
    if (auto t = streams_.find(k); t != streams_.end()) {
      count_in(t->second, w, v);
      gather(t->second.busy, busy);
    }
  }
  for (std::uint32_t c : contexts) {
    if (auto t = streams_.find(stream_key{c, no_stream}); t != streams_.end()) count_in(t->second, w, v);
    if (auto u = context_busy_.find(c); u != context_busy_.end()) gather(u->second, device);
  }
  auto as_union = [](std::vector<interval>& xs) {
    std::sort(xs.begin(), xs.end(), [](const interval& a, const interval& b) { return a.begin < b.begin; });
    std::vector<interval> u;
    for (const interval& x : xs) extend(u, x.begin, x.end);
    return u;
  };
  const std::vector<interval> own = as_union(busy), whole = as_union(device);
  busy_and_idle(v, w.begin, w.end, own.begin(), own.end(), w.segments);
  v.device_busy = overlap(w.begin, w.end, whole.begin(), whole.end());
  memory_peak(v);
  nccl_exposure(v, compute_of);
  return v;
}

void device_join::records_in(std::uint64_t begin, std::uint64_t end, const std::vector<stream_key>& streams,
                             std::size_t cap, std::vector<device_record>& out, std::uint32_t& dropped) const {
  out.clear();
  dropped = 0;
  auto take = [&](const track& t) {
    auto first = std::lower_bound(t.records.begin(), t.records.end(), begin,
                                  [](const device_record& r, std::uint64_t at) { return r.start < at; });
    for (auto r = first; r != t.records.end() && r->start < end; ++r) {
      if (r->kind == device_activity::memory) continue;
      out.size() < cap ? out.push_back(*r) : void(++dropped);
    }
  };
  if (streams.empty()) {
    for (const auto& [key, t] : streams_) take(t);
  } else {
    std::vector<std::uint32_t> contexts;
    for (const stream_key& k : streams) {
      if (auto t = streams_.find(k); t != streams_.end()) take(t->second);
      if (std::find(contexts.begin(), contexts.end(), k.context) == contexts.end()) contexts.push_back(k.context);
    }
    for (std::uint32_t c : contexts) {
      if (auto t = streams_.find(stream_key{c, no_stream}); t != streams_.end()) take(t->second);
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const device_record& a, const device_record& b) { return a.start < b.start; });
}

void device_join::join(std::uint64_t before) {
  std::uint64_t keep_from = newest_ > retain_ns ? newest_ - retain_ns : 0;
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (it->end < before) {
      add_view(totals, *it);
      it = waiting_.erase(it);
    } else {
      keep_from = std::min(keep_from, it->begin);
      ++it;
    }
  }
  let_go(keep_from);
}

void device_join::let_go(std::uint64_t before) {
  auto drop = [before](busy_union& u) {
    while (!u.empty() && u.front().end < before) u.pop_front();
  };
  for (auto it = streams_.begin(); it != streams_.end();) {
    auto& records = it->second.records;
    while (!records.empty() && records.front().start < before) records.pop_front();
    drop(it->second.busy);
    it = records.empty() && it->second.busy.empty() ? streams_.erase(it) : std::next(it);
  }
  for (auto* unions : {&context_busy_, &compute_busy_}) {
    for (auto it = unions->begin(); it != unions->end();) {
      drop(it->second);
      it = it->second.empty() ? unions->erase(it) : std::next(it);
    }
  }
  drop(busy_);
}

bool device_join::in_gap(const waiting& w) const {
  for (const auto& [begin, end] : gaps_) {
    if (w.begin < end && begin < w.end) return true;
  }
  return false;
}

void device_join::add_view(device_aggregate& to, const waiting& w) const {
  if (in_gap(w)) {
    ++to.uncovered;
  } else {
    to.add(view(w));
  }
}

void device_join::fill(gpu_stats& out) const {
  if (waiting_.empty()) return totals.fill(out);
  device_aggregate with_waiting = totals;
  for (const waiting& w : waiting_) add_view(with_waiting, w);
  with_waiting.fill(out);
}

}  // namespace steptrace::detail
