// CUPTI activity records -> device records, on hand-made records of each kind. Built against
// the CUDA 13 toolkit's CUPTI headers and, in scripts/test, against CUDA 12's as well.
#include <catch2/catch.hpp>
#include <cstring>

#include "gpu/cupti_decode.hpp"
#include "gpu/cupti_records.hpp"

using namespace steptrace::detail;

namespace {

template <class T>
T blank(CUpti_ActivityKind kind) {
  T r;
  std::memset(&r, 0, sizeof r);
  r.kind = kind;
  return r;
}

template <class T>
decoded run(const T& r, device_record& out) {
  return decode(reinterpret_cast<const CUpti_Activity&>(r), out);
}

}  // namespace

TEST_CASE("a concurrent kernel record decodes to a kernel interval", "[gpu][decode]") {
  auto k = blank<cupti_records::kernel>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  k.start = 1'000;
  k.end = 51'000;
  k.deviceId = 1;
  k.streamId = 7;
  device_record out;
  REQUIRE(run(k, out) == decoded::ok);
  CHECK(out.kind == device_activity::kernel);
  CHECK(out.start == 1'000);
  CHECK(out.end == 51'000);
  CHECK(out.device == 1);
  CHECK(out.stream == 7);
  CHECK_FALSE(out.nccl);
  k.name = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
  REQUIRE(run(k, out) == decoded::ok);
  CHECK(out.nccl);  // NCCL's collectives are counted apart, in the live device view too
  k.name = "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*, unsigned long)";
  REQUIRE(run(k, out) == decoded::ok);
  CHECK(out.nccl);  // and other libraries' (PyTorch's symmetric memory here), the name classified once
  REQUIRE(run(k, out) == decoded::ok);
  CHECK(out.nccl);  // the second record of that name, from the name's cache
  k.name = "void at::native::vectorized_elementwise_kernel<4>(int)";
  REQUIRE(run(k, out) == decoded::ok);
  CHECK_FALSE(out.nccl);
}

TEST_CASE("memcpy records carry direction, bytes and whether the host side was pageable", "[gpu][decode]") {
  auto m = blank<cupti_records::memcpy>(CUPTI_ACTIVITY_KIND_MEMCPY);
  m.start = 10;
  m.end = 20;
  m.bytes = 1 << 20;
  device_record out;
  SECTION("pageable host to device") {
    m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
    m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
    m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    REQUIRE(run(m, out) == decoded::ok);
    CHECK(out.copy == copy_kind::h2d);
    CHECK(out.pageable);
    CHECK(out.bytes == (1u << 20));
  }
  SECTION("pinned host to device") {
    m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
    m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
    REQUIRE(run(m, out) == decoded::ok);
    CHECK(!out.pageable);
  }
  SECTION("device to pageable host looks at the destination") {
    m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
    m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
    REQUIRE(run(m, out) == decoded::ok);
    CHECK(out.copy == copy_kind::d2h);
    CHECK(out.pageable);
  }
  SECTION("device to device") {
    m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOD;
    REQUIRE(run(m, out) == decoded::ok);
    CHECK(out.copy == copy_kind::d2d);
  }
}

TEST_CASE("memset and synchronization records decode", "[gpu][decode]") {
  auto s = blank<cupti_records::memset>(CUPTI_ACTIVITY_KIND_MEMSET);
  s.start = 5;
  s.end = 9;
  s.bytes = 4096;
  device_record out;
  REQUIRE(run(s, out) == decoded::ok);
  CHECK(out.kind == device_activity::memset);
  CHECK(out.bytes == 4096);
  auto y = blank<cupti_records::sync>(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
  y.start = 100;
  y.end = 900;
  y.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
  REQUIRE(run(y, out) == decoded::ok);
  CHECK(out.kind == device_activity::sync);
  CHECK(out.end - out.start == 800);
}

TEST_CASE("a record flushed before it finished is incomplete and never read as an interval", "[gpu][decode]") {
  auto k = blank<cupti_records::kernel>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  device_record out;
  k.start = 1'000;
  k.end = 0;  // still running at a forced flush
  CHECK(run(k, out) == decoded::incomplete);
  k.end = 500;  // reversed
  CHECK(run(k, out) == decoded::incomplete);
  auto other = blank<cupti_records::kernel>(CUPTI_ACTIVITY_KIND_DRIVER);
  CHECK(run(other, out) == decoded::ignored);
}

TEST_CASE("only synchronisations that block the host count as syncs", "[gpu][decode]") {
  auto y = blank<cupti_records::sync>(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
  y.start = 100;
  y.end = 900;
  device_record out;
  for (auto type :
       {CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE,
        CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE}) {
    y.type = type;
    CHECK(run(y, out) == decoded::ok);
  }
  // Stream-wait-event orders streams on the device; unknown types (newer CUPTI also reports
  // event and stream queries, the collector's own among them) are not counted either.
  for (std::uint32_t type : {0u, 2u, 5u, 6u, 9u}) {
    y.type = static_cast<CUpti_ActivitySynchronizationType>(type);
    CHECK(run(y, out) == decoded::ignored);
  }
}

TEST_CASE("device memory records decode to allocations and releases; other memory is ignored", "[gpu][decode]") {
  auto m = blank<cupti_records::memory>(CUPTI_ACTIVITY_KIND_MEMORY2);
  m.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
  m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m.bytes = 1 << 20;
  m.timestamp = 5'000;
  m.deviceId = 1;
  m.contextId = 2;
  m.streamId = 13;
  device_record out;
  REQUIRE(run(m, out) == decoded::ok);
  CHECK(out.kind == device_activity::memory);
  CHECK_FALSE(out.freed);
  CHECK(out.bytes == (1u << 20));
  CHECK(out.start == 5'000);
  CHECK(out.end == 5'000);
  CHECK(out.context == 2);
  CHECK(out.stream == no_stream);  // the device's memory, whatever stream ordered it
  m.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
  REQUIRE(run(m, out) == decoded::ok);
  CHECK(out.freed);
  m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;  // host memory: not the device's
  CHECK(run(m, out) == decoded::ignored);
  m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_INVALID;
  CHECK(run(m, out) == decoded::ignored);
}
