// CUPTI activity collection: buffer callbacks, enabling the record kinds, flushing. See
// activity.hpp.
#include "gpu/activity.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <iterator>
#include <mutex>
#include <vector>

#include "base/log.hpp"
#include "gpu/cupti_decode.hpp"
#include "gpu/launch_match.hpp"
#include "record/clock.hpp"

namespace steptrace::detail {
namespace {

// CUPTI's callbacks carry no user pointer: these name what they serve. Set by start_activity
// before the callbacks are registered.
std::atomic<const cupti_functions*> g_api{nullptr};
std::atomic<record_store*> g_store{nullptr};

// CONCURRENT_KERNEL, never KERNEL: KERNEL serialises every kernel launch. The rest are optional: a
// CUPTI that refuses them still gives the kernels, copies and syncs. MEMORY2: device memory per
// step.
constexpr CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                        CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
                                        CUPTI_ACTIVITY_KIND_MEMORY2};
constexpr std::size_t required_kinds = 4;

// The launch calls, whose start gives each kernel the host phase that launched it (the per-phase
// kernel table; Triton launches through the driver). Where CUPTI can choose calls one by one (12.6
// and later) only these are recorded; else every runtime and driver call is, and on an H100
// CUPTI's records then cost 8.6 us a kernel of a launch-bound loop (docs/cost.md).
constexpr CUpti_CallbackId runtime_launches[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernelMultiDevice_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000,
};
// CUDA 13's `__cudaLaunchKernel`, numbered here as CUPTI 13 numbers them, since CUDA 12's headers
// lack them. (On an H200 with CUDA 13.0, nvcc's `<<<...>>>` still launched through
// cudaLaunchKernel_v7000.)
constexpr CUpti_CallbackId runtime_launches_cuda13[] = {
    505,  // CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000
    506,  // CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000
};
#if defined(CUPTI_API_VERSION) && CUPTI_API_VERSION >= 130000
static_assert(runtime_launches_cuda13[0] == CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000 &&
              runtime_launches_cuda13[1] == CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000);
#endif
constexpr CUpti_CallbackId driver_launches[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunch,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernelMultiDevice,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
};
// Every call id a CUPTI may number, with room for later ones (CUDA 13.0: 523 runtime, 807 driver);
// an id a CUPTI does not know is refused, at no cost.
constexpr CUpti_CallbackId api_ids_below = 2048;

// Turns the launch calls' records on or off. CUPTI chooses calls one by one only this way round:
// the RUNTIME and DRIVER kinds on, then every call but the launches off. Chosen by id alone with
// the kinds off, the choice did not reach a context made before it (an H200 with CUPTI 13: no
// launch record; tests/gpu/probe_launch_records.cu), and steptrace mostly starts after the
// program's context exists. Optional, like MEMORY2: without them the kernel table has no
// launching phases.
void launch_records(const cupti_functions& api, bool on) {
  for (CUpti_ActivityKind kind : {CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER}) {
    on ? api.enable(kind) : api.disable(kind);  // enabling a kind clears its calls' choices
  }
  if (api.enable_runtime_api == nullptr || api.enable_driver_api == nullptr) return;
  if (on) {
    for (CUpti_CallbackId id = 1; id < api_ids_below; ++id) {
      api.enable_runtime_api(id, 0);
      api.enable_driver_api(id, 0);
    }
  }
  const std::uint8_t flag = on ? 1 : 0;  // off: no launch recorded for the next tool either
  for (CUpti_CallbackId id : runtime_launches) api.enable_runtime_api(id, flag);
  for (CUpti_CallbackId id : runtime_launches_cuda13) api.enable_runtime_api(id, flag);
  for (CUpti_CallbackId id : driver_launches) api.enable_driver_api(id, flag);
}

std::string result_text(const cupti_functions& api, CUptiResult r) {
  const char* text = nullptr;
  if (api.result_string) api.result_string(r, &text);
  return text ? text : "CUPTI error " + std::to_string(static_cast<int>(r));
}

// Enables the record kinds and the launch calls' records: "" once they are on, else why not
// (none left on).
std::string enable_kinds(const cupti_functions& api) {
  for (std::size_t i = 0; i < std::size(kinds); ++i) {
    if (CUptiResult r = api.enable(kinds[i]); r != CUPTI_SUCCESS && i < required_kinds) {
      for (std::size_t j = 0; j < i; ++j) api.disable(kinds[j]);
      return "CUPTI is held by another tool such as torch.profiler or Nsight (" + result_text(api, r) + ")";
    }
  }
  launch_records(api, true);
  return "";
}

// CUPTI stamps device activity with this: the same clock as every host record, in ns.
std::uint64_t CUPTIAPI host_timestamp() { return host_clock::to_monotonic_ns(host_clock::now()); }

// When collection last began (host ns): no record of work can start before it.
std::atomic<std::uint64_t> g_enabled_at{0};

// A record CUPTI stamped on another clock: after a timestamp callback is registered again (each
// hand-back from torch.profiler, whose Kineto registers its own), CUPTI was seen to give the first
// kernel records of a session times off by ~1e14 ns, its own clock's, while their launch calls'
// records stayed right (pytorch issue #192021). Such a record is left out and counted: work that
// started before collection began, that ends after its buffer came back, or a kernel that started
// before its own launch call. The slacks cover clock conversion and reading jitter, never a wrong
// clock: a second against the host's clock, a millisecond against the launch call's.
constexpr std::uint64_t clock_slack_ns = 1'000'000'000, launch_slack_ns = 1'000'000;
bool impossible_time(const device_record& r, std::uint64_t enabled_at, std::uint64_t now) {
  if (r.start == 0 && r.end == 0) return false;  // no time at all: incomplete, counted apart
  if (r.start + clock_slack_ns < enabled_at || r.end > now + clock_slack_ns || r.end < r.start) return true;
  return r.kind == device_activity::kernel && r.launched != 0 && r.start + launch_slack_ns < r.launched;
}

// Leaves out of `records` those with impossible times; how many.
std::uint64_t drop_bad_clock(std::vector<device_record>& records) {
  const std::uint64_t now = host_timestamp(), enabled_at = g_enabled_at.load(std::memory_order_relaxed);
  const auto good_end = std::remove_if(records.begin(), records.end(),
                                       [&](const device_record& r) { return impossible_time(r, enabled_at, now); });
  const auto bad = static_cast<std::uint64_t>(records.end() - good_end);
  records.erase(good_end, records.end());
  static std::atomic<bool> said{false};
  if (bad > 0 && !said.exchange(true)) {
    log(log_level::warn, "CUPTI gave " + std::to_string(bad) + " device record" + (bad == 1 ? "" : "s") +
                             " stamped on another clock (a profiler's timestamp callback registered again?): left "
                             "out, and counted in the fact cupti.records_bad_clock");
  }
  return bad;
}

// Kernels wait for their launch calls' records here (they come in other buffers, in either order).
std::mutex g_launch_mutex;  // buffer_completed runs on CUPTI's thread and on flushing threads
launch_matcher g_launches;

void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
  *max_records = 0;
  record_store* store = g_store.load(std::memory_order_acquire);
  *buffer = store ? store->take_buffer() : nullptr;  // nullptr at the cap: CUPTI drops records and counts them
  *size = *buffer ? record_store::buffer_bytes : 0;
}

