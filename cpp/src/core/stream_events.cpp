// CUDA events at step and phase boundaries, on the recording thread. See stream_events.hpp.
#include "core/stream_events.hpp"

#include "core/tracer_impl.hpp"

namespace steptrace::detail {

namespace {

// Names `stream` to the step builder: the step's device view covers the streams it worked on.
void note_stream(tracer_impl& impl, thread_state& s, void* stream) noexcept {
  const std::uint32_t index = stream_index(s.streams, stream);
  if (index != no_event) push(impl, s, record_kind::stream_scope, index);
}

}  // namespace

void mark_phase_event(tracer_impl& impl, thread_state& s, void* stream, bool begin) noexcept {
  if (begin) {
    note_stream(impl, s, stream);
    const std::uint32_t slot = record_stream_event(s.events, stream);
    event_pool* pool = s.events.get();
    if (pool == nullptr) return;  // no events on this thread (yet)
    if (pool->depth < event_pool::max_depth) pool->open[pool->depth++] = slot;
    if (slot != no_event) push(impl, s, record_kind::event_begin, slot);
    return;
  }
  event_pool* pool = s.events.get();
  if (pool == nullptr || pool->depth == 0) return;  // its begin had no pool: nothing to pair
  // An end event only for a begin that got one: a slot taken here for a phase whose begin found
  // the pool full would be freed by nobody.
  if (pool->open[--pool->depth] == no_event) return;
  push(impl, s, record_kind::event_end, record_stream_event(s.events, stream));
}

void mark_step_event(tracer_impl& impl, thread_state& s, bool begin) noexcept {
  if (begin) note_stream(impl, s, s.step_stream);
  const std::uint32_t slot = record_stream_event(s.events, s.step_stream);
  if (slot != no_event) push(impl, s, begin ? record_kind::step_event_begin : record_kind::step_event_end, slot);
}

}  // namespace steptrace::detail
