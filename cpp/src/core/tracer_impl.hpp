// Internal (not public API): what a tracer owns behind its public face: its identity, the lock,
// the options, the run's figures and its four subsystems (recording, the live view, capture, the
// hang watch), each with the narrow context it may read the tracer through. See
// cpp/src/core/README.md for who runs what.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/capture/capturer.hpp"
#include "core/hang/hang_watch.hpp"
#include "core/live/live_view.hpp"
#include "core/recording/recorder.hpp"
#include "core/recording/stream_events.hpp"
#include "core/state/step_statistics.hpp"
#include "core/thread_binding.hpp"
#include "gpu/backend.hpp"
#include "record/clock.hpp"
#include "steptrace/config.hpp"
#include "steptrace/summary.hpp"

namespace steptrace::detail {

class tracer_impl {
 public:
  explicit tracer_impl(const config& cfg);
  ~tracer_impl();

  // Starts the GPU backend and the CPU accounting, once: the first step (takes the lock).
  void first_step() noexcept {
    rec.first_step();
    started.store(true, std::memory_order_release);
  }

  // Read by the recording threads on every record; written once, or never.
  alignas(64) const std::uint64_t uid;
  std::atomic<bool> forked{false};   // this copy lives in a forked child: it records nothing
  std::atomic<bool> started{false};  // first_step() ran
  const int creator_pid;
  const bool env_disabled;  // STEPTRACE_DISABLE=1 wins over configure()

  // Written by whoever drains (the collector, every interval): kept off the line above, which
  // the recording threads read on every record.
  alignas(64) mutable std::mutex mutex;  // the consumer side of every ring, the builders, the aggregate
  config cfg;
  // cfg's told FLOPs a step and their dtype (a dtype_class), as configure set them, for a window
  // finished without the lock (add_told_ceiling) while configure may write cfg.
  std::atomic<double> told_flops{0};
  std::atomic<unsigned char> told_dtype{0};
  step_statistics stats;  // the counted steps' figures; its restart and each subsystem's: tracer::reset
  std::vector<std::pair<std::string, std::string>> facts;
  std::optional<rank_info> rank;  // tracer::set_rank
  std::atomic<bool> nested_reported{false};
  bool exit_reported = false;

