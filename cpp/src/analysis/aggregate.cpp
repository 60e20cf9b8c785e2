#include "analysis/aggregate.hpp"

#include <algorithm>

#include "record/clock.hpp"
#include "steptrace/phase.hpp"

namespace steptrace::detail {

aggregate::aggregate() : to_ns_(&host_clock::to_monotonic_ns) {}

void aggregate::on_step(const built_step& s) {
  span(s.begin, s.end);  // the run covers warm-up and failed steps too
  if (s.warmup) {
    ++warmup_;
    return;
  }
  if (s.failed) {
    ++failed_;
    return;
  }
  const std::uint64_t window = s.end - s.begin;
  const std::uint64_t length = window > s.set_aside ? window - s.set_aside : 0;
  if (steps_ == 0 || s.begin < first_begin_) first_begin_ = s.begin;
  if (steps_ == 0 || s.end > last_end_) last_end_ = s.end;
  ++steps_;
  requests_ += s.request ? 1 : 0;
  if (s.batch != 0) {
    batch_sizes_.add(s.batch);
    batch_requests_ += s.batch;
  }
  step_ticks_ += length;
  step_hist_.add(length);
  series_.add(s, length);
  for (const phase_slice& p : s.phases) {
    if (p.id >= phases_.size()) phases_.resize(p.id + 1);
    if (!phases_[p.id]) phases_[p.id] = std::make_unique<phase_totals>();
    phase_totals& t = *phases_[p.id];
    t.per_step.add(p.ticks);
    t.per_step_incl.add(p.incl_ticks);
    t.ticks += p.ticks;
    t.calls += p.calls;
    t.incl_ticks += p.incl_ticks;
    if (t.parent == phase_slice::no_parent) t.parent = p.parent;
  }
  threads_ += s.first_of_thread ? 1 : 0;
  if (device_) {  // device records are in ns on the host clock: convert this step's times
    std::vector<host_segment> segments;
    segments.reserve(s.segments.size());
    for (const host_segment& g : s.segments) {
      segments.push_back({to_ns_(g.begin), to_ns_(g.end), g.phase});
    }
    device_->add_step(to_ns_(s.begin), to_ns_(s.end), std::move(segments), s.streams);
  }
}

void aggregate::note_rss(std::uint64_t bytes) noexcept {
  if (bytes == 0) return;
  if (rss_samples_++ == 0) rss_first_ = bytes;
  rss_last_ = bytes;
  rss_peak_ = std::max(rss_peak_, bytes);
  series_.note_rss(bytes);
}

void aggregate::span(std::uint64_t begin, std::uint64_t end) {
  if (run_end_ == 0 || begin < run_begin_) run_begin_ = begin;
  if (end > run_end_) run_end_ = end;
}

void aggregate::on_set_aside(std::uint32_t id, std::uint64_t begin, std::uint64_t end) {
  if (id >= set_aside_.size()) set_aside_.resize(id + 1);
  unscoped_totals& a = set_aside_[id];
  const std::uint64_t ticks = end > begin ? end - begin : 0;
  a.ticks += ticks;
  a.max = std::max(a.max, ticks);
  ++a.calls;
  span(begin, end);
  series_.note_set_aside(ticks);
}

void aggregate::on_unscoped(std::uint32_t id, std::uint64_t ticks) {
  if (id >= unscoped_.size()) unscoped_.resize(id + 1);
  unscoped_totals& u = unscoped_[id];
  u.ticks += ticks;
  u.max = std::max(u.max, ticks);
  ++u.calls;
}

void aggregate::add_device_time(device_time& d, float ms) {
  if (ms < 0) return;
  const auto ns = static_cast<std::uint64_t>(static_cast<double>(ms) * 1e6);
  d.per_call.add(ns);
  d.total_ns += ns;
  ++d.calls;
}

void aggregate::add_phase_device_time(std::uint32_t id, float ms) {
  if (id >= phase_device_.size()) phase_device_.resize(id + 1);
  if (!phase_device_[id]) phase_device_[id] = std::make_unique<device_time>();
  add_device_time(*phase_device_[id], ms);
}

void aggregate::clear() {
  const bool device = device_ != nullptr;
  const tick_clock to_ns = to_ns_;
  *this = aggregate{};
  to_ns_ = to_ns;
  if (device) enable_device();
}

namespace {

stat_ms to_ms(const histogram& h, std::uint64_t total_ticks, std::uint64_t steps, double ms_per_tick) {
  stat_ms m;
  m.total = static_cast<double>(total_ticks) * ms_per_tick;
  m.mean = steps ? m.total / static_cast<double>(steps) : 0.0;
  m.p50 = static_cast<double>(h.quantile(0.50)) * ms_per_tick;
  m.p95 = static_cast<double>(h.quantile(0.95)) * ms_per_tick;
  m.p99 = static_cast<double>(h.quantile(0.99)) * ms_per_tick;
  m.max = static_cast<double>(h.max()) * ms_per_tick;
  return m;
}

}  // namespace

void aggregate::fill(summary& out, double ns_per_tick) const {
  const double ms_per_tick = ns_per_tick * 1e-6;
  out.steps = steps_;
  out.requests = requests_;
  out.warmup_steps = warmup_;
  out.failed_steps = failed_;
  out.threads = threads_;
  out.wall_ms = steps_ ? static_cast<double>(last_end_ - first_begin_) * ms_per_tick : 0.0;
  out.step_ms = to_ms(step_hist_, step_ticks_, steps_, ms_per_tick);
  out.step_device_ms.reset();
  if (step_device_.calls) {
    out.step_device_ms = to_ms(step_device_.per_call, step_device_.total_ns, step_device_.calls, 1e-6);
  }
  out.step_device_steps = step_device_.calls;

  out.phases.clear();
  std::vector<std::uint32_t> custom;
  auto add = [&](std::uint32_t id) {
    const phase_totals& t = *phases_[id];
    histogram h = t.per_step;
    h.add_zeros(steps_ - std::min(steps_, h.count()));  // steps in which the phase did not run
    histogram incl = t.per_step_incl;
    incl.add_zeros(steps_ - std::min(steps_, incl.count()));
    phase_stats p;
    p.name = phase_label(phase_id{id});
    p.ms = to_ms(h, t.ticks, steps_, ms_per_tick);
    p.inclusive_ms = id == builtin::other.value ? p.ms : to_ms(incl, t.incl_ticks, steps_, ms_per_tick);
    if (t.parent != phase_slice::no_parent) p.parent = phase_label(phase_id{t.parent});
    p.share = step_ticks_ ? static_cast<double>(t.ticks) / static_cast<double>(step_ticks_) : 0.0;
    p.calls = t.calls;
    if (id < phase_device_.size() && phase_device_[id]) {
      const device_time& d = *phase_device_[id];
      p.device_ms = to_ms(d.per_call, d.total_ns, d.calls, 1e-6);
      p.device_calls = d.calls;
    }
    out.phases.push_back(std::move(p));
  };
  for (std::uint32_t id = 1; id < phases_.size(); ++id) {
    if (!phases_[id]) continue;
    if (id <= builtin::wait.value) {
      add(id);
    } else {
      custom.push_back(id);
    }
  }
  std::stable_sort(custom.begin(), custom.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return phases_[a]->ticks > phases_[b]->ticks; });
  for (std::uint32_t id : custom) add(id);
  if (!phases_.empty() && phases_[0]) {
    add(0);
  } else if (steps_ > 0) {
    phase_stats other;  // steps with every instant inside some phase
    other.name = "other";
    out.phases.push_back(other);
  }

