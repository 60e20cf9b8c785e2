// Internal (not public API): the process-wide GPU backend.
//
// Nothing here touches CUDA until start_gpu_backend(), which the tracers call at the first step
// of the process (never at import or static-initialisation time, so DataLoader workers fork
// first). libcuda and libcupti are loaded with dlopen (gpu/loader.cpp); with no driver, no
// device or no CUPTI the backend says why and steptrace runs host-only. The parts, one job per
// file: loader (dlopen into function tables), activity (CUPTI callbacks) into record_store,
// event_timer (CUDA event pairs), nvtx.
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
// A forked child (the fork handler calls it, with one thread alive): a parent that had started the
// backend leaves CUDA and CUPTI state the child cannot use (calls into it can hang), so the child
// is host-only from here, and says why. A parent that never started it leaves the child free to.
void forget_gpu_in_forked_child() noexcept;

// none: what CUPTI's own periodic flush delivered; completed: every buffer whose records have
// all finished (work still running comes later); forced: everything, unfinished records counted
// as incomplete (at exit, when nothing comes later).
enum class device_flush { none, completed, forced };
// The position after the newest stored record: a reader starting there sees only later ones.
std::uint64_t device_records_end();
// Appends the decoded records after `cursor` (in arrival order) to out, advancing the cursor.
// Records the bounded store let go before this reader saw them are added to `lost`.
void read_device_records(std::uint64_t& cursor, std::vector<device_record>& out, std::uint64_t& lost, device_flush how);
// Process-wide, since the start: records flushed before they finished, records CUPTI dropped.
struct device_counts {
  std::uint64_t incomplete = 0, dropped = 0;
  std::uint64_t launches = 0, kernels_without_launch = 0;  // launch-call records; kernels none matched
  std::uint64_t bad_clock = 0;  // records left out: stamped before collection began, after they came, or
                                // (a kernel) before its own launch call (activity.cpp)
};
device_counts device_record_counts();

// Another tool takes CUPTI (torch.profiler's Kineto, or one the program names): steptrace gives
// back every buffer, disables its record kinds and collects nothing until reclaim_cupti(), which
// takes CUPTI back (its callbacks, timestamps and kinds). Meanwhile phases given a stream are
// still timed with CUDA events, and steps that overlap the time are counted apart. Before the
// backend starts, the start leaves CUPTI alone until the reclaim. Says so in one line.
void yield_cupti(const std::string& holder) noexcept;
void reclaim_cupti() noexcept;
// The times [begin, end), host clock in ns, when steptrace recorded no device activity: another
// tool held CUPTI, or (`sampled`) device_sample left the window out; end UINT64_MAX while it still
// does (cupti_gap, in gpu/device_record.hpp). The latest max_cupti_gaps only.
constexpr std::size_t max_cupti_gaps = 256;
std::vector<cupti_gap> cupti_gaps();

// device_sample (gpu/sample_plan.hpp): CUPTI records one window in `every` (1: every window) of
// `period_s` seconds on the wall clock. CUPTI is the process's, so this is too: the tracer that
// set it last decides (a tracer sets it when its own value changes from 1, or back). The
// collectors tick it on each pass, at no cost while it is 1 and nothing is left out. A window
// left out is a `sampled` gap; it ends when recording resumes, or later: work launched while
// nothing was recorded can run after the resume, so the gap ends where the first kernel launched
// after the resume starts (2 s after the resume at most, when none comes).
void set_device_sample(std::uint32_t every, std::uint32_t period_s) noexcept;
void sample_device_tick() noexcept;
std::string cupti_holder();  // the tool holding CUPTI now, "" for none

// NVTX ranges in the `steptrace` domain, for Nsight timelines. Off unless a tool that collects
// them is attached (nvtx_requested(); Nsight sets NVTX_INJECTION64_PATH), in which case every
// record takes the library's slow path, which pushes and pops them.
bool nvtx_requested() noexcept;
void nvtx_push(std::uint32_t id) noexcept;  // id 0: the step itself
void nvtx_pop() noexcept;
extern std::atomic<bool> nvtx_enabled;

}  // namespace steptrace::detail
