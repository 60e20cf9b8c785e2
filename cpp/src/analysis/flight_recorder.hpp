// Internal (not public API): the flight recorder. Per thread, the raw intervals of the most
// recent steps and of the slowest counted ones (cpp/src/analysis/README.md, "Timeline"). Fed by the
// collector, never by a recording thread; bounded whatever the run's length.
#pragma once

#include <cstdint>
#include <vector>

#include "analysis/step_builder.hpp"
#include "gpu/device_record.hpp"
#include "steptrace/timeline.hpp"

namespace steptrace::detail {

class device_join;

class flight_recorder {
 public:
  static constexpr std::size_t max_threads = 64;     // past this the thread idle longest is let go
  static constexpr std::size_t max_device = 256;     // device records kept per step
  static constexpr std::size_t set_aside_kept = 16;  // recent set-aside spans per thread
  static constexpr std::size_t set_aside_per_step = 16;

  void configure(std::uint32_t recent, std::uint32_t slowest);
  bool enabled() const noexcept { return recent_ + slowest_ > 0; }
  // Each kept step keeps its phase figures too, so replay() can give it to an aggregate again
  // (the retroactive capture's recorders; the timeline's does not need them).
  void keep_phases(bool on) noexcept { keep_phases_ = on; }

  void on_step(const built_step& step);
  void on_set_aside(std::uint32_t thread, std::uint32_t id, std::uint64_t begin, std::uint64_t end);
  void clear();

  // Kept steps that ended before `settled_ns` and have no device records yet take theirs from
  // the join (which still holds them: it lets records go only after the steps that need them).
  // to_ns: ticks to the device records' clock.
  void attach_device(const device_join& join, std::uint64_t settled_ns, std::uint64_t (*to_ns)(std::uint64_t));

  // origin: the run's first instant (ticks); to_ns converts ticks, device times are already ns.
  void fill(timeline_view& out, std::uint64_t origin, double ns_per_tick, std::uint64_t (*to_ns)(std::uint64_t)) const;
  std::uint64_t bytes() const noexcept;

  // A kept step, as selection sees it: which thread and step, how long (ticks, set-aside time
  // out), when it ended.
  struct kept_ref {
    std::uint32_t thread = 0;
    std::uint64_t index = 0, length = 0, end = 0;
    bool counted = false;  // neither warm-up nor failed
  };
  void list(std::vector<kept_ref>& out) const;  // every kept step once (recent and slowest alike)
  // The kept steps `chosen` names (thread and index) are copied into `into` as its recent steps
  // (`into` configured to hold them all); a step already there is not copied twice.
  void copy_to(flight_recorder& into, const std::vector<kept_ref>& chosen) const;
  // Every kept step, oldest first, given to `sink` again as the fan-out gave it (its set-aside
  // spans, then the step): the figures of those steps alone. Needs keep_phases.
  void replay(step_sink& sink) const;

 private:
  struct aside {
    std::uint32_t id;
    std::uint64_t begin, end;
  };
  struct kept_step {
    std::uint64_t begin = 0, end = 0, length = 0, index = 0;
    std::uint32_t thread = 0;
    bool warmup = false, failed = false, device_known = false, first_of_thread = false, request = false;
    bool device_unrecorded = false;  // it ran while no device activity was recorded: device unknown for good
    std::uint64_t set_aside_ticks = 0;
    std::vector<phase_slice> phases;  // keep_phases only
    std::vector<phase_span> spans;
    std::uint32_t spans_dropped = 0, device_dropped = 0;
    std::vector<stream_key> streams;
    std::vector<aside> set_aside;  // inside its window
    std::vector<device_record> device;
    std::uint64_t bytes() const noexcept;
  };
  struct thread_log {
    std::uint32_t thread = 0;
    std::uint64_t last_end = 0;
    std::vector<kept_step> recent;  // a ring: `next` is the oldest once it is full
    std::size_t next = 0;
    std::vector<kept_step> slowest;  // a min-heap by length
    std::vector<aside> pending;      // set aside since its last step
    std::vector<aside> set_aside;    // the most recent, a ring
    std::size_t set_aside_next = 0;
  };
  thread_log& log_of(std::uint32_t thread);
  static bool slower(const kept_step& a, const kept_step& b);
  void keep(kept_step& into, const built_step& s, std::uint64_t length, thread_log& log) const;

  std::uint32_t recent_ = 64, slowest_ = 8;
  bool keep_phases_ = false;
  std::vector<thread_log> threads_;
};

}  // namespace steptrace::detail
