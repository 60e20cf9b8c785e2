// Internal (not public API): the live view, one of the tracer's four subsystems. Every `live`
// seconds (10 when 0) a window closes on the wall clock's multiples of the period: its figures
// go to the live line on stderr, to jsonl_path and to the program's listeners' queue, and the
// subsystems that listen hear of it. It also keeps the windows tracer::window() reads and rank
// 0's count of each live window's straggler. See cpp/src/core/README.md, "Windows".
//
//   live_view live;
//   live.listen(captures_listener);                  // told of each window as it closes
//   if (live.on(cfg)) fan_out.add(live.totals());    // the steps since the last window
//   live.tick(lock, context);                        // the collector, each pass
//   live.tick(lock, context, true);                  // the run's end: the window in progress goes out
//
// It reads its tracer only through a live_context. All of it is under the tracer lock unless said.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "analysis/aggregate.hpp"
#include "analysis/kernel_drift.hpp"
#include "core/live/node_reading.hpp"
#include "steptrace/config.hpp"
#include "steptrace/ranks.hpp"
#include "steptrace/summary.hpp"

namespace steptrace::detail {

// A subsystem told of each live window (capture weighs its triggers on it). Under the tracer lock.
class window_listener {
 public:
  // Whether it wants windows made though nothing else asked for them (capture's triggers).
  virtual bool wants_windows() const { return false; }
  // Before the window goes out: what it carries of this listener's (the captures that ended, the
  // hang view).
  virtual void on_window_closing(summary& /*w*/) {}
  // After it went out; `last`: the run's end, no window after it.
  virtual void on_window(const summary& w, bool last) = 0;

 protected:
  ~window_listener() = default;
};

// What the live view may ask of its tracer. Under the tracer lock, but `finish`.
class live_context {
 public:
  virtual const config& options() const = 0;
  virtual const std::optional<rank_info>& rank() const = 0;
  virtual device_join* device() = 0;               // the whole run's device join; nullptr without a GPU
  virtual summary window_of(aggregate& from) = 0;  // its figures as a window; `from` starts afresh
  virtual std::uint32_t sample_every(const gpu_stats& g) const = 0;  // device_sample, as the figures say it
  virtual std::uint64_t steps_ended() const = 0;                     // the run's, so far
  virtual void finish(summary& w) const = 0;  // without the lock: backend, misuse counts, diagnosis

 protected:
  ~live_context() = default;
};

class live_view {
 public:
  // Told of every window from now on; it outlives the view.
  void listen(window_listener& l) { subsystems_.push_back(&l); }
  // The view wants steps: asked for (live, jsonl_path), a program listening, or a subsystem that
  // wants windows; never after its end.
  bool on(const config& cfg) const;
  aggregate& totals() noexcept { return live_totals_; }  // the steps since the last live window
  // The collector, each pass: a window closes when the wall clock crosses the period. `last`: the
  // window in progress goes out however short (if it holds a counted step), and the view ends.
  // Lets go of the lock while the window is formatted and written.
  void tick(std::unique_lock<std::mutex>& lock, live_context& ctx, bool last = false);
  bool ended() const noexcept { return ended_; }
  void end() noexcept { ended_ = true; }

  // tracer::window(): the windows fed once the first is asked for (until then the first is the
  // run so far).
  bool windows_on() const noexcept { return windows_on_; }
  void turn_windows_on() noexcept { windows_on_ = true; }
  aggregate& window_totals() noexcept { return window_totals_; }
  // Resident memory at a step end, in both windows.
  void note_rss(std::uint64_t bytes);

  // The program's listeners (tracer::listen_windows): the latest `queued` windows.
  static constexpr std::size_t queued = 2;  // tracer::queued_windows
  void listen_windows();
  std::optional<live_window> next_window(std::unique_lock<std::mutex>& lock, double timeout_s);
  void stop_listening();  // under the lock; then wake_listeners() without it
  void wake_listeners() { queued_cv_.notify_all(); }
  void count_window_failure() noexcept { window_calls_failed_.fetch_add(1, std::memory_order_relaxed); }
  std::uint64_t windows_dropped() const noexcept { return windows_dropped_.load(std::memory_order_relaxed); }
  std::uint64_t window_calls_failed() const noexcept { return window_calls_failed_.load(std::memory_order_relaxed); }

  // Rank 0 of a job (core/live/rank_windows.cpp): counts one window, its straggler and the ranks
  // late or missing in it; the straggler's count now.
  rank_window_count note_rank_window(const std::optional<straggler_info>& straggler, std::vector<std::uint32_t> late,
                                     std::vector<std::uint32_t> missing);
  const std::optional<live_ranks_view>& live_ranks() const noexcept { return live_ranks_; }

  // tracer::reset: the windows' figures and counts start afresh; the period's clock, the
  // listeners and what was said once stay.
  void restart();

 private:
  // A live window's kernels against their first window's time a call: the fact gpu.kernel_drift,
  // and the line to say once a kernel ("" when none), said after the lock is let go.
  std::string note_drift(summary& w);

  std::vector<window_listener*> subsystems_;
  aggregate window_totals_;  // since the last tracer::window() (or reset); fed once windows_on_
  bool windows_on_ = false;
  aggregate live_totals_;           // since the last live window; fed only while the view is on
  bool ended_ = false;              // tracer::end_live: the last window went; no line or window after it
  double origin_s_ = -1;            // steady seconds at the first live window's start
  std::int64_t slot_ = 0;           // the wall clock's period slot the window in progress covers
  std::chrono::seconds period_{0};  // the period slot_ counts in
  bool merge_first_ = false;        // the first window began late in its slot: it covers the next one too
  bool jsonl_failed_ = false;       // an append to jsonl_path failed (said once)
  // The program's listeners.
  bool listening_ = false, listening_stopped_ = false;
  std::deque<live_window> queued_;
  std::condition_variable queued_cv_;
  std::atomic<std::uint64_t> windows_dropped_{0}, window_calls_failed_{0};
  // Rank 0's count of each live window's straggler.
  std::optional<live_ranks_view> live_ranks_;
  std::map<std::uint32_t, std::map<std::string, std::uint64_t>> live_rank_phases_;  // by rank: windows by phase
  // In a job, each window reads this rank's node (its row carries it), without the tracer lock
  // (one window is made at a time).
  node_reader node_;
  // Each kernel's time a call in the first window it ran in; the kernels already said drifting.
  kernel_drift drift_;
  std::vector<std::string> drift_said_;
};

}  // namespace steptrace::detail
