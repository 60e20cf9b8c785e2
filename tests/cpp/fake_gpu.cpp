// The fake libcuda and libcupti of fake_gpu.hpp: plain functions over one global state.
// Over 400 lines on purpose: every fake entry of the driver tables in one place, beside the one state they share.
#include "fake_gpu.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <utility>

#include "gpu/testing.hpp"
#include "helpers.hpp"
#include "steptrace/steptrace.hpp"

namespace steptrace::testing {
namespace {

struct fake_event {
  bool recorded = false, pending = false, failed = false;
  double at_ms = 0;
  CUcontext context = nullptr;  // made in
  bool dead = false;            // its context was reset
};

struct fake_buffer {
  std::uint8_t* data = nullptr;
  std::size_t valid = 0;
  bool complete = true;
  std::vector<fake_record> finished;  // the records once the device finishes them
};

struct state_t {
  std::mutex mutex;
  std::mutex kinds_mutex;          // enabled, apis_on, apis_off: the collector switches kinds while a test reads them
  std::vector<fake_event> events;  // CUevent n+1 is events[n]
  std::set<CUstream> capturing;
  bool hold = false, fail = false, invalidated = false, refuse = false;
  double clock_ms = 0;
  std::map<CUstream, std::uint64_t> recorded_on;
  CUpti_BuffersCallbackRequestFunc requested = nullptr;
  CUpti_BuffersCallbackCompleteFunc completed = nullptr;
  std::vector<fake_buffer> buffers;
  fake_gpu* owner = nullptr;
  std::set<int> enabled;
  // Calls switched on and off one by one: (0 runtime, 1 driver; callback id). As in CUPTI, a call is
  // recorded when its kind is on and it is not switched off, or its kind is off and it is switched
  // on; enabling the kind clears its calls' switches.
  std::set<std::pair<int, CUpti_CallbackId>> apis_on, apis_off;
  CUpti_CallbackId known_ids = UINT32_MAX;  // runtime ids from here on are refused (an older CUPTI)
  std::uint64_t other_records = 0;
  std::uint64_t stream_lookups = 0;
  CUpti_TimestampCallbackFunc timestamp = nullptr;  // the clock registered last, and how many times one was
  int timestamp_registrations = 0;
};

state_t& st() {
  static state_t s;
  return s;
}

thread_local CUcontext t_context = nullptr;    // current
thread_local std::vector<CUcontext> t_pushed;  // under it, pushed over
thread_local CUstreamCaptureMode t_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
const auto k_context = reinterpret_cast<CUcontext>(std::uintptr_t{0x1000});  // device 0's
constexpr std::uintptr_t k_streams_per_device = 0x100;  // stream n of device d: 0x100 * (d + 1) + n

CUcontext context_of_device(std::uintptr_t d) { return reinterpret_cast<CUcontext>(0x1000 * (d + 1)); }

fake_event* event_of(CUevent e) {
  const auto n = reinterpret_cast<std::uintptr_t>(e);
  return n >= 1 && n <= st().events.size() ? &st().events[n - 1] : nullptr;
}

// An unsafe call while a global-mode capture runs, from a thread not in relaxed mode, breaks it.
void unsafe_call() {
  if (!st().capturing.empty() && t_mode != CU_STREAM_CAPTURE_MODE_RELAXED) st().invalidated = true;
}

CUresult init(unsigned) { return CUDA_SUCCESS; }
CUresult device_count(int* n) {
  *n = 1;
  return CUDA_SUCCESS;
}
CUresult current_context(CUcontext* c) {
  *c = t_context;
  return CUDA_SUCCESS;
}
CUresult stream_context(CUstream s, CUcontext* c) {
  const auto n = reinterpret_cast<std::uintptr_t>(s);
  if (n < k_streams_per_device) return current_context(c);  // the default streams: the current context's
  *c = context_of_device(n / k_streams_per_device - 1);
  return CUDA_SUCCESS;
}
CUresult push_context(CUcontext c) {
  const auto n = reinterpret_cast<std::uintptr_t>(c);
  if (n == 0 || n % 0x1000 != 0) return CUDA_ERROR_INVALID_CONTEXT;
  t_pushed.push_back(t_context);
  t_context = c;
  return CUDA_SUCCESS;
}
CUresult pop_context(CUcontext* c) {
  if (t_pushed.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  *c = t_context;
  t_context = t_pushed.back();
  t_pushed.pop_back();
  return CUDA_SUCCESS;
}
CUresult event_create(CUevent* e, unsigned) {
  if (!t_context) return CUDA_ERROR_INVALID_CONTEXT;
  std::lock_guard<std::mutex> lock(st().mutex);
  st().events.emplace_back().context = t_context;
  *e = reinterpret_cast<CUevent>(static_cast<std::uintptr_t>(st().events.size()));
  return CUDA_SUCCESS;
}
CUresult event_record(CUevent e, CUstream s) {
  std::lock_guard<std::mutex> lock(st().mutex);
  fake_event* ev = event_of(e);
  if (ev == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (ev->dead) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  CUcontext stream_ctx = nullptr;
  stream_context(s, &stream_ctx);
  if (stream_ctx != ev->context) return CUDA_ERROR_INVALID_HANDLE;  // an event and a stream of two contexts
  if (st().capturing.count(s)) st().invalidated = true;             // steptrace must never record into a capture
  st().clock_ms += 0.5;  // each event half a millisecond after the one before
  ev->recorded = true;
  ev->pending = st().hold;
  ev->failed = st().fail;
  ev->at_ms = st().clock_ms;
  ++st().recorded_on[s];
  return CUDA_SUCCESS;
}
CUresult event_query(CUevent e) {
  std::lock_guard<std::mutex> lock(st().mutex);
  unsafe_call();
  fake_event* ev = event_of(e);
  if (ev == nullptr || !ev->recorded) return CUDA_ERROR_INVALID_HANDLE;
  if (ev->dead) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  if (ev->failed) return CUDA_ERROR_LAUNCH_FAILED;
  return ev->pending ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
}
CUresult event_elapsed(float* ms, CUevent a, CUevent b) {
  std::lock_guard<std::mutex> lock(st().mutex);
  fake_event *x = event_of(a), *y = event_of(b);
  if (x == nullptr || y == nullptr || x->pending || y->pending) return CUDA_ERROR_NOT_READY;
  *ms = static_cast<float>(y->at_ms - x->at_ms);
  return CUDA_SUCCESS;
}
CUresult stream_capturing(CUstream s, CUstreamCaptureStatus* status) {
  std::lock_guard<std::mutex> lock(st().mutex);
  *status = st().capturing.count(s) ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
CUresult exchange_capture_mode(CUstreamCaptureMode* mode) {
  std::swap(*mode, t_mode);
  return CUDA_SUCCESS;
}

int api_domain(int kind) {
  return kind == CUPTI_ACTIVITY_KIND_RUNTIME ? 0 : kind == CUPTI_ACTIVITY_KIND_DRIVER ? 1 : -1;
}

CUptiResult enable(CUpti_ActivityKind kind) {
  if (st().refuse) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  std::lock_guard<std::mutex> lock(st().kinds_mutex);
  st().enabled.insert(kind);
  for (auto* set : {&st().apis_on, &st().apis_off}) {
    for (auto it = set->begin(); it != set->end();) it = it->first == api_domain(kind) ? set->erase(it) : std::next(it);
  }
  return CUPTI_SUCCESS;
}
CUptiResult disable(CUpti_ActivityKind kind) {
  std::lock_guard<std::mutex> lock(st().kinds_mutex);
  st().enabled.erase(kind);
  return CUPTI_SUCCESS;
}
CUptiResult choose_api(int domain, CUpti_CallbackId id, uint8_t on) {
  if (st().refuse) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  if (domain == 0 && id >= st().known_ids) return CUPTI_ERROR_INVALID_PARAMETER;
  std::lock_guard<std::mutex> lock(st().kinds_mutex);
  (on ? st().apis_on : st().apis_off).insert({domain, id});
  (on ? st().apis_off : st().apis_on).erase({domain, id});
  return CUPTI_SUCCESS;
}
CUptiResult enable_runtime_api(CUpti_CallbackId id, uint8_t on) { return choose_api(0, id, on); }
CUptiResult enable_driver_api(CUpti_CallbackId id, uint8_t on) { return choose_api(1, id, on); }

// The other tool's callbacks: its own buffers, its own count.
void CUPTIAPI other_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, 1 << 20));
  *size = 1 << 20;
  *max_records = 0;
}
void CUPTIAPI other_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  st().other_records += valid / sizeof(fake_record);
  std::free(buffer);
}
CUptiResult register_callbacks(CUpti_BuffersCallbackRequestFunc r, CUpti_BuffersCallbackCompleteFunc c) {
  st().requested = r;
  st().completed = c;
  return CUPTI_SUCCESS;
}
CUptiResult register_timestamp(CUpti_TimestampCallbackFunc f) {
  st().timestamp = f;
  ++st().timestamp_registrations;
  return CUPTI_SUCCESS;
}
std::uint64_t CUPTIAPI other_clock() { return 42; }  // a profiler's own timebase
CUptiResult flush_all(uint32_t flag) {
  std::vector<fake_buffer> out;
  {
    std::lock_guard<std::mutex> lock(st().mutex);
    for (auto it = st().buffers.begin(); it != st().buffers.end();) {
      if (it->complete || (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED)) {
        out.push_back(*it);
        it = st().buffers.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (const fake_buffer& b : out) st().completed(nullptr, 0, b.data, 0, b.valid);
  return CUPTI_SUCCESS;
}
CUptiResult next_record(uint8_t* buffer, size_t valid, CUpti_Activity** record) {
  std::uint8_t* next = *record == nullptr ? buffer : reinterpret_cast<std::uint8_t*>(*record) + sizeof(fake_record);
  if (next + sizeof(fake_record) > buffer + valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = reinterpret_cast<CUpti_Activity*>(next);
  return CUPTI_SUCCESS;
}
CUptiResult dropped_records(CUcontext, uint32_t, size_t* n) {
  *n = st().owner ? static_cast<size_t>(std::exchange(st().owner->dropped, 0)) : 0;
  return CUPTI_SUCCESS;
}
CUptiResult context_id(CUcontext c, uint32_t* id) {
  const auto n = reinterpret_cast<std::uintptr_t>(c);
  if (n == 0 || n % 0x1000 != 0) return CUPTI_ERROR_INVALID_CONTEXT;
  *id = static_cast<uint32_t>(n / 0x1000);  // device d: context id d + 1
  return CUPTI_SUCCESS;
}
CUptiResult stream_id_ex(CUcontext, CUstream s, uint8_t, uint32_t* id) {
  std::lock_guard<std::mutex> lock(st().mutex);
  ++st().stream_lookups;
  *id = fake_gpu::stream_id(s);
  return CUPTI_SUCCESS;
}
CUptiResult result_string(CUptiResult, const char** text) {
  *text = "fake CUPTI error";
  return CUPTI_SUCCESS;
}

}  // namespace

fake_gpu::fake_gpu(bool with_cupti, bool api_selection) {
  {
    std::lock_guard<std::mutex> lock(st().mutex);
    st().events.clear();
    st().capturing.clear();
    st().hold = st().fail = st().invalidated = st().refuse = false;
    st().known_ids = UINT32_MAX;
    st().recorded_on.clear();
    st().buffers.clear();
    st().owner = this;
    st().enabled.clear();
    st().apis_on.clear();
    st().apis_off.clear();
    st().other_records = 0;
    st().stream_lookups = 0;
    st().timestamp = nullptr;
    st().timestamp_registrations = 0;
    st().requested = nullptr;
    st().completed = nullptr;
  }
  detail::cuda_driver d;
  d.init = init;
  d.device_count = device_count;
  d.event_create = event_create;
  d.event_record = event_record;
  d.event_query = event_query;
  d.event_elapsed = event_elapsed;
  d.current_context = current_context;
  d.stream_context = stream_context;
  d.push_context = push_context;
  d.pop_context = pop_context;
  d.stream_capturing = stream_capturing;
  d.exchange_capture_mode = exchange_capture_mode;
  detail::cupti_functions c;
  c.enable = enable;
  c.disable = disable;
  c.register_callbacks = register_callbacks;
  c.register_timestamp = register_timestamp;
  c.flush_all = flush_all;
  c.next_record = next_record;
  c.dropped_records = dropped_records;
  c.result_string = result_string;
  c.context_id = context_id;
  c.stream_id = stream_id_ex;
  if (api_selection) {
    c.enable_runtime_api = enable_runtime_api;
    c.enable_driver_api = enable_driver_api;
  }
  detail::use_gpu_tables_for_testing(d, with_cupti ? &c : nullptr);
}

fake_gpu::~fake_gpu() {
  detail::use_real_gpu_for_testing();
  std::lock_guard<std::mutex> lock(st().mutex);
  st().owner = nullptr;
  t_context = nullptr;
}

void* fake_gpu::stream(int n, int device) const {
  return reinterpret_cast<void*>(k_streams_per_device * static_cast<std::uintptr_t>(device + 1) +
                                 static_cast<std::uintptr_t>(n));
}
std::uint32_t fake_gpu::stream_id(void* s) {
  const auto n = reinterpret_cast<std::uintptr_t>(s);
  return n < k_streams_per_device ? 7 : static_cast<std::uint32_t>(10 + n % k_streams_per_device);
}
std::uint64_t fake_gpu::stream_lookups() const {
  std::lock_guard<std::mutex> lock(st().mutex);
  return st().stream_lookups;
}
void fake_gpu::set_current_context(bool on) { t_context = on ? k_context : nullptr; }
void fake_gpu::device_reset() {
  std::lock_guard<std::mutex> lock(st().mutex);
  for (fake_event& e : st().events) e.dead = true;
}
void fake_gpu::hold_events(bool on) {
  std::lock_guard<std::mutex> lock(st().mutex);
  st().hold = on;
}
void fake_gpu::release_events() {
  std::lock_guard<std::mutex> lock(st().mutex);
  for (fake_event& e : st().events) e.pending = false;
}
void fake_gpu::fail_events(bool on) {
  std::lock_guard<std::mutex> lock(st().mutex);
  st().fail = on;
}
void fake_gpu::begin_capture(void* s) {
  std::lock_guard<std::mutex> lock(st().mutex);
  st().capturing.insert(static_cast<CUstream>(s));
}
void fake_gpu::end_capture(void* s) {
  std::lock_guard<std::mutex> lock(st().mutex);
  st().capturing.erase(static_cast<CUstream>(s));
}
bool fake_gpu::capture_invalidated() const {
  std::lock_guard<std::mutex> lock(st().mutex);
  return st().invalidated;
}
bool fake_gpu::this_thread_capture_mode_is_global() const { return t_mode == CU_STREAM_CAPTURE_MODE_GLOBAL; }
std::uint64_t fake_gpu::events_recorded_on(void* s) const {
  std::lock_guard<std::mutex> lock(st().mutex);
  auto it = st().recorded_on.find(static_cast<CUstream>(s));
  return it == st().recorded_on.end() ? 0 : it->second;
}

void fake_gpu::emit(const std::vector<fake_record>& records, bool complete) {
  std::uint8_t* data = nullptr;
  std::size_t size = 0, max_records = 0;
  st().requested(&data, &size, &max_records);
  if (data == nullptr) {  // the store is at its cap: CUPTI drops the records and counts them
    dropped += records.size();
    return;
  }
  std::size_t n = std::min(records.size(), size / sizeof(fake_record));
  for (std::size_t i = 0; i < n; ++i) {
    fake_record r = records[i];
    if (!complete) reinterpret_cast<detail::cupti_records::kernel*>(r.bytes)->end = 0;  // still running
    std::memcpy(data + i * sizeof(fake_record), &r, sizeof r);
  }
  std::lock_guard<std::mutex> lock(st().mutex);
  st().buffers.push_back({data, n * sizeof(fake_record), complete,
                          std::vector<fake_record>(records.begin(), records.begin() + static_cast<std::ptrdiff_t>(n))});
}

void fake_gpu::finish_work() {
  std::lock_guard<std::mutex> lock(st().mutex);
  for (fake_buffer& b : st().buffers) {
    if (b.complete) continue;
    std::memcpy(b.data, b.finished.data(), b.finished.size() * sizeof(fake_record));
    b.complete = true;
  }
}

void fake_gpu::periodic_flush() { flush_all(0); }

std::size_t fake_gpu::buffers_held() const {
  std::lock_guard<std::mutex> lock(st().mutex);
  return st().buffers.size();
}

void fake_gpu::other_tool_starts() {
  register_timestamp(other_clock);  // as Kineto does at each session's start
  register_callbacks(other_requested, other_completed);
  for (CUpti_ActivityKind k : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY}) enable(k);
}

void fake_gpu::other_tool_stops() {
  flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  for (CUpti_ActivityKind k : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY}) disable(k);
}

std::uint64_t fake_gpu::other_tool_records() const { return st().other_records; }
int fake_gpu::timestamp_registrations() const { return st().timestamp_registrations; }
bool fake_gpu::steptrace_clock() const { return st().timestamp != nullptr && st().timestamp != other_clock; }
bool fake_gpu::steptrace_has_callbacks() const {
  return st().requested != nullptr && st().requested != other_requested;
}
int fake_gpu::kinds_enabled() const {
  std::lock_guard<std::mutex> lock(st().kinds_mutex);
  return static_cast<int>(st().enabled.size());
}
bool fake_gpu::kind_enabled(int kind) const {
  std::lock_guard<std::mutex> lock(st().kinds_mutex);
  return st().enabled.count(kind) > 0;
}
bool fake_gpu::api_recorded(int domain, CUpti_CallbackId id) const {
  std::lock_guard<std::mutex> lock(st().kinds_mutex);
  const std::pair<int, CUpti_CallbackId> call{domain, id};
  const bool kind_on = st().enabled.count(domain == 0 ? CUPTI_ACTIVITY_KIND_RUNTIME : CUPTI_ACTIVITY_KIND_DRIVER) > 0;
  return kind_on ? st().apis_off.count(call) == 0 : st().apis_on.count(call) != 0;
}

void fake_gpu::know_api_ids_below(CUpti_CallbackId first_unknown) {
  std::lock_guard<std::mutex> lock(st().mutex);
  st().known_ids = first_unknown;
}

void fake_gpu::refuse_enable(bool on) {
  std::lock_guard<std::mutex> lock(st().mutex);
  st().refuse = on;
}

std::pair<std::uint64_t, std::uint64_t> one_step(tracer& t) {
  scoped_step step(t);
  scoped_phase p(t, builtin::compute);
  const std::uint64_t begin = host_now_ns();
  spin_for(std::chrono::microseconds(2000));
  return {begin, host_now_ns()};
}

}  // namespace steptrace::testing
