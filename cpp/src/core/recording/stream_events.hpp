// Internal (not public API): CUDA events at the boundaries of steps and phases given a stream.
// The recording thread records an event in a slot of its pool (gpu/event_timer.hpp) and a ring
// record naming the slot; the collector reads the pair's device time later (recording/device_reading.cpp,
// harvest_events) and frees the slots.
#pragma once

#include "gpu/event_timer.hpp"

namespace steptrace::detail {

class recorder;
struct thread_state;

// A CUDA event on `stream` at a phase boundary, and a record naming its slot.
void mark_phase_event(recorder& rec, thread_state& s, void* stream, bool begin) noexcept;
// A CUDA event on the step's stream at a step boundary, and a record naming its slot.
void mark_step_event(recorder& rec, thread_state& s, bool begin) noexcept;

}  // namespace steptrace::detail
