// An honest device view: a trace whose device starts every step's work long after its launch,
// with nothing traced running before it (another process's work), or that holds the device
// records of under half of most steps' launches, is said incomplete and the host view decides; a
// device clock offset that the syncs and the launches agree on is taken out. The truth is the
// trace's own construction.
#include <catch2/catch.hpp>
#include <string>

#include "steptrace/profiler_trace.hpp"
#include "steptrace/summary.hpp"
#include "trace_files.hpp"

using namespace steptrace;
using namespace steptrace::testing;
using Catch::Matchers::Contains;

namespace {

// Six 20 ms steps: an op launches one 8 ms kernel 1.1 ms in, and the host synchronises from 2 ms
// until the kernel ends. The kernel starts `late_us` after its launch returned.
// The device's clock runs `clock_us` ahead of the host's (written into its records); a sync
// returns `sync_early_us` before its kernel ends (0 in a real trace).
summary steps_with_kernels_late_by(double late_us, double clock_us = 0, double sync_early_us = 0) {
  trace_text t;
  for (int k = 0; k < 6; ++k) {
    const double at = 20000.0 + 20000.0 * k;
    t.add("user_annotation", "ProfilerStep#" + std::to_string(k + 1), 1, at, 20000);
    t.add("cpu_op", "aten::mm", 1, at + 1000, 500);
    t.add("cuda_runtime", "cudaLaunchKernel", 1, at + 1100, 10, corr(k + 1));
    const double start = at + 1110 + late_us;
    t.add("kernel", "gemm", 7, start + clock_us, 8000, device_args(k + 1), 0);
    t.add("cuda_runtime", "cudaDeviceSynchronize", 1, at + 2000, start + 8000 - sync_early_us - (at + 2000),
          corr(100 + k));
  }
  const temp_file f(t.json());
  return read_profiler_trace(f.path);
}

bool refuted(const summary& s, const std::string& fix) {
  for (const hypothesis& h : s.diag.hypotheses) {
    if (h.fix == fix && !h.holds) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("a device that starts every step's work late is said incomplete, and the host view decides",
          "[profiler][device_view]") {
  const summary s = steps_with_kernels_late_by(6000);
  REQUIRE(s.gpu);  // the device figures stay in the summary, as read
  const std::string* late = s.fact("trace.device_late");
  REQUIRE(late != nullptr);
  CHECK(*late == "5 5 6.000");  // the first step is warm-up (its device waited before anything ran)
  CHECK_THAT(s.diag.evidence, Contains("The device view is not complete: in 5 of 5 steps the device started work "
                                       "6.000 ms a step after its launch"));
  CHECK_THAT(s.diag.evidence, Contains("the host view decides"));
  CHECK(refuted(s, "a complete device view"));
  CHECK_THAT(s.diag.advice.back(), Contains("make the device view whole"));
  // Its syncs return as its kernels end: the clocks agree, so the premise of an offset is refuted.
  REQUIRE(s.fact("trace.device_clock") != nullptr);
  CHECK(*s.fact("trace.device_clock") == "0.000 6");
  CHECK_THAT(s.diag.evidence, Contains("another process's on the GPU: the clocks agree, 6 blocking syncs returning"));
  CHECK_THAT(s.diag.advice.back(), Contains("no other process on the GPU"));
  CHECK_THAT(s.diag.advice.back(), !Contains("aligns the device clock"));
}

TEST_CASE("kernels that start as they are launched leave the device view whole", "[profiler][device_view]") {
  const summary s = steps_with_kernels_late_by(10);
  CHECK(s.fact("trace.device_late") == nullptr);
  CHECK_THAT(s.diag.evidence, !Contains("not complete"));
  CHECK_THAT(s.diag.evidence, Contains("GPU"));
}

TEST_CASE("a device clock that runs ahead of the host's, measured by the syncs and the launches, is taken out",
          "[profiler][device_view]") {
  // Kernels start 10 us after their launch; the device stamps them 6 ms later than the host would.
  const summary s = steps_with_kernels_late_by(10, 6000);
  REQUIRE(s.fact("trace.device_clock") != nullptr);
  CHECK(*s.fact("trace.device_clock") == "6.000 6");
  CHECK(s.fact("trace.device_late") == nullptr);  // nothing left late once the offset is out
  CHECK_THAT(s.backend.reason, Contains("the device's clock runs 6.000 ms ahead of the host's (6 blocking syncs"));
  CHECK_THAT(s.diag.evidence, !Contains("not complete"));
  REQUIRE(s.gpu);
  // Truth: an 8 ms kernel in each 20 ms step; read against the host's clock it is 40% busy.
  CHECK(s.gpu->busy_share > 0.35);
  CHECK(s.gpu->busy_share < 0.45);
  // Read with the offset left in, the same steps are read late (the test above): the figures differ.
  CHECK(steps_with_kernels_late_by(6010).fact("trace.device_late") != nullptr);
}

TEST_CASE("a device clock behind the host's, kernels starting before their launch, is taken out",
          "[profiler][device_view]") {
  const summary s = steps_with_kernels_late_by(10, -3000);
  REQUIRE(s.fact("trace.device_clock") != nullptr);
  CHECK(*s.fact("trace.device_clock") == "-3.000 6");
  CHECK_THAT(s.backend.reason, Contains("runs 3.000 ms behind the host's"));
  REQUIRE(s.gpu);
  CHECK(s.gpu->busy_share > 0.35);
  CHECK(s.gpu->busy_share < 0.45);
}

TEST_CASE("syncs that return early while kernels start as launched measure no offset", "[profiler][device_view]") {
  // Each sync returns 6 ms before its kernel ends, yet the kernels start 10 us after their
  // launch: the launches refute a 6 ms offset, so nothing is moved.
  const summary s = steps_with_kernels_late_by(10, 0, 6000);
  CHECK(s.fact("trace.device_clock") == nullptr);
  CHECK_THAT(s.backend.reason, !Contains("clock runs"));
}

namespace {

// Six 20 ms steps of five 1 ms kernels each; steps from `first_short` on keep the record of one
// kernel only. Step 1 also captures a graph: its five launches have no kernel, rightly.
summary steps_with_kernels_recorded_from(int first_short) {
  trace_text t;
  int c = 1;
  for (int k = 0; k < 6; ++k) {
    const double at = 20000.0 + 20000.0 * k;
    t.add("user_annotation", "ProfilerStep#" + std::to_string(k + 1), 1, at, 20000);
    if (k == 0) {
      t.add("cuda_runtime", "cudaStreamBeginCapture", 1, at + 100, 5, corr(c++));
      for (int i = 0; i < 5; ++i) t.add("cuda_runtime", "cudaLaunchKernel", 1, at + 200 + 10 * i, 5, corr(c++));
      t.add("cuda_runtime", "cudaStreamEndCapture", 1, at + 300, 5, corr(c++));
    }
    for (int i = 0; i < 5; ++i) {
      const double launch = at + 1000 + 2000 * i;
      t.add("cpu_op", "aten::mm", 1, launch - 50, 100);
      t.add("cuda_runtime", "cudaLaunchKernel", 1, launch, 10, corr(c));
      if (k < first_short || i == 0) t.add("kernel", "gemm", 7, launch + 20, 1000, device_args(c), 0);
      ++c;
    }
  }
  const temp_file f(t.json());
  return read_profiler_trace(f.path);
}

}  // namespace

TEST_CASE("steps whose launches the trace holds few kernels of are under-recorded", "[profiler][device_view]") {
  SECTION("most steps: the view is not complete, and the host view decides") {
    const summary s = steps_with_kernels_recorded_from(1);
    REQUIRE(s.fact("trace.device_coverage") != nullptr);
    CHECK(*s.fact("trace.device_coverage") == "5 6 25 5");  // the capture's launches are not weighed
    CHECK_THAT(s.diag.evidence, Contains("The device view is not complete: in 5 of 6 steps the trace holds the "
                                         "device records of under half the kernels launched (5 of 25 launches"));
    CHECK(refuted(s, "a complete device view"));
    CHECK_THAT(s.diag.advice.back(), Contains("record fewer steps a trace"));
  }
  SECTION("one step: said beside the device figures") {
    const summary s = steps_with_kernels_recorded_from(5);
    CHECK_THAT(s.diag.evidence, Contains("in 1 of 6 steps the trace holds the device records of under half"));
    CHECK_THAT(s.diag.evidence, Contains("undercounted"));
    CHECK_THAT(s.diag.evidence, !Contains("not complete"));
  }
  SECTION("every kernel recorded, a capture's launches without kernels: whole") {
    const summary s = steps_with_kernels_recorded_from(6);
    CHECK(s.fact("trace.device_coverage") == nullptr);
    CHECK_THAT(s.diag.evidence, !Contains("under half"));
  }
}
