// The CUPTI records of fake_gpu.hpp, laid out as CUPTI lays them out, for tests to emit.
#include "fake_gpu.hpp"
#include "record/clock.hpp"

namespace steptrace::testing {

std::uint64_t host_now_ns() {
  detail::host_clock::init();  // which clock now() reads is settled here
  return detail::host_clock::to_monotonic_ns(detail::host_clock::now());
}

fake_record kernel_record(std::uint64_t start, std::uint64_t end, std::uint32_t stream, std::uint32_t device) {
  fake_record r;
  auto& k = *reinterpret_cast<detail::cupti_records::kernel*>(r.bytes);
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = start;
  k.end = end;
  k.streamId = stream;
  k.deviceId = device;
  k.contextId = device + 1;
  return r;
}

fake_record named_kernel_record(std::uint64_t start, std::uint64_t end, const char* name, std::uint32_t correlation,
                                std::uint32_t stream, std::uint32_t device) {
  fake_record r = kernel_record(start, end, stream, device);
  auto& k = *reinterpret_cast<detail::cupti_records::kernel*>(r.bytes);
  k.name = name;
  k.correlationId = correlation;
  return r;
}

fake_record launch_record(std::uint64_t start, std::uint64_t end, std::uint32_t correlation) {
  fake_record r;
  auto& a = *reinterpret_cast<detail::cupti_records::api*>(r.bytes);
  a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  a.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
  a.start = start;
  a.end = end;
  a.correlationId = correlation;
  return r;
}

fake_record memory_record(std::uint64_t at, std::uint64_t bytes, bool freed, std::uint32_t device) {
  fake_record r;
  auto& m = *reinterpret_cast<detail::cupti_records::memory*>(r.bytes);
  m.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
  m.memoryOperationType =
      freed ? CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE : CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
  m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m.bytes = bytes;
  m.timestamp = at;
  m.deviceId = device;
  m.contextId = device + 1;
  return r;
}

fake_record sync_record(std::uint64_t start, std::uint64_t end, std::uint32_t device, std::uint32_t stream) {
  fake_record r;
  auto& k = *reinterpret_cast<detail::cupti_records::sync*>(r.bytes);
  k.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  k.type = stream == 0xffffffffu ? CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE
                                 : CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
  k.start = start;
  k.end = end;
  k.contextId = device + 1;
  k.streamId = stream;
  return r;
}

}  // namespace steptrace::testing
