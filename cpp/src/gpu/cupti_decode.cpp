#include "gpu/cupti_decode.hpp"

#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>

#include "gpu/cupti_records.hpp"
#include "record/kernel_names.hpp"

namespace steptrace::detail {
namespace {

static_assert(static_cast<std::uint32_t>(CUPTI_SYNCHRONIZATION_INVALID_VALUE) == no_stream);  // -1 in 12.x headers

using kernel_record = cupti_records::kernel;
using memcpy_record = cupti_records::memcpy;
using memset_record = cupti_records::memset;
using sync_record = cupti_records::sync;
using memory_record = cupti_records::memory;
using api_record = cupti_records::api;

// The host waited for the device. Stream-wait-event orders two streams without stopping the
// host, and the event and stream queries newer CUPTI reports (steptrace's own collector makes
// them) wait for nothing: only the three blocking kinds are syncs, whatever a newer CUPTI adds.
bool blocks_host(std::uint32_t type) {
  return type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE ||
         type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE ||
         type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE;
}

copy_kind direction(std::uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
      return copy_kind::h2d;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
      return copy_kind::d2h;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
      return copy_kind::d2d;
    default:
      return copy_kind::other;
  }
}

decoded timed(device_record& out, std::uint64_t start, std::uint64_t end) {
  if (start == 0 || end == 0 || end < start) return decoded::incomplete;
  out.start = start;
  out.end = end;
  return decoded::ok;
}

}  // namespace

decoded decode(const CUpti_Activity& activity, device_record& out) noexcept {
  out = device_record{};
  switch (activity.kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto& k = reinterpret_cast<const kernel_record&>(activity);
      out.kind = device_activity::kernel;
      out.device = k.deviceId;
      out.context = k.contextId;
      out.stream = k.streamId;
      bool collective = false;  // NCCL's, or another library's (record/collective_kernels.hpp): counted apart
      out.name = intern_kernel_name(k.name, collective);
      out.nccl = collective;
      out.correlation = k.correlationId;
      return timed(out, k.start, k.end);
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto& m = reinterpret_cast<const memcpy_record&>(activity);
      out.kind = device_activity::memcpy;
      out.copy = direction(m.copyKind);
      const std::uint8_t host_side = out.copy == copy_kind::d2h ? m.dstKind : m.srcKind;
      out.pageable = host_side == CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
      out.bytes = m.bytes;
      out.device = m.deviceId;
      out.context = m.contextId;
      out.stream = m.streamId;
      return timed(out, m.start, m.end);
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto& m = reinterpret_cast<const memset_record&>(activity);
      out.kind = device_activity::memset;
      out.bytes = m.bytes;
      out.device = m.deviceId;
      out.context = m.contextId;
      out.stream = m.streamId;
      return timed(out, m.start, m.end);
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
      const auto& s = reinterpret_cast<const sync_record&>(activity);
      if (!blocks_host(s.type)) return decoded::ignored;
      out.kind = device_activity::sync;
      out.context = s.contextId;
      out.stream = s.streamId;  // CUPTI_SYNCHRONIZATION_INVALID_VALUE (no_stream) but for stream syncs
      return timed(out, s.start, s.end);
    }
    case CUPTI_ACTIVITY_KIND_MEMORY2: {
      const auto& m = reinterpret_cast<const memory_record&>(activity);
      // Device memory only (not pinned or managed host memory): what a step holds on the GPU.
      if (m.memoryKind != CUPTI_ACTIVITY_MEMORY_KIND_DEVICE) return decoded::ignored;
      if (m.memoryOperationType != CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION &&
          m.memoryOperationType != CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE) {
        return decoded::ignored;
      }
      out.kind = device_activity::memory;
      out.freed = m.memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
      out.bytes = m.bytes;
      out.device = m.deviceId;
      out.context = m.contextId;
      out.stream = no_stream;  // the device's, whichever stream an asynchronous one was ordered on
      return timed(out, m.timestamp, m.timestamp);
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      const auto& a = reinterpret_cast<const api_record&>(activity);
      out.kind = device_activity::launch;
      out.graph =
          activity.kind == CUPTI_ACTIVITY_KIND_RUNTIME
              ? a.cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000 ||
                    a.cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000
              : a.cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch || a.cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz;
      out.correlation = a.correlationId;
      out.start = a.start;
      out.end = a.end;
      return a.start != 0 ? decoded::ok : decoded::ignored;  // a call, not device work: never incomplete
    }
    default:
      return decoded::ignored;
  }
}

}  // namespace steptrace::detail
