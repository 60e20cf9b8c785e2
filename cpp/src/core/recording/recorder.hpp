// Internal (not public API): recording, one of the tracer's four subsystems. It owns every
// recording thread's state (ring, CUDA events, builder), the collector thread that drains the
// rings into steps, the requests' builder, and what is read from the device and the CPU. See
// cpp/src/core/README.md, "Threads: who runs what".
//
//   recorder rec{mutex, context};
//   thread_state* s = rec.attach();                 // a thread's first record (takes the lock)
//   push(rec, *s, record_kind::step_begin, 0);      // the recording thread: its own ring, no lock
//   rec.drain_all();                                // under the lock: every ring into steps
//   rec.stop();                                     // the collector joined
//
// It reads its tracer only through a recording_context; the steps it builds go to the sinks the
// context adds to each drain's fan-out. Under the tracer lock unless said.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "analysis/aggregate.hpp"
#include "analysis/step_builder.hpp"
#include "analysis/step_fan_out.hpp"
#include "core/recording/request_state.hpp"
#include "core/recording/thread_state.hpp"
#include "gpu/backend.hpp"
#include "record/clock.hpp"
#include "record/cpu_load.hpp"
#include "steptrace/config.hpp"

namespace steptrace::detail {

// What recording may ask of its tracer. Under the tracer lock.
class recording_context {
 public:
  virtual const config& options() const = 0;
  virtual bool forked() const = 0;  // this copy lives in a forked child: no collector
  // The run's figures: the device join, device times, a retiring thread's last step.
  virtual aggregate& totals() = 0;
  virtual void add_sinks(step_fan_out& out) = 0;  // where a drain's finished steps go
  virtual bool spans_wanted() const = 0;          // builders keep phase calls
  // Device records were joined to steps ending before `before`: the timeline and captures take them.
  virtual void on_device(device_join& d, std::uint64_t before) = 0;
  // The collector, after each pass's drains: the other subsystems' turn. May let go of the lock.
  virtual void each_pass(std::unique_lock<std::mutex>& lock) = 0;

 protected:
  ~recording_context() = default;
};

class recorder {
 public:
  recorder(std::mutex& lock, recording_context& ctx) : mutex_(lock), ctx_(ctx) {}
  ~recorder() { stop(); }
  recorder(const recorder&) = delete;
  recorder& operator=(const recorder&) = delete;

  // A thread's first record into this tracer (takes the lock; starts the collector). Its memory
  // may be a retired thread's, but it is a new thread: its own number and warm-up.
  thread_state* attach();
  void detach(thread_state& s);  // the thread exited (takes the lock): its ring read, its open step counted
  // Not under the lock: the collector told to stop, and joined (a forked child's handle is left);
  // none starts after it. Recording goes on: each thread drains its own full ring.
  void stop();

  std::uint64_t drain(thread_state& s);  // its records into steps; how many
  void drain_all();
  void drain_for_producer(thread_state& s);  // takes the lock: the thread's ring is full
  step_builder& request_builder();           // made on first use

  // tracer::reset: every ring read (its CUDA event slots must go back), each builder afresh, its
  // pairs not yet read back counting in no step.
  void restart();
  void configure(const config& cfg);  // the builders' warm-up and spans, as cfg says
  void keep_spans(bool keep);
  std::uint64_t unbalanced_phases() const;                 // the threads' (not the requests')
  std::uint64_t open_steps() const;                        // steps open now, and left open by threads that ended
  std::vector<const step_builder*> live_builders() const;  // of threads that have not exited
  std::uint64_t steps_ended() const noexcept { return steps_ended_; }

  // The device (device_reading.cpp).
  void first_step() noexcept;  // takes the lock: starts the GPU backend and the CPU accounting
  void start_device_reading();
  void read_device(device_flush how);
  // Device time of finished event pairs. Returns how full the fullest thread's event pool was with
  // pairs not yet read back, before this harvest (0 to 1).
  double harvest_events();
  // Not under the lock (takes it): before a summary, waits up to max_device_wait for the phases
  // and steps already closed to finish on the device (their CUDA events). Says how many had not,
  // and how long the device took to finish those that did (0 when none was running: the device had
  // kept up with the host).
  struct device_wait {
    std::size_t still_running = 0;
    double behind_ms = 0;
  };
  device_wait await_device_work();
  static constexpr std::chrono::milliseconds max_device_wait{1000};
  const device_counts& device_base() const noexcept { return device_base_; }  // when reading began

  // The process tree's CPU use and demand since the first step (or reset). Reading it walks /proc,
  // so it has its own lock and is never read under the tracer lock, which a recording thread may
  // be waiting for.
  void sample_cpu();
  cpu_totals cpu_so_far();
  void restart_cpu(bool unless_started);

  request_state reqs;  // the requests' builder and counts
  // Woken by a recording thread: it drained its own ring, or found its ring or pool half full.
  std::condition_variable wake;
  std::atomic<std::uint64_t> producer_drains{0};  // rings drained by their own thread: the collector lags

 private:
  void start_collector();
  void collect_loop();

  std::mutex& mutex_;
  recording_context& ctx_;
  std::vector<std::unique_ptr<thread_state>> threads_;
  std::uint32_t next_thread_ = 0;         // every thread that ever recorded gets its own number
  std::uint64_t steps_ended_ = 0;         // every step the builders finished; kept at reset
  std::uint64_t open_at_thread_end_ = 0;  // steps a thread left open when it ended
  std::thread collector_;
  int collector_pid_ = 0;
  bool stopping_ = false;
  // What is read from the device: the backend's counts when reading began (or reset), and the
  // CUDA event pairs not yet read back.
  device_counts device_base_;
  struct pending_pair {
    thread_state* thread;
    event_pair pair;
  };
  std::vector<pending_pair> pending_events_;
  std::mutex cpu_mutex_;
  cpu_load cpu_;  // under cpu_mutex_
};

// The recording thread's side: a compare a record, and a lock only when its ring is full.
__attribute__((noinline, cold)) inline void push_after_drain(recorder& rec, thread_state& state, std::uint64_t ticks,
                                                             std::uint32_t id, record_kind kind) noexcept {
  rec.drain_for_producer(state);  // the collector fell behind: this thread catches up itself
  state.records.try_push(ticks, id, kind);
}

// At a step's begin: a ring half full asks the collector to drain it (thread_state::drain_asked).
// A compare a step; a wake-up once per half ring at most, never a lock.
inline void ask_drain_if_half_full(recorder& rec, thread_state& state) noexcept {
  if (!state.records.half_full()) {
    state.drain_wanted = false;
    return;
  }
  if (state.drain_wanted) return;  // asked already
  state.drain_wanted = true;
  state.drain_asked.store(true, std::memory_order_relaxed);
  rec.wake.notify_one();
}

// One record stamped now, from the library's slow path.
inline void push(recorder& rec, thread_state& state, record_kind kind, std::uint32_t id) noexcept {
  const std::uint64_t ticks = host_clock::now();
  if (__builtin_expect(!state.records.try_push(ticks, id, kind), 0)) push_after_drain(rec, state, ticks, id, kind);
}

}  // namespace steptrace::detail
