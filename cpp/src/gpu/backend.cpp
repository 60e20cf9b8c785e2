// The GPU backend: libcuda and libcupti loaded at run time, CUPTI activity collected into a
// bounded store the tracers read from, NVTX ranges.
#include "gpu/backend.hpp"

#include <cuda.h>
#include <cupti.h>
#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <deque>
#include <mutex>

#include "base/log.hpp"
#include "gpu/cupti_decode.hpp"
#include "record/clock.hpp"

namespace steptrace::detail {

std::atomic<bool> nvtx_enabled{false};

namespace {

constexpr std::size_t buffer_bytes = std::size_t{1} << 20;  // one CUPTI buffer
constexpr std::size_t max_buffers = 32;                     // hard cap: 32 MiB in CUPTI's hands
constexpr std::size_t max_stored = std::size_t{1} << 19;    // decoded records kept for the tracers

// The CUPTI whose record layouts cupti_decode.cpp was compiled against (same major version).
const std::string cupti_soname = "libcupti.so." + std::to_string(CUDA_VERSION / 1000);

struct cupti_api {
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityDisable) disable = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityRegisterTimestampCallback) register_timestamp = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityFlushPeriod) flush_period = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) dropped_records = nullptr;
  decltype(&cuptiGetResultString) result_string = nullptr;
};

struct event_api {
  CUresult (*create)(CUevent*, unsigned) = nullptr;
  CUresult (*record)(CUevent, CUstream) = nullptr;
  CUresult (*query)(CUevent) = nullptr;
  CUresult (*elapsed)(float*, CUevent, CUevent) = nullptr;
  CUresult (*current_context)(CUcontext*) = nullptr;
};

struct backend {
  std::once_flag once;
  event_api events;  // set once by start(), before `started`; read-only afterwards
  std::atomic<bool> started{false};
  std::mutex mutex;  // everything below
  gpu_status status{false, false, "host only: no step has run yet, so the GPU was not looked at"};
  std::vector<std::string> dirs;
  cupti_api cupti;
  std::deque<device_record> store;  // every tracer reads it through its own cursor
  std::uint64_t store_first = 0;    // sequence number of store.front()
  std::uint64_t incomplete = 0, dropped = 0;
  std::vector<std::uint8_t*> free_buffers;
  std::size_t buffers_out = 0;
};

backend& state() {
  static auto* b = new backend;  // never destroyed: CUPTI may call back during exit
  return *b;
}

template <class Fn>
bool resolve(void* lib, const char* name, Fn& fn) {
  fn = reinterpret_cast<Fn>(dlsym(lib, name));
  return fn != nullptr;
}

std::string cupti_error(CUptiResult r) {
  const char* text = nullptr;
  if (state().cupti.result_string) state().cupti.result_string(r, &text);
  return text ? text : "CUPTI error " + std::to_string(static_cast<int>(r));
}

// CUPTI stamps device activity with this: the same clock as every host record, in ns.
std::uint64_t CUPTIAPI host_timestamp() { return host_clock::to_monotonic_ns(host_clock::now()); }

void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
  backend& b = state();
  std::lock_guard<std::mutex> lock(b.mutex);
  *max_records = 0;
  if (!b.free_buffers.empty()) {
    *buffer = b.free_buffers.back();
    b.free_buffers.pop_back();
  } else if (b.buffers_out < max_buffers) {
    *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(8, buffer_bytes));
  } else {
    *buffer = nullptr;  // at the cap: CUPTI drops records and counts them
  }
  *size = *buffer ? buffer_bytes : 0;
  if (*buffer) ++b.buffers_out;
}

void CUPTIAPI buffer_completed(CUcontext context, std::uint32_t stream, std::uint8_t* buffer, std::size_t,
                               std::size_t valid) {
  backend& b = state();
  std::vector<device_record> decoded_records;
  std::uint64_t incomplete = 0;
  CUpti_Activity* record = nullptr;
  while (valid > 0 && b.cupti.next_record(buffer, valid, &record) == CUPTI_SUCCESS) {
    device_record r;
    switch (decode(*record, r)) {
      case decoded::ok: decoded_records.push_back(r); break;
      case decoded::incomplete: ++incomplete; break;
      case decoded::ignored: break;
    }
  }
  std::size_t lost = 0;
  if (b.cupti.dropped_records) b.cupti.dropped_records(context, stream, &lost);
  std::lock_guard<std::mutex> lock(b.mutex);
  b.incomplete += incomplete;
  b.dropped += lost;
  b.store.insert(b.store.end(), decoded_records.begin(), decoded_records.end());
  while (b.store.size() > max_stored) {  // bounded: the oldest go; a tracer that had not read them counts them lost
    b.store.pop_front();
    ++b.store_first;
  }
  b.free_buffers.push_back(buffer);
  --b.buffers_out;
}

