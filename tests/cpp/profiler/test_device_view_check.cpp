// An honest device view: a trace whose device starts every step's work long after its launch,
// with nothing traced running before it (a device clock offset, or another process's work), is
// said incomplete and the host view decides. The truth is the trace's own construction.
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
summary steps_with_kernels_late_by(double late_us) {
  trace_text t;
  for (int k = 0; k < 6; ++k) {
    const double at = 20000.0 * k;
    t.add("user_annotation", "ProfilerStep#" + std::to_string(k + 1), 1, at, 20000);
    t.add("cpu_op", "aten::mm", 1, at + 1000, 500);
    t.add("cuda_runtime", "cudaLaunchKernel", 1, at + 1100, 10, corr(k + 1));
    const double start = at + 1110 + late_us;
    t.add("kernel", "gemm", 7, start, 8000, device_args(k + 1), 0);
    t.add("cuda_runtime", "cudaDeviceSynchronize", 1, at + 2000, start + 8000 - (at + 2000), corr(100 + k));
  }
  const temp_file f(t.json());
  return read_profiler_trace(f.path);
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
  bool refuted = false;
  for (const hypothesis& h : s.diag.hypotheses) refuted = refuted || (h.fix == "a complete device view" && !h.holds);
  CHECK(refuted);
  CHECK_THAT(s.diag.advice.back(), Contains("make the device view whole"));
}

TEST_CASE("kernels that start as they are launched leave the device view whole", "[profiler][device_view]") {
  const summary s = steps_with_kernels_late_by(10);
  CHECK(s.fact("trace.device_late") == nullptr);
  CHECK_THAT(s.diag.evidence, !Contains("not complete"));
  CHECK_THAT(s.diag.evidence, Contains("GPU"));
}
