#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <pthread.h>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <new>
#include <thread>
#include <unordered_map>

#include "core/log.hpp"
#include "core/tracer_impl.hpp"
#include "gpu/backend.hpp"
#include "record/clock.hpp"
#include "report/report.hpp"

namespace steptrace {
namespace detail {

// The only thread-local on the hot path (declared in detail/ring.hpp).
__thread thread_binding t_binding __attribute__((tls_model("initial-exec"))) = {0, nullptr, nullptr};

namespace {

// Live tracers by uid, so an exiting thread never touches a destroyed tracer. Never destroyed.
std::mutex& live_mutex() {
  static auto* m = new std::mutex;
  return *m;
}
std::unordered_map<std::uint64_t, tracer_impl*>& live_tracers() {
  static auto* m = new std::unordered_map<std::uint64_t, tracer_impl*>;
  return *m;
}
std::atomic<std::uint64_t> next_uid{1};

// Every (tracer, state) pair of this thread; detaches them when the thread exits.
struct thread_links {
  std::vector<std::pair<std::uint64_t, thread_state*>> links;
  ~thread_links() {
    t_binding = {0, nullptr, nullptr};
    std::lock_guard<std::mutex> lock(live_mutex());
    for (auto& [uid, state] : links) {
      auto it = live_tracers().find(uid);
      if (it != live_tracers().end()) it->second->detach_thread(*state);
    }
  }
};

thread_state* lookup_slow(tracer_impl& impl) noexcept {
  if (impl.forked.load(std::memory_order_relaxed)) return nullptr;
  thread_local thread_links links;
  for (auto& [uid, state] : links.links) {
    if (uid == impl.uid) {
      t_binding = {uid, &state->records, state};
      return state;
    }
  }
  try {
    thread_state* state = impl.attach_thread();
    links.links.emplace_back(impl.uid, state);
    t_binding = {impl.uid, &state->records, state};
    return state;
  } catch (const std::bad_alloc&) {
    return nullptr;  // out of memory: this thread goes untraced rather than failing the caller
  }
}

inline thread_state* local_state(tracer_impl& impl) noexcept {
  if (__builtin_expect(t_binding.tracer_uid == impl.uid, 1)) return static_cast<thread_state*>(t_binding.state);
  return lookup_slow(impl);
}

__attribute__((noinline, cold)) void push_after_drain(tracer_impl& impl, thread_state& state, std::uint64_t ticks,
                                                      std::uint32_t id, record_kind kind) noexcept {
  impl.drain_for_producer(state);  // the collector fell behind: this thread catches up itself
  state.records.try_push(ticks, id, kind);
}

inline void push(tracer_impl& impl, thread_state& state, record_kind kind, std::uint32_t id) noexcept {
  const std::uint64_t ticks = host_clock::now();
  if (__builtin_expect(!state.records.try_push(ticks, id, kind), 0)) push_after_drain(impl, state, ticks, id, kind);
}

// Records a CUDA event on `stream` and returns its slot; no_event where none could be (no CUDA
// context on this thread, every event still in flight, or a failed record).
std::uint32_t record_event(thread_state& s, void* stream) noexcept {
  event_pool* pool = s.events.get();
  if (pool == nullptr) {
    if (s.events_failed || !device_events_available()) return no_event;
    try {  // once per thread
      auto made = std::make_unique<event_pool>();
      if (!create_device_events(made->events, event_pool::size)) {
        s.events_failed = true;
        return no_event;
      }
      s.events = std::move(made);
      pool = s.events.get();
    } catch (const std::bad_alloc&) {
      s.events_failed = true;
      return no_event;
    }
  }
  const std::uint32_t slot = pool->take();
  if (slot != no_event && !record_device_event(pool->events[slot], stream)) {
    pool->busy[slot].store(false, std::memory_order_relaxed);
    return no_event;
  }
  return slot;
}

// A CUDA event at a phase boundary, and a record naming its slot.
void mark_event(tracer_impl& impl, thread_state& s, void* stream, bool begin) noexcept {
  const std::uint32_t slot = record_event(s, stream);
  event_pool* pool = s.events.get();
  if (pool == nullptr) return;  // no events on this thread
  if (begin) {
    if (pool->depth < event_pool::max_depth) pool->open[pool->depth++] = slot;
    if (slot != no_event) push(impl, s, record_kind::event_begin, slot);
  } else {
    const bool paired = pool->depth > 0 && pool->open[--pool->depth] != no_event;
    if (paired || slot != no_event) push(impl, s, record_kind::event_end, slot);
  }
}

// A CUDA event at a step boundary, and a record naming its slot (the builder pairs them).
void mark_step_event(tracer_impl& impl, thread_state& s, bool begin) noexcept {
  const std::uint32_t slot = record_event(s, s.step_stream);
  if (slot != no_event) push(impl, s, begin ? record_kind::step_event_begin : record_kind::step_event_end, slot);
}

}  // namespace

unsigned usable_cpus() noexcept {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return static_cast<unsigned>(CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

// In a forked child only the forking thread survives, and a collector may have held a lock at
// the fork: the child's copies of every tracer stop recording and never report (a DataLoader
// worker must not print its parent's summary). No lock is taken here: the child has one thread.
void disable_in_child();

tracer_impl::tracer_impl(const config& c)
    : uid(next_uid.fetch_add(1)), creator_pid(getpid()), env_disabled(!config::from_env().enabled), cfg(c) {
  host_clock::init();
  static std::once_flag atfork_once;
  std::call_once(atfork_once, [] { pthread_atfork(nullptr, nullptr, disable_in_child); });
}

tracer_impl::~tracer_impl() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  wake.notify_all();
  if (collector.joinable()) {
    if (collector_pid == getpid()) {
      collector.join();
    } else {
      new (&collector) std::thread();  // a handle copied from the parent: nothing to join here
    }
  }
}

void tracer_impl::start_collector() {
  if (collector_pid == getpid() || forked.load()) return;
  collector_pid = getpid();
  collector = std::thread([this] { collect_loop(); });
}

void tracer_impl::start_gpu() noexcept {
  bool use_cupti;
  {
    std::lock_guard<std::mutex> lock(mutex);
    use_cupti = cfg.cupti;
  }
  start_gpu_backend(use_cupti);
  if (gpu_backend_status().cupti) {
    std::lock_guard<std::mutex> lock(mutex);
    totals.enable_device();
    for (auto& t : threads) t->builder.keep_segments(true);
  }
  gpu_checked.store(true, std::memory_order_release);
}

void tracer_impl::read_device(bool flush) {
  device_join* device = totals.device();
  if (device == nullptr) return;
  std::vector<device_record> records;
  std::uint64_t lost = 0;
  read_device_records(device->cursor, records, lost, flush);
  device->totals.dropped += lost;
  device->add_records(records);
  // Without a forced flush, wait a second past a step's end for its records to arrive.
  const std::uint64_t settled = device->newest_record_end();
  device->join(flush ? UINT64_MAX : (settled > 1'000'000'000 ? settled - 1'000'000'000 : 0));
}

void tracer_impl::collect_loop() {
  // Polls faster while rings fill quickly, slower while they do not, between 0.1 and 50 ms;
  // at once at the fastest when a thread had to drain its own.
  constexpr auto fastest = std::chrono::microseconds(100);
  auto interval = std::chrono::microseconds(1000);
  std::uint64_t self_drains = producer_drains.load(std::memory_order_relaxed);
  auto last_device_read = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mutex);
  while (!stopping) {
    wake.wait_for(lock, interval);
    if (stopping) break;
    harvest_events();
    if (std::chrono::steady_clock::now() - last_device_read > std::chrono::seconds(1)) {
      read_device(false);
      last_device_read = std::chrono::steady_clock::now();
    }
    std::uint64_t fullest = 0;
    for (auto& t : threads) {
      const std::uint64_t n = drain_locked(*t);
      fullest = std::max(fullest, n * 8 / t->records.capacity());  // in eighths of the ring
    }
    const std::uint64_t now_self_drains = producer_drains.load(std::memory_order_relaxed);
    if (now_self_drains != self_drains) {
      interval = fastest;  // a thread filled its ring: recording resumed faster than we polled
    } else if (fullest >= 2) {
      interval = std::max(interval / 2, fastest);
    } else if (fullest == 0) {
      interval = std::min(interval * 2, std::chrono::microseconds(50000));
    }
    self_drains = now_self_drains;
  }
}

thread_state* tracer_impl::attach_thread() {
  std::lock_guard<std::mutex> lock(mutex);
  for (auto& t : threads) {
    if (t->retired && t->records.capacity() == cfg.ring_records) {
      t->retired = false;
      t->step_open = false;
      t->builder.set_warmup(cfg.warmup_steps);
      return t.get();
    }
  }
  threads.push_back(std::make_unique<thread_state>(cfg.ring_records, cfg.warmup_steps,
                                                   static_cast<std::uint32_t>(threads.size())));
  threads.back()->builder.keep_segments(totals.device() != nullptr);
  start_collector();
  return threads.back().get();
}

void tracer_impl::detach_thread(thread_state& state) {
  std::lock_guard<std::mutex> lock(mutex);
  drain_locked(state);
  state.builder.finish(totals);
  state.retired = true;
}

void tracer_impl::harvest_events() {
  for (auto& t : threads) {
    for (const event_pair& p : t->builder.event_pairs()) pending_events.push_back({t.get(), p});
    t->builder.event_pairs().clear();
  }
  auto done = [&](const pending_pair& p) {
    event_pool& pool = *p.thread->events;
    if (p.pair.end != no_event) {
      float ms = 0;
      switch (p.pair.timed ? device_event_elapsed(pool.events[p.pair.begin], pool.events[p.pair.end], ms)
                           : event_result::failed) {
        case event_result::pending: return false;
        case event_result::done:
          p.pair.phase == event_pair::step ? totals.add_step_device_time(ms)
                                           : totals.add_phase_device_time(p.pair.phase, ms);
          break;
        case event_result::failed: break;
      }
      pool.busy[p.pair.end].store(false, std::memory_order_release);
    }
    pool.busy[p.pair.begin].store(false, std::memory_order_release);
    return true;
  };
  pending_events.erase(std::remove_if(pending_events.begin(), pending_events.end(), done), pending_events.end());
}

void tracer_impl::drain_for_producer(thread_state& state) {
  producer_drains.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mutex);
    drain_locked(state);
  }
  wake.notify_one();  // the collector may be in a long sleep: it polls at its fastest from now
}

