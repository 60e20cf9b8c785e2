// Internal (not public API): what a tracer owns behind its public face, and the recording
// helpers the library's slow path shares. See cpp/src/core/README.md for who runs what.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "analysis/step_builder.hpp"
#include "core/capture/capturer.hpp"
#include "core/hang/hang_watch.hpp"
#include "core/live/live_view.hpp"
#include "core/state/device_reading.hpp"
#include "core/state/request_state.hpp"
#include "core/state/step_statistics.hpp"
#include "core/stream_events.hpp"
#include "core/thread_binding.hpp"
#include "gpu/backend.hpp"
#include "gpu/stream_ids.hpp"
#include "record/clock.hpp"
#include "record/cpu_load.hpp"
#include "steptrace/config.hpp"
#include "steptrace/detail/ring.hpp"
#include "steptrace/summary.hpp"

namespace steptrace::detail {

// One per (thread, tracer). The producer fields belong to the owning thread; the rest is
// touched only under tracer_impl::mutex.
struct thread_state {
  thread_state(std::uint32_t ring_records, std::uint32_t warmup, std::uint32_t thread)
      : records(ring_records), builder(warmup, thread, streams.keys) {}

  ring records;
  bool step_open = false;                // producer
  bool step_on_stream = false;           // producer: the open step was given a stream
  void* step_stream = nullptr;           // producer: that stream
  std::uint32_t exclude_depth = 0;       // producer: set-aside spans open on the thread
  std::uint32_t step_exclude_depth = 0;  // producer: exclude_depth when the open step began
  // A step began with its ring half full: the collector is asked to drain it now rather than at
  // its next timed poll (after a quiet spell that may be 50 ms away, and the ring full before it,
  // which would cost this thread the drain). Set by the producer, once until the ring is found
  // under half again (`drain_wanted`, producer only); cleared by the collector as it polls.
  std::atomic<bool> drain_asked{false};
  bool drain_wanted = false;
  thread_events events;              // producer makes its pools; the collector reads the slots its records name
  std::uint32_t pairs_pending = 0;   // collector: this thread's event pairs held at the last harvest
  stream_table streams;              // producer appends; the builder reads the entries its records name
  alignas(64) step_builder builder;  // consumer (its own cache lines: written per record)
  std::uint32_t request_left = 0;    // consumer: records of a request block still to come
  bool retired = false;              // consumer: its thread exited; the memory may serve a new thread
};

class tracer_impl {
 public:
  explicit tracer_impl(const config& cfg);
  ~tracer_impl();

  // thread_binding.cpp
  thread_state* attach_thread();            // slow path: a thread's first record
  void detach_thread(thread_state& state);  // the thread exited

  // collector.cpp: drains every ring from a background thread, so recording threads rarely
  // drain their own.
  void start_collector();                           // under `mutex`
  void drain_for_producer(thread_state& state);     // the thread's ring is full
  std::uint64_t drain_locked(thread_state& state);  // its records into steps; how many
  // Under `mutex`, for tracer::reset: every ring read (its CUDA event slots must go back), each
  // builder afresh, its pairs not yet read back counting in no step.
  void restart_threads();
  void drain_all_locked();
  void first_step() noexcept;          // starts the GPU backend and the CPU accounting
  void read_device(device_flush how);  // under `mutex`
  void start_device_reading();         // under `mutex`: from the records that come next
  // Under `mutex`: device time of finished event pairs. Returns how full the fullest thread's
  // event pool was with pairs not yet read back, before this harvest (0 to 1).
  double harvest_events();