  // windows.cpp: windows for servers and the live view, and resident memory at step ends.
  summary window_of(aggregate& from, bool restart = true);  // under `mutex`: its figures; restart: it starts afresh
  // The ceiling of a live summary or window told its FLOPs (flops_per_step, or counted once by
  // FlopCounterMode: the fact flops.from), on the device the fact gpu.name names.
  void add_told_ceiling(summary& s) const;
  void finish_window(summary& w) const;                           // without the lock: backend, misuse counts, diagnosis
  void sample_rss(std::unique_lock<std::mutex>& lock, bool now);  // reads /proc without the lock
  std::uint64_t rss_steps = 0;                                    // rec.steps_ended() at the last RSS sample
  std::chrono::steady_clock::time_point rss_last{};
  // The live view (core/live), and what it may ask of this tracer (windows.cpp).
  live_view live;
  struct live_glue final : live_context {
    explicit live_glue(tracer_impl& t) : impl(t) {}
    const config& options() const override { return impl.cfg; }
    const std::optional<rank_info>& rank() const override { return impl.rank; }
    device_join* device() override { return impl.stats.totals.device(); }
    summary window_of(aggregate& from) override { return impl.window_of(from); }
    std::uint32_t sample_every(const gpu_stats& g) const override { return impl.sample_every(g); }
    std::uint64_t steps_ended() const override { return impl.rec.steps_ended(); }
    void finish(summary& w) const override { impl.finish_window(w); }
    tracer_impl& impl;
  };
  live_glue live_ctx{*this};
  // The collector, each pass; `last`: the run's end (tracer::end_live). Nothing in a forked child.
  void live_tick(std::unique_lock<std::mutex>& lock, bool last = false) {
    if (!forked.load()) live.tick(lock, live_ctx, last);
  }
  // The hang watch (core/hang): each tracer watches its own open steps.
  hang_watch hang;
  // What the hang watch may read of this tracer, under `mutex`.
  hang_context hang_context_now() const {
    hang_context c{cfg.hang_after_s, cfg.capture_dir, cfg.jsonl_path, rank, &stats.recent, {}};
    c.builders = rec.live_builders();
    return c;
  }
  // Capture on trouble (core/capture), under `mutex`, and what it may ask of this tracer
  // (capture_glue.cpp).
  capturer capture;
  struct capture_glue final : capture_context {
    explicit capture_glue(tracer_impl& t) : impl(t) {}
    const config& options() const override { return impl.cfg; }
    const std::optional<rank_info>& rank() const override { return impl.rank; }
    const std::vector<std::pair<std::string, std::string>>& facts() const override { return impl.facts; }
    const device_join* device() const override { return impl.stats.totals.device(); }
    std::uint64_t run_begin() const override { return impl.stats.totals.run_begin(); }
    void read_device_now() override;
    void spans_wanted_changed() override;
    void finish(summary& s) const override { impl.finish_window(s); }
    tracer_impl& impl;
  };
  capture_glue capture_ctx{*this};
  // Capture and the hang watch listen to the live windows (windows.cpp): the captures that ended
  // and the steps open now go out with a window; capture's rule weighs each one.
  struct capture_windows final : window_listener {
    explicit capture_windows(tracer_impl& t) : impl(t) {}
    bool wants_windows() const override { return !impl.cfg.capture.empty() && !impl.capture.elsewhere(); }
    void on_window_closing(summary& w) override;
    void on_window(const summary& w, bool last) override;
    tracer_impl& impl;
  };
  struct hang_windows final : window_listener {
    explicit hang_windows(tracer_impl& t) : impl(t) {}
    void on_window_closing(summary& w) override;
    void on_window(const summary&, bool) override {}
    tracer_impl& impl;
  };
  capture_windows capture_listener{*this};
  hang_windows hang_listener{*this};
  // Builders keep phase calls: for the timeline, the retroactive ring or a capture armed.
  bool spans_wanted() const noexcept { return stats.timeline.enabled() || capture.spans_wanted(); }

  std::pair<std::uint32_t, std::uint32_t> sample_asked{1,
                                                       10};  // device_sample and its period, as last told the backend
  std::uint32_t sample_last = 1;                             // the last device_sample above 1 this tracer asked for
  // The N a summary's device figures say they were sampled with: the one asked now, or, set back
  // to 1 after windows were left out, the last one that left them out. Under the lock.
  std::uint32_t sample_every(const gpu_stats& g) const noexcept {
    return cfg.device_sample > 1 ? cfg.device_sample : g.steps_sampled_out > 0 ? sample_last : 1;
  }

  // Recording (core/recording), and what it may ask of this tracer (recording_glue.cpp). Last:
  // its collector calls on every subsystem above.
  struct recording_glue final : recording_context {
    explicit recording_glue(tracer_impl& t) : impl(t) {}
    const config& options() const override { return impl.cfg; }
    bool forked() const override { return impl.forked.load(); }
    aggregate& totals() override { return impl.stats.totals; }
    void add_sinks(step_fan_out& out) override;
    bool spans_wanted() const override { return impl.spans_wanted(); }
    void on_device(device_join& d, std::uint64_t before) override;
    void each_pass(std::unique_lock<std::mutex>& lock) override;
    tracer_impl& impl;
  };
  recording_glue recording_ctx{*this};
  recorder rec{mutex, recording_ctx};
};

// What the GPU backend is and why, with the host clock: every summary's `backend`.
inline backend_info backend_now() {
  const gpu_status gpu = gpu_backend_status();
  return {gpu.cuda, gpu.cupti, gpu.reason, host_clock_name()};
}

// This thread's state in `impl`: the TLS slot when it matches, else the slow lookup.
inline thread_state* local_state(tracer_impl& impl) noexcept {
  if (__builtin_expect(t_binding.tracer_uid == impl.uid, 1)) return static_cast<thread_state*>(t_binding.state);
  return lookup_slow(impl);
}

}  // namespace steptrace::detail
