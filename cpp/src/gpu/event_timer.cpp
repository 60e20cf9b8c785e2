// CUDA event pairs for the device time of phases and steps. See event_timer.hpp.
#include "gpu/event_timer.hpp"

#include <new>

#include "gpu/backend_state.hpp"

namespace steptrace::detail {
namespace {

// A new pool, its events made in `context` (made current for the while if it is not).
std::unique_ptr<event_pool> make_pool(const cuda_driver& d, CUcontext context) noexcept {
  CUcontext current = nullptr;
  const bool push = d.current_context(&current) != CUDA_SUCCESS || current != context;
  if (push && (d.push_context == nullptr || d.pop_context == nullptr || d.push_context(context) != CUDA_SUCCESS)) {
    return nullptr;
  }
  std::unique_ptr<event_pool> pool(new (std::nothrow) event_pool);
  for (std::uint32_t i = 0; pool && i < event_pool::size; ++i) {
    CUevent event = nullptr;
    if (d.event_create(&event, CU_EVENT_DEFAULT) != CUDA_SUCCESS)
      pool.reset();  // the ones made leak: rare
    else
      pool->events[i] = event;
  }
  if (pool) pool->context = context;
  if (push) {
    CUcontext popped = nullptr;
    d.pop_context(&popped);
  }
  return pool;
}

// The live pool of `context`, made if there is none; nullptr when none can be.
event_pool* pool_for(const cuda_driver& d, thread_events& events, CUcontext context, std::uint32_t& index) noexcept {
  for (index = 0; index < events.count; ++index) {
    event_pool* p = events.pools[index].get();
    if (p->context == context && !p->retired) return p;
  }
  if (events.count == thread_events::max_pools) return nullptr;
  if ((events.pools[index] = make_pool(d, context)) == nullptr) return nullptr;
  events.count = index + 1;
  return events.pools[index].get();
}

bool capturing(const cuda_driver& d, CUstream stream) noexcept {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  // An error (the legacy stream asked while another stream captures) counts as capturing.
  return d.stream_capturing(stream, &status) != CUDA_SUCCESS || status != CU_STREAM_CAPTURE_STATUS_NONE;
}

// The event's own context is gone (cudaDeviceReset, or the context destroyed): its pool is done.
bool context_gone(CUresult r) {
  return r == CUDA_ERROR_CONTEXT_IS_DESTROYED || r == CUDA_ERROR_INVALID_CONTEXT || r == CUDA_ERROR_INVALID_HANDLE;
}

CUevent event_at(const thread_events& events, std::uint32_t id) {
  return static_cast<CUevent>(events.pool_of(id)->events[id % event_pool::size]);
}

event_result query_pair(const cuda_driver& d, const thread_events& events, std::uint32_t begin, std::uint32_t end,
                        float& ms) noexcept {
  const CUresult ready = d.event_query(event_at(events, end));
  if (ready == CUDA_ERROR_NOT_READY) return event_result::pending;
  if (ready != CUDA_SUCCESS) return event_result::failed;
  return d.event_elapsed(&ms, event_at(events, begin), event_at(events, end)) == CUDA_SUCCESS ? event_result::done
                                                                                              : event_result::failed;
}

}  // namespace

void* stream_context(void* stream) noexcept {
  const cuda_driver& d = loaded_driver();
  return d.has_events() ? context_of(d, static_cast<CUstream>(stream)) : nullptr;
}

std::uint32_t record_stream_event(thread_events& events, void* stream_handle, void* context_handle) noexcept {
  const cuda_driver& d = loaded_driver();
  const auto stream = static_cast<CUstream>(stream_handle);
  const auto context = static_cast<CUcontext>(context_handle);
  // No context yet: tried again next time.
  if (!d.has_events() || context == nullptr || capturing(d, stream)) return no_event;
  std::uint32_t index = 0;
  event_pool* pool = pool_for(d, events, context, index);
  if (pool == nullptr) return no_event;
  const std::uint32_t slot = pool->take();
  if (slot == no_event) {
    events.full.store(events.full.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    return no_event;
  }
  if (const CUresult r = d.event_record(static_cast<CUevent>(pool->events[slot]), stream); r != CUDA_SUCCESS) {
    pool->release(slot);
    if (context_gone(r)) pool->retired = true;  // the next event in this context gets a new pool
    return no_event;
  }
  // Slots are taken in turn and mostly freed in turn: the slot half a pool ahead still busy
  // means half the pool waits for the collector.
  if (pool->busy[(slot + event_pool::size / 2) % event_pool::size].load(std::memory_order_relaxed) &&
      !events.harvest_asked.load(std::memory_order_relaxed)) {
    events.harvest_asked.store(true, std::memory_order_relaxed);
    events.wake_collector = true;
  }
  return index * event_pool::size + slot;
}

event_result pair_elapsed(const thread_events& events, std::uint32_t begin, std::uint32_t end, float& ms) noexcept {
  const cuda_driver& d = loaded_driver();
  if (!d.has_events() || events.pool_of(begin) == nullptr || events.pool_of(end) == nullptr)
    return event_result::failed;
  // Queries are "unsafe" calls under CUDA graph capture: in the default (global) mode one made
  // here would invalidate a capture running on another thread. Asked in relaxed mode, and the
  // calling thread's own mode put back after.
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  if (d.exchange_capture_mode(&mode) != CUDA_SUCCESS)
    return event_result::failed;  // no query that could break a capture
  const event_result result = query_pair(d, events, begin, end, ms);
  d.exchange_capture_mode(&mode);
  return result;
}

}  // namespace steptrace::detail
