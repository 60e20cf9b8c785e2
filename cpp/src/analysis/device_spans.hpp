// Internal (not public API): the interval arithmetic the device view is made of, shared by the
// one-step view and aggregate (device_view.cpp) and the live path's incremental join
// (device_join.cpp). Unions are sorted, disjoint intervals with `begin` and `end`.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "analysis/device_view.hpp"

namespace steptrace::detail::spans {

struct interval {
  std::uint64_t begin, end;
};

// Adds the part of [begin, end) that overlaps each host segment to idle[segment.phase].
void attribute(interval idle, const std::vector<host_segment>& segments, std::size_t& cursor,
               std::vector<std::uint64_t>& out);

// Counts a record that starts in the step: kernels, copies by direction, syncs, memory. A named
// kernel whose launch was not seen is listed for the kernel table here, by where it ran.
void count(step_device_view& v, const device_record& r, const std::vector<host_segment>& segments);

// Lists a named kernel launched in the step [begin, end), wherever it ran, for the kernel table,
// with the phase of `segments` (the step's) in which it was launched. A loop that runs ahead of
// its GPU has its kernels run in later steps: they are still the launching step's.
void list_launched(step_device_view& v, const device_record& r, std::uint64_t begin, std::uint64_t end,
                   const std::vector<host_segment>& segments);

// The step's peak device memory above its start, from its allocations and releases in time order.
void memory_peak(step_device_view& v);

// A kernel, copy or memset, or a span a trace shows busy with untraced work.
inline bool occupies_device(const device_record& r) {
  return r.kind == device_activity::kernel || r.kind == device_activity::memcpy || r.kind == device_activity::memset ||
         r.kind == device_activity::untraced;
}

// Time set aside inside a step (tracer::begin_exclude; a trace's one-time initialisation) lies
// between its host segments, which otherwise tile the window: in no step, so neither busy nor
// idle time of it. Only gaps before or between segments count (a capped list may end early).
inline std::vector<interval> set_aside_gaps(std::uint64_t begin, const std::vector<host_segment>& segments) {
  std::vector<interval> gaps;
  std::uint64_t at = begin;
  for (const host_segment& s : segments) {
    if (s.begin > at) gaps.push_back({at, s.begin});
    at = std::max(at, s.end);
  }
  return gaps;
}

// Busy and idle time of the window [begin, end) from the device's busy intervals [first, last):
// sorted, disjoint, possibly reaching outside the window. Idle gaps are cut along the host phases;
// time set aside is taken out of the window and of the busy time.
template <class It>
void busy_and_idle(step_device_view& v, std::uint64_t begin, std::uint64_t end, It first, It last,
                   const std::vector<host_segment>& segments) {
  const std::vector<interval> aside = set_aside_gaps(begin, segments);
  std::size_t cursor = 0, g = 0;
  std::uint64_t at = begin;
  for (It b = first; b != last && b->begin < end; ++b) {
    if (b->end <= begin) continue;
    const std::uint64_t lo = std::max(b->begin, begin), hi = std::min(b->end, end);
    v.busy += hi - lo;
    while (g < aside.size() && aside[g].end <= lo) ++g;
    for (std::size_t k = g; k < aside.size() && aside[k].begin < hi; ++k) {
      v.busy -= std::min(hi, aside[k].end) - std::max(lo, aside[k].begin);
    }
    if (lo > at) attribute({at, lo}, segments, cursor, v.idle_by_phase);
    at = hi;
  }
  if (end > at) attribute({at, end}, segments, cursor, v.idle_by_phase);
  for (const interval& x : aside) v.window -= std::min(x.end, end) - std::min(x.begin, end);
}

// Whether a record belongs to a step with these streams (empty: every stream).
inline bool in_scope(const device_record& r, const std::vector<stream_key>& streams) {
  if (streams.empty()) return true;
  for (const stream_key& k : streams) {
    if (k.context == r.context && (r.stream == no_stream || k.stream == r.stream)) return true;
  }
  return false;
}

inline bool on_devices_of(const device_record& r, const std::vector<stream_key>& streams) {
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

// The time of `r` that no kernel of its context but NCCL's overlaps. compute(context) gives that
// context's union of those kernels (sorted, disjoint), or nullptr.
template <class Lookup>
std::uint64_t exposed(const device_record& r, Lookup& compute) {
  std::uint64_t hidden = 0;
  if (const auto* u = compute(r.context)) {
    const auto from =
        std::lower_bound(u->begin(), u->end(), r.start, [](const auto& x, std::uint64_t t) { return x.end <= t; });
    hidden = overlap(r.start, r.end, from, u->end());
  }
  return (r.end - r.start) - hidden;
}

// The step's collective kernels' and H2D copies' exposed time (no compute kernel hides it).
template <class Lookup>
void exposure(step_device_view& v, Lookup&& compute) {
  for (const device_record& r : v.nccl) v.nccl_exposed_ns += exposed(r, compute);
  v.nccl.clear();
  for (const device_record& r : v.h2d_copies) v.h2d_exposed_ns += exposed(r, compute);
  v.h2d_copies.clear();
}

}  // namespace steptrace::detail::spans