void* open_library(const std::string& soname, const std::vector<std::string>& dirs) {
  if (void* lib = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD)) return lib;  // already in use
  if (void* lib = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL)) return lib;
  for (const std::string& dir : dirs) {
    if (void* lib = dlopen((dir + "/" + soname).c_str(), RTLD_NOW | RTLD_LOCAL)) return lib;
  }
  return nullptr;
}

// Returns why CUPTI cannot be used, or "" once it collects.
std::string start_cupti(backend& b) {
  std::vector<std::string> dirs = b.dirs;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    if (const char* root = std::getenv(var)) {
      dirs.push_back(std::string(root) + "/extras/CUPTI/lib64");
      dirs.push_back(std::string(root) + "/lib64");
    }
  }
  dirs.push_back("/usr/local/cuda/extras/CUPTI/lib64");
  dirs.push_back("/usr/local/cuda/lib64");
  void* lib = open_library(cupti_soname, dirs);
  if (lib == nullptr) return cupti_soname + " was not found";
  cupti_api& c = b.cupti;
  const bool complete = resolve(lib, "cuptiActivityEnable", c.enable) && resolve(lib, "cuptiActivityDisable", c.disable) &&
                        resolve(lib, "cuptiActivityRegisterCallbacks", c.register_callbacks) &&
                        resolve(lib, "cuptiActivityFlushAll", c.flush_all) &&
                        resolve(lib, "cuptiActivityGetNextRecord", c.next_record) &&
                        resolve(lib, "cuptiGetResultString", c.result_string);
  resolve(lib, "cuptiActivityRegisterTimestampCallback", c.register_timestamp);
  resolve(lib, "cuptiActivityFlushPeriod", c.flush_period);
  resolve(lib, "cuptiActivityGetNumDroppedRecords", c.dropped_records);
  if (!complete || c.register_timestamp == nullptr) {
    return cupti_soname + " lacks the functions steptrace needs";
  }
  host_clock::ns_per_tick();  // fix the tick scale before CUPTI takes its first timestamp
  if (CUptiResult r = c.register_timestamp(&host_timestamp); r != CUPTI_SUCCESS) return cupti_error(r);
  if (CUptiResult r = c.register_callbacks(&buffer_requested, &buffer_completed); r != CUPTI_SUCCESS) {
    return "CUPTI refused steptrace (" + cupti_error(r) + "); another profiler may hold it";
  }
  // CONCURRENT_KERNEL, never KERNEL: KERNEL serialises every kernel launch.
  const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                      CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION};
  for (std::size_t i = 0; i < std::size(kinds); ++i) {
    if (CUptiResult r = c.enable(kinds[i]); r != CUPTI_SUCCESS) {
      for (std::size_t j = 0; j < i; ++j) c.disable(kinds[j]);
      return "CUPTI is held by another tool such as torch.profiler or Nsight (" + cupti_error(r) + ")";
    }
  }
  if (c.flush_period) c.flush_period(200);  // CUPTI's own thread hands over full buffers
  return "";
}

}  // namespace

bool nvtx_requested() noexcept { return std::getenv("NVTX_INJECTION64_PATH") != nullptr; }  // how Nsight attaches

namespace {

void start(bool use_cupti) {
  backend& b = state();
  nvtx_enabled.store(nvtx_requested());
  gpu_status status;
  void* cuda = open_library("libcuda.so.1", {});
  decltype(&cuInit) init = nullptr;
  decltype(&cuDeviceGetCount) device_count = nullptr;
  int devices = 0;
  if (cuda == nullptr) {
    status.reason = "host only: no NVIDIA driver (libcuda.so.1 could not be loaded)";
  } else if (!resolve(cuda, "cuInit", init) || !resolve(cuda, "cuDeviceGetCount", device_count)) {
    status.reason = "host only: libcuda.so.1 lacks cuInit or cuDeviceGetCount";
  } else if (CUresult r = init(0); r != CUDA_SUCCESS) {
    status.reason = "host only: the NVIDIA driver did not initialise (CUDA error " + std::to_string(r) + ")";
  } else if (device_count(&devices) != CUDA_SUCCESS || devices == 0) {
    status.reason = "host only: the driver sees no CUDA device";
  } else {
    status.cuda = true;
    event_api& e = b.events;
    const bool have_events = resolve(cuda, "cuEventCreate", e.create) && resolve(cuda, "cuEventRecord", e.record) &&
                             resolve(cuda, "cuEventQuery", e.query) && resolve(cuda, "cuCtxGetCurrent", e.current_context) &&
                             (resolve(cuda, "cuEventElapsedTime_v2", e.elapsed) || resolve(cuda, "cuEventElapsedTime", e.elapsed));
    if (!have_events) e = event_api{};
    std::string why_not;
    if (!use_cupti) {
      why_not = "CUPTI is off (STEPTRACE_CUPTI=0)";
    } else {
      why_not = start_cupti(b);
      if (!why_not.empty()) log(log_level::warn, why_not + "; steptrace keeps host timing only for the device view");
    }
    status.cupti = why_not.empty();
    status.reason = status.cupti ? "CUPTI activity on " + std::to_string(devices) + " device" +
                                       (devices == 1 ? "" : "s") + "; device timestamps on the host clock"
                                 : "device activity off: " + why_not;
  }
  std::lock_guard<std::mutex> lock(b.mutex);
  b.status = status;
}

// One registered NVTX string per phase id, made when first needed.
constexpr std::size_t max_phase_ids = 4096;
std::atomic<nvtxStringHandle_t> nvtx_names[max_phase_ids];

nvtxDomainHandle_t nvtx_domain() {
  static nvtxDomainHandle_t d = nvtxDomainCreateA("steptrace");
  return d;
}

thread_local std::uint32_t nvtx_depth = 0;

}  // namespace

