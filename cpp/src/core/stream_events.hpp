// Internal (not public API): CUDA events at the boundaries of steps and phases given a stream.
// The recording thread takes an event slot and records the event; the collector reads the
// pair's device time later by query (collector.cpp, harvest_events) and frees the slots.
#pragma once

#include <atomic>
#include <cstdint>

#include "steptrace/detail/ring.hpp"

namespace steptrace::detail {

class tracer_impl;
struct thread_state;

// CUDA events for one thread's phases that were given a stream. The thread takes free slots
// (no lock: `busy` is the hand-over); the tracer frees them once it has read their time.
struct event_pool {
  static constexpr std::uint32_t size = 512;
  static constexpr std::uint32_t max_depth = 64;
  void* events[size] = {};
  std::atomic<bool> busy[size] = {};
  std::uint32_t next = 0;              // producer
  std::uint32_t open[max_depth] = {};  // producer: begin slots of the open stream phases
  std::uint32_t depth = 0;             // producer

  std::uint32_t take() noexcept {
    const std::uint32_t slot = next;
    if (busy[slot].load(std::memory_order_acquire)) return no_event;  // all in flight: skip timing
    busy[slot].store(true, std::memory_order_relaxed);
    next = (next + 1) % size;
    return slot;
  }
};

// A CUDA event on `stream` at a phase boundary, and a record naming its slot.
void mark_phase_event(tracer_impl& impl, thread_state& s, void* stream, bool begin) noexcept;
// A CUDA event on the step's stream at a step boundary, and a record naming its slot.
void mark_step_event(tracer_impl& impl, thread_state& s, bool begin) noexcept;

}  // namespace steptrace::detail
