// CUDA event pairs for the device time of phases and steps. See event_timer.hpp.
#include "gpu/event_timer.hpp"

#include <new>

#include "gpu/backend_state.hpp"

namespace steptrace::detail {
namespace {

// A new pool, its events created in the calling thread's context or, with none current, in
// the stream's own; nullptr when neither exists yet.
std::unique_ptr<event_pool> make_pool(const cuda_driver& d, CUstream stream) noexcept {
  CUcontext context = nullptr;
  bool pushed = false;
  if (d.current_context(&context) != CUDA_SUCCESS || context == nullptr) {
    context = nullptr;
    if (stream == nullptr || d.stream_context == nullptr || d.push_context == nullptr || d.pop_context == nullptr ||
        d.stream_context(stream, &context) != CUDA_SUCCESS || context == nullptr ||
        d.push_context(context) != CUDA_SUCCESS) {
      return nullptr;
    }
    pushed = true;
  }
  std::unique_ptr<event_pool> pool(new (std::nothrow) event_pool);
  for (std::uint32_t i = 0; pool && i < event_pool::size; ++i) {
    CUevent event = nullptr;
    if (d.event_create(&event, CU_EVENT_DEFAULT) != CUDA_SUCCESS) pool.reset();  // the ones made leak: rare
    else pool->events[i] = event;
  }
  if (pushed) {
    CUcontext popped = nullptr;
    d.pop_context(&popped);
  }
  return pool;
}

bool capturing(const cuda_driver& d, CUstream stream) noexcept {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  // An error (the legacy stream asked while another stream captures) counts as capturing.
  return d.stream_capturing(stream, &status) != CUDA_SUCCESS || status != CU_STREAM_CAPTURE_STATUS_NONE;
}

event_result query_pair(const cuda_driver& d, const event_pool& pool, std::uint32_t begin, std::uint32_t end,
                        float& ms) noexcept {
  const CUresult ready = d.event_query(static_cast<CUevent>(pool.events[end]));
  if (ready == CUDA_ERROR_NOT_READY) return event_result::pending;
  if (ready != CUDA_SUCCESS) return event_result::failed;
  return d.event_elapsed(&ms, static_cast<CUevent>(pool.events[begin]), static_cast<CUevent>(pool.events[end])) ==
                 CUDA_SUCCESS
             ? event_result::done
             : event_result::failed;
}

}  // namespace

std::uint32_t record_stream_event(std::unique_ptr<event_pool>& pool, void* stream_handle) noexcept {
  const cuda_driver& d = loaded_driver();
  if (!d.has_events()) return no_event;
  const auto stream = static_cast<CUstream>(stream_handle);
  if (pool == nullptr && (pool = make_pool(d, stream)) == nullptr) return no_event;
  if (capturing(d, stream)) return no_event;
  const std::uint32_t slot = pool->take();
  if (slot != no_event && d.event_record(static_cast<CUevent>(pool->events[slot]), stream) != CUDA_SUCCESS) {
    pool->release(slot);
    return no_event;
  }
  return slot;
}

event_result pair_elapsed(const event_pool& pool, std::uint32_t begin, std::uint32_t end, float& ms) noexcept {
  const cuda_driver& d = loaded_driver();
  if (!d.has_events() || begin >= event_pool::size || end >= event_pool::size) return event_result::failed;
  // Queries are "unsafe" calls under CUDA graph capture: in the default (global) mode one made
  // here would invalidate a capture running on another thread. Asked in relaxed mode, and the
  // calling thread's own mode put back after.
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  if (d.exchange_capture_mode(&mode) != CUDA_SUCCESS) return event_result::failed;  // no query that could break a capture
  const event_result result = query_pair(d, pool, begin, end, ms);
  d.exchange_capture_mode(&mode);
  return result;
}

}  // namespace steptrace::detail
