#include "analysis/device_view.hpp"

#include <algorithm>

#include "steptrace/phase.hpp"

namespace steptrace::detail {
namespace {

struct interval {
  std::uint64_t begin, end;
};

bool occupies_device(const device_record& r) { return r.kind != device_activity::sync; }

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
    case device_activity::memset:
      break;
  }
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

}  // namespace

step_device_view view_step(std::uint64_t begin, std::uint64_t end, const std::vector<host_segment>& segments,
                           const std::vector<device_record>& records, std::uint32_t stream) {
  step_device_view v;
  v.window = end > begin ? end - begin : 0;
  // Records are sorted by start: the union of those that occupy the device, and the counts of
  // those that start in the window (each counted in the step in which it starts, never twice).
  std::vector<interval> busy;
  for (const device_record& r : records) {
    if (r.start >= end) break;
    if (stream != 0 && r.stream != stream) continue;
    if (r.start >= begin) count(v, r);
    if (!occupies_device(r) || r.end <= begin) continue;
    if (!busy.empty() && r.start <= busy.back().end) {
      busy.back().end = std::max(busy.back().end, r.end);
    } else {
      busy.push_back({r.start, r.end});
    }
  }
  busy_and_idle(v, begin, end, busy.begin(), busy.end(), segments);
  return v;
}

void device_aggregate::add(const step_device_view& v) {
  ++steps_;
  busy_.add(v.busy);
  idle_.add(v.window - v.busy);
  busy_total_ += v.busy;
  idle_total_ += v.window - v.busy;
  if (v.idle_by_phase.size() > idle_by_phase_.size()) idle_by_phase_.resize(v.idle_by_phase.size(), 0);
  for (std::size_t i = 0; i < v.idle_by_phase.size(); ++i) idle_by_phase_[i] += v.idle_by_phase[i];
  for (std::uint64_t k : v.kernel_ns) kernel_.add(k);
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
  out.incomplete_records = incomplete;
  out.dropped_records = dropped;
  out.steps_viewed = steps_;
  out.steps_without_records = uncovered;
}

void device_join::add_step(std::uint64_t begin, std::uint64_t end, std::vector<host_segment> segments) {
  if (waiting_.size() >= max_pending) join(waiting_.front().end + 1);  // view the oldest now
  waiting_.push_back({begin, end, std::move(segments)});
}

void device_join::add_records(const std::vector<device_record>& records) {
  if (records.empty()) return;
  std::vector<device_record> batch(records);
  auto by_start = [](const device_record& a, const device_record& b) { return a.start < b.start; };
  std::sort(batch.begin(), batch.end(), by_start);
  // Records: only the kept ones that start after the batch's first need merging with it.
  const auto tail = std::upper_bound(records_.begin(), records_.end(), batch.front(), by_start) - records_.begin();
  const auto old_end = static_cast<std::ptrdiff_t>(records_.size());
  records_.insert(records_.end(), batch.begin(), batch.end());
  std::inplace_merge(records_.begin() + tail, records_.begin() + old_end, records_.end(), by_start);
  // Busy time: the batch's own union, merged with the part of the kept union it can touch.
  std::vector<interval> added;
  for (const device_record& r : batch) {
    newest_ = std::max(newest_, r.end);
    if (!occupies_device(r) || r.end <= r.start) continue;
    if (!added.empty() && r.start <= added.back().end) {
      added.back().end = std::max(added.back().end, r.end);
    } else {
      added.push_back({r.start, r.end});
    }
  }
  if (!added.empty()) merge_busy(added);
}

void device_join::merge_busy(const std::vector<interval>& added) {
  // The first kept interval that ends at or after the batch begins: everything before it stays.
  const auto from = std::lower_bound(busy_.begin(), busy_.end(), added.front().begin,
                                     [](const interval& x, std::uint64_t t) { return x.end < t; });
  std::vector<interval> kept(from, busy_.end());
  busy_.erase(from, busy_.end());
  auto push = [&](interval x) {
    if (!busy_.empty() && x.begin <= busy_.back().end) {
      busy_.back().end = std::max(busy_.back().end, x.end);
    } else {
      busy_.push_back(x);
    }
  };
  std::size_t i = 0, j = 0;
  while (i < kept.size() || j < added.size()) {
    if (j == added.size() || (i < kept.size() && kept[i].begin < added[j].begin)) {
      push(kept[i++]);
    } else {
      push(added[j++]);
    }
  }
}

step_device_view device_join::view(const waiting& w) const {
  step_device_view v;
  v.window = w.end > w.begin ? w.end - w.begin : 0;
  auto first = std::lower_bound(records_.begin(), records_.end(), w.begin,
                                [](const device_record& r, std::uint64_t t) { return r.start < t; });
  for (auto r = first; r != records_.end() && r->start < w.end; ++r) count(v, *r);
  auto busy = std::lower_bound(busy_.begin(), busy_.end(), w.begin,
                               [](const interval& x, std::uint64_t t) { return x.end <= t; });
  busy_and_idle(v, w.begin, w.end, busy, busy_.end(), w.segments);
  return v;
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
  while (!records_.empty() && records_.front().start < before) records_.pop_front();
  while (!busy_.empty() && busy_.front().end < before) busy_.pop_front();
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
