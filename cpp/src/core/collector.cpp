// The collector: one background thread per tracer that drains every thread's ring into the
// step builders, harvests CUDA event times, reads device records and samples CPU use. It polls adaptively, and
// at once when a recording thread had to drain its own ring. See cpp/src/core/README.md, "Threads".
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

#include "analysis/step_fan_out.hpp"
#include "core/poll_interval.hpp"
#include "core/tracer_impl.hpp"
#include "gpu/backend.hpp"

namespace steptrace::detail {

void tracer_impl::start_collector() {
  if (collector_pid == getpid() || forked.load()) return;
  collector_pid = getpid();
  collector = std::thread([this] {
    pthread_setname_np(pthread_self(), "steptrace");  // as top, gdb and /proc show it
    collect_loop();
  });
}

void tracer_impl::collect_loop() {
  // Polls at the pace the records come (core/poll_interval.hpp), and at once when a thread had
  // to drain its own ring, found its event pool full, or woke it with a pool or ring half full.
  auto interval = poll_interval::first;
  std::uint64_t self_drains = producer_drains.load(std::memory_order_relaxed);
  std::uint64_t pools_full = 0;  // the threads' event pools found full, as last read
  auto last_device_read = std::chrono::steady_clock::now();
  auto last_poll = last_device_read;
  std::unique_lock<std::mutex> lock(mutex);
  while (!stopping) {
    wake.wait_for(lock, interval);
    if (stopping) break;
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
    for (auto& t : threads) {
      now_pools_full += t->events.full.load(std::memory_order_relaxed);
      asked |= t->events.harvest_asked.exchange(false, std::memory_order_relaxed);
      asked |= t->drain_asked.exchange(false, std::memory_order_relaxed);
      const std::uint64_t n = drain_locked(*t);
      ring_fill = std::max(ring_fill, static_cast<double>(n) / t->records.capacity());
    }
    sample_rss(lock, false);
    live_tick(lock);
    capture.tick(lock, capture_ctx);
    if (hang.due() && !forked.load()) hang.tick(lock, hang_context_now());
    const std::uint64_t now_self_drains = producer_drains.load(std::memory_order_relaxed);
    interval =
        poll_interval::next(interval, std::chrono::duration_cast<std::chrono::microseconds>(now - last_poll), ring_fill,
                            pool_fill, now_self_drains != self_drains || now_pools_full != pools_full || asked);
    last_poll = now;
    self_drains = now_self_drains;
    pools_full = now_pools_full;
  }
}

void tracer_impl::drain_for_producer(thread_state& state) {
  producer_drains.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mutex);
    drain_locked(state);
  }
  wake.notify_one();  // the collector may be in a long sleep: it polls at its fastest from now
}

namespace {

// Each finished step of `thread` goes to the whole-run totals and the recent steps, the windows
// (while they are on), the timeline, the retroactive ring and an armed capture; a batch to the
// batches alone. Each drain makes its own: what is on cannot change while the lock is held.
struct drain_fan_out {
  drain_fan_out(tracer_impl& impl, std::uint32_t thread) : out(thread) {
    out.add_batches(impl.stats.batches).add(impl.stats.totals).add(impl.stats.recent);
    if (impl.live.windows_on()) out.add(impl.live.window_totals());
    if (impl.live.on(impl.cfg)) out.add(impl.live.totals());
    out.add(impl.stats.timeline).add(impl.capture.ring());
    if (impl.capture.armed()) out.add(impl.capture);
  }
  step_fan_out out;
};

}  // namespace

std::uint64_t tracer_impl::drain_locked(thread_state& state) {
  drain_fan_out sink(*this, state.builder.thread());
  const std::uint64_t drained = state.records.drain([&](const record* first, const record* last) {
    // A request's block (request_block, then its records) goes to the request builder; the
    // thread's own records around it to the thread's. A block may straddle two runs.
    while (first != last) {
      if (state.request_left != 0) {
        const std::uint64_t take = std::min<std::uint64_t>(state.request_left, last - first);
        step_builder& builder = request_builder();
        drain_fan_out request_sink(*this, builder.thread());
        builder.consume(first, first + take, request_sink.out);
        stats.steps_ended += request_sink.out.steps();
        first += take;
        state.request_left -= static_cast<std::uint32_t>(take);
        continue;
      }
      const record* block = state.builder.consume_until_block(first, last, sink.out);
      if (block == last) break;
      state.request_left = block->id;
      first = block + 1;
    }
  });
  stats.steps_ended += sink.out.steps();
  return drained;
}

void tracer_impl::restart_threads() {
  for (auto& t : threads) {
    drain_locked(*t);  // read, not dropped: their CUDA event slots must go back
    t->builder.restart();
    for (auto& pair : t->builder.event_pairs()) pair.timed = false;
  }
}

step_builder& tracer_impl::request_builder() {
  if (!reqs.requests) {
    reqs.requests = std::make_unique<step_builder>(cfg.warmup_steps, next_thread++);
    reqs.requests->set_requests(true);
    reqs.requests->keep_segments(stats.totals.device() != nullptr);
    reqs.requests->keep_spans(spans_wanted());
  }
  return *reqs.requests;
}

void tracer_impl::drain_all_locked() {
  for (auto& t : threads) drain_locked(*t);
}

