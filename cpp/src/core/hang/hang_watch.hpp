// Internal (not public API): the hang watch, one of the tracer's four subsystems. Each tracer
// watches its own open steps. A step open past `hang_after` is a suspected hang, reported once
// (again only after that step is no longer open) from the collector's thread, without touching
// the stuck thread. See cpp/src/report/README.md, "Hangs".
//
//   hang_watch watch;
//   if (watch.due()) watch.tick(lock, context);  // the collector, each pass: a look once a second
//   hang_view now = watch.view(context);  // a window's or metrics()' view of what is open
//
// It reads its tracer only through a hang_context, made under the tracer lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "analysis/recent_window.hpp"
#include "analysis/step_builder.hpp"
#include "steptrace/hang.hpp"
#include "steptrace/ranks.hpp"

namespace steptrace::detail {

// What the watch may read of its tracer: the options it uses, the rank, the recent counted
// steps and every live thread's builder. Made under the tracer lock; read only while it is held.
struct hang_context {
  double hang_after_s = 0;  // the option: above 0 a threshold, 0 automatic, below 0 off
  std::string capture_dir;  // where the report goes ("" is the working folder)
  std::string jsonl_path;   // the live JSONL, with {rank} still in it ("" none)
  std::optional<rank_info> rank;
  const recent_window* recent = nullptr;
  std::vector<const step_builder*> builders;
  std::uint64_t now = 0;  // the host clock's ticks now; 0: read the clock (a test sets its own)
};

class hang_watch {
 public:
  // The threshold now: the option's, or automatic (10 p99 steps, at least 60 s; 600 s before
  // any counted step).
  double after_now(const hang_context& c) const;
  // Every thread's open step, the last collectives, and the report of a hang reported.
  hang_view view(const hang_context& c) const;
  // The collector, each pass: whether a second has gone since the last look (and it is one now).
  bool due();
  // A look: a step open past the threshold is reported once (the stacks, the file, the lines),
  // with `lock` let go meanwhile. `c` is read before the lock is let go, never after.
  void tick(std::unique_lock<std::mutex>& lock, const hang_context& c);
  std::uint64_t reports() const noexcept { return reports_; }  // hangs reported in this run
  // tracer::reset: the watch goes on (a hang outlives a reset), so nothing is cleared.
  void restart() {}

 private:
  // The report's file, named in view() once written (the lock taken briefly, then let go).
  void publish(std::unique_lock<std::mutex>& lock, const hang_view& v, const std::string& path);

  std::chrono::steady_clock::time_point last_check_{};  // looked once a second
  // The hang reported: the thread and step that were stuck. Another report only once that step
  // is no longer the one open on that thread (the job moved).
  bool reported_ = false;
  std::uint32_t thread_ = 0;
  std::uint64_t step_ = 0;
  std::string report_;  // its file ("" while being written, or when it could not be)
  std::uint64_t reports_ = 0;
};

}  // namespace steptrace::detail
