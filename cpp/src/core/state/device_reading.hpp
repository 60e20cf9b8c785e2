// Internal: what a tracer reads from the device (tracer_impl::device; collector.cpp): the
// backend's counts when reading began, and the CUDA event pairs not yet read back. Under the
// tracer lock.
#pragma once

#include <vector>

#include "analysis/step_builder.hpp"
#include "gpu/backend.hpp"

namespace steptrace::detail {

struct thread_state;

struct device_reading {
  device_counts device_base;  // the backend's counts when reading started (or reset)
  struct pending_pair {
    thread_state* thread;
    event_pair pair;
  };
  std::vector<pending_pair> pending_events;

  void restart() {  // tracer::reset: pairs still held are read, but count in no step
    for (auto& p : pending_events) p.pair.timed = false;
  }
};

}  // namespace steptrace::detail