std::uint64_t tracer_impl::drain_locked(thread_state& state) {
  return state.records.drain(
      [&](const record* first, const record* last) { state.builder.consume(first, last, totals); });
}

void tracer_impl::drain_all_locked() {
  for (auto& t : threads) drain_locked(*t);
}


void disable_in_child() {
  for (auto& [uid, impl] : live_tracers()) impl->forked.store(true);
  t_binding = {0, nullptr, nullptr};  // the surviving thread's next record takes the slow path, which refuses
}

}  // namespace detail

using detail::host_clock;
using detail::local_state;
using detail::no_event;
using detail::record_kind;

tracer::tracer() : tracer(config::from_env()) {}

tracer::tracer(const config& cfg) : uid_(0), impl_(std::make_unique<detail::tracer_impl>(cfg)) {
  uid_ = impl_->uid;
  configure(cfg);
  std::lock_guard<std::mutex> lock(detail::live_mutex());
  detail::live_tracers()[impl_->uid] = impl_.get();
}

tracer::~tracer() {
  std::lock_guard<std::mutex> lock(detail::live_mutex());
  detail::live_tracers().erase(impl_->uid);
}

void tracer::configure(const config& cfg) {
  cfg.validate();
  detail::set_log_level(detail::parse_log_level(cfg.log_level));
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->cfg = cfg;
  for (auto& t : impl_->threads) t->builder.set_warmup(cfg.warmup_steps);
  const bool inline_path = host_clock::uses_tsc() && !detail::nvtx_requested();
  mode_.store(!cfg.enabled || impl_->env_disabled ? mode::off : inline_path ? mode::bound : mode::unbound,
              std::memory_order_relaxed);
}

