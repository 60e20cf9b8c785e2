// Start-up that a trace itself shows, left out of the steps it would otherwise be advised on: a
// range the program names warm-up (a window begins after it, leading steps it covers are warm-up
// steps, a smaller one is set aside) and graph capture (launches that record and run nothing).
// Hand-made traces against hand-worked truth.
#include <catch2/catch.hpp>
#include <string>

#include "profiler/trace_names.hpp"
#include "steptrace/profiler_trace.hpp"
#include "steptrace/summary.hpp"
#include "trace_files.hpp"

using namespace steptrace;
using namespace steptrace::testing;

TEST_CASE(
    "a range the program names warm-up is start-up by its own words: the window begins after it, a step sets it aside",
    "[profiler]") {
  // A benchmark harness: its warm-up forward (context creation, algorithm search) and then its
  // measured forward, a cache-clearing pass between; no ProfilerStep#N.
  trace_text t;
  t.add("user_annotation", "[bench|cuda]", 1, 0, 10000);
  t.add("user_annotation", "[bench|model|warmup|forward]", 1, 100, 5000);
  t.add("user_annotation", "[bench|model|warmup|forward]", 1, 110, 4900);  // nested: one range
  t.add("cpu_op", "aten::mm", 1, 200, 4700);
  t.add("cuda_runtime", "cudaLaunchKernel", 1, 300, 10, corr(1));
  t.add("kernel", "gemm", 7, 400, 400, device_args(1), 0);
  t.add("user_annotation", "[bench|model|measure|forward]", 1, 6000, 1000);
  t.add("cpu_op", "aten::mm", 1, 6100, 300);
  t.add("cuda_runtime", "cudaLaunchKernel", 1, 6110, 10, corr(2));
  t.add("kernel", "gemm", 7, 6150, 400, device_args(2), 0);
  t.add("user_annotation", "Optimizer.step#WarmupLR.step", 1, 6500, 100);  // a name, not the word
  t.add("user_annotation", "[bench|clear_cache]", 1, 7000, 2500);
  const summary w = read_profiler_trace(temp_file(t.json()).path);
  CHECK(w.windows);
  CHECK(w.step_ms.mean == Approx(10.0 - 5.1).margin(1e-9));  // from the warm-up's end to the trace's end
  REQUIRE(w.gpu);
  CHECK(w.gpu->busy_ms.mean == Approx(0.4).margin(1e-9));  // the measured kernel only
  CHECK(w.gpu->kernels_per_step == 1);
  CHECK_THAT(w.backend.reason,
             Catch::Matchers::Contains("the window begins where the program's own warm-up ends: 1 "
                                       "range named warm-up (`[bench|model|warmup|forward]`), 5.000 ms, "
                                       "left out"));
  // The GPU idles 4.5 ms: 2.5 of it while the host clears the cache, the harness's own 1.4 after.
  REQUIRE_FALSE(w.diag.advice.empty());
  CHECK_THAT(w.diag.advice.front(),
             Catch::Matchers::Contains("starting with `[bench|clear_cache]`: the GPU spends 56% of "
                                       "its idle time while the host is in it"));

  // With no op after the warm-up, the window keeps it (nothing else would be left to read).
  trace_text only;
  only.add("user_annotation", "warmup", 1, 0, 1000);
  only.add("cpu_op", "aten::mm", 1, 100, 500);
  const summary o = read_profiler_trace(temp_file(only.json()).path);
  CHECK(o.step_ms.mean == Approx(1.0).margin(1e-9));
  CHECK_THAT(o.backend.reason, !Catch::Matchers::Contains("warm-up ends"));

  // Inside a step it covers less than half of, the range is set aside with the one-time costs:
  // in no step, never advised on.
  trace_text steps;
  for (int i = 0; i < 3; ++i) {
    steps.add("user_annotation", "ProfilerStep#" + std::to_string(i + 1), 1, i * 3000, 3000);
    steps.add("cpu_op", "aten::mm", 1, i * 3000 + 2000, 500);
  }
  steps.add("user_annotation", "Warm-up iteration", 1, 100, 1200);  // 40% of its step
  const summary s = read_profiler_trace(temp_file(steps.json()).path);
  CHECK(s.steps == 3);
  REQUIRE(s.set_aside.size() == 1);
  CHECK(s.set_aside[0].name == "initialisation");
  CHECK(s.set_aside[0].total_ms == Approx(1.2).margin(1e-9));
  CHECK(s.step_ms.mean == Approx((3 * 3.0 - 1.2) / 3).margin(1e-9));

  // Steps such ranges cover half or more of, from the first on, are warm-up steps; the last always
  // counts.
  trace_text lead;
  for (int i = 0; i < 4; ++i) {
    lead.add("user_annotation", "ProfilerStep#" + std::to_string(i), 1, i * 1000, 990);
    lead.add("cpu_op", "aten::mm", 1, i * 1000 + 100, 500 + (i < 2 ? 300 : 0));
  }
  lead.add("user_annotation", "warmup", 1, 0, 1995);   // steps 0 and 1
  lead.add("user_annotation", "warmup", 1, 2000, 90);  // 0.09 ms of step 2, before its op: set aside
  const summary l = read_profiler_trace(temp_file(lead.json()).path);
  CHECK(l.steps == 2);
  CHECK(l.warmup_steps == 2);
  REQUIRE(l.set_aside.size() == 1);
  CHECK(l.set_aside[0].total_ms == Approx(0.09).margin(1e-9));
  CHECK(phase_mean(l, "compute") == Approx(0.5).margin(1e-9));  // the warm-up steps' 0.8 ms are not in it
  CHECK_THAT(l.backend.reason,
             Catch::Matchers::Contains("the first 2 steps are left out as warm-up by the program's "
                                       "own words: ranges named warm-up (`warmup`) cover most of each"));
  lead.add("user_annotation", "warm-up", 1, 2300, 1690);  // now most of every step: the last one counts
  const summary all = read_profiler_trace(temp_file(lead.json()).path);
  CHECK(all.steps == 1);
  CHECK(all.warmup_steps == 3);
}

