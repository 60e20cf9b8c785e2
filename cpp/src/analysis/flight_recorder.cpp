#include "analysis/flight_recorder.hpp"

#include <algorithm>

#include "analysis/device_view.hpp"
#include "record/kernel_names.hpp"
#include "steptrace/phase.hpp"

namespace steptrace::detail {

namespace {

const char* kind_name(const device_record& r) {
  switch (r.kind) {
    case device_activity::kernel:
      return "kernel";
    case device_activity::memset:
      return "memset";
    case device_activity::sync:
      return "sync";
    case device_activity::memory:
      return "memory";
    case device_activity::untraced:
      return "untraced work";
    case device_activity::launch:
      return "launch";  // never stored: matched to kernels (gpu/launch_match)
    case device_activity::memcpy:
      break;
  }
  switch (r.copy) {
    case copy_kind::h2d:
      return "copy HtoD";
    case copy_kind::d2h:
      return "copy DtoH";
    case copy_kind::d2d:
      return "copy DtoD";
    case copy_kind::other:
      break;
  }
  return "copy";
}

}  // namespace

void flight_recorder::configure(std::uint32_t recent, std::uint32_t slowest) {
  if (recent == recent_ && slowest == slowest_) return;
  recent_ = recent;
  slowest_ = slowest;
  clear();
}

void flight_recorder::clear() { std::vector<thread_log>().swap(threads_); }  // its memory too

flight_recorder::thread_log& flight_recorder::log_of(std::uint32_t thread) {
  for (thread_log& l : threads_) {
    if (l.thread == thread) return l;
  }
  if (threads_.size() >= max_threads) {  // the thread that has been quiet longest makes room
    auto quiet = std::min_element(threads_.begin(), threads_.end(),
                                  [](const thread_log& a, const thread_log& b) { return a.last_end < b.last_end; });
    threads_.erase(quiet);
  }
  thread_log& l = threads_.emplace_back();
  l.thread = thread;
  return l;
}

void flight_recorder::on_set_aside(std::uint32_t thread, std::uint32_t id, std::uint64_t begin, std::uint64_t end) {
  if (!enabled()) return;
  thread_log& l = log_of(thread);
  const aside a{id, begin, end};
  if (l.pending.size() < set_aside_per_step) l.pending.push_back(a);
  if (l.set_aside.size() < set_aside_kept) {
    l.set_aside.push_back(a);
  } else {
    l.set_aside[l.set_aside_next] = a;
  }
  l.set_aside_next = (l.set_aside_next + 1) % set_aside_kept;
}

void flight_recorder::keep(kept_step& into, const built_step& s, std::uint64_t length, thread_log& log) const {
  into.begin = s.begin;
  into.end = s.end;
  into.length = length;
  into.index = s.index;
  into.thread = s.thread;
  into.warmup = s.warmup;
  into.failed = s.failed;
  into.first_of_thread = s.first_of_thread;
  into.request = s.request;
  into.set_aside_ticks = s.set_aside;
  if (keep_phases_) into.phases.assign(s.phases.begin(), s.phases.end());
  into.device_known = into.device_unrecorded = false;
  into.spans.assign(s.spans.begin(), s.spans.end());  // reuses the slot's memory
  into.spans_dropped = s.spans_dropped;
  into.streams.assign(s.streams.begin(), s.streams.end());
  into.set_aside.clear();
  for (const aside& a : log.pending) {
    if (a.begin >= s.begin && a.end <= s.end) into.set_aside.push_back(a);
  }
  into.device.clear();
  into.device_dropped = 0;
}

// The slowest-steps heap keeps its fastest step on top, the one a slower step replaces.
bool flight_recorder::slower(const kept_step& a, const kept_step& b) { return a.length > b.length; }

void flight_recorder::on_step(const built_step& s) {
  if (!enabled()) return;
  thread_log& l = log_of(s.thread);
  l.last_end = std::max(l.last_end, s.end);
  const std::uint64_t window = s.end - s.begin;
  const std::uint64_t length = window > s.set_aside ? window - s.set_aside : 0;
  if (recent_ > 0) {
    if (l.recent.size() < recent_) {
      keep(l.recent.emplace_back(), s, length, l);
    } else {
      keep(l.recent[l.next], s, length, l);
    }
    l.next = (l.next + 1) % recent_;
  }
  if (slowest_ > 0 && !s.warmup && !s.failed) {
    if (l.slowest.size() < slowest_) {
      keep(l.slowest.emplace_back(), s, length, l);
      std::push_heap(l.slowest.begin(), l.slowest.end(), slower);
    } else if (length > l.slowest.front().length) {
      std::pop_heap(l.slowest.begin(), l.slowest.end(), slower);
      keep(l.slowest.back(), s, length, l);
      std::push_heap(l.slowest.begin(), l.slowest.end(), slower);
    }
  }
  l.pending.clear();
}

void flight_recorder::attach_device(const device_join& join, std::uint64_t settled_ns,
                                    std::uint64_t (*to_ns)(std::uint64_t)) {
  auto attach = [&](kept_step& k) {
    if (k.device_known || k.device_unrecorded) return;
    const std::uint64_t end = to_ns(k.end);
    if (end >= settled_ns) return;
    // another tool held CUPTI, or device_sample left the window out: no records is not an idle GPU
    if (k.device_unrecorded = join.unrecorded(to_ns(k.begin), end); k.device_unrecorded) return;
    join.records_in(to_ns(k.begin), end, k.streams, max_device, k.device, k.device_dropped);
    k.device_known = true;
  };
  for (thread_log& l : threads_) {
    for (kept_step& k : l.recent) attach(k);
    for (kept_step& k : l.slowest) attach(k);
  }
}

std::uint64_t flight_recorder::kept_step::bytes() const noexcept {
  return sizeof(kept_step) + phases.capacity() * sizeof(phase_slice) + spans.capacity() * sizeof(phase_span) +
         streams.capacity() * sizeof(stream_key) + set_aside.capacity() * sizeof(aside) +
         device.capacity() * sizeof(device_record);
}

std::uint64_t flight_recorder::bytes() const noexcept {
  std::uint64_t n = threads_.capacity() * sizeof(thread_log);
  for (const thread_log& l : threads_) {
    for (const kept_step& k : l.recent) n += k.bytes();
    for (const kept_step& k : l.slowest) n += k.bytes();
    n += (l.pending.capacity() + l.set_aside.capacity()) * sizeof(aside);
  }
  return n;
}

void flight_recorder::list(std::vector<kept_ref>& out) const {
  out.clear();
  for (const thread_log& l : threads_) {
    auto add = [&](const kept_step& k) {
      for (const kept_ref& r : out) {
        if (r.thread == k.thread && r.index == k.index) return;
      }
      out.push_back({k.thread, k.index, k.length, k.end, !k.warmup && !k.failed});
    };
    for (const kept_step& k : l.recent) add(k);
    for (const kept_step& k : l.slowest) add(k);
  }
}

void flight_recorder::copy_to(flight_recorder& into, const std::vector<kept_ref>& chosen) const {
  for (const thread_log& l : threads_) {
    auto copy = [&](const kept_step& k) {
      const bool wanted = std::any_of(chosen.begin(), chosen.end(),
                                      [&](const kept_ref& r) { return r.thread == k.thread && r.index == k.index; });
      if (!wanted) return;
      thread_log& to = into.log_of(k.thread);
      const bool there =
          std::any_of(to.recent.begin(), to.recent.end(), [&](const kept_step& h) { return h.index == k.index; });
      if (there || to.recent.size() >= into.recent_) return;
      to.recent.push_back(k);
      to.last_end = std::max(to.last_end, k.end);
      to.next = to.recent.size() % into.recent_;
    };
    for (const kept_step& k : l.recent) copy(k);
    for (const kept_step& k : l.slowest) copy(k);
  }
}

void flight_recorder::replay(step_sink& sink) const {
  std::vector<const kept_step*> all;
  for (const thread_log& l : threads_) {
    for (const kept_step& k : l.recent) all.push_back(&k);
    for (const kept_step& k : l.slowest) all.push_back(&k);
  }
  std::sort(all.begin(), all.end(), [](const kept_step* a, const kept_step* b) {
    return a->end != b->end ? a->end < b->end : a->thread < b->thread;
  });
  const std::vector<host_segment> no_segments;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const kept_step& k = *all[i];
    if (i > 0 && all[i - 1]->thread == k.thread && all[i - 1]->index == k.index) continue;  // recent and slowest
    for (const aside& a : k.set_aside) sink.on_set_aside(a.id, a.begin, a.end);
    const built_step s{k.begin,           k.end,    k.set_aside_ticks, k.failed, k.warmup,
                       k.first_of_thread, k.thread, k.index,           k.phases, no_segments,
                       k.streams,         k.spans,  k.spans_dropped,   0,        k.request};
    sink.on_step(s);
  }
}

