// CUPTI's ids of the streams a thread works on. See stream_ids.hpp.
#include "gpu/stream_ids.hpp"

#include <cuda.h>

#include "gpu/backend_state.hpp"

namespace steptrace::detail {
namespace {

// The key of `stream` in `context`; false when CUPTI cannot tell.
bool map_stream(const cupti_functions& c, CUcontext context, CUstream stream, stream_key& out) {
  std::uint32_t context_id = 0, stream_id = 0;
  const bool per_thread = stream == CU_STREAM_PER_THREAD;
  if (c.context_id(context, &context_id) != CUPTI_SUCCESS) return false;
  if (c.stream_id(context, is_default_stream(stream) ? nullptr : stream, per_thread ? 1 : 0, &stream_id) !=
      CUPTI_SUCCESS) {
    return false;
  }
  out = {context_id, stream_id};
  return true;
}

}  // namespace

std::uint32_t stream_index(stream_table& table, void* handle, void* context) noexcept {
  const cupti_functions* c = loaded_cupti();
  if (c == nullptr || c->context_id == nullptr || c->stream_id == nullptr || context == nullptr) return no_event;
  for (std::uint32_t i = 0; i < table.count; ++i) {
    if (table.handles[i] == handle && table.contexts[i] == context) return i;
  }
  if (table.count == max_thread_streams) return unknown_stream;
  const std::uint32_t i = table.count;
  if (!map_stream(*c, static_cast<CUcontext>(context), static_cast<CUstream>(handle), table.keys[i])) {
    return unknown_stream;
  }
  table.handles[i] = handle;
  table.contexts[i] = context;
  table.count = i + 1;
  return i;
}

}  // namespace steptrace::detail
