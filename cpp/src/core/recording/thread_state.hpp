// Internal (not public API): one recording thread's state in one tracer: its ring, its CUDA
// events, its streams and the builder its records become steps in. See cpp/src/core/README.md,
// "Threads: who runs what".
#pragma once

#include <atomic>
#include <cstdint>

#include "analysis/step_builder.hpp"
#include "gpu/event_timer.hpp"
#include "gpu/stream_ids.hpp"
#include "steptrace/detail/ring.hpp"

namespace steptrace::detail {

// One per (thread, tracer). The producer fields belong to the owning thread; the rest is
// touched only under the tracer lock.
struct thread_state {
  thread_state(std::uint32_t ring_records, std::uint32_t warmup, std::uint32_t thread)
      : records(ring_records), builder(warmup, thread, streams.keys) {}

  ring records;
  bool step_open = false;                // producer
  bool step_on_stream = false;           // producer: the open step was given a stream
  void* step_stream = nullptr;           // producer: that stream
  std::uint32_t exclude_depth = 0;       // producer: set-aside spans open on the thread
  std::uint32_t step_exclude_depth = 0;  // producer: exclude_depth when the open step began
  // A step began with its ring half full: the collector is asked to drain it now rather than at
  // its next timed poll (after a quiet spell that may be 50 ms away, and the ring full before it,
  // which would cost this thread the drain). Set by the producer, once until the ring is found
  // under half again (`drain_wanted`, producer only); cleared by the collector as it polls.
  std::atomic<bool> drain_asked{false};
  bool drain_wanted = false;
  thread_events events;              // producer makes its pools; the collector reads the slots its records name
  std::uint32_t pairs_pending = 0;   // collector: this thread's event pairs held at the last harvest
  stream_table streams;              // producer appends; the builder reads the entries its records name
  alignas(64) step_builder builder;  // consumer (its own cache lines: written per record)
  std::uint32_t request_left = 0;    // consumer: records of a request block still to come
  bool retired = false;              // consumer: its thread exited; the memory may serve a new thread
};

}  // namespace steptrace::detail
