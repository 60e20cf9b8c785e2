// Internal (not public API): the most recent counted steps, kept raw, so that quantiles over
// them can be read by any number of readers, any number of times, without consuming anything
// (a metrics endpoint scraped by several Prometheus servers). Bounded: at most `max_steps`
// steps and `max_slices` phase slices; the oldest go first.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "analysis/step_builder.hpp"
#include "steptrace/summary.hpp"

namespace steptrace::detail {

class recent_window {
 public:
  static constexpr std::size_t max_steps = 4096;
  static constexpr std::size_t max_slices = 65536;

  void on_step(const built_step& s, std::uint64_t length);  // a counted step
  void clear();
  bool empty() const noexcept { return steps_.empty(); }
  // The kept steps' length (ticks) at quantile q (nearest rank), and the last n lengths, oldest first.
  std::uint64_t length_quantile(double q) const;
  std::vector<std::uint64_t> last_lengths(std::size_t n) const;
  // Replaces the quantiles (p50, p95, p99, max) of `out`'s step time and of each of its phases
  // with those of the kept steps that ended at `since` (ticks) or later; a phase that did not
  // run in a step counts 0 there, as in the whole-run figures. How many steps that was.
  std::uint64_t fill_quantiles(summary& out, std::uint64_t since, double ns_per_tick) const;

 private:
  struct step_entry {
    std::uint64_t end, length;
    std::uint32_t slices;  // its phase slices, next in slices_
  };
  struct slice {
    std::uint32_t phase;
    std::uint64_t ticks;
  };
  std::deque<step_entry> steps_;
  std::deque<slice> slices_;
};

}  // namespace steptrace::detail
