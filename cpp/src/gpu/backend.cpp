// The process-wide GPU backend: starts the driver and CUPTI once, keeps their status, serves the
// record store to the tracers. See backend.hpp.
#include "gpu/backend.hpp"

#include <mutex>

#include "base/log.hpp"
#include "gpu/activity.hpp"
#include "gpu/backend_state.hpp"
#include "gpu/driver_api.hpp"
#include "gpu/record_store.hpp"
#include "gpu/testing.hpp"

namespace steptrace::detail {
namespace {

struct backend {
  std::mutex start_mutex;      // one start at a time
  std::atomic<bool> started{false};
  cuda_driver driver;          // set by start, before `started`; read-only afterwards
  cupti_functions cupti;       // likewise
  record_store* store = new record_store;  // never freed: CUPTI may call back during exit
  std::mutex mutex;            // status and dirs
  gpu_status status{false, false, "host only: no step has run yet, so the GPU was not looked at"};
  std::vector<std::string> dirs;
  bool fake = false;  // tests: the tables below instead of the real libraries
  cuda_driver fake_driver;
  cupti_functions fake_cupti;
  bool fake_has_cupti = false;
};

backend& state() {
  static auto* b = new backend;  // never destroyed: CUPTI may call back during exit
  return *b;
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
  if (!use_cupti) {
    why_not = "CUPTI is off (STEPTRACE_CUPTI=0)";
  } else if (b.fake ? (c = b.fake_cupti, !b.fake_has_cupti) : !load_cupti(c, b.dirs, loaded, why_not)) {
    if (why_not.empty()) why_not = "no CUPTI";
  } else {
    b.cupti = c;
    why_not = start_activity(b.cupti, *b.store);
  }
  if (!why_not.empty() && use_cupti) {
    log(log_level::warn, why_not + "; steptrace keeps host timing only for the device view");
  }
  status.cupti = why_not.empty();
  status.reason = status.cupti ? "CUPTI activity (" + loaded + ") on " + std::to_string(devices) + " device" +
                                     (devices == 1 ? "" : "s") + "; device timestamps on the host clock"
                               : "device activity off: " + why_not;
  return status;
}

}  // namespace

const cuda_driver& loaded_driver() noexcept { return state().driver; }

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

gpu_status gpu_backend_status() {
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().status;
}

std::uint64_t device_records_end() { return state().store->end(); }

void read_device_records(std::uint64_t& cursor, std::vector<device_record>& out, std::uint64_t& lost, device_flush how) {
  backend& b = state();
  if (!gpu_backend_started() || !gpu_backend_status().cupti) return;
  if (how != device_flush::none) {
    flush_activity(how == device_flush::forced ? activity_flush::forced : activity_flush::completed);
  }
  b.store->read(cursor, out, lost);
}

device_counts device_record_counts() {
  const record_store::counts_t c = state().store->counts();
  return {c.incomplete, c.dropped};
}

void use_gpu_tables_for_testing(const cuda_driver& driver, const cupti_functions* cupti) {
  backend& b = state();
  std::lock_guard<std::mutex> once(b.start_mutex);
  b.started.store(false);
  b.driver = cuda_driver{};
  b.cupti = cupti_functions{};
  b.store = new record_store;  // the old one stays: a fake may still hold its buffers
  b.fake = true;
  b.fake_driver = driver;
  b.fake_has_cupti = cupti != nullptr;
  b.fake_cupti = cupti ? *cupti : cupti_functions{};
  std::lock_guard<std::mutex> lock(b.mutex);
  b.status = {false, false, "host only: no step has run yet, so the GPU was not looked at"};
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
}

}  // namespace steptrace::detail
