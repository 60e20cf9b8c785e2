// Internal (not public API): CUPTI's ids of the streams a thread's steps work on, so that a step's
// device view covers its own streams (analysis/device_view.hpp). A CUstream handle is not what
// CUPTI's records name: they carry a context id and a stream id unique within that context.
//
// Usage, on the recording thread:
//   stream_table table;                               // one per recording thread
//   std::uint32_t i = stream_index(table, stream, stream_context(stream));  // no_event: nothing to say
//   push(stream_scope, i);                            // the collector reads table.keys[i]
#pragma once

#include <cstdint>

#include "gpu/device_record.hpp"
#include "steptrace/detail/ring.hpp"

namespace steptrace::detail {

// Append-only. The thread writes an entry before the record that names it, so the collector,
// having drained that record, reads a finished entry without a lock.
struct stream_table {
  stream_key keys[max_thread_streams] = {};  // read by the collector
  void* handles[max_thread_streams] = {};    // recording thread only
  void* contexts[max_thread_streams] = {};   // the context each handle meant (a default-stream
                                             // handle names another stream in each context)
  std::uint32_t count = 0;                   // recording thread only
};

// A stream_index that names no entry: the stream could not be mapped (the table is full, or CUPTI
// did not know it). A step that used one is viewed on every stream.
inline constexpr std::uint32_t unknown_stream = max_thread_streams;

// The entry for `stream` in `context` (gpu/event_timer.hpp's stream_context: for nullptr or
// CU_STREAM_LEGACY the legacy default stream of the current context, for CU_STREAM_PER_THREAD
// the per-thread one), mapped with CUPTI on first sight and remembered by handle and context: a
// stream destroyed and another created at the same address keeps the first one's ids.
// unknown_stream as above; no_event when there is nothing to say: no CUPTI, or no context (no
// work can have been queued there yet).
std::uint32_t stream_index(stream_table& table, void* stream, void* context) noexcept;

}  // namespace steptrace::detail
