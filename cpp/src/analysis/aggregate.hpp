// Internal (not public API): streaming statistics over finished steps, in bounded memory.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "analysis/device_view.hpp"
#include "analysis/histogram.hpp"
#include "analysis/step_builder.hpp"
#include "analysis/step_series.hpp"
#include "steptrace/summary.hpp"

namespace steptrace::detail {

class aggregate final : public step_sink {
 public:
  aggregate();
  void on_step(const built_step& step) override;
  void on_unscoped(std::uint32_t id, std::uint64_t ticks) override;
  void on_set_aside(std::uint32_t id, std::uint64_t begin, std::uint64_t end) override;
  void clear();

  // Fills the measured parts of a summary (not the diagnosis or the backend).
  void fill(summary& out, double ns_per_tick) const;
  // The same figures for an aggregate of batches (steps with a batch size).
  void fill_batches(batch_stats& out, double ns_per_tick) const;
  std::uint64_t steps() const noexcept { return steps_; }
  // Counted steps are kept for the device view from now on (the GPU backend collects).
  void enable_device() {
    if (!device_) device_ = std::make_unique<device_join>();
  }
  device_join* device() noexcept { return device_.get(); }
  // How step ticks become the device records' nanoseconds: the host clock's conversion live; a
  // trace read from a file is in nanoseconds already.
  using tick_clock = std::uint64_t (*)(std::uint64_t);
  void set_tick_clock(tick_clock to_ns) noexcept { to_ns_ = to_ns; }
  // The process's resident memory at a step end (bytes; 0: not known).
  void note_rss(std::uint64_t bytes) noexcept;
  // The run's first instant (ticks): steps, set-aside spans, warm-up included.
  std::uint64_t run_begin() const noexcept { return run_begin_; }
  // Device time of one call of a phase, or of one counted step, given a stream (CUDA events).
  void add_phase_device_time(std::uint32_t id, float ms);
  void add_step_device_time(float ms) { add_device_time(step_device_, ms); }

 private:
  struct phase_totals {
    histogram per_step;       // exclusive ticks per counted step in which the phase ran (zeros implied)
    histogram per_step_incl;  // inclusive ticks, likewise
    std::uint64_t ticks = 0, calls = 0, incl_ticks = 0;
    std::uint32_t parent = phase_slice::no_parent;  // the first parent it was seen under
  };
  struct unscoped_totals {
    std::uint64_t ticks = 0, max = 0, calls = 0;
  };

  std::uint64_t steps_ = 0, warmup_ = 0, failed_ = 0, requests_ = 0;
  histogram batch_sizes_;  // requests per counted batch
  std::uint64_t batch_requests_ = 0;
  std::uint64_t step_ticks_ = 0, first_begin_ = 0, last_end_ = 0;
  histogram step_hist_;
  std::vector<std::unique_ptr<phase_totals>> phases_;  // by phase id
  std::vector<unscoped_totals> unscoped_;              // by phase id
  std::vector<unscoped_totals> set_aside_;             // by name id
  std::uint64_t run_begin_ = 0, run_end_ = 0;          // first and last instant of steps and set-aside time
  void span(std::uint64_t begin, std::uint64_t end);
  std::uint64_t threads_ = 0;  // with at least one counted step
  step_series_builder series_;
  std::uint64_t rss_first_ = 0, rss_last_ = 0, rss_peak_ = 0, rss_samples_ = 0;
  std::unique_ptr<device_join> device_;
  tick_clock to_ns_;  // set in the constructor: the host clock's conversion
  struct device_time {
    histogram per_call;  // ns
    std::uint64_t total_ns = 0, calls = 0;
  };
  static void add_device_time(device_time& d, float ms);
  std::vector<std::unique_ptr<device_time>> phase_device_;  // by phase id
  device_time step_device_;
};

}  // namespace steptrace::detail
