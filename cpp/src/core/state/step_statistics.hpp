// Internal: a tracer's figures of the steps it counted (tracer_impl::stats), under the tracer lock.
// See cpp/src/core/README.md, "The tracer's state".
#pragma once

#include <atomic>
#include <cstdint>

#include "analysis/aggregate.hpp"
#include "analysis/flight_recorder.hpp"
#include "analysis/recent_window.hpp"

namespace steptrace::detail {

struct step_statistics {
  aggregate totals;
  aggregate batches;                           // steps that served a batch of requests (tracer::set_batch_size)
  recent_window recent;                        // the latest counted steps, raw: metrics() quantiles, never consumed
  flight_recorder timeline;                    // the recent and slowest steps of each thread
  std::atomic<std::uint64_t> nested_steps{0};  // steps begun inside an open one (misuse)
  // Steps (of any kind) in the last summary the program fetched; UINT64_MAX: none fetched.
  std::uint64_t shown_steps = UINT64_MAX;

  void restart() {  // tracer::reset: the figures start afresh
    totals.clear();
    batches.clear();
    recent.clear();
    timeline.clear();
    nested_steps.store(0, std::memory_order_relaxed);
    shown_steps = UINT64_MAX;
  }
};

}  // namespace steptrace::detail