void set_gpu_library_dirs(std::vector<std::string> dirs) {
  std::lock_guard<std::mutex> lock(state().mutex);
  state().dirs = std::move(dirs);
}

void start_gpu_backend(bool use_cupti) noexcept {
  backend& b = state();
  std::call_once(b.once, [&] {
    try {
      start(use_cupti);
    } catch (...) {  // never let the backend break the traced program
      std::lock_guard<std::mutex> lock(b.mutex);
      b.status = {false, false, "host only: the GPU backend failed to start"};
    }
    b.started.store(true, std::memory_order_release);
  });
}

bool gpu_backend_started() noexcept { return state().started.load(std::memory_order_acquire); }

gpu_status gpu_backend_status() {
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().status;
}

void read_device_records(std::uint64_t& cursor, std::vector<device_record>& out, std::uint64_t& lost, bool flush) {
  backend& b = state();
  if (!gpu_backend_started()) return;
  {
    std::lock_guard<std::mutex> lock(b.mutex);
    if (!b.status.cupti) return;
  }
  if (flush) b.cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);  // calls buffer_completed, which locks
  std::lock_guard<std::mutex> lock(b.mutex);
  if (cursor < b.store_first) {
    lost += b.store_first - cursor;
    cursor = b.store_first;
  }
  out.insert(out.end(), b.store.begin() + static_cast<std::ptrdiff_t>(cursor - b.store_first), b.store.end());
  cursor = b.store_first + b.store.size();
}

void device_record_counts(std::uint64_t& incomplete, std::uint64_t& dropped) {
  std::lock_guard<std::mutex> lock(state().mutex);
  incomplete = state().incomplete;
  dropped = state().dropped;
}

bool device_events_available() noexcept { return gpu_backend_started() && state().events.create != nullptr; }

bool create_device_events(void** events, std::size_t count) noexcept {
  const event_api& e = state().events;
  CUcontext context = nullptr;
  if (!device_events_available() || e.current_context(&context) != CUDA_SUCCESS || context == nullptr) return false;
  for (std::size_t i = 0; i < count; ++i) {
    CUevent event = nullptr;
    if (e.create(&event, CU_EVENT_DEFAULT) != CUDA_SUCCESS) return false;  // the ones made so far leak: rare
    events[i] = event;
  }
  return true;
}

bool record_device_event(void* event, void* stream) noexcept {
  return state().events.record(static_cast<CUevent>(event), static_cast<CUstream>(stream)) == CUDA_SUCCESS;
}

event_result device_event_elapsed(void* begin, void* end, float& ms) noexcept {
  const event_api& e = state().events;
  const CUresult ready = e.query(static_cast<CUevent>(end));
  if (ready == CUDA_ERROR_NOT_READY) return event_result::pending;
  if (ready != CUDA_SUCCESS) return event_result::failed;
  return e.elapsed(&ms, static_cast<CUevent>(begin), static_cast<CUevent>(end)) == CUDA_SUCCESS ? event_result::done
                                                                                               : event_result::failed;
}

void nvtx_push(std::uint32_t id) noexcept {
  if (id >= max_phase_ids) return;
  nvtxStringHandle_t name = nvtx_names[id].load(std::memory_order_relaxed);
  if (name == nullptr) {
    name = nvtxDomainRegisterStringA(nvtx_domain(), id == 0 ? "step" : phase_label(phase_id{id}).c_str());
    nvtx_names[id].store(name, std::memory_order_relaxed);
  }
  nvtxEventAttributes_t attr{};
  attr.version = NVTX_VERSION;
  attr.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attr.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  attr.message.registered = name;
  nvtxDomainRangePushEx(nvtx_domain(), &attr);
  ++nvtx_depth;
}

void nvtx_pop() noexcept {
  if (nvtx_depth == 0) return;
  --nvtx_depth;
  nvtxDomainRangePop(nvtx_domain());
}

}  // namespace steptrace::detail
