// The GPU backend of a build without CUDA headers: always host-only, and says so.
#include "gpu/backend.hpp"
#include "gpu/event_timer.hpp"
#include "gpu/stream_ids.hpp"

namespace steptrace::detail {

void set_gpu_library_dirs(std::vector<std::string>) {}

std::atomic<bool> nvtx_enabled{false};

void start_gpu_backend(bool) noexcept {}
bool gpu_backend_started() noexcept { return false; }
gpu_status gpu_backend_status() {
  return {false, false, "host only: this build of steptrace has no GPU backend (no CUDA headers at build time)"};
}
std::uint64_t device_records_end() { return 0; }
void read_device_records(std::uint64_t&, std::vector<device_record>&, std::uint64_t&, device_flush) {}
device_counts device_record_counts() { return {}; }
void* stream_context(void*) noexcept { return nullptr; }
std::uint32_t record_stream_event(thread_events&, void*, void*) noexcept { return no_event; }
std::uint32_t stream_index(stream_table&, void*, void*) noexcept { return no_event; }
event_result pair_elapsed(const thread_events&, std::uint32_t, std::uint32_t, float&) noexcept {
  return event_result::failed;
}
void yield_cupti(const std::string&) noexcept {}
void reclaim_cupti() noexcept {}
std::string cupti_holder() { return {}; }
std::vector<cupti_gap> cupti_gaps() { return {}; }
void set_device_sample(std::uint32_t, std::uint32_t) noexcept {}
void sample_device_tick() noexcept {}
bool nvtx_requested() noexcept { return false; }
void nvtx_push(std::uint32_t) noexcept {}
void nvtx_pop() noexcept {}

}  // namespace steptrace::detail