void CUPTIAPI buffer_completed(CUcontext context, std::uint32_t stream, std::uint8_t* buffer, std::size_t,
                               std::size_t valid) {
  const cupti_functions* api = g_api.load(std::memory_order_acquire);
  record_store* store = g_store.load(std::memory_order_acquire);
  if (api == nullptr || store == nullptr) return;
  std::vector<device_record> decoded, records;
  std::uint64_t incomplete = 0;
  CUpti_Activity* activity = nullptr;
  while (buffer != nullptr && valid > 0 && api->next_record(buffer, valid, &activity) == CUPTI_SUCCESS) {
    device_record r;
    switch (decode(*activity, r)) {
      case decoded::ok:
        decoded.push_back(r);
        break;
      case decoded::incomplete:
        ++incomplete;
        break;
      case decoded::ignored:
        break;
    }
  }
  {
    std::lock_guard<std::mutex> lock(g_launch_mutex);
    g_launches.take(decoded, host_timestamp(), records);
  }
  const std::uint64_t bad_clock = drop_bad_clock(records);
  std::size_t dropped = 0;
  if (api->dropped_records) api->dropped_records(context, stream, &dropped);
  store->add(records, incomplete, dropped, bad_clock);
  store->give_back(buffer);
}

}  // namespace

std::string start_activity(const cupti_functions& api, record_store& store) {
  g_api.store(&api, std::memory_order_release);
  g_store.store(&store, std::memory_order_release);
  host_clock::ns_per_tick();  // fix the tick scale before CUPTI takes its first timestamp
  g_enabled_at.store(host_timestamp(), std::memory_order_relaxed);
  // Registered at each start: after a hand-over the callback is the other tool's, on its clock.
  if (CUptiResult r = api.register_timestamp(&host_timestamp); r != CUPTI_SUCCESS) return result_text(api, r);
  if (CUptiResult r = api.register_callbacks(&buffer_requested, &buffer_completed); r != CUPTI_SUCCESS) {
    return "CUPTI refused steptrace (" + result_text(api, r) + "); another profiler may hold it";
  }
  if (std::string why = enable_kinds(api); !why.empty()) return why;
  if (api.flush_period) api.flush_period(200);  // CUPTI's own thread hands over full buffers
  return "";
}

