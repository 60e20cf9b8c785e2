// What held the GPU idle in a trace, named in the first fix (profiler/idle_holders.hpp,
// report/diagnosis/idle_holder_advice.cpp), and graph replays counted as one launch each.
// Hand-made traces against hand-worked truth.
#include <catch2/catch.hpp>
#include <string>

#include "steptrace/profiler_trace.hpp"
#include "steptrace/summary.hpp"
#include "trace_files.hpp"

using namespace steptrace;
using namespace steptrace::testing;

namespace {

double gain_of(const summary& s, const std::string& cause) {
  for (const auto& [name, gain] : s.diag.gains) {
    if (name == cause) return gain;
  }
  return -1;
}

// Step k at `at` (us) lasting `step_us`: an op launching one kernel of `kernel_us`.
void mm_step(trace_text& t, int k, double at, double step_us, double kernel_us) {
  t.add("user_annotation", "ProfilerStep#" + std::to_string(k + 1), 1, at, step_us);
  t.add("cpu_op", "aten::mm", 1, at, 1000);
  t.add("cuda_runtime", "cudaLaunchKernel", 1, at + 100, 5, corr(k + 1));
  t.add("kernel", "gemm", 7, at + 200, kernel_us, device_args(k + 1), 0);
}

}  // namespace

TEST_CASE("blocking runtime calls that hold the GPU idle are named with their count, time and gain", "[profiler]") {
  // Ten 10 ms steps: an op launching a 0.8 ms kernel, then cudaFree blocking 7 ms and cudaMalloc
  // 1 ms (the caching allocator off). The GPU idles 8 ms of each step inside them.
  trace_text t;
  for (int k = 0; k < 10; ++k) {
    const double at = 10000.0 * k;
    mm_step(t, k, at, 10000, 800);
    t.add("cuda_runtime", "cudaFree", 1, at + 1500, 7000);
    t.add("cuda_runtime", "cudaMalloc", 1, at + 8600, 1000);
  }
  const summary s = read_profiler_trace(temp_file(t.json()).path);
  REQUIRE(s.steps == 10);
  CHECK(*s.fact("trace.blocking_call") == "cudaFree");
  CHECK(std::stod(*s.fact("trace.blocking_idle_share")) == Approx(0.8).margin(1e-4));
  CHECK(std::stod(*s.fact("trace.blocking_ms_per_step")) == Approx(8.0).margin(1e-3));
  CHECK(std::stod(*s.fact("trace.blocking_calls_per_step")) == Approx(2.0));
  REQUIRE_FALSE(s.diag.advice.empty());
  CHECK_THAT(s.diag.advice.front(), Catch::Matchers::StartsWith("the host sat 8.000 ms a step in 2 blocking runtime "
                                                                "calls, most idle time in `cudaFree`"));
  CHECK_THAT(s.diag.advice.front(), Catch::Matchers::Contains("PYTORCH_NO_CUDA_MEMORY_CACHING unset"));
  CHECK_THAT(s.diag.advice.front(), Catch::Matchers::EndsWith("(up to 80% shorter steps)"));
  CHECK(gain_of(s, "runtime_calls") == Approx(0.8).margin(1e-4));
  CHECK_THAT(s.diag.evidence, Catch::Matchers::Contains("`cudaFree` (10 calls, 70.00 ms)"));
  // the same steps without the calls name none
  trace_text calm;
  for (int k = 0; k < 10; ++k) {
    mm_step(calm, k, 2000.0 * k, 2000, 1700);
  }
  const summary c = read_profiler_trace(temp_file(calm.json()).path);
  CHECK(c.fact("trace.blocking_call") == nullptr);
  CHECK(gain_of(c, "runtime_calls") < 0);
}