config tracer::options() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->cfg;
}

step_open tracer::open_step(void* stream, bool on_stream) noexcept {
  if (!enabled() || impl_->forked.load(std::memory_order_relaxed)) return step_open::disabled;
  detail::thread_state* s = local_state(*impl_);
  if (s == nullptr) return step_open::disabled;
  if (s->step_open) {
    impl_->nested_steps.fetch_add(1, std::memory_order_relaxed);
    return step_open::nested;
  }
  if (__builtin_expect(!impl_->gpu_checked.load(std::memory_order_relaxed), 0)) impl_->start_gpu();
  s->step_open = true;
  s->step_on_stream = on_stream;
  s->step_stream = stream;
  detail::push(*impl_, *s, record_kind::step_begin, 0);
  if (on_stream) detail::mark_step_event(*impl_, *s, true);
  if (detail::nvtx_enabled.load(std::memory_order_relaxed)) detail::nvtx_push(0);
  return step_open::opened;
}

void tracer::end_step(bool failed) noexcept {
  if (impl_->forked.load(std::memory_order_relaxed)) return;
  detail::thread_state* s = local_state(*impl_);
  if (s == nullptr || !s->step_open) return;
  s->step_open = false;
  if (s->step_on_stream) detail::mark_step_event(*impl_, *s, false);
  detail::push(*impl_, *s, failed ? record_kind::step_end_failed : record_kind::step_end, 0);
  if (detail::nvtx_enabled.load(std::memory_order_relaxed)) detail::nvtx_pop();
}

