// Thread binding: the TLS slot, the live-tracer map, each thread's links to the tracers it
// recorded into, attach/detach, and what a forked child inherits. See cpp/src/core/README.md,
// "Threads".
#include "core/thread_binding.hpp"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <new>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/tracer_impl.hpp"
#include "gpu/backend.hpp"

namespace steptrace::detail {

// The only thread-local on the hot path (declared in detail/ring.hpp, in its ABI namespace).
inline namespace ring_v1 {
__thread thread_binding t_binding __attribute__((tls_model("initial-exec"))) = {0, nullptr, nullptr};
}  // namespace ring_v1

namespace {

// Never destroyed (steps may end during exit). A forked child re-initialises it in place: it
// may have been held by a thread that does not exist there.
std::mutex* const g_live_mutex = new std::mutex;
std::unordered_map<std::uint64_t, tracer_impl*>& live_tracers() {
  static auto* m = new std::unordered_map<std::uint64_t, tracer_impl*>;
  return *m;
}
std::atomic<std::uint64_t> g_next_uid{1};

// Set when this thread's links are destroyed (thread exit, or process exit for the main
// thread). A plain __thread bool: it has no destructor, so it outlives every thread_local.
__thread bool t_links_gone = false;

// Every (tracer, state) pair of this thread; detaches them when the thread exits.
struct thread_links {
  std::vector<std::pair<std::uint64_t, thread_state*>> links;

  ~thread_links() {
    t_links_gone = true;
    t_binding = {0, nullptr, nullptr};
    std::lock_guard<std::mutex> lock(*g_live_mutex);
    for (auto& [uid, state] : links) {
      auto it = live_tracers().find(uid);
      // A forked child's inherited tracers take no lock: their collector died at the fork.
      if (it != live_tracers().end() && !it->second->forked.load()) it->second->rec.detach(*state);
    }
  }

  // Links to tracers destroyed since are dropped, so a thread's cost stays bounded however
  // many tracers come and go.
  void forget_dead() {
    std::lock_guard<std::mutex> lock(*g_live_mutex);
    links.erase(std::remove_if(links.begin(), links.end(),
                               [](const auto& link) { return live_tracers().count(link.first) == 0; }),
                links.end());
  }
};

// In a forked child only the forking thread survives, and any lock may have been held at the
// fork: the child's copies of every tracer stop recording and never report (a DataLoader
// worker must not print its parent's summary), and take no lock from then on.
void on_fork_child() {
  new (g_live_mutex) std::mutex;  // the child has one thread: nobody else can be using it
  for (auto& [uid, impl] : live_tracers()) impl->forked.store(true);
  t_binding = {0, nullptr, nullptr};  // the next record takes the slow path, which refuses
  forget_gpu_in_forked_child();       // a tracer made in the child is host-only if CUDA was started
}

thread_links& this_thread_links() {
  thread_local thread_links links;
  return links;
}

}  // namespace

std::uint64_t next_tracer_uid() noexcept { return g_next_uid.fetch_add(1); }

void register_tracer(tracer_impl& impl) {
  std::lock_guard<std::mutex> lock(*g_live_mutex);
  live_tracers()[impl.uid] = &impl;
}

void unregister_tracer(tracer_impl& impl) {
  std::lock_guard<std::mutex> lock(*g_live_mutex);
  live_tracers().erase(impl.uid);
}

void keep_forked_copy(tracer_impl* impl) {
  static auto* kept = new std::vector<tracer_impl*>;  // reachable, so not reported as a leak
  std::lock_guard<std::mutex> lock(*g_live_mutex);
  kept->push_back(impl);
}

void install_fork_guard() {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(nullptr, nullptr, on_fork_child); });
}

std::size_t thread_link_count() noexcept { return t_links_gone ? 0 : this_thread_links().links.size(); }

thread_state* lookup_slow(tracer_impl& impl) noexcept {
  if (impl.forked.load(std::memory_order_relaxed) || t_links_gone) return nullptr;
  thread_links& links = this_thread_links();
  for (auto& [uid, state] : links.links) {
    if (uid == impl.uid) {
      t_binding = {uid, &state->records, state};
      return state;
    }
  }
  try {
    links.forget_dead();
    thread_state* state = impl.rec.attach();
    links.links.emplace_back(impl.uid, state);
    t_binding = {impl.uid, &state->records, state};
    return state;
  } catch (const std::bad_alloc&) {
    return nullptr;  // out of memory: this thread goes untraced rather than failing the caller
  }
}

}  // namespace steptrace::detail