void stop_activity() {
  const cupti_functions* api = g_api.load(std::memory_order_acquire);
  if (api == nullptr) return;
  api->flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  release_waiting_kernels(true);  // the other tool's launches never come here
  for (CUpti_ActivityKind kind : kinds) api->disable(kind);
  launch_records(*api, false);
  if (api->flush_period) api->flush_period(0);  // the other tool flushes on its own schedule
}

void pause_activity() {
  const cupti_functions* api = g_api.load(std::memory_order_acquire);
  if (api == nullptr) return;
  for (CUpti_ActivityKind kind : kinds) api->disable(kind);
  launch_records(*api, false);
}

std::string resume_activity() {
  const cupti_functions* api = g_api.load(std::memory_order_acquire);
  if (api == nullptr) return "CUPTI was never started";
  return enable_kinds(*api);
}

void flush_activity(activity_flush how) {
  const cupti_functions* api = g_api.load(std::memory_order_acquire);
  if (api == nullptr) return;
  api->flush_all(how == activity_flush::forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);  // calls buffer_completed
  // Every finished record is in now, launch calls included (a call's record is finished before
  // its kernel runs): a kernel still waiting will never be matched.
  release_waiting_kernels(true);
}

launch_counts_t launch_counts() {
  std::lock_guard<std::mutex> lock(g_launch_mutex);
  return {g_launches.launches_seen(), g_launches.unmatched(), g_launches.launches_absent()};
}

void release_waiting_kernels(bool all) {
  record_store* store = g_store.load(std::memory_order_acquire);
  if (store == nullptr) return;
  std::vector<device_record> records;
  {
    std::lock_guard<std::mutex> lock(g_launch_mutex);
    if (g_launches.waiting() == 0) return;
    g_launches.release(host_timestamp(), all, records);
  }
  const std::uint64_t bad_clock = drop_bad_clock(records);
  if (!records.empty() || bad_clock > 0) store->add(records, 0, 0, bad_clock);
}

}  // namespace steptrace::detail
