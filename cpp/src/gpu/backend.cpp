// The process-wide GPU backend: starts the driver and CUPTI once, keeps their status, serves the
// record store to the tracers. See backend.hpp.
#include "gpu/backend.hpp"

#include <cstdlib>
#include <deque>
#include <mutex>
#include <new>

#include "base/log.hpp"
#include "gpu/activity.hpp"
#include "gpu/backend_data.hpp"
#include "gpu/backend_state.hpp"
#include "gpu/driver_api.hpp"
#include "gpu/record_store.hpp"
#include "gpu/testing.hpp"
#include "record/clock.hpp"

namespace steptrace::detail {
namespace {

backend& state() { return backend_data(); }

}  // namespace

backend& backend_data() {
  static auto* b = new backend;  // never destroyed: CUPTI may call back during exit
  return *b;
}

void add_gap(backend& b, std::uint64_t at, bool sampled) {
  b.gaps.push_back({at, UINT64_MAX, sampled});
  while (b.gaps.size() > max_cupti_gaps) b.gaps.pop_front();
}
cupti_gap* open_gap(backend& b, bool sampled) {
  for (auto it = b.gaps.rbegin(); it != b.gaps.rend(); ++it) {
    if (it->sampled == sampled && it->end == UINT64_MAX) return &*it;
  }
  return nullptr;
}

namespace {

std::string held_reason(const backend& b) {  // under b.mutex
  return "CUPTI held by " + b.holder + ": device activity resumes when it lets go (CUDA events meanwhile)";
}

// Returns the status; fills b.driver and b.cupti with what works.
gpu_status start(backend& b, bool use_cupti) {
  gpu_status status;
  std::string why;
  cuda_driver d;
  if (b.fake) {
    d = b.fake_driver;
  } else if (!load_cuda_driver(d, why)) {
    status.reason = "host only: " + why;
    return status;
  }
  int devices = 0;
  if (CUresult r = d.init(0); r != CUDA_SUCCESS) {
    status.reason = "host only: the NVIDIA driver did not initialise (CUDA error " + std::to_string(r) + ")";
    return status;
  }
  if (d.device_count(&devices) != CUDA_SUCCESS || devices == 0) {
    status.reason = "host only: the driver sees no CUDA device";
    return status;
  }
  status.cuda = true;
  b.driver = d;
  std::string why_not, loaded = "libcupti";
  cupti_functions c;
  std::vector<std::string> dirs;
  {
    std::lock_guard<std::mutex> lock(b.mutex);  // set_gpu_library_dirs may run on another thread
    dirs = b.dirs;
  }
  if (!use_cupti) {
    why_not = "CUPTI is off (STEPTRACE_CUPTI=0)";
  } else if (!b.fake && std::getenv("CUDA_INJECTION64_PATH") != nullptr) {
    why_not = "CUPTI belongs to the tool injected with CUDA_INJECTION64_PATH (Nsight)";
  } else if (b.fake ? (c = b.fake_cupti, !b.fake_has_cupti) : !load_cupti(c, dirs, loaded, why_not)) {
    if (why_not.empty()) why_not = "no CUPTI";
  } else {
    b.cupti = c;
    std::lock_guard<std::mutex> lock(b.mutex);
    b.cupti_loaded = true;
    // A profiler that already holds CUPTI keeps it: steptrace takes it when the profiler stops.
    if (b.holder.empty()) {
      why_not = start_activity(b.cupti, *b.store);
      b.collecting = b.own_callbacks = why_not.empty();
    }
  }
  if (!why_not.empty() && use_cupti) {
    log(log_level::warn, why_not + "; steptrace keeps host timing only for the device view");
  }
  status.cupti = why_not.empty();
  status.reason = status.cupti ? "CUPTI activity (" + loaded + ") on " + std::to_string(devices) + " device" +
                                     (devices == 1 ? "" : "s") + "; device timestamps on the host clock"
                               : "device activity off: " + why_not;
  std::lock_guard<std::mutex> lock(b.mutex);
  b.collecting_reason = status.reason;
  if (status.cupti && !b.holder.empty()) status.reason = held_reason(b);
  return status;
}

}  // namespace

const cuda_driver& loaded_driver() noexcept { return state().driver; }

const cupti_functions* loaded_cupti() noexcept {
  backend& b = state();  // b.cupti is written before `started`, and never again while in use
  return b.started.load(std::memory_order_acquire) && b.cupti.complete() ? &b.cupti : nullptr;
}

void set_gpu_library_dirs(std::vector<std::string> dirs) {
  std::lock_guard<std::mutex> lock(state().mutex);
  state().dirs = std::move(dirs);
}

void start_gpu_backend(bool use_cupti) noexcept {
  backend& b = state();
  if (b.started.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> once(b.start_mutex);
  if (b.started.load(std::memory_order_relaxed)) return;
  nvtx_enabled.store(nvtx_requested());
  gpu_status status;
  try {
    status = start(b, use_cupti);
  } catch (...) {  // never let the backend break the traced program
    status = {false, false, "host only: the GPU backend failed to start"};
  }
  {
    std::lock_guard<std::mutex> lock(b.mutex);
    b.status = status;
  }
  b.started.store(true, std::memory_order_release);
}

bool gpu_backend_started() noexcept { return state().started.load(std::memory_order_acquire); }

void forget_gpu_in_forked_child() noexcept {
  backend& b = state();
  if (!b.started.load(std::memory_order_relaxed)) return;
  // One thread alive: any lock may have been held by a thread the child does not have.
  new (&b.start_mutex) std::mutex;
  new (&b.mutex) std::mutex;
  b.forked_child = true;
  b.driver = cuda_driver{};
  b.cupti = cupti_functions{};
  b.collecting = false;
  b.cupti_loaded = false;
  b.sampling.store(false);  // device_sample: nothing to switch here
  b.status = {false, false, "host only: a process forked from one that had started CUDA cannot use it"};
}

gpu_status gpu_backend_status() {
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().status;
}

void yield_cupti(const std::string& holder) noexcept {
  backend& b = state();
  try {
    std::lock_guard<std::mutex> once(b.start_mutex);  // no start, yield or reclaim meanwhile
    std::lock_guard<std::mutex> lock(b.mutex);
    if (!b.holder.empty()) return;
    b.holder = holder.empty() ? "another tool" : holder;
    add_gap(b, host_clock::to_monotonic_ns(host_clock::now()), false);
    b.own_callbacks = false;                                    // the other tool registers its own
    if (b.collecting || (b.sample_paused && b.cupti_loaded)) {  // paused: buffers of ours still in flight
      stop_activity();  // calls buffer_completed, which takes only the store's lock
      b.collecting = false;
      log(log_level::info, "CUPTI handed to " + b.holder + "; steptrace resumes device activity when it stops");
    }
    if (b.status.cupti) b.status.reason = held_reason(b);
  } catch (...) {  // never break the traced program or its profiler
  }
}

void reclaim_cupti() noexcept {
  backend& b = state();
  try {
    std::lock_guard<std::mutex> once(b.start_mutex);
    std::lock_guard<std::mutex> lock(b.mutex);
    if (b.holder.empty()) return;
    b.holder.clear();
    if (cupti_gap* g = open_gap(b, false)) g->end = host_clock::to_monotonic_ns(host_clock::now());
    if (b.cupti_loaded && !b.collecting && !b.sample_paused) {  // a window left out: taken back at its end
      const std::string why_not = start_activity(b.cupti, *b.store);
      b.collecting = b.own_callbacks = why_not.empty();
      if (!b.collecting) {
        log(log_level::warn, "could not take CUPTI back (" + why_not + "); device activity stays off");
        b.status.cupti = false;
        b.status.reason = "device activity off after a profiler: " + why_not;
        return;
      }
    }
    if (b.status.cupti) b.status.reason = b.collecting_reason;
  } catch (...) {
  }
}

std::vector<cupti_gap> cupti_gaps() {
  std::lock_guard<std::mutex> lock(state().mutex);
  return {state().gaps.begin(), state().gaps.end()};
}

std::string cupti_holder() {
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().holder;
}

std::uint64_t device_records_end() { return state().forked_child ? 0 : state().store->end(); }

void read_device_records(std::uint64_t& cursor, std::vector<device_record>& out, std::uint64_t& lost,
                         device_flush how) {
  backend& b = state();
  if (!gpu_backend_started()) return;
  bool collecting;
  {
    std::lock_guard<std::mutex> lock(b.mutex);
    if (!b.status.cupti) return;
    // a window left out (device_sample): the buffers CUPTI still holds are steptrace's, of work
    // launched before it, and come back to steptrace's callbacks
    collecting = b.collecting || (b.sample_paused && b.own_callbacks && b.holder.empty());
  }
  if (how != device_flush::none && collecting) {  // never flush a profiler's buffers for it
    flush_activity(how == device_flush::forced ? activity_flush::forced : activity_flush::completed);
  } else {
    release_waiting_kernels(false);  // those whose launch call's record is overdue
  }
  const std::size_t before = out.size();
  b.store->read(cursor, out, lost);
  if (b.sampling.load(std::memory_order_relaxed) && out.size() > before) {
    std::lock_guard<std::mutex> lock(b.mutex);
    end_resume_gap_at_kernels(b, out.data() + before, out.data() + out.size());
  }
  // No launch-call record is coming (launch_matcher::launches_absent): said once, since the
  // kernel table loses its launching phase.
  static std::atomic<bool> said{false};
  if (!said.load(std::memory_order_relaxed)) {
    const launch_counts_t l = launch_counts();
    if (l.absent && !said.exchange(true)) {
      log(log_level::warn, "CUPTI gave no launch-call records for " + std::to_string(l.unmatched) +
                               " kernels: the kernel table cannot name the phase that launched each kernel");
    }
  }
}

device_counts device_record_counts() {
  if (state().forked_child) return {};
  const record_store::counts_t c = state().store->counts();
  const launch_counts_t l = launch_counts();
  return {c.incomplete, c.dropped, l.launches, l.unmatched, c.bad_clock};
}

void use_gpu_tables_for_testing(const cuda_driver& driver, const cupti_functions* cupti) {
  backend& b = state();
  std::lock_guard<std::mutex> once(b.start_mutex);
  b.started.store(false);
  b.driver = cuda_driver{};
  b.cupti = cupti_functions{};
  static auto* retired = new std::vector<record_store*>;  // kept, never freed: a fake may hold their buffers
  retired->push_back(b.store);
  b.store = new record_store;
  b.fake = true;
  b.fake_driver = driver;
  b.fake_has_cupti = cupti != nullptr;
  b.fake_cupti = cupti ? *cupti : cupti_functions{};
  std::lock_guard<std::mutex> lock(b.mutex);
  b.status = {false, false, "host only: no step has run yet, so the GPU was not looked at"};
  b.cupti_loaded = b.collecting = false;
  b.holder.clear();
  b.gaps.clear();
  reset_sampling(b);
}

void use_real_gpu_for_testing() {
  backend& b = state();
  std::lock_guard<std::mutex> once(b.start_mutex);
  b.started.store(false);
  b.driver = cuda_driver{};
  b.cupti = cupti_functions{};
  b.fake = false;
  std::lock_guard<std::mutex> lock(b.mutex);
  b.status = {false, false, "host only: no step has run yet, so the GPU was not looked at"};
  b.cupti_loaded = b.collecting = false;
  b.holder.clear();
  b.gaps.clear();
  reset_sampling(b);
}

}  // namespace steptrace::detail
