// CUDA events at step and phase boundaries, on the recording thread. See stream_events.hpp.
#include "core/recording/stream_events.hpp"

#include "core/recording/recorder.hpp"

namespace steptrace::detail {

namespace {

// A pool half full of pairs not read back wakes the collector (event_timer.hpp): rare, once per
// half pool at most, and never a lock.
void wake_if_asked(recorder& rec, thread_events& events) noexcept {
  if (__builtin_expect(events.wake_collector, 0)) {
    events.wake_collector = false;
    rec.wake.notify_one();
  }
}

// Names `stream` to the step builder: the step's device view covers the streams it worked on.
void note_stream(recorder& rec, thread_state& s, void* stream, void* context) noexcept {
  const std::uint32_t index = stream_index(s.streams, stream, context);
  if (index != no_event) push(rec, s, record_kind::stream_scope, index);
}

}  // namespace

void mark_phase_event(recorder& rec, thread_state& s, void* stream, bool begin) noexcept {
  thread_events& events = s.events;
  if (begin) {
    void* const context = stream_context(stream);  // one driver call for both below
    note_stream(rec, s, stream, context);
    if (events.depth == thread_events::max_depth) {  // nested too deep: not timed
      ++events.too_deep;
      return;
    }
    const std::uint32_t id = record_stream_event(events, stream, context);
    events.open[events.depth++] = id;
    if (id != no_event) push(rec, s, record_kind::event_begin, id);
    wake_if_asked(rec, events);
    return;
  }
  if (events.too_deep > 0) {  // the end of a phase that was not timed
    --events.too_deep;
    return;
  }
  if (events.depth == 0) return;
  // An end event only for a begin that got one: a slot taken here for a phase whose begin found
  // the pool full would be freed by nobody.
  if (events.open[--events.depth] == no_event) return;
  push(rec, s, record_kind::event_end, record_stream_event(events, stream, stream_context(stream)));
  wake_if_asked(rec, events);
}

void mark_step_event(recorder& rec, thread_state& s, bool begin) noexcept {
  void* const context = stream_context(s.step_stream);
  if (begin) note_stream(rec, s, s.step_stream, context);
  const std::uint32_t slot = record_stream_event(s.events, s.step_stream, context);
  if (slot != no_event) push(rec, s, begin ? record_kind::step_event_begin : record_kind::step_event_end, slot);
  wake_if_asked(rec, s.events);
}

}  // namespace steptrace::detail