TEST_CASE("warm-up is a word of a range's name, in any case and spelling, never part of another word", "[profiler]") {
  using steptrace::detail::names_warmup;
  for (const char* yes : {"warmup", "WARMUP", "Warm-Up iteration", "warm_up", "warm up", "[param|net|0|warmup|forward]",
                          "bench.warmup.3", "lr_warmup"}) {
    CHECK(names_warmup(yes));
  }
  for (const char* no : {"Optimizer.step#WarmupLR.step", "prewarmup", "warmups", "warm", "warmer up", "wa rmup", "",
                         "ProfilerStep#3", "swarm_up"}) {
    CHECK_FALSE(names_warmup(no));
  }
}

TEST_CASE("graph capture is start-up: the range holding a step's captures is set aside, unless every step captures",
          "[profiler]") {
  // A server's start-up: a range capturing one graph (its launches record, nothing runs), then
  // the graph instantiated.
  trace_text w;
  w.add("user_annotation", "capture_8_FULL", 1, 0, 5000);
  w.add("cuda_runtime", "cudaStreamBeginCapture", 1, 100, 5);
  for (int i = 0; i < 40; ++i) w.add("cuda_runtime", "cudaLaunchKernel", 1, 200 + i * 100, 20, corr(100 + i));
  w.add("cuda_runtime", "cudaStreamEndCapture", 1, 4300, 10);
  w.add("cuda_runtime", "cudaGraphInstantiateWithFlags", 1, 4400, 500);
  w.add("cpu_op", "aten::empty", 1, 5010, 20);  // after it: 0.03 ms of ops
  const summary s = read_profiler_trace(temp_file(w.json()).path);
  REQUIRE(s.set_aside.size() == 1);
  CHECK(s.set_aside[0].name == "initialisation");
  CHECK(s.set_aside[0].total_ms == Approx(5.0).margin(1e-9));
  REQUIRE(s.fact("trace.graph_captures") != nullptr);
  CHECK(*s.fact("trace.graph_captures") == "1");
  CHECK(s.diag.label == "BALANCED");
  CHECK_THAT(s.diag.evidence, Catch::Matchers::StartsWith("This trace is 99% one-time start-up work (1 graph capture: "
                                                          "launches that record a graph and run nothing)"));
  REQUIRE(s.diag.advice.size() == 1);
  CHECK_THAT(s.diag.advice[0], Catch::Matchers::StartsWith("trace the steady state instead"));
  CHECK(s.diag.gains.empty());

  // Steps: the first records its graph inside torch.compile's range, the others replay it.
  trace_text steps;
  for (int i = 0; i < 3; ++i) {
    const double at = i * 10000;
    steps.add("user_annotation", "ProfilerStep#" + std::to_string(i), 1, at, 9000);
    steps.add("cuda_runtime", "cudaGraphLaunch", 1, at + 8000, 50, corr(10 + i));
    steps.add("kernel", "gemm", 7, at + 8060, 900, device_args(10 + i), 0);
  }
  steps.add("user_annotation", "CUDAGraphNode.record (dynamo_timed)", 1, 1000, 6000);
  steps.add("cuda_runtime", "cudaStreamBeginCapture", 1, 1100, 5);
  steps.add("cuda_runtime", "cudaStreamEndCapture", 1, 6000, 5);
  const summary st = read_profiler_trace(temp_file(steps.json()).path);
  CHECK(st.steps == 3);
  REQUIRE(st.set_aside.size() == 1);
  CHECK(st.set_aside[0].total_ms == Approx(6.0).margin(1e-9));
  CHECK(st.step_ms.mean == Approx((3 * 9.0 - 6.0) / 3).margin(1e-9));
  CHECK(*st.fact("trace.graph_captures") == "1");
  CHECK(st.diag.label != "BALANCED");  // 6 of 27 ms: the steps are read, not called start-up

  // A capture in every step is the steps' own work: nothing set aside.
  for (int i = 1; i < 3; ++i) {
    steps.add("user_annotation", "CUDAGraphNode.record (dynamo_timed)", 1, i * 10000 + 1000, 6000);
    steps.add("cuda_runtime", "cudaStreamBeginCapture", 1, i * 10000 + 1100, 5);
    steps.add("cuda_runtime", "cudaStreamEndCapture", 1, i * 10000 + 6000, 5);
  }
  const summary every = read_profiler_trace(temp_file(steps.json()).path);
  CHECK(every.set_aside.empty());
  CHECK(every.fact("trace.graph_captures") == nullptr);
}