  // Not under `mutex` (takes it): before a summary, waits up to max_device_wait for the phases and
  // steps already closed to finish on the device (their CUDA events). Says how many had not, and
  // how long the device took to finish those that did (0 when none was running: the device had
  // kept up with the host).
  struct device_wait {
    std::size_t still_running = 0;
    double behind_ms = 0;
  };
  device_wait await_device_work();
  static constexpr std::chrono::milliseconds max_device_wait{1000};

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
  std::vector<std::unique_ptr<thread_state>> threads;
  std::uint32_t next_thread = 0;  // every thread that ever recorded gets its own number
  // Each subsystem's state, with its own restart (tracer::reset calls them).
  step_statistics stats;            // the counted steps' figures
  request_state reqs;               // request.hpp's steps
  step_builder& request_builder();  // under `mutex`: reqs.requests, made on first use
  device_reading reading;           // device counts and event pairs not yet read back
  std::vector<std::pair<std::string, std::string>> facts;
  std::optional<rank_info> rank;                  // tracer::set_rank
  std::atomic<std::uint64_t> producer_drains{0};  // rings drained by their own thread: the collector lags
  std::atomic<bool> nested_reported{false};
  bool exit_reported = false;

  // The process tree's CPU use and demand since the first step (or reset). Reading it walks
  // /proc, so it has its own lock and is never read under `mutex`, which a recording thread
  // may be waiting for.
  std::mutex cpu_mutex;
  cpu_load cpu;  // under cpu_mutex
  void sample_cpu();
  cpu_totals cpu_so_far();
  void restart_cpu(bool unless_started);

  // windows.cpp: windows for servers and the live view, and resident memory at step ends.
  summary window_of(aggregate& from, bool restart = true);  // under `mutex`: its figures; restart: it starts afresh
  // The ceiling of a live summary or window told its FLOPs (flops_per_step, or counted once by
  // FlopCounterMode: the fact flops.from), on the device the fact gpu.name names.
  void add_told_ceiling(summary& s) const;
  void finish_window(summary& w) const;                           // without the lock: backend, misuse counts, diagnosis
  void sample_rss(std::unique_lock<std::mutex>& lock, bool now);  // reads /proc without the lock
  std::uint64_t rss_steps = 0;                                    // stats.steps_ended at the last RSS sample
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
    std::uint64_t steps_ended() const override { return impl.stats.steps_ended; }
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
    for (const auto& t : threads) {
      if (!t->retired) c.builders.push_back(&t->builder);
    }
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

  std::thread collector;
  int collector_pid = 0;
  std::pair<std::uint32_t, std::uint32_t> sample_asked{1,
                                                       10};  // device_sample and its period, as last told the backend
  std::uint32_t sample_last = 1;                             // the last device_sample above 1 this tracer asked for
  // The N a summary's device figures say they were sampled with: the one asked now, or, set back
  // to 1 after windows were left out, the last one that left them out. Under the lock.
  std::uint32_t sample_every(const gpu_stats& g) const noexcept {
    return cfg.device_sample > 1 ? cfg.device_sample : g.steps_sampled_out > 0 ? sample_last : 1;
  }
  bool stopping = false;  // under `mutex`
  std::condition_variable wake;

 private:
  void collect_loop();
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

__attribute__((noinline, cold)) inline void push_after_drain(tracer_impl& impl, thread_state& state,
                                                             std::uint64_t ticks, std::uint32_t id,
                                                             record_kind kind) noexcept {
  impl.drain_for_producer(state);  // the collector fell behind: this thread catches up itself
  state.records.try_push(ticks, id, kind);
}

// At a step's begin: a ring half full asks the collector to drain it (thread_state::drain_asked).
// A compare a step; a wake-up once per half ring at most, never a lock.
inline void ask_drain_if_half_full(tracer_impl& impl, thread_state& state) noexcept {
  if (!state.records.half_full()) {
    state.drain_wanted = false;
    return;
  }
  if (state.drain_wanted) return;  // asked already
  state.drain_wanted = true;
  state.drain_asked.store(true, std::memory_order_relaxed);
  impl.wake.notify_one();
}

// One record stamped now, from the library's slow path.
inline void push(tracer_impl& impl, thread_state& state, record_kind kind, std::uint32_t id) noexcept {
  const std::uint64_t ticks = host_clock::now();
  if (__builtin_expect(!state.records.try_push(ticks, id, kind), 0)) push_after_drain(impl, state, ticks, id, kind);
}

}  // namespace steptrace::detail
