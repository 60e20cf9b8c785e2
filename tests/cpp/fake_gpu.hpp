// Fakes of libcuda and libcupti for the tests: the GPU backend runs on them in-process, so the
// device logic (event slots, capture, contexts, CUPTI buffers and flushes) is tested without a
// device. One fake device at a time (the backend is process-wide).
//
// Usage:
//   fake_gpu gpu;                       // the backend starts on the fakes at the next first step
//   gpu.set_current_context(true);      // this thread has a CUDA context
//   tracer t(...); ... scoped_phase p(t, builtin::compute, gpu.stream(1));
//   gpu.hold_events(true);              // events recorded from now stay pending
//   gpu.emit({kernel(...)}, /*complete=*/true);  // a CUPTI buffer with these records
#pragma once

#include <cstdint>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "gpu/cupti_records.hpp"
#include "gpu/driver_api.hpp"

namespace steptrace {
class tracer;
}

namespace steptrace::testing {

// One step of about 2 ms of host time (`compute` spinning) on `t`; a window on the host clock, in
// ns, stamped inside the step (its opening may start the backend, which takes a while the first
// time): fake records placed in it fall in that step.
std::pair<std::uint64_t, std::uint64_t> one_step(tracer& t);

// Now on the host clock in ns, the clock steptrace has CUPTI stamp device records with: fake
// records placed by it fall where the tracer's steps were.
std::uint64_t host_now_ns();

// A CUPTI record of one of the kinds steptrace reads, as CUPTI would lay it out.
struct fake_record {
  alignas(8) unsigned char bytes[256] = {};
};
// Device n has CUPTI context id n + 1; stream is CUPTI's id (fake_gpu::stream_id).
fake_record kernel_record(std::uint64_t start, std::uint64_t end, std::uint32_t stream = 7, std::uint32_t device = 0);
// A kernel with a name (a string that outlives the records, as CUPTI's do) and the correlation id
// of the call that launched it.
fake_record named_kernel_record(std::uint64_t start, std::uint64_t end, const char* name, std::uint32_t correlation,
                                std::uint32_t stream = 7, std::uint32_t device = 0);
// A runtime API call (cudaLaunchKernel) on the host over [start, end) with that correlation id.
fake_record launch_record(std::uint64_t start, std::uint64_t end, std::uint32_t correlation);
// Device memory allocated (or, with `freed`, released) at `at` on that device.
fake_record memory_record(std::uint64_t at, std::uint64_t bytes, bool freed, std::uint32_t device = 0);
// A blocking synchronisation: a context synchronise (no stream) unless `stream` is given.
fake_record sync_record(std::uint64_t start, std::uint64_t end, std::uint32_t device = 0,
                        std::uint32_t stream = 0xffffffffu);

class fake_gpu {
 public:
  // api_selection: its CUPTI can record chosen API calls only (cuptiActivityEnableRuntimeApi and
  // cuptiActivityEnableDriverApi, CUPTI 12.6 and later).
  explicit fake_gpu(bool with_cupti = true, bool api_selection = false);
  ~fake_gpu();
  fake_gpu(const fake_gpu&) = delete;
  fake_gpu& operator=(const fake_gpu&) = delete;

  void* stream(int n, int device = 0) const;  // a fake CUstream (n >= 1) in that device's context
  // CUPTI's id of a stream (nullptr: the legacy default stream, 7 as CUPTI often numbers it).
  static std::uint32_t stream_id(void* stream);
  std::uint64_t stream_lookups() const;  // cuptiGetStreamIdEx calls so far
  void set_current_context(bool on);     // the calling thread's current context (device 0's)
  void device_reset();                   // cudaDeviceReset: every event made so far is dead
  void hold_events(bool on);             // events recorded while on stay pending...
  void release_events();                 // ...until this
  void fail_events(bool on);             // queries of events recorded while on fail
  void begin_capture(void* stream);      // a global-mode graph capture on `stream`
  void end_capture(void* stream);
  bool capture_invalidated() const;  // an unsafe call broke a capture
  bool this_thread_capture_mode_is_global() const;
  std::uint64_t events_recorded_on(void* stream) const;

  // CUPTI: a buffer requested through steptrace's callback, filled with `records`; a buffer that
  // is not complete is handed back only by a forced flush (its records then come back with no
  // end time, as CUPTI does).
  void emit(const std::vector<fake_record>& records, bool complete = true);
  void finish_work();                // the device finishes what unfinished buffers hold
  void periodic_flush();             // CUPTI's own thread (flush_period): every complete buffer back
  std::size_t buffers_held() const;  // requested and not yet handed back
  void refuse_enable(bool on);       // another tool holds CUPTI
  // Another CUPTI client (a profiler) registers its own callbacks and enables its kinds; when it
  // stops it flushes and disables them, as Kineto does.
  void other_tool_starts();
  void other_tool_stops();
  std::uint64_t other_tool_records() const;  // records its callbacks received
  int timestamp_registrations() const;       // cuptiActivityRegisterTimestampCallback calls, anyone's
  bool steptrace_clock() const;              // the timestamp callback registered last is steptrace's
  bool steptrace_has_callbacks() const;      // the registered callbacks are steptrace's
  int kinds_enabled() const;
  bool kind_enabled(int kind) const;
  bool api_recorded(int domain, CUpti_CallbackId id) const;  // a call's records on: domain 0 runtime, 1 driver
  void know_api_ids_below(CUpti_CallbackId first_unknown);   // an older CUPTI: later runtime ids refused
  std::uint64_t dropped = 0;                                 // reported by the next completed buffer
};

}  // namespace steptrace::testing
