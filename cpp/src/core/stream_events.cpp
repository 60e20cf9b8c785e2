// CUDA events at step and phase boundaries, on the recording thread. See stream_events.hpp.
#include "core/stream_events.hpp"

#include <memory>
#include <new>

#include "core/tracer_impl.hpp"
#include "gpu/backend.hpp"

namespace steptrace::detail {
namespace {

// Records a CUDA event on `stream` and returns its slot; no_event where none could be (no CUDA
// context on this thread, every event still in flight, or a failed record).
std::uint32_t record_event(thread_state& s, void* stream) noexcept {
  event_pool* pool = s.events.get();
  if (pool == nullptr) {
    if (s.events_failed || !device_events_available()) return no_event;
    try {  // once per thread
      auto made = std::make_unique<event_pool>();
      if (!create_device_events(made->events, event_pool::size)) {
        s.events_failed = true;
        return no_event;
      }
      s.events = std::move(made);
      pool = s.events.get();
    } catch (const std::bad_alloc&) {
      s.events_failed = true;
      return no_event;
    }
  }
  const std::uint32_t slot = pool->take();
  if (slot != no_event && !record_device_event(pool->events[slot], stream)) {
    pool->busy[slot].store(false, std::memory_order_relaxed);
    return no_event;
  }
  return slot;
}

}  // namespace

void mark_phase_event(tracer_impl& impl, thread_state& s, void* stream, bool begin) noexcept {
  const std::uint32_t slot = record_event(s, stream);
  event_pool* pool = s.events.get();
  if (pool == nullptr) return;  // no events on this thread
  if (begin) {
    if (pool->depth < event_pool::max_depth) pool->open[pool->depth++] = slot;
    if (slot != no_event) push(impl, s, record_kind::event_begin, slot);
  } else {
    const bool paired = pool->depth > 0 && pool->open[--pool->depth] != no_event;
    if (paired || slot != no_event) push(impl, s, record_kind::event_end, slot);
  }
}

void mark_step_event(tracer_impl& impl, thread_state& s, bool begin) noexcept {
  const std::uint32_t slot = record_event(s, s.step_stream);
  if (slot != no_event) push(impl, s, begin ? record_kind::step_event_begin : record_kind::step_event_end, slot);
}

}  // namespace steptrace::detail