TEST_CASE("the op holding the GPU's idle time is named, with what such an op means", "[profiler]") {
  // Ten 10 ms steps: `aten::randn` builds the input on the CPU for 6 ms, a copy sends it (0.1 ms
  // on the device), then a 3 ms kernel. The GPU idles 6.9 ms a step, 6 of them in `aten::randn`.
  trace_text t;
  for (int k = 0; k < 10; ++k) {
    const double at = 10000.0 * k;
    t.add("user_annotation", "ProfilerStep#" + std::to_string(k + 1), 1, at, 10000);
    t.add("cpu_op", "aten::randn", 1, at, 6000);
    t.add("cpu_op", "aten::copy_", 1, at + 6000, 200);
    t.add("cuda_runtime", "cudaMemcpyAsync", 1, at + 6010, 50, corr(100 + k));
    t.add("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 7, at + 6070, 100, device_args(100 + k, 1 << 20), 0);
    t.add("cpu_op", "aten::mm", 1, at + 6300, 100);
    t.add("cuda_runtime", "cudaLaunchKernel", 1, at + 6310, 5, corr(k + 1));
    t.add("kernel", "gemm", 7, at + 6400, 3000, device_args(k + 1), 0);
  }
  const summary s = read_profiler_trace(temp_file(t.json()).path);
  REQUIRE(s.steps == 10);
  CHECK(s.diag.label == "BALANCED");
  CHECK(*s.fact("trace.idle_op") == "aten::randn");
  CHECK(std::stod(*s.fact("trace.idle_op_share")) == Approx(6.0 / 6.9).margin(1e-4));
  CHECK(std::stod(*s.fact("trace.idle_op_step_share")) == Approx(0.6).margin(1e-4));
  REQUIRE_FALSE(s.diag.advice.empty());
  CHECK_THAT(s.diag.advice.front(), Catch::Matchers::StartsWith("start with `aten::randn`: the GPU spends 87% of its "
                                                                "idle time while the host is in it"));
  CHECK_THAT(s.diag.advice.front(), Catch::Matchers::Contains("make them on the device"));
  CHECK_THAT(s.diag.advice.front(), Catch::Matchers::EndsWith("(up to 60% shorter steps)"));
  CHECK(gain_of(s, "op") == Approx(0.6).margin(1e-4));
}

TEST_CASE("a graph's replay is one launch, and a program replaying graphs is not told to adopt them", "[profiler]") {
  // Ten 2 ms steps in one op: a graph replay running 100 kernels of 3 us, then 20 eager launches
  // of 3 us kernels 50 us apart. 21 host launches a step, 120 kernels.
  trace_text t;
  int c = 1;
  for (int k = 0; k < 10; ++k) {
    const double at = 2000.0 * k;
    t.add("user_annotation", "ProfilerStep#" + std::to_string(k + 1), 1, at, 2000);
    t.add("cpu_op", "decode", 1, at, 1950);
    const int graph = c++;
    t.add("cuda_runtime", "cudaGraphLaunch", 1, at + 10, 5, corr(graph));
    for (int g = 0; g < 100; ++g) t.add("kernel", "graph_kernel", 7, at + 20 + 5 * g, 3, device_args(graph), 0);
    for (int e = 0; e < 20; ++e) {
      const int launch = c++;
      t.add("cuda_runtime", "cudaLaunchKernel", 1, at + 900 + 50 * e, 5, corr(launch));
      t.add("kernel", "eager_kernel", 7, at + 910 + 50 * e, 3, device_args(launch), 0);
    }
  }
  const summary s = read_profiler_trace(temp_file(t.json()).path);
  REQUIRE(s.steps == 10);
  CHECK(s.gpu->graph_replays_per_step == Approx(1));
  CHECK(s.gpu->graph_kernels_per_step == Approx(100));
  CHECK(std::stod(*s.fact("trace.launches_per_step")) == 21);
  CHECK(s.gpu->kernels_per_step == Approx(120));
  REQUIRE(s.diag.label == "LAUNCH-BOUND");
  CHECK_THAT(s.diag.evidence, Catch::Matchers::Contains("It replays 1 graph a step (100 kernels, each replay one "
                                                        "launch) and launches 20 kernels a step outside them."));
  REQUIRE_FALSE(s.diag.advice.empty());
  CHECK_THAT(s.diag.advice.front(), Catch::Matchers::StartsWith("the program already replays CUDA graphs (1 a step): "
                                                                "the 20 launches a step made outside them"));
  for (const std::string& a : s.diag.advice) CHECK_THAT(a, !Catch::Matchers::Contains("replay a step's"));
}

TEST_CASE("a first call set aside by its length is named with a range's name escaped", "[profiler]") {
  // A range the program named with a terminal escape, its first call 5 ms with the GPU idle and
  // the later ones 0.1 ms: set aside as start-up, its name said without the escape byte.
  trace_text t;
  for (int k = 0; k < 4; ++k) {
    const double at = 10000.0 * k;
    mm_step(t, k, at, 10000, 800);
    t.add("user_annotation", "\\u001b[2Jprep", 1, at + 2000, k == 0 ? 5000 : 100);
  }
  const summary s = read_profiler_trace(temp_file(t.json()).path);
  REQUIRE(s.fact("trace.one_time_calls") != nullptr);
  const std::string said = *s.fact("trace.one_time_calls");
  CHECK_THAT(said, Catch::Matchers::Contains("prep 5.000"));
  CHECK(said.find('\x1b') == std::string::npos);
  CHECK(s.diag.evidence.find('\x1b') == std::string::npos);
}
