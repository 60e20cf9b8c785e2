// The collector: one background thread per tracer that drains every thread's ring into the
// step builders, harvests CUDA event times, reads device records and samples CPU use. It polls
// at the pace records come, and at once when a recording thread had to drain its own ring. Also
// the threads' comings and goings. See cpp/src/core/README.md, "Threads: who runs what".
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <new>
#include <thread>
#include <utility>
#include <vector>

#include "analysis/step_fan_out.hpp"
#include "core/recording/poll_interval.hpp"
#include "core/recording/recorder.hpp"
#include "gpu/backend.hpp"

namespace steptrace::detail {

thread_state* recorder::attach() {
  std::lock_guard<std::mutex> lock(mutex_);
  const config& cfg = ctx_.options();
  const std::uint32_t index = next_thread_++;
  for (auto& t : threads_) {
    if (t->retired && t->records.capacity() == cfg.ring_records) {  // reuse the memory only:
      t->retired = false;                                           // a new thread, with its
      t->step_open = false;                                         // own warm-up
      t->builder.rebind(index, cfg.warmup_steps);
      return t.get();
    }
  }
  threads_.push_back(std::make_unique<thread_state>(cfg.ring_records, cfg.warmup_steps, index));
  threads_.back()->builder.keep_segments(ctx_.totals().device() != nullptr);
  threads_.back()->builder.keep_spans(ctx_.spans_wanted());
  start_collector();
  return threads_.back().get();
}

void recorder::detach(thread_state& state) {
  std::lock_guard<std::mutex> lock(mutex_);
  drain(state);
  // A step still open here is dropped with the thread: the main thread's ends before the exit
  // report runs (thread_local destructors come first), so the report must hear of it from here.
  if (state.builder.in_step()) ++open_at_thread_end_;
  state.builder.finish(ctx_.totals());
  state.retired = true;
}

void recorder::start_collector() {
  if (stopping_ || collector_pid_ == getpid() || ctx_.forked()) return;
  collector_pid_ = getpid();
  collector_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "steptrace");  // as top, gdb and /proc show it
    collect_loop();
  });
}

void recorder::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake.notify_all();
  if (!collector_.joinable()) return;
  if (collector_pid_ == getpid()) {
    collector_.join();
  } else {
    new (&collector_) std::thread();  // a handle copied from the parent: nothing to join here
  }
}

void recorder::collect_loop() {
  // Polls at the pace the records come (poll_interval.hpp), and at once when a thread had to
  // drain its own ring, found its event pool full, or woke it with a pool or ring half full.
  auto interval = poll_interval::first;
  std::uint64_t self_drains = producer_drains.load(std::memory_order_relaxed);
  std::uint64_t pools_full = 0;  // the threads' event pools found full, as last read
  auto last_device_read = std::chrono::steady_clock::now();
  auto last_poll = last_device_read;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    wake.wait_for(lock, interval);
    if (stopping_) break;
    const auto now = std::chrono::steady_clock::now();
    const double pool_fill = harvest_events();
    sample_device_tick();  // device_sample: a window's start turns CUPTI's kinds on or off
    if (now - last_device_read > std::chrono::seconds(1)) {
      read_device(device_flush::none);
      lock.unlock();  // /proc is read without the tracer lock
      sample_cpu();   // threads that exit between two samples keep what was seen of them
      lock.lock();
      last_device_read = std::chrono::steady_clock::now();
    }
    std::uint64_t now_pools_full = 0;
    bool asked = false;    // a pool or ring half full asked for this poll: records came faster than the polls
    double ring_fill = 0;  // of the fullest ring, as this poll found it
    for (auto& t : threads_) {
      now_pools_full += t->events.full.load(std::memory_order_relaxed);
      asked |= t->events.harvest_asked.exchange(false, std::memory_order_relaxed);
      asked |= t->drain_asked.exchange(false, std::memory_order_relaxed);
      const std::uint64_t n = drain(*t);
      ring_fill = std::max(ring_fill, static_cast<double>(n) / t->records.capacity());
    }
    ctx_.each_pass(lock);
    const std::uint64_t now_self_drains = producer_drains.load(std::memory_order_relaxed);
    interval =
        poll_interval::next(interval, std::chrono::duration_cast<std::chrono::microseconds>(now - last_poll), ring_fill,
                            pool_fill, now_self_drains != self_drains || now_pools_full != pools_full || asked);
    last_poll = now;
    self_drains = now_self_drains;
    pools_full = now_pools_full;
  }
}

void recorder::drain_for_producer(thread_state& state) {
  producer_drains.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    drain(state);
  }
  wake.notify_one();  // the collector may be in a long sleep: it polls at its fastest from now
}

