// CUPTI activity collection on the fake CUPTI (fake_gpu.hpp): records reach the step they ran
// in, unfinished work is read once finished rather than lost to a flush, counts are per tracer,
// and a CUPTI held by another tool leaves steptrace host-and-events only, saying so.
#include <catch2/catch.hpp>

#include "fake_gpu.hpp"
#include "gpu/activity.hpp"
#include "gpu/backend.hpp"
#include "helpers.hpp"
#include "record/clock.hpp"
#include "steptrace/steptrace.hpp"

using namespace steptrace;
using steptrace::detail::host_clock;
using steptrace::testing::fake_gpu;
using steptrace::testing::kernel_record;

namespace {

std::uint64_t now_ns() { return host_clock::to_monotonic_ns(host_clock::now()); }

// One step of about 2 ms of host time; returns its window on the host clock, in ns.
std::pair<std::uint64_t, std::uint64_t> one_step(tracer& t) {
  const std::uint64_t before = now_ns();
  {
    scoped_step step(t);
    scoped_phase p(t, builtin::compute);
    steptrace::testing::spin_for(std::chrono::microseconds(2000));
  }
  return {before, now_ns()};
}

}  // namespace

TEST_CASE("kernels reach the step they ran in", "[gpu][activity]") {
  fake_gpu gpu;
  tracer t(steptrace::testing::quiet());
  auto [b, e] = one_step(t);
  REQUIRE(t.summary().backend.cupti);
  // Three kernels well inside the step, on the host clock (as CUPTI stamps them for steptrace).
  const std::uint64_t mid = b + (e - b) / 2;
  gpu.emit({kernel_record(mid - 300'000, mid - 200'000), kernel_record(mid, mid + 100'000),
            kernel_record(mid + 150'000, mid + 250'000)});
  const summary s = t.summary();
  REQUIRE(s.gpu.has_value());
  CHECK(s.gpu->kernels_per_step == 3);
  CHECK(s.gpu->busy_ms.mean == Approx(0.3).margin(1e-6));
  CHECK(s.gpu->incomplete_records == 0);
}

TEST_CASE("work still running at summary() is read once it finishes, not lost as incomplete", "[gpu][activity]") {
  fake_gpu gpu;
  tracer t(steptrace::testing::quiet());
  auto [b, e] = one_step(t);
  const std::uint64_t mid = b + (e - b) / 2;
  gpu.emit({kernel_record(mid, mid + 100'000)}, /*complete=*/false);
  summary s = t.summary();
  REQUIRE(s.gpu.has_value());
  CHECK(s.gpu->kernels_per_step == 0);  // not finished: not yet known
  CHECK(s.gpu->incomplete_records == 0);
  CHECK(gpu.buffers_held() == 1);  // still with CUPTI
  gpu.finish_work();
  s = t.summary();
  CHECK(s.gpu->kernels_per_step == 1);
  CHECK(s.gpu->busy_ms.mean == Approx(0.1).margin(1e-6));
  CHECK(s.gpu->incomplete_records == 0);
}

TEST_CASE("a forced flush (at exit) hands back unfinished records, counted as incomplete", "[gpu][activity]") {
  fake_gpu gpu;
  tracer t(steptrace::testing::quiet());
  one_step(t);
  const detail::device_counts before = detail::device_record_counts();
  gpu.emit({kernel_record(1, 2), kernel_record(3, 4)}, /*complete=*/false);
  detail::flush_activity(detail::activity_flush::forced);
  CHECK(gpu.buffers_held() == 0);
  CHECK(detail::device_record_counts().incomplete - before.incomplete == 2);
}

TEST_CASE("a tracer made late, or reset, reports no records dropped that it never had", "[gpu][activity]") {
  fake_gpu gpu;
  tracer early(steptrace::testing::quiet());
  one_step(early);
  // More records than the store keeps, before the second tracer exists.
  std::vector<steptrace::testing::fake_record> batch(4096, kernel_record(10, 20));
  std::uint64_t cursor = detail::device_records_end(), lost = 0;
  std::vector<detail::device_record> sink;
  for (int i = 0; i < 140; ++i) {  // 573,440 records
    gpu.emit(batch);
    sink.clear();
    detail::read_device_records(cursor, sink, lost, detail::device_flush::completed);
  }
  tracer late(steptrace::testing::quiet());
  one_step(late);
  summary s = late.summary();
  REQUIRE(s.gpu.has_value());
  CHECK(s.gpu->dropped_records == 0);
  gpu.dropped = 7;  // CUPTI reports 7 records dropped with the next buffer
  gpu.emit({kernel_record(10, 20)});
  s = late.summary();
  CHECK(s.gpu->dropped_records == 7);
  late.reset();
  one_step(late);
  s = late.summary();
  CHECK(s.gpu->dropped_records == 0);
}

TEST_CASE("with CUPTI held by another tool steptrace runs on events and says why", "[gpu][activity]") {
  fake_gpu gpu;
  gpu.refuse_enable(true);
  tracer t(steptrace::testing::quiet());
  one_step(t);
  const summary s = t.summary();
  CHECK(s.backend.cuda);
  CHECK_FALSE(s.backend.cupti);
  CHECK_THAT(s.backend.reason, Catch::Matchers::Contains("held by another tool"));
  CHECK_FALSE(s.gpu.has_value());
}
