// Internal: a tracer's requests (steptrace/request.hpp; recorder::reqs). Their blocks, drained
// from whichever ring carried them, make steps in one builder, numbered as one more thread, made on
// the first request. See cpp/src/core/README.md, "Requests and batches".
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "analysis/step_builder.hpp"

namespace steptrace::detail {

struct request_state {
  std::unique_ptr<step_builder> requests;  // under the tracer lock
  // Counted by request handles at end or destruction, never per boundary.
  std::atomic<std::uint64_t> requests_abandoned{0}, request_phases_dropped{0}, request_stray_ends{0};

  void restart() {  // tracer::reset
    if (requests) requests->restart();
    requests_abandoned.store(0, std::memory_order_relaxed);
    request_phases_dropped.store(0, std::memory_order_relaxed);
    request_stray_ends.store(0, std::memory_order_relaxed);
  }
};

}  // namespace steptrace::detail
