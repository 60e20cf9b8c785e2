// The live path's device join: records as they arrive, each step viewed once its records are in
// (cpp/src/gpu/README.md, "The device layer").
#include <algorithm>
#include <utility>
#include <vector>

#include "analysis/device_spans.hpp"
#include "analysis/device_view.hpp"

namespace steptrace::detail {

using namespace spans;

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
    const Interval& x =
        j == added.size() || (i < kept.size() && kept[i].begin < added[j].begin) ? kept[i++] : added[j++];
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

namespace {

// `batch` as one run per stream, each in order of start. CUPTI writes a context's streams into
// one buffer interleaved, each stream's records in the order its work finished, which is their
// start order on a stream but for rare overlaps: grouped in one pass that keeps their order, and a
// group sorted only when it is not (a sort of the whole batch was a fifth of the collector's time
// at 200,000 records a second, bench_collector).
std::vector<std::pair<stream_key, std::vector<device_record>>> by_stream(std::vector<device_record>& batch) {
  std::vector<std::pair<stream_key, std::vector<device_record>>> groups;
  std::size_t last = 0;  // the group the previous record went to: runs of one stream are common
  for (device_record& r : batch) {
    const stream_key key{r.context, r.stream};
    if (last >= groups.size() || !(groups[last].first == key)) {
      last = 0;
      while (last < groups.size() && !(groups[last].first == key)) ++last;
      if (last == groups.size()) groups.emplace_back(key, std::vector<device_record>{});
    }
    groups[last].second.push_back(std::move(r));
  }
  auto by_start = [](const device_record& a, const device_record& b) { return a.start < b.start; };
  for (auto& [key, records] : groups) {
    if (!std::is_sorted(records.begin(), records.end(), by_start)) {
      std::stable_sort(records.begin(), records.end(), by_start);
    }
  }
  return groups;
}

}  // namespace

void device_join::add_records(std::vector<device_record> batch) {
  if (batch.empty()) return;
  // One run per stream, each sorted by start: into its track, its stream's and context's unions.
  std::vector<interval> all;
  for (auto& [key, records] : by_stream(batch)) {
    std::vector<interval> added, compute;
    for (const device_record& r : records) {
      newest_ = std::max(newest_, r.end);
      if (occupies_device(r) && r.end > r.start) extend(added, r.start, r.end);
      if (r.kind == device_activity::kernel && !r.nccl && r.end > r.start) extend(compute, r.start, r.end);
    }
    merge_union(compute_busy_[key.context], compute);
    track& t = streams_[key];
    merge_records(t.records, records.begin(), records.end());
    merge_union(t.busy, added);
    merge_union(context_busy_[key.context], added);
    // Every device: the streams' unions, each sorted, merged in order of begin.
    const auto middle = static_cast<std::ptrdiff_t>(all.size());
    all.insert(all.end(), added.begin(), added.end());
    std::inplace_merge(all.begin(), all.begin() + middle, all.end(),
                       [](const interval& a, const interval& b) { return a.begin < b.begin; });
  }
  std::vector<interval> joined;
  for (const interval& x : all) extend(joined, x.begin, x.end);
  merge_union(busy_, joined);
}

void device_join::count_in(const track& t, const waiting& w, step_device_view& v) const {
  auto first = std::lower_bound(t.records.begin(), t.records.end(), w.begin,
                                [](const device_record& r, std::uint64_t at) { return r.start < at; });
  for (auto r = first; r != t.records.end() && r->start < w.end; ++r) count(v, *r, w.segments);
  // The kernel table's: kernels launched in the window, wherever they ran. Launched before their
  // start, so none starts before the window; on one stream they run in launch order, so the first
  // kernel past the window launched after it ends the scan, as does one past the window whose
  // launch was not seen (without launch records that is the first kernel after the window, so the
  // scan never reads ahead), or a second past the window.
  constexpr std::uint64_t lag_limit = 1'000'000'000;
  for (auto r = first; r != t.records.end() && r->start < w.end + lag_limit; ++r) {
    if (r->kind == device_activity::kernel && (r->launched >= w.end || (r->launched == 0 && r->start >= w.end))) break;
    list_launched(v, *r, w.begin, w.end, w.segments);
  }
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
    exposure(v, compute_of);
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
  exposure(v, compute_of);
  return v;
}

void device_join::records_in(std::uint64_t begin, std::uint64_t end, const std::vector<stream_key>& streams,
                             std::size_t cap, std::vector<device_record>& out, std::uint32_t& dropped) const {
  out.clear();
  dropped = 0;
  std::size_t collectives = 0;  // kept past the cap
  auto take = [&](const track& t) {
    auto first = std::lower_bound(t.records.begin(), t.records.end(), begin,
                                  [](const device_record& r, std::uint64_t at) { return r.start < at; });
    for (auto r = first; r != t.records.end() && r->start < end; ++r) {
      if (r->kind == device_activity::memory) continue;
      if (out.size() < cap) {
        out.push_back(*r);
      } else if (r->nccl && collectives < collectives_past_cap) {
        out.push_back(*r);
        ++collectives;
      } else {
        ++dropped;
      }
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
  std::stable_sort(out.begin(), out.end(),
                   [](const device_record& a, const device_record& b) { return a.start < b.start; });
  if (out.capacity() > out.size() + out.size() / 4) out.shrink_to_fit();  // kept with the step: no growth's slack
}

void device_join::join(std::uint64_t before) {
  std::uint64_t keep_from = newest_ > retain_ns ? newest_ - retain_ns : 0;
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (it->end < before) {
      add_view(totals, *it, recent_on ? &recent_ : nullptr);
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

device_join::coverage device_join::covered(std::uint64_t begin, std::uint64_t end) const {
  coverage c = coverage::recorded;
  for (const cupti_gap& g : gaps_) {
    if (begin < g.end && g.begin < end) {
      if (!g.sampled) return coverage::held;  // another tool's hold is said first
      c = coverage::sampled_out;
    }
  }
  return c;
}

void device_join::add_view(device_aggregate& to, const waiting& w, device_aggregate* also) const {
  if (const coverage c = covered(w.begin, w.end); c != coverage::recorded) {
    std::uint64_t device_aggregate::*count =
        c == coverage::held ? &device_aggregate::uncovered : &device_aggregate::sampled_out;
    ++(to.*count);
    if (also) ++(also->*count);
    return;
  }
  const step_device_view v = view(w);  // viewed once, whoever adds it
  to.add(v);
  if (also) also->add(v);
}

std::optional<gpu_stats> device_join::take_recent() {
  std::optional<gpu_stats> out;
  gpu_stats g;
  recent_.fill(g);
  if (g.steps_viewed > 0) out = g;
  recent_.clear();
  return out;
}

void device_join::fill(gpu_stats& out) const {
  if (waiting_.empty()) return totals.fill(out);
  device_aggregate with_waiting = totals;
  for (const waiting& w : waiting_) add_view(with_waiting, w);
  with_waiting.fill(out);
}

}  // namespace steptrace::detail