  if (device_) {
    out.gpu = gpu_stats{};
    device_->fill(*out.gpu);
  }

  series_.fill(out.series, ns_per_tick);
  out.host_memory.reset();
  if (rss_samples_ > 0) {
    constexpr double mib = 1024.0 * 1024.0;
    out.host_memory = host_memory_stats{static_cast<double>(rss_first_) / mib, static_cast<double>(rss_last_) / mib,
                                        static_cast<double>(rss_peak_) / mib, rss_samples_};
  }

  out.run_ms = static_cast<double>(run_end_ - run_begin_) * ms_per_tick;
  out.set_aside.clear();
  for (std::uint32_t id = 0; id < set_aside_.size(); ++id) {
    const unscoped_totals& a = set_aside_[id];
    if (a.calls == 0) continue;
    set_aside_stats row;
    row.name = phase_label(phase_id{id});
    row.calls = a.calls;
    row.total_ms = static_cast<double>(a.ticks) * ms_per_tick;
    row.mean_ms = row.total_ms / static_cast<double>(a.calls);
    row.max_ms = static_cast<double>(a.max) * ms_per_tick;
    row.run_share = out.run_ms > 0 ? row.total_ms / out.run_ms : 0.0;
    out.set_aside.push_back(std::move(row));
  }
  std::stable_sort(out.set_aside.begin(), out.set_aside.end(),
                   [](const set_aside_stats& a, const set_aside_stats& b) { return a.total_ms > b.total_ms; });

  out.unscoped_phases.clear();
  for (std::uint32_t id = 0; id < unscoped_.size(); ++id) {
    const unscoped_totals& u = unscoped_[id];
    if (u.calls == 0) continue;
    out.unscoped_phases.push_back({phase_label(phase_id{id}), static_cast<double>(u.ticks) * ms_per_tick,
                                   static_cast<double>(u.max) * ms_per_tick, u.calls});
  }
}

void aggregate::fill_batches(batch_stats& out, double ns_per_tick) const {
  summary as_steps;
  fill(as_steps, ns_per_tick);
  out.batches = steps_;
  out.ms = as_steps.step_ms;
  out.phases = std::move(as_steps.phases);
  out.size_p50 = static_cast<double>(batch_sizes_.quantile(0.5));
  out.size_max = static_cast<double>(batch_sizes_.max());
  out.size_mean = steps_ ? static_cast<double>(batch_requests_) / static_cast<double>(steps_) : 0.0;
  out.busy_share = as_steps.wall_ms > 0 ? std::min(1.0, as_steps.step_ms.total / as_steps.wall_ms) : 0.0;
}

}  // namespace steptrace::detail
