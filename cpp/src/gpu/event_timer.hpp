// Internal (not public API): device time of phases and steps given a stream, from pairs of CUDA
// events. The recording thread takes a slot of its pool and records the event there; the
// collector reads a finished pair's time by query (never a wait) and frees its slots.
//
// Usage:
//   std::unique_ptr<event_pool> pool;                         // one per recording thread
//   std::uint32_t a = record_stream_event(pool, stream);     // no_event: none could be recorded
//   ... ; std::uint32_t b = record_stream_event(pool, stream);
//   float ms; switch (pair_elapsed(*pool, a, b, ms)) { ... }  // on the collector
//   pool->release(a); pool->release(b);
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "steptrace/detail/ring.hpp"

namespace steptrace::detail {

// The events of one recording thread. Slots are handed over without a lock: `busy` is set by
// the thread that takes a slot and cleared by the collector once it has read the time.
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
  void release(std::uint32_t slot) noexcept {
    if (slot < size) busy[slot].store(false, std::memory_order_release);
  }
};

// Records an event on `stream` (nullptr: the legacy default stream) in a slot of `pool`, making
// the pool on first use. no_event when none could be: no CUDA context yet (tried again next
// time), every slot in flight, or the stream is being captured into a CUDA graph (an event
// there would become part of the graph, and could not be timed).
std::uint32_t record_stream_event(std::unique_ptr<event_pool>& pool, void* stream) noexcept;

enum class event_result { done, pending, failed };
// The device time from `begin`'s event to `end`'s: a query, never a wait, asked in relaxed
// capture mode so that it never invalidates a graph capture running on another thread.
event_result pair_elapsed(const event_pool& pool, std::uint32_t begin, std::uint32_t end, float& ms) noexcept;

}  // namespace steptrace::detail
