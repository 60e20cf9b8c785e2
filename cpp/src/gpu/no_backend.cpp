// The GPU backend of a build without CUDA headers: always host-only, and says so.
#include "gpu/backend.hpp"

namespace steptrace::detail {

void set_gpu_library_dirs(std::vector<std::string>) {}

std::atomic<bool> nvtx_enabled{false};

void start_gpu_backend(bool) noexcept {}
bool gpu_backend_started() noexcept { return false; }
gpu_status gpu_backend_status() {
  return {false, false, "host only: this build of steptrace has no GPU backend (no CUDA headers at build time)"};
}
void read_device_records(std::uint64_t&, std::vector<device_record>&, std::uint64_t&, bool) {}
void device_record_counts(std::uint64_t& incomplete, std::uint64_t& dropped) { incomplete = dropped = 0; }
bool device_events_available() noexcept { return false; }
bool create_device_events(void**, std::size_t) noexcept { return false; }
bool record_device_event(void*, void*) noexcept { return false; }
event_result device_event_elapsed(void*, void*, float&) noexcept { return event_result::failed; }
bool nvtx_requested() noexcept { return false; }
void nvtx_push(std::uint32_t) noexcept {}
void nvtx_pop() noexcept {}

}  // namespace steptrace::detail