std::uint64_t recorder::drain(thread_state& state) {
  // Each finished step goes where the context says (the run's figures, the windows while they
  // are on, the timeline, the captures). Each drain makes its own fan-out: what is on cannot
  // change while the lock is held.
  step_fan_out sink(state.builder.thread());
  ctx_.add_sinks(sink);
  const std::uint64_t drained = state.records.drain([&](const record* first, const record* last) {
    // A request's block (request_block, then its records) goes to the request builder; the
    // thread's own records around it to the thread's. A block may straddle two runs.
    while (first != last) {
      if (state.request_left != 0) {
        const std::uint64_t take = std::min<std::uint64_t>(state.request_left, last - first);
        step_builder& builder = request_builder();
        step_fan_out request_sink(builder.thread());
        ctx_.add_sinks(request_sink);
        builder.consume(first, first + take, request_sink);
        steps_ended_ += request_sink.steps();
        first += take;
        state.request_left -= static_cast<std::uint32_t>(take);
        continue;
      }
      const record* block = state.builder.consume_until_block(first, last, sink);
      if (block == last) break;
      state.request_left = block->id;
      first = block + 1;
    }
  });
  steps_ended_ += sink.steps();
  return drained;
}

void recorder::drain_all() {
  for (auto& t : threads_) drain(*t);
}

step_builder& recorder::request_builder() {
  if (!reqs.requests) {
    reqs.requests = std::make_unique<step_builder>(ctx_.options().warmup_steps, next_thread_++);
    reqs.requests->set_requests(true);
    reqs.requests->keep_segments(ctx_.totals().device() != nullptr);
    reqs.requests->keep_spans(ctx_.spans_wanted());
  }
  return *reqs.requests;
}

void recorder::restart() {
  for (auto& t : threads_) {
    drain(*t);  // read, not dropped: their CUDA event slots must go back
    t->builder.restart();
    for (auto& pair : t->builder.event_pairs()) pair.timed = false;
  }
  for (auto& p : pending_events_) p.pair.timed = false;  // read, but counted in no step
  reqs.restart();
  open_at_thread_end_ = 0;
}

void recorder::configure(const config& cfg) {
  for (auto& t : threads_) t->builder.set_warmup(cfg.warmup_steps);
  if (reqs.requests) reqs.requests->set_warmup(cfg.warmup_steps);
  keep_spans(ctx_.spans_wanted());
}

void recorder::keep_spans(bool keep) {
  for (auto& t : threads_) t->builder.keep_spans(keep);
  if (reqs.requests) reqs.requests->keep_spans(keep);
}

std::uint64_t recorder::unbalanced_phases() const {
  std::uint64_t n = 0;
  for (const auto& t : threads_) n += t->builder.unbalanced();
  return n;
}

std::uint64_t recorder::open_steps() const {
  std::uint64_t open = open_at_thread_end_;
  for (const auto& t : threads_) open += t->builder.in_step() ? 1 : 0;
  return open;
}

std::vector<const step_builder*> recorder::live_builders() const {
  std::vector<const step_builder*> out;
  for (const auto& t : threads_) {
    if (!t->retired) out.push_back(&t->builder);
  }
  return out;
}

// A program that never waits for its GPU (non_blocking copies, no .item()) ends its loop with the
// device still running the last steps' work. CUPTI hands a buffer back only when every record in
// it is done, so a summary read then would find none of those steps' kernels and copies and call
// the GPU idle through them (an H200, 2026-11-28: the demo's pinned-copy loop read "busy 0.0%").
// So a summary first waits, briefly, for what the steps' closed phases put on the device; without
// CUDA events (no phase on a stream) there is nothing to wait for. See cpp/src/gpu/README.md, "The
// device layer".
recorder::device_wait recorder::await_device_work() {
  using key = std::pair<const thread_state*, std::uint32_t>;  // a pair by its thread and end slot
  auto keys_of = [](const std::vector<pending_pair>& pairs) {
    std::vector<key> keys;
    keys.reserve(pairs.size());
    for (const pending_pair& p : pairs) keys.emplace_back(p.thread, p.pair.end);
    std::sort(keys.begin(), keys.end());
    return keys;
  };
  // Only the pairs closed before the summary was asked: a server's later work never ends.
  std::vector<key> waited;
  const auto asked = std::chrono::steady_clock::now();
  const auto until = asked + max_device_wait;
  for (bool first = true;; first = false) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      drain_all();
      harvest_events();
      const std::vector<key> pending = keys_of(pending_events_);
      if (first) {
        waited = pending;
      } else {
        waited.erase(
            std::remove_if(waited.begin(), waited.end(),
                           [&](const key& k) { return !std::binary_search(pending.begin(), pending.end(), k); }),
            waited.end());
      }
    }
    const auto now = std::chrono::steady_clock::now();
    if (waited.empty() || now >= until) {
      return {waited.size(), first ? 0.0 : std::chrono::duration<double, std::milli>(now - asked).count()};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace steptrace::detail
