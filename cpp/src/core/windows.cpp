// Windows: the statistics since the last window, for servers that never reach "end of run"
// (tracer::window()) and for the live view (options `live`, `jsonl_path`), both beside the
// whole-run totals, which they never change. And the process's resident memory at step ends.
// See cpp/src/core/README.md, "Windows".
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "analysis/ceiling.hpp"
#include "analysis/kernel_table.hpp"
#include "base/log.hpp"
#include "base/quiet_write.hpp"
#include "base/whole_file.hpp"
#include "core/tracer_impl.hpp"
#include "record/host_memory.hpp"
#include "record/names.hpp"
#include "report/report.hpp"
#include "steptrace/tracer.hpp"

namespace steptrace {
namespace detail {

summary tracer_impl::window_of(aggregate& from, bool restart) {
  summary out;
  from.fill(out, host_clock::ns_per_tick());
  if (restart) from.clear();
  out.series = step_series{};  // a window is read as a whole: the whole-run summary has the series
  out.gpu.reset();             // and the device view
  out.facts = facts;
  out.rank = rank;
  for (auto& t : threads) out.errors.unbalanced_phases += t->builder.unbalanced();  // the run's so far
  return out;
}

void tracer_impl::finish_window(summary& w) const {
  w.errors.windows_dropped = live.windows_dropped.load(std::memory_order_relaxed);  // the run's so far
  w.errors.window_calls_failed = live.window_calls_failed.load(std::memory_order_relaxed);
  w.errors.nested_steps = stats.nested_steps.load(std::memory_order_relaxed);  // the run's so far
  w.errors.phase_names_folded = folded_phase_names();
  w.errors.requests_abandoned = reqs.requests_abandoned.load(std::memory_order_relaxed);
  w.errors.request_phases_dropped = reqs.request_phases_dropped.load(std::memory_order_relaxed);
  w.backend = backend_now();
  add_told_ceiling(w);
  complete(w);
}

std::string tracer_impl::note_drift(summary& w) {
  if (!w.gpu || !w.gpu->kernels || w.gpu->steps_viewed == 0) return {};
  const auto found = live.drift.check(*w.gpu->kernels, w.gpu->steps_viewed);
  if (found.empty()) return {};
  const kernel_drift::finding& worst = found.front();
  // "NAME\tBASELINE_US\tNOW_US": the diagnosis's finding (report/diagnosis/drift_advice.cpp).
  w.facts.emplace_back("gpu.kernel_drift",
                       fmt::format("{}\t{:.3f}\t{:.3f}", worst.name, worst.baseline_us, worst.now_us));
  if (std::find(live.drift_said.begin(), live.drift_said.end(), worst.name) != live.drift_said.end() ||
      live.drift_said.size() >= kernel_drift::max_names) {
    return {};
  }
  live.drift_said.push_back(worst.name);
  return fmt::format(
      "the kernel {} takes {:.0f}% longer a call than in the first window it ran in ({:.1f} us against "
      "{:.1f} us): clocks held lower (heat, power) or larger shapes (said once a kernel)",
      short_kernel_name(worst.name), 100 * (worst.now_us / worst.baseline_us - 1), worst.now_us, worst.baseline_us);
}

void tracer_impl::add_told_ceiling(summary& s) const {  // without the lock: cfg's copies, not cfg
  const double flops = told_flops.load(std::memory_order_relaxed);
  if (flops <= 0 || s.steps == 0 || s.ceiling) return;
  const std::string* from = s.fact("flops.from");
  const std::string* gpu = s.fact("gpu.name");
  s.ceiling = told_ceiling(flops, static_cast<dtype_class>(told_dtype.load(std::memory_order_relaxed)),
                           from ? *from : "flops_per_step", s.step_ms.mean, gpu ? *gpu : "");
}

void tracer_impl::sample_rss(std::unique_lock<std::mutex>& lock, bool now) {
  constexpr auto every = std::chrono::milliseconds(50);
  if (stats.steps_ended == live.rss_steps) return;  // sampled at step ends only
  const auto at = std::chrono::steady_clock::now();
  if (!now && at - live.rss_last < every) return;
  live.rss_steps = stats.steps_ended;
  live.rss_last = at;
  lock.unlock();  // /proc is read without the tracer lock
  const std::uint64_t bytes = resident_bytes();
  lock.lock();
  stats.totals.note_rss(bytes);
  live.window_totals.note_rss(bytes);
  live.live_totals.note_rss(bytes);
}

void tracer_impl::live_tick(std::unique_lock<std::mutex>& lock, bool last) {
  const bool on = live_on() && !forked.load();
  if (device_join* device = stats.totals.device())
    device->recent_on = on && !last;  // the windows' device view, while they are made
  if (!on) return;
  if (last) live.live_ended = true;  // whatever follows: no window, no line after this one
  const auto now = std::chrono::steady_clock::now();
  const double now_s = std::chrono::duration<double>(now.time_since_epoch()).count();
  // Windows end on the wall clock's multiples of the period, so every rank of a job (one clock,
  // or clocks kept in step) cuts its windows at the same instants: rank 0 compares like with like.
  const auto period = std::chrono::seconds(cfg.live > 0 ? cfg.live : 10);
  const std::int64_t slot = std::chrono::system_clock::now().time_since_epoch() / period;
  if (live.live_origin_s < 0 && !last) {  // the first pass with the view on starts its first window
    live.live_origin_s = now_s;
    live.live_last = now;
    live.live_slot = slot;
    live.live_period = period;
    // The first window ends at the first boundary, however soon: a listener never waits more
    // than a period for its first window.
    live.live_merge_first = false;
    live.live_totals.clear();
    if (device_join* device = stats.totals.device()) device->take_recent();  // views from before the view began
    return;
  }
  if (live.live_origin_s < 0)
    live.live_origin_s = now_s, live.live_slot = slot;  // the last window is the first: it began with the run
  if (!last && period != live.live_period) {            // the period changed (configure): the window in progress
    live.live_period = period;                          // ends at the new period's next boundary, not at once
    live.live_slot = slot;
    return;
  }
  if (!last && slot == live.live_slot) return;
  if (!last && live.live_merge_first) {  // the short first slot joins the next one
    live.live_merge_first = false;
    live.live_slot = slot;
    return;
  }
  if (last && live.live_totals.steps() == 0) return;  // nothing counted since the last window: none to send
  const std::int64_t covered = live.live_slot;        // the slot this window covers (the last one: to now)
  live.live_last = now;
  live.live_slot = slot;
  summary w = window_of(live.live_totals);
  if (device_join* device = stats.totals.device()) w.gpu = device->take_recent();  // the steps viewed since
  if (w.gpu) w.gpu->sample_every = sample_every(*w.gpu);
  const std::string drift = note_drift(w);  // said once the lock is let go
  w.captures = capture.take_unsent();       // a window carries the captures that ended since the last
  if (hang_view open = hang.view(hang_context_now()); !open.threads.empty())
    w.hang = std::move(open);  // what is open now
  const std::string jsonl = rank_path(cfg.jsonl_path, rank ? rank->rank : 0);
  const bool print = cfg.live > 0;
  const std::uint64_t step = stats.steps_ended;
  const std::optional<rank_info> who = rank;
  lock.unlock();  // formatting and writing without the tracer lock
  if (!drift.empty()) log(log_level::warn, drift);
  try {
    if (who && who->world_size > 1) w.node = live.node.read(who->local_rank, w.gpu.has_value() || backend_now().cuda);
    finish_window(w);
    if (print) {
      const std::string line = live_line(w, now_s - live.live_origin_s);
      write_stderr(line);
    }
    if (!jsonl.empty()) {
      std::string why;
      if (const int code = append_whole_line(jsonl, summary_json_line(w) + "\n", &why);
          code != 0 && !live.jsonl_failed) {
        live.jsonl_failed = true;  // once: it would repeat every window; later windows are still tried
        log(log_level::error,
            "could not append a live window to " + jsonl + ": " + why + " (the file keeps whole lines; said once)");
      }
    }
  } catch (const std::exception& e) {
    log(log_level::error, std::string("live view: ") + e.what());
  }
  lock.lock();
  capture.on_window(capture_ctx, w, last);  // the rule weighs it; the ring turns
  if (live.listening && !live.listening_stopped) {
    if (live.queued.size() == tracer::queued_windows) {  // the listener fell behind: it loses the oldest
      live.queued.pop_front();
      live.windows_dropped.fetch_add(1, std::memory_order_relaxed);
    }
    live.queued.push_back({std::move(w), step, now_s - live.live_origin_s, covered});
    live.window_queued.notify_all();
  }
}

}  // namespace detail

namespace {

// A window-like summary: nothing in a forked child; else `fill` under the tracer lock, after
// every ring is drained, then the parts read without it.
template <class Fill>
summary read_under_lock(detail::tracer_impl& impl, Fill&& fill) {
  ::steptrace::summary out;
  if (impl.forked.load()) {
    detail::complete(out);
    return out;
  }
  {
    std::unique_lock<std::mutex> lock(impl.mutex);
    impl.drain_all_locked();
    fill(lock, out);
  }
  impl.finish_window(out);
  return out;
}

}  // namespace

summary tracer::window() {
  return read_under_lock(*impl_, [&](std::unique_lock<std::mutex>& lock, ::steptrace::summary& out) {
    impl_->harvest_events();
    impl_->sample_rss(lock, true);
    // Windows are fed only once asked for: the first one is the whole run so far.
    out = impl_->live.windows_on ? impl_->window_of(impl_->live.window_totals)
                                 : impl_->window_of(impl_->stats.totals, false);
    impl_->live.windows_on = true;
  });
}

summary tracer::metrics() const {
  return read_under_lock(*impl_, [&](std::unique_lock<std::mutex>&, ::steptrace::summary& out) {
    out = impl_->window_of(impl_->stats.totals, false);  // counts and sums since the start
    out.live_ranks = impl_->live.live_ranks;
    if (hang_view open = impl_->hang.view(impl_->hang_context_now()); !open.threads.empty()) out.hang = std::move(open);
    const double ns_per_tick = detail::host_clock::ns_per_tick();
    const std::uint64_t now = detail::host_clock::now();
    const auto window = static_cast<std::uint64_t>(quantile_window_s * 1e9 / ns_per_tick);
    impl_->stats.recent.fill_quantiles(out, now > window ? now - window : 0, ns_per_tick);
    if (impl_->stats.batches.steps() > 0) impl_->stats.batches.fill_batches(out.batches.emplace(), ns_per_tick);
  });
}

void tracer::listen_windows() {
  if (impl_->forked.load()) return;
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->live.listening = true;
  impl_->live.listening_stopped = false;
}

std::optional<live_window> tracer::next_window(double timeout_s) {
  if (impl_->forked.load()) return std::nullopt;  // no lock: its holder may not exist here
  std::unique_lock<std::mutex> lock(impl_->mutex);
  const auto wait = std::chrono::duration<double>(std::max(0.0, timeout_s));
  impl_->live.window_queued.wait_for(lock, wait,
                                     [&] { return !impl_->live.queued.empty() || impl_->live.listening_stopped; });
  if (impl_->live.queued.empty() || impl_->live.listening_stopped) return std::nullopt;
  live_window w = std::move(impl_->live.queued.front());
  impl_->live.queued.pop_front();
  return w;
}

void tracer::stop_listening() {
  if (impl_->forked.load()) return;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->live.listening_stopped = true;
    impl_->live.queued.clear();
  }
  impl_->live.window_queued.notify_all();
}

void tracer::end_live() {
  if (impl_->forked.load() || impl_->creator_pid != getpid()) return;  // before any lock
  std::unique_lock<std::mutex> lock(impl_->mutex);
  if (impl_->live.live_ended) return;
  impl_->drain_all_locked();  // the steps that ended since the collector's last pass
  impl_->harvest_events();
  impl_->live_tick(lock, true);
  impl_->capture.tick(lock, impl_->capture_ctx, true);  // a capture still recording: written with the steps it has
  impl_->live.live_ended = true;
}

void tracer::count_window_failure() noexcept {
  impl_->live.window_calls_failed.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace steptrace
