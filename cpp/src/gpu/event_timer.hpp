// Internal (not public API): device time of phases and steps given a stream, from pairs of CUDA
// events. The recording thread takes a slot of one of its pools and records the event there; the
// collector reads a finished pair's time by query (never a wait) and frees its slots.
//
// A thread has a pool per CUDA context it records in (an event can only be recorded on a stream
// of its own context: a stream on another GPU needs events made there). A pool whose context was
// destroyed (cudaDeviceReset) is retired, never freed (the collector may still hold its slots),
// and the next event in that context gets a new one.
//
// Usage:
//   thread_events events;                                     // one per recording thread
//   void* context = stream_context(stream);                   // once per boundary
//   std::uint32_t a = record_stream_event(events, stream, context);  // no_event: none recorded
//   ... ; std::uint32_t b = record_stream_event(events, stream, stream_context(stream));
//   float ms; switch (pair_elapsed(events, a, b, ms)) { ... }  // on the collector
//   events.release(a); events.release(b);
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "steptrace/detail/ring.hpp"

namespace steptrace::detail {

// The events of one recording thread in one context. Slots are handed over without a lock:
// `busy` is set by the thread that takes a slot and cleared by the collector once it has read
// the time.
struct event_pool {
  static constexpr std::uint32_t size = 1024;  // 512 phases in flight or not yet read back
  void* events[size] = {};
  std::atomic<bool> busy[size] = {};
  void* context = nullptr;  // the CUDA context its events were made in
  bool retired = false;     // producer: its context is gone; no new slots are taken
  std::uint32_t next = 0;   // producer

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

// A recording thread's pools. An event's id names its pool and slot (pool * event_pool::size +
// slot); a pool is published before any record naming one of its slots, and never moves.
struct thread_events {
  static constexpr std::uint32_t max_pools = 8;  // contexts, retired pools included
  static constexpr std::uint32_t max_depth = 64;
  std::unique_ptr<event_pool> pools[max_pools];
  std::uint32_t count = 0;             // producer
  std::uint32_t open[max_depth] = {};  // producer: begin ids of the open stream phases
  std::uint32_t depth = 0;             // producer
  std::uint32_t too_deep = 0;          // producer: stream phases open past max_depth (not timed)
  // Producer writes, the collector reads: times a slot was wanted with every one in flight. The
  // collector then polls at its fastest (a loop of short stream phases outran its reads).
  std::atomic<std::uint64_t> full{0};
  // A pool half full of pairs not yet read back asks the collector for a harvest at once, so
  // that slots come back before the pool wraps, however long the collector meant to sleep (it
  // polls a quiet thread up to 50 ms apart: a loop of 20 us phases takes 512 pairs in 10 ms).
  // Set by the producer (and `wake_collector` with it, which the producer clears once it has
  // woken the collector), cleared by the collector after its harvest: one wake per half pool.
  std::atomic<bool> harvest_asked{false};
  bool wake_collector = false;  // producer

  const event_pool* pool_of(std::uint32_t id) const noexcept {
    return id != no_event && id / event_pool::size < max_pools ? pools[id / event_pool::size].get() : nullptr;
  }
  void release(std::uint32_t id) noexcept {
    if (const event_pool* p = pool_of(id)) const_cast<event_pool*>(p)->release(id % event_pool::size);
  }
};

// The CUDA context `stream` belongs to: its own, or the current one for a default-stream handle
// (nullptr, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD); nullptr with no driver or no context yet.
void* stream_context(void* stream) noexcept;

// Records an event on `stream` (nullptr: the legacy default stream) in a slot of the pool of
// `context` (stream_context's), making the pool on first use. no_event when none could be: no
// CUDA context yet (tried again next time), every slot in flight, more contexts than pools, or
// the stream is being captured into a CUDA graph (an event there would become part of the graph,
// and could not be timed).
std::uint32_t record_stream_event(thread_events& events, void* stream, void* context) noexcept;

enum class event_result { done, pending, failed };
// The device time from `begin`'s event to `end`'s: a query, never a wait, asked in relaxed
// capture mode so that it never invalidates a graph capture running on another thread.
event_result pair_elapsed(const thread_events& events, std::uint32_t begin, std::uint32_t end, float& ms) noexcept;

}  // namespace steptrace::detail
