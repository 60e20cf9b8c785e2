// The tracer's side of its windows: the figures since the last window (tracer::window(), for
// servers that never reach "end of run") and the live view's (core/live), both beside the
// whole-run totals, which they never change; what the live view may ask of the tracer and what
// capture and the hang watch add to each window; resident memory at step ends.
// See cpp/src/core/README.md, "Windows".
#include <unistd.h>

#include <algorithm>
#include <string>
#include <utility>

#include "analysis/ceiling.hpp"
#include "core/tracer_impl.hpp"
#include "record/host_memory.hpp"
#include "record/names.hpp"
#include "report/report.hpp"
#include "steptrace/tracer.hpp"

namespace steptrace {
namespace detail {

static_assert(live_view::queued == tracer::queued_windows, "the live view queues what the public header says");

summary tracer_impl::window_of(aggregate& from, bool restart) {
  summary out;
  from.fill(out, host_clock::ns_per_tick());
  if (restart) from.clear();
  out.series = step_series{};  // a window is read as a whole: the whole-run summary has the series
  out.gpu.reset();             // and the device view
  out.facts = facts;
  out.rank = rank;
  out.errors.unbalanced_phases += rec.unbalanced_phases();  // the run's so far
  return out;
}

void tracer_impl::finish_window(summary& w) const {
  w.errors.windows_dropped = live.windows_dropped();  // the run's so far
  w.errors.window_calls_failed = live.window_calls_failed();
  w.errors.nested_steps = stats.nested_steps.load(std::memory_order_relaxed);  // the run's so far
  w.errors.phase_names_folded = folded_phase_names();
  w.errors.requests_abandoned = rec.reqs.requests_abandoned.load(std::memory_order_relaxed);
  w.errors.request_phases_dropped = rec.reqs.request_phases_dropped.load(std::memory_order_relaxed);
  w.backend = backend_now();
  add_told_ceiling(w);
  complete(w);
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
  if (rec.steps_ended() == rss_steps) return;  // sampled at step ends only
  const auto at = std::chrono::steady_clock::now();
  if (!now && at - rss_last < every) return;
  rss_steps = rec.steps_ended();
  rss_last = at;
  lock.unlock();  // /proc is read without the tracer lock
  const std::uint64_t bytes = resident_bytes();
  lock.lock();
  stats.totals.note_rss(bytes);
  live.note_rss(bytes);
}

void tracer_impl::capture_windows::on_window_closing(summary& w) {
  w.captures = impl.capture.take_unsent();  // a window carries the captures that ended since the last
}

void tracer_impl::capture_windows::on_window(const summary& w, bool last) {
  impl.capture.on_window(impl.capture_ctx, w, last);  // the rule weighs it; the ring turns
}

void tracer_impl::hang_windows::on_window_closing(summary& w) {
  if (hang_view open = impl.hang.view(impl.hang_context_now()); !open.threads.empty()) w.hang = std::move(open);
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
    impl.rec.drain_all();
    fill(lock, out);
  }
  impl.finish_window(out);
  return out;
}

}  // namespace

summary tracer::window() {
  return read_under_lock(*impl_, [&](std::unique_lock<std::mutex>& lock, ::steptrace::summary& out) {
    impl_->rec.harvest_events();
    impl_->sample_rss(lock, true);
    // Windows are fed only once asked for: the first one is the whole run so far.
    out = impl_->live.windows_on() ? impl_->window_of(impl_->live.window_totals())
                                   : impl_->window_of(impl_->stats.totals, false);
    impl_->live.turn_windows_on();
  });
}

summary tracer::metrics() const {
  return read_under_lock(*impl_, [&](std::unique_lock<std::mutex>&, ::steptrace::summary& out) {
    out = impl_->window_of(impl_->stats.totals, false);  // counts and sums since the start
    out.live_ranks = impl_->live.live_ranks();
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
  impl_->live.listen_windows();
}

std::optional<live_window> tracer::next_window(double timeout_s) {
  if (impl_->forked.load()) return std::nullopt;  // no lock: its holder may not exist here
  std::unique_lock<std::mutex> lock(impl_->mutex);
  return impl_->live.next_window(lock, timeout_s);
}

void tracer::stop_listening() {
  if (impl_->forked.load()) return;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->live.stop_listening();
  }
  impl_->live.wake_listeners();
}

void tracer::end_live() {
  if (impl_->forked.load() || impl_->creator_pid != getpid()) return;  // before any lock
  std::unique_lock<std::mutex> lock(impl_->mutex);
  if (impl_->live.ended()) return;
  impl_->rec.drain_all();  // the steps that ended since the collector's last pass
  impl_->rec.harvest_events();
  impl_->live_tick(lock, true);
  impl_->capture.tick(lock, impl_->capture_ctx, true);  // a capture still recording: written with the steps it has
  impl_->live.end();
}

void tracer::count_window_failure() noexcept { impl_->live.count_window_failure(); }

rank_window_count tracer::note_rank_window(const std::optional<straggler_info>& straggler,
                                           std::vector<std::uint32_t> late, std::vector<std::uint32_t> missing) {
  if (impl_->forked.load()) return {};
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->live.note_rank_window(straggler, std::move(late), std::move(missing));
}

}  // namespace steptrace
