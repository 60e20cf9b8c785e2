// Internal (not public API): the process-wide GPU backend.
//
// Nothing here touches CUDA until start(), which the tracers call at the first step of the
// process (never at import or static-initialisation time, so DataLoader workers fork first).
// libcuda and libcupti are loaded with dlopen; with no driver, no device or no CUPTI the
// backend says why and steptrace runs host-only.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gpu/device_record.hpp"
#include "steptrace/phase.hpp"

namespace steptrace::detail {

struct gpu_status {
  bool cuda = false;   // a driver and at least one device
  bool cupti = false;  // device activity records are being collected
  std::string reason;  // plain words, for the summary
};

// Extra directories to look for libcupti in (tracer.hpp's set_gpu_library_dirs).
void set_gpu_library_dirs(std::vector<std::string> dirs);
// Starts the backend once per process; later calls return at once. Never throws.
void start_gpu_backend(bool use_cupti) noexcept;
bool gpu_backend_started() noexcept;
gpu_status gpu_backend_status();

// Flushes CUPTI (forced: records still running come back incomplete and are counted) and
// appends the decoded records after `cursor` (in arrival order) to out, advancing the cursor.
// Records the bounded store let go before this reader saw them are added to `lost`.
// flush=false reads what CUPTI's own periodic flush delivered, without cutting running work.
void read_device_records(std::uint64_t& cursor, std::vector<device_record>& out, std::uint64_t& lost, bool flush);
// Process-wide: records flushed before they finished, and records CUPTI dropped at the cap.
void device_record_counts(std::uint64_t& incomplete, std::uint64_t& dropped);

// CUDA events (driver API) for the device time of phases given a stream. Events are plain
// handles here; creating them needs a CUDA context current on the calling thread.
bool device_events_available() noexcept;
bool create_device_events(void** events, std::size_t count) noexcept;
bool record_device_event(void* event, void* stream) noexcept;
enum class event_result { done, pending, failed };
event_result device_event_elapsed(void* begin, void* end, float& ms) noexcept;  // a query, never a wait

// NVTX ranges in the `steptrace` domain, for Nsight timelines. Off unless a tool that collects
// them is attached (nvtx_requested(); Nsight sets NVTX_INJECTION64_PATH), in which case every
// record takes the library's slow path, which pushes and pops them.
bool nvtx_requested() noexcept;
void nvtx_push(std::uint32_t id) noexcept;  // id 0: the step itself
void nvtx_pop() noexcept;
extern std::atomic<bool> nvtx_enabled;

}  // namespace steptrace::detail
