// Internal (not public API): capture on trouble, one of the tracer's four subsystems
// (steptrace/capture.hpp). A capture is armed when the rule fires on a live window, on SIGUSR2,
// or when the program asks (tracer::capture); the fan-out gives it the steps that begin after
// that; once it has them, the collector writes them as a Chrome trace and says their diagnosis.
// The retroactive capture writes steps the ring kept before the trigger. See
// cpp/src/core/README.md, "Capture on trouble".
//
//   capturer captures;
//   captures.configure(cfg);
//   fan_out.add(captures.ring());            // every step, kept whole for a retroactive capture
//   if (captures.armed()) fan_out.add(captures);
//   captures.tick(lock, context);            // the collector, each pass
//
// It reads its tracer only through a capture_context.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "analysis/aggregate.hpp"
#include "analysis/back_ring.hpp"
#include "analysis/flight_recorder.hpp"
#include "analysis/step_fan_out.hpp"
#include "steptrace/capture.hpp"
#include "steptrace/config.hpp"
#include "steptrace/ranks.hpp"
#include "steptrace/summary.hpp"

namespace steptrace::detail {

// The kept steps a trigger's retroactive capture writes: a window's trigger (slow, stall, label,
// phase), the window's slowest; one from outside the loop's figures (file, signal), the last ones.
kept_steps back_choice(const capture_rule& rule);

// What a capture may ask of its tracer. Called under the tracer lock, but `finish`.
class capture_context {
 public:
  virtual const config& options() const = 0;
  virtual const std::optional<rank_info>& rank() const = 0;
  virtual const std::vector<std::pair<std::string, std::string>>& facts() const = 0;
  virtual const device_join* device() const = 0;  // the whole run's device join; nullptr without a GPU
  virtual std::uint64_t run_begin() const = 0;    // the run's first instant (ticks)
  virtual void read_device_now() = 0;             // CUPTI's finished records read and joined now
  virtual void spans_wanted_changed() = 0;        // the builders keep phase calls as wanted now
  virtual void finish(summary& s) const = 0;      // without the lock: backend, misuse counts, diagnosis

 protected:
  ~capture_context() = default;
};

class capturer final : public step_keeper {
 public:
  // The options changed: the rule anew (and the SIGUSR2 handler) when `capture` did; the ring's size.
  void configure(const config& cfg, bool triggers_changed);
  // Python weighs the triggers (its capturer listens to the windows): this one weighs none.
  void weigh_elsewhere() { elsewhere_ = true; }
  bool elsewhere() const noexcept { return elsewhere_; }
  bool has_rule() const noexcept { return rule_.has_value(); }
  bool armed() const noexcept { return armed_; }
  // Builders keep phase calls while a capture is armed or the ring keeps steps.
  bool spans_wanted() const noexcept { return armed_ || back_.steps() > 0; }
  back_ring& ring() noexcept { return back_; }

  // Arms a capture of the next `steps` steps (0: capture_steps); false when one is armed or the
  // run has had capture_max.
  bool arm(capture_context& c, std::string reason, std::uint32_t steps);
  // The retroactive capture: the kept steps to write now, chosen at once (their indices; none
  // when capture_back is 0, nothing is kept, or one is being written).
  std::vector<std::uint64_t> arm_back(capture_context& c, std::string reason, kept_steps which,
                                      const std::vector<std::uint64_t>& indices);
  // The fan-out, while armed: the steps and spans that begin after the capture was armed.
  void on_step(const built_step& s) override;
  void on_set_aside(std::uint32_t thread, std::uint32_t id, std::uint64_t begin, std::uint64_t end) override;
  // Device records joined up to `settled_ns`: the armed capture's steps and the ring take theirs.
  void on_device(const device_join& join, std::uint64_t settled_ns);
  // A live window closed: the rule weighs it (not the last: the run ended), and the ring turns.
  void on_window(capture_context& c, const summary& w, bool last);
  // The collector, each pass: SIGUSR2, then a capture whose steps are in, written and said with
  // `lock` let go meanwhile. `last`: the run ends; a capture with steps is written with those.
  void tick(std::unique_lock<std::mutex>& lock, capture_context& c, bool last = false);

  // What the captures read: every one of this run, and those since the last window.
  const std::vector<capture_record>& done() const noexcept { return done_; }
  std::vector<capture_record> take_unsent();
  void note(capture_record r) { done_.push_back(std::move(r)); }  // one Python wrote

 private:
  std::string weigh(const summary& w);  // the rule on a live window: the reason to capture, or ""
  void back_tick(std::unique_lock<std::mutex>& lock, capture_context& c, bool last);
  // Writes a capture's summary as a Chrome trace, says its block and appends it to the JSONL, the
  // lock let go meanwhile; `name`: the file name's step part. False when it could not.
  bool write(std::unique_lock<std::mutex>& lock, capture_context& c, capture_record& record, summary& s,
             const std::string& name, std::chrono::steady_clock::time_point started);

  // The triggers, weighed on each live window: a C++ program's. The Python binding weighs its
  // own (elsewhere), with torch.profiler's captures and the job's store.
  std::optional<capture_rule> rule_;  // made at configure
  bool elsewhere_ = false;

  // The capture armed: the first `steps_` steps that begin after `armed_at_`.
  bool armed_ = false, complete_ = false, device_ready_ = false;
  std::string reason_;
  std::uint32_t steps_ = 0, seen_ = 0;
  std::uint64_t armed_at_ = 0, last_end_ = 0;  // ticks
  std::uint64_t first_index_ = 0, last_index_ = 0;
  std::chrono::steady_clock::time_point complete_at_{};
  flight_recorder kept_;  // those steps' raw intervals
  aggregate totals_;      // and their figures, for the diagnosis of those steps alone

  // The retroactive capture: the ring of kept steps (capture_back), and the steps chosen from it
  // when a trigger fired, waiting for the collector to write them.
  back_ring back_;
  struct {
    bool pending = false, writing = false;
    std::string reason;
    std::vector<std::uint64_t> indices;
    std::uint64_t lead = 0;
    std::chrono::steady_clock::time_point armed_at{};
    flight_recorder steps;
  } chosen_;

  std::vector<capture_record> done_;
  bool writing_ = false;  // a capture's files are being written (the lock let go): it counts toward capture_max
  std::size_t sent_ = 0;  // done_[0, sent_) went out in a live window
  bool said_limit_ = false;
};

}  // namespace steptrace::detail
