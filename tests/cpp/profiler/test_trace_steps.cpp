// Which intervals of a torch.profiler trace are steps: warm-up by evidence (the only step always
// counts), ranges the user names, a training loop's iterations, the whole trace as one window,
// steptrace's own annotations;
// and a collective on another thread as `wait`. Hand-made traces against hand-worked truth, and
// the ResNet-50 samples against their own stamps.
#include <catch2/catch.hpp>
#include <string>

#include "steptrace/profiler_trace.hpp"
#include "steptrace/summary.hpp"
#include "trace_files.hpp"

using namespace steptrace;
using namespace steptrace::testing;

TEST_CASE("warm-up by evidence: the first step is left out only when its device ran work from before the trace",
          "[profiler]") {
  // num_workers=4, step 5: the first copy's cudaMemcpyAsync begins at +8.556 ms and its copy
  // starts at +44.992 ms, with no traced device work in between (the trace's own stamps): the
  // device ran 36.436 ms of untraced work. num_workers=0, step 5: its first copy starts 0.160 ms
  // after its launch and nothing else waits: no evidence, so step 5 counts, and the mean step
  // takes in its ProfilerStep#5 range, 176.078 ms long.
  const summary nw4 = read_profiler_trace(data("resnet50_num_workers_4.pt.trace.json.gz"));
  CHECK(nw4.steps == 5);
  CHECK(nw4.warmup_steps == 1);
  CHECK_THAT(nw4.backend.reason, Catch::Matchers::Contains("first step is left out as warm-up: its device ran work "
                                                           "launched before the trace for 36.44 ms"));
  const summary nw0 = read_profiler_trace(data("resnet50_num_workers_0.pt.trace.json.gz"));
  CHECK(nw0.steps == 6);
  CHECK(nw0.warmup_steps == 0);
  CHECK(nw0.step_ms.mean == Approx((5 * 174.580 + 176.078) / 6).margin(0.001));
  CHECK(nw0.diag.label == "INPUT-BOUND");

  // The only step of a trace always counts; the untraced span is busy, not idle time of a phase.
  trace_text t;
  t.add("user_annotation", "ProfilerStep#7", 1, 0, 3000);
  t.add("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 1, 0, 2500);
  t.add("cuda_runtime", "cudaLaunchKernel", 1, 2600, 5, corr(1));
  t.add("kernel", "late", 7, 2800, 100, device_args(1), 0);  // began 0.2 ms after its launch: no evidence
  t.add("cuda_runtime", "cudaMemcpyAsync", 1, 100, 5, corr(2));
  t.add("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 7, 1700, 50, device_args(2, 64), 0);  // 1.6 ms late
  const summary one = read_profiler_trace(temp_file(t.json()).path);
  REQUIRE(one.steps == 1);
  CHECK(one.warmup_steps == 0);
  REQUIRE(one.gpu);
  // busy: untraced 0.100..1.700 (1.6 ms), the copy 0.05, the kernel 0.1 ms
  CHECK(one.gpu->busy_ms.mean == Approx(1.75).margin(1e-9));
  CHECK(idle_in(one, "input") == Approx(2.5 - 1.65).margin(1e-9));  // 0..0.1 and 1.75..2.5
  CHECK(one.gpu->kernels_per_step == 1);                            // the untraced span is no kernel
  CHECK_THAT(one.backend.reason,
             Catch::Matchers::Contains("work launched before the trace for 1.600 ms of the first step"));
  // the same copy 0.9 ms late is no evidence: every microsecond it waited is idle
  trace_text soon;
  soon.add("user_annotation", "ProfilerStep#7", 1, 0, 3000);
  soon.add("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 1, 0, 2500);
  soon.add("cuda_runtime", "cudaMemcpyAsync", 1, 100, 5, corr(2));
  soon.add("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 7, 1000, 50, device_args(2, 64), 0);
  soon.add("cuda_runtime", "cudaLaunchKernel", 1, 2600, 5, corr(1));
  soon.add("kernel", "late", 7, 2800, 100, device_args(1), 0);
  const summary quiet = read_profiler_trace(temp_file(soon.json()).path);
  REQUIRE(quiet.gpu);
  CHECK(quiet.gpu->busy_ms.mean == Approx(0.15).margin(1e-9));
  CHECK_THAT(quiet.backend.reason, !Catch::Matchers::Contains("before the trace"));
}

TEST_CASE("a trace without steps: ranges the user names, else the whole trace as one window", "[profiler]") {
  trace_text t;  // a server: three execute_model calls, no ProfilerStep#N
  for (int i = 0; i < 3; ++i) {
    const double at = 100 + i * 1000;
    t.add("user_annotation", "execute_model", 1, at, 600);
    t.add("cpu_op", "aten::mm", 1, at + 100, 300);
    t.add("cuda_runtime", "cudaLaunchKernel", 1, at + 110, 10, corr(10 + i));
    t.add("kernel", "gemm", 7, at + 150, 400, device_args(10 + i), 0);
    t.add("cuda_runtime", "hipDeviceSynchronize", 1, at + 450, 120);  // ROCm's name: a sync like cuda's
  }
  t.add("cpu_op", "aten::zeros", 1, 0, 50);  // before the first call
  const temp_file f(t.json());

  const summary window = read_profiler_trace(f.path);
  CHECK(window.windows);
  CHECK(window.steps == 1);
  CHECK(window.warmup_steps == 0);
  CHECK(window.step_ms.mean == Approx(2.7).margin(1e-9));  // 0 (aten::zeros) to 2.7 ms (the last call's end)
  REQUIRE(window.gpu);
  CHECK(window.gpu->busy_ms.mean == Approx(1.2).margin(1e-9));
  CHECK(window.gpu->syncs_per_step == 3);
  CHECK(phase_mean(window, "wait") == Approx(0.36).margin(1e-9));  // hipDeviceSynchronize, 3 x 120 us
  // here a custom phase, holding the ops inside it (aten::mm), less the syncs (wait)
  CHECK(phase_mean(window, "execute_model") == Approx(3 * (0.6 - 0.12)).margin(1e-9));
  CHECK_THAT(window.table(), Catch::Matchers::Contains("1 window of a trace without steps"));
  CHECK_THAT(window.backend.reason, Catch::Matchers::Contains("the whole trace is one window"));
  CHECK(summary::from_json(window.json()).windows);

  const summary named = read_profiler_trace(f.path, {"execute_model"});
  CHECK_FALSE(named.windows);
  CHECK(named.steps == 3);
  CHECK(named.step_ms.mean == Approx(0.6).margin(1e-9));
  CHECK(named.phase("execute_model") == nullptr);                   // the step itself is no phase
  CHECK(phase_mean(named, "compute") == Approx(0.3).margin(1e-9));  // aten::mm, with the launch inside it
  CHECK(phase_mean(named, "other") == Approx(0.6 - 0.3 - 0.12).margin(1e-9));
  CHECK(phase_mean(named, "wait") == Approx(0.12).margin(1e-9));
  CHECK(named.gpu->busy_ms.mean == Approx(0.4).margin(1e-9));
  CHECK_THAT(named.backend.reason, Catch::Matchers::Contains("3 steps, each a `execute_model` range"));
  CHECK_FALSE(summary::from_json(named.json()).windows);

  CHECK_THAT(read_error_with(f.path, "no_such_range"),
             Catch::Matchers::Contains(f.path + ": no step: the trace has no host range named \"no_such_range\""));
}

TEST_CASE("a CPU collective on another thread covering a main-thread gap is `collective`, inside wait", "[profiler]") {
  trace_text t;  // gloo: the fast rank's all-reduce waits for the slow one on gloo's thread
  for (int i = 0; i < 2; ++i) {
    const double at = i * 100;
    t.add("user_annotation", "ProfilerStep#" + std::to_string(i), 1, at, 100);
    t.add("cpu_op", "aten::mm", 1, at, 20);
    t.add("cpu_op", "gloo:all_reduce", 3, at + 25, 60);  // the main thread has no op open meanwhile
    t.add("cpu_op", "aten::add_", 1, at + 90, 5);
  }
  const summary s = read_profiler_trace(temp_file(t.json()).path);
  CHECK(s.steps == 2);
  CHECK(phase_mean(s, "collective") == Approx(0.060).margin(1e-9));
  REQUIRE(s.phase("collective") != nullptr);
  CHECK(s.phase("collective")->parent == "wait");
  CHECK(s.phase("wait")->inclusive_ms.mean == Approx(0.060).margin(1e-9));
  CHECK(phase_mean(s, "compute") == Approx(0.025).margin(1e-9));
  CHECK(phase_mean(s, "other") == Approx(0.015).margin(1e-9));
}

TEST_CASE("an NCCL collective's host range on another thread only enqueues: compute, never wait", "[profiler]") {
  trace_text t;  // the same shape as gloo's above, with a device: nccl:all_reduce launches a kernel
  for (int i = 0; i < 2; ++i) {
    const double at = i * 100;
    t.add("user_annotation", "ProfilerStep#" + std::to_string(i), 1, at, 100);
    t.add("cpu_op", "aten::mm", 1, at, 20);
    t.add("cpu_op", "nccl:all_reduce", 3, at + 25, 60);
    t.add("cuda_runtime", "cudaLaunchKernel", 3, at + 30, 5, "{\"correlation\": " + std::to_string(i + 1) + "}");
    t.add("kernel", "ncclDevKernel_AllReduce_Sum_f32", 0, at + 36, 40,
          "{\"correlation\": " + std::to_string(i + 1) + ", \"device\": 0, \"stream\": 7}", 0);
    t.add("cpu_op", "aten::add_", 1, at + 90, 5);
  }
  const summary s = read_profiler_trace(temp_file(t.json()).path);
  REQUIRE(s.steps == 2);
  CHECK(s.phase("wait") == nullptr);
  CHECK(s.phase("collective") == nullptr);
  CHECK(phase_mean(s, "compute") == Approx(0.085).margin(1e-9));  // aten::mm, the NCCL range, aten::add_
  CHECK(phase_mean(s, "other") == Approx(0.015).margin(1e-9));
}

TEST_CASE("steptrace's own annotations in a trace give its exact steps and phases, by the live rules", "[profiler]") {
  trace_text t;
  for (int i = 0; i < 3; ++i) {  // steps(loader): the fetch comes before the step opens
    const double at = i * 100;
    t.add("user_annotation", "steptrace:input", 1, at, 10);
    t.add("user_annotation", "steptrace:step", 1, at + 10, 40);
    t.add("user_annotation", "steptrace:compute", 1, at + 15, 30);
    t.add("user_annotation", "steptrace:forward", 1, at + 15, 20);
    t.add("cpu_op", "aten::mm", 1, at + 16, 10);  // ops are not phases when steptrace's are there
    t.add("user_annotation", "ProfilerStep#" + std::to_string(i), 1, at, 90);
  }
  const temp_file f(t.json());
  const summary s = read_profiler_trace(f.path);
  CHECK(s.steps == 3);  // no device, so no evidence of warm-up: every step counts
  CHECK(s.warmup_steps == 0);
  CHECK(s.step_ms.mean == Approx(0.050).margin(1e-9));  // the held fetch opens the step's window
  // `other` keeps its live meaning there (outside every phase), not a trace's Python outside ops
  REQUIRE(s.fact("trace.steps_from") != nullptr);
  CHECK(*s.fact("trace.steps_from") == "annotations");
  CHECK(phase_mean(s, "input") == Approx(0.010).margin(1e-9));
  CHECK(phase_mean(s, "compute") == Approx(0.010).margin(1e-9));
  CHECK(phase_mean(s, "forward") == Approx(0.020).margin(1e-9));
  CHECK(s.phase("forward")->parent == "compute");
  CHECK(phase_mean(s, "other") == Approx(0.010).margin(1e-9));
  CHECK_FALSE(s.gpu);  // no device activity in the trace: host view only
  CHECK_THAT(s.backend.reason, Catch::Matchers::Contains("steptrace's own annotations"));
  CHECK_THAT(s.backend.reason, Catch::Matchers::Contains("no GPU activity"));

  // the user's explicit choice wins over the annotations: each ProfilerStep range, 90 us long
  const summary named = read_profiler_trace(f.path, {"ProfilerStep#1"});
  CHECK(named.steps == 1);
  CHECK(*named.fact("trace.steps_from") == "named range");
  CHECK(named.step_ms.mean == Approx(0.090).margin(1e-9));
}

TEST_CASE("step ranges nested in or overlapping another are counted and said, never dropped silently", "[profiler]") {
  trace_text nested;  // ten ProfilerSteps inside one long one: the long one is the step
  nested.add("user_annotation", "ProfilerStep#0", 1, 0, 10000);
  nested.add("cpu_op", "aten::mm", 1, 100, 50);
  for (int i = 1; i <= 10; ++i) nested.add("user_annotation", "ProfilerStep#" + std::to_string(i), 1, i * 900.0, 800);
  const summary one = read_profiler_trace(temp_file(nested.json()).path);
  CHECK(one.steps == 1);
  CHECK(one.errors.nested_steps == 10);
  CHECK_THAT(one.backend.reason,
             Catch::Matchers::Contains("10 more step ranges nested in or overlapping another, left out"));
  CHECK_THAT(one.table(), Catch::Matchers::Contains("10 nested steps ignored"));

  trace_text overlapping;  // ten steps each starting before the last ends: every other one is kept
  for (int i = 0; i < 10; ++i) {
    overlapping.add("user_annotation", "ProfilerStep#" + std::to_string(i), 1, i * 100.0, 150);
    overlapping.add("cpu_op", "aten::mm", 1, i * 100.0 + 10, 20);
  }
  const summary half = read_profiler_trace(temp_file(overlapping.json()).path);
  CHECK(half.steps == 5);
  CHECK(half.errors.nested_steps == 5);
  CHECK(summary::from_json(half.json()).errors.nested_steps == 5);

  trace_text clean;
  for (int i = 0; i < 3; ++i) clean.add("user_annotation", "ProfilerStep#" + std::to_string(i), 1, i * 100.0, 100);
  const summary none = read_profiler_trace(temp_file(clean.json()).path);
  CHECK(none.errors.nested_steps == 0);

  trace_text window;  // no steps: nested ops only choose the main thread, and none is a step left out
  window.add("cpu_op", "aten::linear", 1, 0, 100);
  window.add("cpu_op", "aten::addmm", 1, 10, 50);
  window.add("cpu_op", "aten::linear", 1, 200, 100);
  const summary whole = read_profiler_trace(temp_file(window.json()).path);
  CHECK(whole.windows);
  CHECK(whole.errors.nested_steps == 0);
  CHECK_THAT(none.backend.reason, !Catch::Matchers::Contains("left out ("));
}

TEST_CASE("the profiler's closing stub is no step: a trace of stubs alone has nothing to diagnose", "[profiler]") {
  // The range the last prof.step() opens and the profiler's exit closes holds no op and starts no
  // device work (a real tensorboard_trace_handler cycle: ProfilerStep#11, 27 us, nothing inside).
  trace_text t;
  for (int i = 0; i < 3; ++i) {
    const double at = i * 1000.0;
    t.add("user_annotation", "ProfilerStep#" + std::to_string(i), 1, at, 1000);
    t.add("cpu_op", "aten::mm", 1, at + 100, 300);
    t.add("cuda_runtime", "cudaLaunchKernel", 1, at + 200, 10, corr(i + 1));
    t.add("kernel", "gemm", 7, at + 250, 600, device_args(i + 1), 0);
  }
  t.add("user_annotation", "ProfilerStep#3", 1, 3000, 37);
  const summary s = read_profiler_trace(temp_file(t.json()).path);
  CHECK(s.steps + s.warmup_steps == 3);
  CHECK(s.step_ms.max == Approx(1.0).margin(1e-9));  // never the 37 us stub
  CHECK_THAT(s.backend.reason, Catch::Matchers::Contains("1 ProfilerStep range holding no op and no device work"));

  // A ProfilerStep with only a runtime call or only device work starting inside is a step.
  trace_text busy;
  busy.add("user_annotation", "ProfilerStep#0", 1, 0, 1000);
  busy.add("cuda_runtime", "cudaStreamSynchronize", 1, 10, 900);
  busy.add("user_annotation", "ProfilerStep#1", 1, 1000, 1000);
  busy.add("kernel", "gemm", 7, 1100, 600, device_args(9), 0);
  CHECK(read_profiler_trace(temp_file(busy.json()).path).steps == 2);

  trace_text stub;  // the last cycle of a repeating schedule: the stub alone
  stub.add("user_annotation", "ProfilerStep#11", 1, 0, 37);
  const summary alone = read_profiler_trace(temp_file(stub.json()).path);
  CHECK(alone.steps == 0);
  CHECK(alone.diag.label.empty());
  CHECK(alone.diag.gains.empty());
  CHECK_THAT(alone.table(), Catch::Matchers::Contains("nothing to break down"));
  CHECK_THAT(alone.table(), !Catch::Matchers::Contains("WAIT-HEAVY"));
}

namespace {

constexpr const char* fetch = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__";

// A loop of `n` iterations of `us` each on thread 1 (a 100 us fetch, then work, then an optimizer
// step ending 50 us before the next fetch), the first `first_us` long; each with a kernel.
trace_text a_loop(int n, double us, double first_us, bool optimizer = true) {
  trace_text t;
  double at = 1000;
  for (int i = 0; i < n; ++i) {
    const double len = i == 0 ? first_us : us;
    t.add("cpu_op", fetch, 1, at, 100);
    t.add("cpu_op", "aten::mm", 1, at + 150, len - 400);
    t.add("cuda_runtime", "cudaLaunchKernel", 1, at + 160, 5, corr(i + 1));
    t.add("kernel", "k", 7, at + 200, 50, device_args(i + 1), 0);
    if (optimizer) t.add("cpu_op", "Optimizer.step#SGD.step", 1, at + len - 250, 200);
    at += len;
  }
  return t;
}

}  // namespace

TEST_CASE("a trace without step ranges reads as its training loop's iterations, the start-up left out by evidence",
          "[profiler]") {
  // each iteration from one fetch's start to the next's; the last to the trace's end
  const summary loop = read_profiler_trace(temp_file(a_loop(5, 1000, 5000).json()).path);
  CHECK_FALSE(loop.windows);
  CHECK(loop.steps == 4);
  CHECK(loop.warmup_steps == 1);  // 5 ms against 1 ms: the program's start-up
  CHECK(loop.step_ms.p50 == Approx(1.0).margin(1e-9));
  CHECK(*loop.fact("trace.steps_from") == "training loop");
  CHECK_THAT(loop.backend.reason, Catch::Matchers::Contains("the first iteration is left out as warm-up: it lasted "
                                                            "5.000 ms against 1.000 ms for the others' median"));
  // under twice the others' median: every iteration counts
  const summary even = read_profiler_trace(temp_file(a_loop(5, 1000, 1990).json()).path);
  CHECK(even.steps == 5);
  CHECK(even.warmup_steps == 0);
  // two iterations are too few to tell a loop: one window
  const summary two = read_profiler_trace(temp_file(a_loop(2, 1000, 1000).json()).path);
  CHECK(two.windows);
  CHECK(two.steps == 1);
  // without an optimizer the fetches still mark it; a closing fetch with nothing after it starts none
  trace_text closing = a_loop(4, 1000, 1000, false);
  closing.add("cpu_op", fetch, 1, 5000, 20);
  const summary closed = read_profiler_trace(temp_file(closing.json()).path);
  CHECK(closed.steps == 4);
  CHECK(closed.step_ms.max == Approx(1.0).margin(1e-9));  // the last ends where the closing fetch begins
  CHECK(closed.phases.at(0).calls == 4);                  // `input`: the closing fetch is in no step
  // an epoch's closing fetch with work after it (evaluation, the next epoch's set-up) is a mark,
  // but the span it starts holds no optimizer step: left out
  trace_text epochs = a_loop(4, 1000, 1000);
  epochs.add("cpu_op", fetch, 1, 5000, 20);
  epochs.add("cpu_op", "aten::zeros", 1, 5100, 10);
  const summary one_epoch = read_profiler_trace(temp_file(epochs.json()).path);
  CHECK(one_epoch.steps == 4);
  CHECK(one_epoch.step_ms.max == Approx(1.0).margin(1e-9));
  // fetches stamped at one instant mark no iteration of no length, and no warm-up of "0 ms against 0 ms"
  trace_text instant;
  for (int i = 0; i < 5; ++i) instant.add("cpu_op", fetch, 1, 1000, 0);
  instant.add("cpu_op", "aten::mm", 1, 1000, 0);
  const summary flat = read_profiler_trace(temp_file(instant.json()).path);
  CHECK(flat.warmup_steps == 0);
  CHECK_THAT(flat.backend.reason, !Catch::Matchers::Contains("warm-up"));
}

TEST_CASE("gradient accumulation: several fetches an optimizer step make one iteration", "[profiler]") {
  trace_text t;
  double at = 1000;
  for (int i = 0; i < 8; ++i) {  // two micro-batches a step: 4 optimizer steps
    t.add("cpu_op", fetch, 1, at, 100);
    t.add("cpu_op", "aten::mm", 1, at + 150, 500);
    t.add("cuda_runtime", "cudaLaunchKernel", 1, at + 160, 5, corr(i + 1));
    t.add("kernel", "k", 7, at + 200, 50, device_args(i + 1), 0);
    if (i % 2 == 1) t.add("cpu_op", "Optimizer.step#SGD.step", 1, at + 700, 200);
    at += 1000;
  }
  const summary s = read_profiler_trace(temp_file(t.json()).path);
  CHECK(s.steps == 4);  // the first from the first fetch to the first optimizer step's end: 1.9 ms
  CHECK(s.warmup_steps == 0);
  CHECK(s.step_ms.p50 == Approx(2.0).margin(1e-9));
  CHECK_THAT(s.backend.reason, Catch::Matchers::Contains("ending with its optimizer step"));
}
