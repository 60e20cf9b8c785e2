// Internal (not public API): each finished step handed to every keeper that wants it. The
// collector's drain and the trace reader use this one fan-out, each with its own list:
//
//   aggregate totals;
//   flight_recorder timeline;
//   step_fan_out out(thread);
//   out.add(totals).add(timeline);
//   builder.consume(first, last, out);  // each step: the totals, then the timeline
//
// A step with a batch size goes to the batch keeper alone, when there is one. It allocates
// nothing. Whoever drains feeds it, under the tracer lock: the collector, or a recording thread
// whose ring filled (the slow path, never a record's). A trace reader feeds its own
// (cpp/src/analysis/README.md).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <variant>

#include "analysis/aggregate.hpp"
#include "analysis/back_ring.hpp"
#include "analysis/flight_recorder.hpp"
#include "analysis/recent_window.hpp"
#include "analysis/step_builder.hpp"

namespace steptrace::detail {

// A keeper of finished steps from any thread: the fan-out says which thread a set-aside span
// came from. Keepers outside the analysis (an armed capture) derive from it.
class step_keeper {
 public:
  virtual void on_step(const built_step& s) = 0;
  virtual void on_unscoped(std::uint32_t /*id*/, std::uint64_t /*ticks*/) {}
  virtual void on_set_aside(std::uint32_t /*thread*/, std::uint32_t /*id*/, std::uint64_t /*begin*/,
                            std::uint64_t /*end*/) {}

 protected:
  ~step_keeper() = default;
};

class step_fan_out final : public step_sink {
 public:
  static constexpr std::size_t max_keepers = 12;

  explicit step_fan_out(std::uint32_t thread) noexcept : thread_(thread) {}
  step_fan_out(const step_fan_out&) = delete;
  step_fan_out& operator=(const step_fan_out&) = delete;

  // Each add keeps a reference: the keeper outlives the fan-out. Past max_keepers, std::length_error.
  step_fan_out& add(aggregate& a);        // every step, its unscoped time and set-aside spans
  step_fan_out& add(recent_window& r);    // counted steps only, with their length less the time set aside
  step_fan_out& add(flight_recorder& f);  // every step and set-aside span, with its thread
  step_fan_out& add(back_ring& b);        // the same
  step_fan_out& add(step_keeper& k);
  step_fan_out& add_batches(aggregate& a);  // steps with a batch size: here, and nowhere else

  void on_step(const built_step& s) override;
  void on_unscoped(std::uint32_t id, std::uint64_t ticks) override;
  void on_set_aside(std::uint32_t id, std::uint64_t begin, std::uint64_t end) override;

  std::uint64_t steps() const noexcept { return steps_; }  // steps handed to the list (not batches kept apart)

 private:
  using keeper = std::variant<aggregate*, recent_window*, flight_recorder*, back_ring*, step_keeper*>;
  step_fan_out& push(keeper k);

  std::array<keeper, max_keepers> keepers_{};
  std::size_t used_ = 0;
  aggregate* batches_ = nullptr;
  std::uint32_t thread_;
  std::uint64_t steps_ = 0;
};

}  // namespace steptrace::detail
