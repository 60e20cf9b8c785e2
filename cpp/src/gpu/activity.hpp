// Internal (not public API): CUPTI activity collection. CUPTI hands steptrace buffers of
// activity records through two process-wide callbacks; they are decoded (gpu/cupti_decode)
// into the record store (gpu/record_store), which the tracers read.
//
// Usage (gpu/backend.cpp):
//   std::string why = start_activity(cupti, store);  // "" once it collects
//   flush_activity(activity_flush::completed);       // hand over every finished buffer now
#pragma once

#include <string>

#include "gpu/driver_api.hpp"
#include "gpu/record_store.hpp"

namespace steptrace::detail {

// completed: buffers whose records have all finished (work still running stays with CUPTI and
// comes later); forced: every buffer, unfinished records counted as incomplete (at exit only).
enum class activity_flush { completed, forced };

// Registers the callbacks and the timestamp source, and enables kernels, copies, memsets and
// syncs. Returns "" once CUPTI collects into `store`, else why not. `api` and `store` must
// outlive the process. Called again after stop_activity, it takes CUPTI back.
std::string start_activity(const cupti_functions& api, record_store& store);
// Hands CUPTI over to another tool: every buffer comes back (a forced flush, so none of ours
// reaches the other tool's callbacks) and the kinds steptrace enabled are disabled.
void stop_activity();
// Sampling (device_sample): between recorded windows the kinds are off and back on, while the
// callbacks and the timestamp source stay steptrace's (registering a timestamp callback again made
// CUPTI stamp a session's first records on its own clock: pytorch issue #192021). Records of work
// launched before a pause still come. resume_activity returns "" once the kinds are on again.
void pause_activity();
std::string resume_activity();
void flush_activity(activity_flush how);
// Kernels still waiting for their launch call's record (gpu/launch_match.hpp) go to the store:
// those that waited long enough, or all. flush_activity lets all of them go after its flush.
void release_waiting_kernels(bool all);
// Since the process started: launch-call records CUPTI gave, kernels that went on without one.
struct launch_counts_t {
  std::uint64_t launches = 0, unmatched = 0;
  bool absent = false;  // none is coming (launch_matcher::launches_absent)
};
launch_counts_t launch_counts();

}  // namespace steptrace::detail
