// Internal (not public API): what a tracer owns behind its public face.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <thread>
#include <memory>
#include <new>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "analysis/aggregate.hpp"
#include "analysis/step_builder.hpp"
#include "steptrace/detail/ring.hpp"
#include "steptrace/tracer.hpp"

namespace steptrace::detail {

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

// One per (thread, tracer). The producer fields belong to the owning thread; the rest is
// touched only under tracer_impl::mutex.
struct thread_state {
  thread_state(std::uint32_t ring_records, std::uint32_t warmup, std::uint32_t slot)
      : records(ring_records), builder(warmup, slot) {}

  ring records;
  bool step_open = false;  // producer
  bool step_on_stream = false;  // producer: the open step was given a stream
  void* step_stream = nullptr;  // producer: that stream
  std::unique_ptr<event_pool> events;  // producer creates it (first stream phase); both read it
  bool events_failed = false;          // producer: no CUDA context here, stop trying
  alignas(64) step_builder builder;    // consumer (its own cache lines: written per record)
  bool retired = false;    // consumer: its thread exited; the slot may be handed to a new thread
};

unsigned usable_cpus() noexcept;  // cores this process may run on

class tracer_impl {
 public:
  explicit tracer_impl(const config& cfg);
  ~tracer_impl();

  thread_state* attach_thread();                 // slow path: a thread's first record
  void detach_thread(thread_state& state);       // the thread exited
  void drain_for_producer(thread_state& state);  // the thread's ring is full
  std::uint64_t drain_locked(thread_state& state);  // its records into steps; how many
  void drain_all_locked();
  // Drains every ring from a background thread, so recording threads rarely drain their own.
  void start_collector();  // under `mutex`
  void collect_loop();
  void start_gpu() noexcept;              // at the first step
  void read_device(bool flush);           // under `mutex`
  void harvest_events();                  // under `mutex`: device time of finished event pairs

  struct pending_pair {
    thread_state* thread;
    event_pair pair;
  };
  std::vector<pending_pair> pending_events;  // under `mutex`

  // Read by the recording threads on every record; written once, or never.
  alignas(64) const std::uint64_t uid;
  std::atomic<bool> forked{false};       // this copy lives in a forked child: it records nothing
  std::atomic<bool> gpu_checked{false};  // the first step has started the GPU backend
  const int creator_pid;
  const bool env_disabled;  // STEPTRACE_DISABLE=1 wins over configure()

  // Written by whoever drains (the collector, every interval): kept off the line above, which
  // the recording threads read on every record.
  alignas(64) mutable std::mutex mutex;  // the consumer side of every ring, the builders, the aggregate
  config cfg;
  std::vector<std::unique_ptr<thread_state>> threads;
  aggregate totals;
  std::vector<std::pair<std::string, std::string>> facts;
  std::atomic<std::uint64_t> nested_steps{0};
  std::atomic<std::uint64_t> producer_drains{0};  // rings drained by their own thread: the collector lags
  std::atomic<bool> nested_reported{false};
  bool exit_reported = false;

  std::thread collector;
  int collector_pid = 0;
  bool stopping = false;  // under `mutex`
  std::condition_variable wake;
};

}  // namespace steptrace::detail