void tracer::record_phase(std::uint32_t id, bool begin) noexcept {
  detail::thread_state* s = local_state(*impl_);  // nullptr in a forked child (disable_in_child)
  if (s == nullptr) return;
  detail::push(*impl_, *s, begin ? record_kind::phase_begin : record_kind::phase_end, id);
  if (__builtin_expect(detail::nvtx_enabled.load(std::memory_order_relaxed), 0)) {
    begin ? detail::nvtx_push(id) : detail::nvtx_pop();
  }
}

void tracer::record_phase_on(std::uint32_t id, void* stream, bool begin) noexcept {
  detail::thread_state* s = local_state(*impl_);
  if (s == nullptr) return;
  if (!begin) detail::mark_event(*impl_, *s, stream, false);
  detail::push(*impl_, *s, begin ? record_kind::phase_begin : record_kind::phase_end, id);
  if (begin) detail::mark_event(*impl_, *s, stream, true);
  if (__builtin_expect(detail::nvtx_enabled.load(std::memory_order_relaxed), 0)) {
    begin ? detail::nvtx_push(id) : detail::nvtx_pop();
  }
}

summary tracer::summary() const {
  ::steptrace::summary out;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->drain_all_locked();
    impl_->harvest_events();
    impl_->read_device(true);
    impl_->totals.fill(out, host_clock::ns_per_tick());
    for (auto& t : impl_->threads) out.errors.unbalanced_phases += t->builder.unbalanced();
    out.facts = impl_->facts;
  }
  if (out.fact("host.cpus") == nullptr) out.facts.emplace_back("host.cpus", std::to_string(detail::usable_cpus()));
  out.errors.nested_steps = impl_->nested_steps.load(std::memory_order_relaxed);
  const detail::gpu_status gpu = detail::gpu_backend_status();
  out.backend = {gpu.cuda, gpu.cupti, gpu.reason, host_clock_name()};
  if (out.gpu) {
    std::uint64_t incomplete = 0, dropped = 0;
    detail::device_record_counts(incomplete, dropped);
    out.gpu->incomplete_records = incomplete;
    out.gpu->dropped_records += dropped;  // CUPTI's, beside those the store let go unread
  }
  detail::complete(out);
  return out;
}

void tracer::set_fact(std::string_view key, std::string_view value) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  for (auto& [k, v] : impl_->facts) {
    if (k == key) {
      v = std::string(value);
      return;
    }
  }
  impl_->facts.emplace_back(std::string(key), std::string(value));
}

void tracer::reset() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  for (auto& t : impl_->threads) {
    impl_->drain_locked(*t);  // read, not dropped: their CUDA event slots must go back
    t->builder.restart();
    for (auto& pair : t->builder.event_pairs()) pair.timed = false;
  }
  for (auto& p : impl_->pending_events) p.pair.timed = false;
  impl_->totals.clear();
  impl_->nested_steps.store(0, std::memory_order_relaxed);
}

std::string tracer::exit_report() {
  if (impl_->forked.load() || impl_->creator_pid != getpid()) return {};  // before any lock
  config cfg;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    if (impl_->exit_reported) return {};
    impl_->exit_reported = true;
    cfg = impl_->cfg;
  }
  const ::steptrace::summary s = summary();
  if (s.steps + s.warmup_steps + s.failed_steps == 0) return {};
  if (!cfg.json_path.empty()) {
    std::ofstream out(cfg.json_path);
    out << s.json() << '\n';
    if (!out) detail::log(detail::log_level::error, "could not write the summary JSON to " + cfg.json_path);
  }
  return cfg.print_at_exit ? s.table() : std::string{};
}

void tracer::warn_nested_step() const noexcept {
  if (!impl_->nested_reported.exchange(true)) {
    detail::log(detail::log_level::error,
                "a step was opened on a thread that already has one open; steps do not nest (make the inner "
                "one a phase). The inner step is ignored; further cases are only counted.");
  }
}

tracer& default_tracer() {
  static tracer* t = [] {
    std::vector<std::string> errors;
    const config cfg = config::from_env(&errors);
    auto* made = new tracer(cfg);  // never destroyed: steps may still end during exit
    for (const auto& e : errors) detail::log(detail::log_level::error, e);
    std::atexit([] {
      const std::string text = default_tracer().exit_report();
      if (!text.empty()) std::fputs(text.c_str(), stderr);
    });
    return made;
  }();
  return *t;
}

}  // namespace steptrace