TEST_CASE("each new shape's first convolution is one-time work, not the steady host side of compute",
          "[profiler][first_calls]") {
  // Four steps of three convolutions at three shapes, each launching a 2 ms kernel. In the first
  // step each call searches for its algorithm for 40 ms with the device idle (cuDNN's or MIOpen's
  // benchmark, no telltale runtime call); later they take 0.3 ms.
  trace_text t;
  int c = 1;
  double at = 0;
  for (int k = 0; k < 4; ++k) {
    const double search = k == 0 ? 40000 : 300;
    const double length = 3 * (search + 2200) + 100;
    t.add("user_annotation", "ProfilerStep#" + std::to_string(k + 1), 1, at, length);
    double op = at + 50;
    for (int shape = 0; shape < 3; ++shape) {
      t.add("cpu_op", "aten::cudnn_convolution", 1, op, search);
      t.add("cuda_runtime", "cudaLaunchKernel", 1, op + search - 20, 10, corr(c));
      t.add("kernel", "conv_fprop_kernel", 7, op + search - 10, 2000, device_args(c), 0);
      ++c;
      op += search + 2200;
    }
    at += length;
  }
  const summary s = read_profiler_trace(temp_file(t.json()).path);
  REQUIRE(s.steps == 4);
  double set_aside_ms = 0;
  for (const set_aside_stats& a : s.set_aside) set_aside_ms += a.name == "initialisation" ? a.total_ms : 0.0;
  CHECK(set_aside_ms == Approx(3 * 40.0).margin(1e-6));  // all three first calls, not the first alone
  CHECK(s.diag.label == "COMPUTE-BOUND");
  for (const std::string& a : s.diag.advice) CHECK_THAT(a, !Catch::Matchers::Contains("profile the host side"));
}
