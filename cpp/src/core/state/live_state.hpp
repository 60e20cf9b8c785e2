// Internal: a tracer's windows (tracer::window), its live view, the listeners' queue and rank 0's
// count of live stragglers (tracer_impl::live; windows.cpp, rank_windows.cpp), under the tracer
// lock unless said. See cpp/src/core/README.md, "Windows".
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>

#include "analysis/aggregate.hpp"
#include "analysis/kernel_drift.hpp"
#include "core/node_reading.hpp"
#include "steptrace/summary.hpp"

namespace steptrace::detail {

struct live_state {
  aggregate window_totals;  // since the last tracer::window() (or reset); fed once windows_on
  bool windows_on = false;  // window() was called: until then the first window is the totals
  aggregate live_totals;    // since the last live window; fed only while the live view is on
  bool live_ended = false;  // tracer::end_live: the last window went; no line or window after it
  std::chrono::steady_clock::time_point live_last{}, rss_last{};
  std::uint64_t rss_steps = 0;          // step_statistics::steps_ended at the last RSS sample
  double live_origin_s = -1;            // steady seconds at the first live window's start
  std::int64_t live_slot = 0;           // the wall clock's period slot the live window in progress covers
  std::chrono::seconds live_period{0};  // the period live_slot counts in
  bool live_merge_first = false;        // the first window began late in its slot: it covers the next one too
  bool jsonl_failed = false;            // an append to jsonl_path failed (said once)
  // Listeners (tracer::listen_windows): the latest live windows.
  bool listening = false, listening_stopped = false;
  std::deque<live_window> queued;
  std::condition_variable window_queued;
  std::atomic<std::uint64_t> windows_dropped{0}, window_calls_failed{0};
  // rank_windows.cpp: rank 0's count of each live window's straggler.
  std::optional<live_ranks_view> live_ranks;
  std::map<std::uint32_t, std::map<std::string, std::uint64_t>> live_rank_phases;  // by rank: windows by phase
  // In a job, each live window reads this rank's node (its row carries it): on the window's
  // thread, without the tracer lock (one window is made at a time).
  node_reader node;
  // Each kernel's time a call in the first live window it ran in, for drift (windows.cpp); the
  // kernels already said drifting (said once each).
  kernel_drift drift;
  std::vector<std::string> drift_said;

  // tracer::reset: the windows' figures and counts start afresh; the period's clock, the
  // listeners and what was said once stay.
  void restart() {
    window_totals.clear();
    live_totals.clear();
    live_ranks.reset();
    live_rank_phases.clear();
    windows_dropped.store(0, std::memory_order_relaxed);
    window_calls_failed.store(0, std::memory_order_relaxed);
  }
};

}  // namespace steptrace::detail