void flight_recorder::fill(timeline_view& out, std::uint64_t origin, double ns_per_tick,
                           std::uint64_t (*to_ns)(std::uint64_t)) const {
  out = timeline_view{};
  out.recent_per_thread = recent_;
  out.slowest_per_thread = slowest_;
  out.bytes = bytes();
  const double ms_per_tick = ns_per_tick * 1e-6;
  auto ms = [&](std::uint64_t t) { return t > origin ? static_cast<double>(t - origin) * ms_per_tick : 0.0; };
  const double origin_ns = static_cast<double>(to_ns(origin));
  auto device_ms = [&](std::uint64_t ns) { return (static_cast<double>(ns) - origin_ns) * 1e-6; };
  auto span = [&](std::uint32_t id, std::uint64_t begin, std::uint64_t end, std::uint32_t depth) {
    return timeline_span{std::string(phase_label(phase_id{id})), ms(begin), ms(end), depth};
  };

  std::vector<const thread_log*> logs;
  for (const thread_log& l : threads_) logs.push_back(&l);
  std::sort(logs.begin(), logs.end(), [](const thread_log* a, const thread_log* b) { return a->thread < b->thread; });
  for (const thread_log* l : logs) {
    std::vector<std::pair<const kept_step*, bool>> kept;  // (step, among the slowest)
    for (const kept_step& k : l->recent) kept.emplace_back(&k, false);
    for (const kept_step& k : l->slowest) kept.emplace_back(&k, true);
    std::sort(kept.begin(), kept.end(), [](const auto& a, const auto& b) {
      return a.first->index != b.first->index ? a.first->index < b.first->index : a.second < b.second;
    });
    for (std::size_t i = 0; i < kept.size(); ++i) {
      const kept_step& k = *kept[i].first;
      if (i > 0 && kept[i - 1].first->index == k.index) {  // both recent and slowest: one entry
        out.steps.back().slowest = true;
        continue;
      }
      timeline_step& st = out.steps.emplace_back();
      st.thread = k.thread;
      st.index = k.index;
      st.begin_ms = ms(k.begin);
      st.end_ms = ms(k.end);
      st.step_ms = static_cast<double>(k.length) * ms_per_tick;
      st.recent = !kept[i].second;
      st.slowest = kept[i].second;
      st.warmup = k.warmup;
      st.failed = k.failed;
      std::vector<phase_span> spans = k.spans;
      std::stable_sort(spans.begin(), spans.end(), [](const phase_span& a, const phase_span& b) {
        return a.begin != b.begin ? a.begin < b.begin : a.depth < b.depth;
      });
      st.phases.reserve(spans.size());  // each list sized once: a summary holds no growth's slack
      for (const phase_span& p : spans) st.phases.push_back(span(p.phase, p.begin, p.end, p.depth));
      st.phases_dropped = k.spans_dropped;
      st.set_aside.reserve(k.set_aside.size());
      for (const aside& a : k.set_aside) st.set_aside.push_back(span(a.id, a.begin, a.end, 0));
      st.device_known = k.device_known;
      st.device_dropped = k.device_dropped;
      st.device.reserve(k.device.size());
      for (const device_record& r : k.device) {
        st.device.push_back({kind_name(r), r.device, r.context, r.stream, device_ms(r.start), device_ms(r.end), r.bytes,
                             r.nccl, r.kind == device_activity::kernel ? kernel_name(r.name) : std::string()});
      }
    }
    std::vector<aside> recent_aside(l->set_aside.begin(), l->set_aside.end());
    std::sort(recent_aside.begin(), recent_aside.end(),
              [](const aside& a, const aside& b) { return a.begin < b.begin; });
    for (const aside& a : recent_aside) out.set_aside.push_back({l->thread, span(a.id, a.begin, a.end, 0)});
  }
}

}  // namespace steptrace::detail