double tracer_impl::harvest_events() {
  for (auto& t : threads) {
    t->pairs_pending = 0;
    for (const event_pair& p : t->builder.event_pairs()) reading.pending_events.push_back({t.get(), p});
    t->builder.event_pairs().clear();
  }
  auto done = [&](const device_reading::pending_pair& p) {
    thread_events& events = p.thread->events;
    if (p.pair.end != no_event) {
      float ms = 0;
      switch (p.pair.timed ? pair_elapsed(events, p.pair.begin, p.pair.end, ms) : event_result::failed) {
        case event_result::pending:
          return false;
        case event_result::done:
          p.pair.phase == event_pair::step ? stats.totals.add_step_device_time(ms)
                                           : stats.totals.add_phase_device_time(p.pair.phase, ms);
          break;
        case event_result::failed:
          break;
      }
      events.release(p.pair.end);
    }
    events.release(p.pair.begin);
    return true;
  };
  // Every pair held before this harvest, read back now or still running: a loop of short phases
  // fills the pool with pairs that wait for this poll, though few are still on the GPU after it
  // (likely why the H100 run timed 1,659 of 2,000 phases of 20 us: polls could grow to 50 ms apart).
  std::uint32_t most = 0;
  for (const device_reading::pending_pair& p : reading.pending_events) most = std::max(most, ++p.thread->pairs_pending);
  reading.pending_events.erase(std::remove_if(reading.pending_events.begin(), reading.pending_events.end(), done),
                               reading.pending_events.end());
  return static_cast<double>(most) * 2 / event_pool::size;  // two slots a pair
}

// A program that never waits for its GPU (non_blocking copies, no .item()) ends its loop with the
// device still running the last steps' work. CUPTI hands a buffer back only when every record in
// it is done, so a summary read then would find none of those steps' kernels and copies and call
// the GPU idle through them (an H200, 2026-11-28: the demo's pinned-copy loop read "busy 0.0%").
// So a summary first waits, briefly, for what the steps' closed phases put on the device; without
// CUDA events (no phase on a stream) there is nothing to wait for. See cpp/src/gpu/README.md, "The
// device layer".
tracer_impl::device_wait tracer_impl::await_device_work() {
  using key = std::pair<const thread_state*, std::uint32_t>;  // a pair by its thread and end slot
  auto keys_of = [](const std::vector<device_reading::pending_pair>& pairs) {
    std::vector<key> keys;
    keys.reserve(pairs.size());
    for (const device_reading::pending_pair& p : pairs) keys.emplace_back(p.thread, p.pair.end);
    std::sort(keys.begin(), keys.end());
    return keys;
  };
  // Only the pairs closed before the summary was asked: a server's later work never ends.
  std::vector<key> waited;
  const auto asked = std::chrono::steady_clock::now();
  const auto until = asked + max_device_wait;
  for (bool first = true;; first = false) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      drain_all_locked();
      harvest_events();
      const std::vector<key> pending = keys_of(reading.pending_events);
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

void tracer_impl::sample_cpu() {
  std::lock_guard<std::mutex> lock(cpu_mutex);
  cpu.sample();
}

cpu_totals tracer_impl::cpu_so_far() {
  std::lock_guard<std::mutex> lock(cpu_mutex);
  cpu.sample();
  return cpu.totals();
}

void tracer_impl::restart_cpu(bool unless_started) {
  std::lock_guard<std::mutex> lock(cpu_mutex);
  if (!unless_started || !cpu.started()) cpu.restart();
}

void tracer_impl::first_step() noexcept {
  bool use_cupti;
  {
    std::lock_guard<std::mutex> lock(mutex);
    use_cupti = cfg.cupti;
  }
  restart_cpu(true);
  start_gpu_backend(use_cupti);
  if (gpu_backend_status().cupti) {
    std::lock_guard<std::mutex> lock(mutex);
    stats.totals.enable_device();
    start_device_reading();
    for (auto& t : threads) t->builder.keep_segments(true);
    if (reqs.requests) reqs.requests->keep_segments(true);
  }
  started.store(true, std::memory_order_release);
}

void tracer_impl::start_device_reading() {
  device_join* device = stats.totals.device();
  if (device == nullptr) return;
  device->cursor = device_records_end();  // records stored before now belong to no step of ours
  reading.device_base = device_record_counts();
}

void tracer_impl::read_device(device_flush how) {
  device_join* device = stats.totals.device();
  if (device == nullptr) return;
  std::vector<device_record> records;
  std::uint64_t lost = 0;
  read_device_records(device->cursor, records, lost, how);
  device->totals.dropped += lost;
  device->add_records(std::move(records));
  device->set_gaps(cupti_gaps());
  // A step is viewed for good a second after the newest record has passed its end (its records
  // have arrived by then), or at exit. A summary before that shows it provisionally.
  const std::uint64_t settled = device->newest_record_end();
  const std::uint64_t before =
      how == device_flush::forced ? UINT64_MAX : (settled > 1'000'000'000 ? settled - 1'000'000'000 : 0);
  device->join(before);
  stats.timeline.attach_device(*device, before, &host_clock::to_monotonic_ns);
  capture.on_device(*device, before);
}

}  // namespace steptrace::detail
