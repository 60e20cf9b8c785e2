// Sharing CUPTI with torch.profiler, on the fake CUPTI (fake_gpu.hpp), in the patterns PyTorch's
// issues report: repeated hand-overs, each of which registers a timestamp callback again (after
// which CUPTI was seen to stamp a session's first kernel records on its own clock: pytorch
// #192021), and a profiler session after steptrace's last hand-back still getting its records
// (a second CUPTI client left a later torch.profiler run with none: pytorch #191944).
#include <catch2/catch.hpp>
#include <chrono>

#include "fake_gpu.hpp"
#include "gpu/backend.hpp"
#include "helpers.hpp"
#include "steptrace/steptrace.hpp"

using namespace steptrace;
using steptrace::testing::fake_gpu;
using steptrace::testing::host_now_ns;
using steptrace::testing::kernel_record;
using steptrace::testing::launch_record;
using steptrace::testing::named_kernel_record;
using steptrace::testing::one_step;

namespace {

constexpr std::uint64_t other_clock_off = 100'000'000'000'000;  // ~1e14 ns: CUPTI's own clock, as reported

}  // namespace

TEST_CASE("repeated hand-overs: steptrace's clock is back each time, and records stamped on another are left out",
          "[gpu][handover]") {
  fake_gpu gpu;
  tracer t(steptrace::testing::quiet());
  one_step(t);  // the backend starts: steptrace registers its clock
  REQUIRE(gpu.steptrace_clock());
  std::uint64_t bad = 0, good = 0;
  std::uint32_t correlation = 1;
  for (int session = 1; session <= 3; ++session) {
    detail::yield_cupti("torch.profiler");
    gpu.other_tool_starts();  // its own timestamp callback, as Kineto registers one each session
    CHECK_FALSE(gpu.steptrace_clock());
    gpu.other_tool_stops();
    detail::reclaim_cupti();
    CHECK(gpu.steptrace_clock());  // registered again: records on steptrace's clock, not the profiler's
    // The first `session` kernels of the session come stamped on another clock (#192021: one more
    // after each registration); their launch calls' records are right. Then a good one.
    auto [b, e] = one_step(t);
    const std::uint64_t mid = b + (e - b) / 2;
    std::vector<steptrace::testing::fake_record> buffer;
    for (int k = 0; k < session; ++k, ++correlation) {
      buffer.push_back(launch_record(mid - 20'000, mid - 10'000, correlation));
      // Alternately: far before collection began, and 5 ms before its own launch call.
      const std::uint64_t start = k % 2 == 0 ? mid - other_clock_off : mid - 5'000'000;
      buffer.push_back(named_kernel_record(start, start + 5'000, "corrupted", correlation));
      ++bad;
    }
    buffer.push_back(launch_record(mid - 20'000, mid - 10'000, correlation));
    buffer.push_back(named_kernel_record(mid, mid + 100'000, "good", correlation++));
    ++good;
    gpu.emit(buffer);
  }
  const summary s = t.summary();
  REQUIRE(s.gpu.has_value());
  CHECK(s.gpu->steps_viewed == 4);                  // the first step, before any hand-over, had no kernel
  CHECK(s.gpu->kernels_per_step * 4 == Approx(3));  // the good kernel alone in each of the others
  CHECK(s.gpu->busy_ms.mean * 4 == Approx(0.3).margin(1e-6));
  const std::string* counted = s.fact("cupti.records_bad_clock");
  REQUIRE(counted != nullptr);
  CHECK(*counted == std::to_string(bad));
  CHECK(good == 3);
}

TEST_CASE("a profiler session after steptrace's last hand-back still gets every record", "[gpu][handover]") {
  fake_gpu gpu;
  tracer t(steptrace::testing::quiet());
  one_step(t);
  for (int session = 0; session < 3; ++session) {  // three captures' hand-overs, as capture_max allows
    detail::yield_cupti("torch.profiler");
    gpu.other_tool_starts();
    gpu.other_tool_stops();
    detail::reclaim_cupti();
  }
  const std::uint64_t before = gpu.other_tool_records();
  detail::yield_cupti("torch.profiler");  // a fourth session, the program's own
  CHECK(gpu.kinds_enabled() == 0);        // steptrace left nothing on that would go to the profiler
  CHECK(gpu.buffers_held() == 0);         // nor a buffer of its own with CUPTI
  gpu.other_tool_starts();
  auto [b, e] = one_step(t);
  gpu.emit({kernel_record(b + 10'000, b + 20'000), kernel_record(b + 30'000, b + 40'000)});
  gpu.other_tool_stops();
  CHECK(gpu.other_tool_records() == before + 2);
  CHECK_FALSE(gpu.steptrace_has_callbacks());
  detail::reclaim_cupti();
  CHECK(gpu.steptrace_has_callbacks());
}
