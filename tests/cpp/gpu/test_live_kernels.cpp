// Live kernel names on the fake CUPTI (fake_gpu.hpp): each kernel record's name is interned once,
// its launch call's record gives the host phase that launched it, and the summary's kernel table
// adds them up. The truth is stamped beside the steps: launch times are taken inside each phase,
// so the expected phase of every kernel holds however the scheduler moves the spins.
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "fake_gpu.hpp"
#include "gpu/backend.hpp"
#include "helpers.hpp"
#include "record/kernel_names.hpp"
#include "steptrace/steptrace.hpp"

using namespace steptrace;
using steptrace::testing::fake_gpu;
using steptrace::testing::host_now_ns;
using steptrace::testing::launch_record;
using steptrace::testing::named_kernel_record;

namespace {

const char* const gemm =
    "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8>(Params)";
const char* const relu =
    "void at::native::vectorized_elementwise_kernel<4, at::native::relu_functor<float>>(int, float*)";
const char* const copy = "void at::native::unrolled_elementwise_kernel<at::native::copy_kernel_cuda>(int)";

struct stamps {
  std::uint64_t input = 0, forward = 0, end = 0;  // a moment inside each phase; the step's end
};

// One step: `input` then `forward` (a phase of the user's), each about 1 ms, with a host stamp
// taken inside each.
stamps one_step(tracer& t) {
  stamps s;
  scoped_step step(t);
  {
    scoped_phase p(t, builtin::input);
    s.input = host_now_ns();
    steptrace::testing::spin_for(std::chrono::microseconds(1000));
  }
  {
    scoped_phase p(t, register_phase("forward"));
    s.forward = host_now_ns();
    steptrace::testing::spin_for(std::chrono::microseconds(1000));
  }
  s.end = host_now_ns();
  return s;
}

const kernel_row* row_of(const kernel_stats& k, const std::string& name) {
  for (const kernel_row& r : k.kernels) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

double op_ms(const kernel_stats& k, const std::string& op) {
  for (const op_row& r : k.ops) {
    if (r.name == op) return r.ms_per_step;
  }
  return -1;
}

}  // namespace

TEST_CASE("live kernels: by name, by the phase that launched them, and by kind", "[gpu][kernels]") {
  fake_gpu gpu;
  tracer t(steptrace::testing::quiet());
  std::uint32_t corr = 1000;
  for (int step = 0; step < 2; ++step) {
    const stamps s = one_step(t);
    if (step == 0) REQUIRE(t.summary().backend.cupti);
    // Kernels run inside the step's window, after their launches. In `forward`: two GEMMs of
    // 0.2 ms and a 0.05 ms ReLU; in `input`: one 0.01 ms copy kernel, whose launch record comes in
    // a buffer of its own before the kernel's (buffers hand over in any order); one GEMM whose
    // launch CUPTI never reported; the ReLU's launch follows its kernel in the same buffer.
    gpu.emit({launch_record(s.input, s.input + 5'000, corr + 3)});
    const std::uint64_t k0 = s.forward + 10'000;
    gpu.emit({launch_record(s.forward, s.forward + 5'000, corr),
              launch_record(s.forward + 1'000, s.forward + 6'000, corr + 1),
              named_kernel_record(k0, k0 + 200'000, gemm, corr),
              named_kernel_record(k0 + 200'000, k0 + 400'000, gemm, corr + 1),
              named_kernel_record(k0 + 400'000, k0 + 450'000, relu, corr + 2),
              launch_record(s.forward + 2'000, s.forward + 7'000, corr + 2),
              named_kernel_record(s.input + 10'000, s.input + 20'000, copy, corr + 3),
              named_kernel_record(k0 + 450'000, k0 + 650'000, gemm, corr + 4)});
    corr += 10;
  }
  const summary sum = t.summary();
  REQUIRE(sum.gpu.has_value());
  REQUIRE(sum.gpu->kernels.has_value());
  const kernel_stats& k = *sum.gpu->kernels;
  CHECK(sum.gpu->kernels_per_step == 5);
  CHECK(k.ms_per_step == Approx(0.66).margin(1e-9));
  const kernel_row* g = row_of(k, gemm);
  REQUIRE(g != nullptr);
  CHECK(k.kernels.front().name == gemm);
  CHECK(g->calls_per_step == 3);
  CHECK(g->ms_per_step == Approx(0.6).margin(1e-9));
  CHECK(g->kind == "gemm");
  CHECK(g->tensor_core);
  CHECK(g->median_us == Approx(200).epsilon(0.09));
  REQUIRE(row_of(k, relu) != nullptr);
  CHECK(row_of(k, relu)->kind == "elementwise");
  // The phase open when each kernel was launched: forward launched 0.45 ms of it, input 0.01 ms.
  CHECK(op_ms(k, "forward") == Approx(0.45).margin(1e-9));
  CHECK(op_ms(k, "input") == Approx(0.01).margin(1e-9));
  CHECK(op_ms(k, "(launch not seen)") == Approx(0.2).margin(1e-9));
  CHECK(k.gemm_tensor_core_share == Approx(1.0));
  // Said in the facts: 4 launch-call records a step, one kernel a step with none.
  REQUIRE(sum.fact("cupti.launch_records") != nullptr);
  CHECK(*sum.fact("cupti.launch_records") == "8");
  CHECK(*sum.fact("cupti.kernels_without_launch") == "2");
}

TEST_CASE("live kernels run by a GPU steps behind its host stay their launching step's and phase's", "[gpu][kernels]") {
  // A loop with no sync: each step launches a GEMM in `forward` that runs during the next step,
  // and the last step's after the run's last step. Found on an H100 (30 steps, no sync): the table
  // named most kernels "launched outside the step's phases" and lost the last steps' ones.
  fake_gpu gpu;
  tracer t(steptrace::testing::quiet());
  std::vector<stamps> steps;
  for (int i = 0; i < 3; ++i) {
    steps.push_back(one_step(t));
    if (i == 0) REQUIRE(t.summary().backend.cupti);
  }
  std::vector<steptrace::testing::fake_record> records;
  for (std::uint32_t i = 0; i < 3; ++i) {
    const std::uint64_t runs = i + 1 < 3 ? steps[i + 1].input : steps[i].end + 500'000;  // a step later
    records.push_back(launch_record(steps[i].forward, steps[i].forward + 5'000, 50 + i));
    records.push_back(named_kernel_record(runs, runs + 300'000, gemm, 50 + i));
  }
  gpu.emit(records);
  const summary sum = t.summary();
  REQUIRE(sum.gpu.has_value());
  REQUIRE(sum.gpu->kernels.has_value());
  const kernel_stats& k = *sum.gpu->kernels;
  const kernel_row* g = row_of(k, gemm);
  REQUIRE(g != nullptr);
  CHECK(g->calls_per_step == Approx(1.0));  // 3 launched in 3 steps
  CHECK(op_ms(k, "forward") == Approx(0.3).margin(1e-9));
  CHECK(op_ms(k, "(launched outside the step's phases)") == -1);
}

TEST_CASE("live kernels: the table reaches the text table and the JSON, and reads back", "[gpu][kernels]") {
  fake_gpu gpu;
  tracer t(steptrace::testing::quiet());
  const stamps s = one_step(t);
  REQUIRE(t.summary().backend.cupti);
  gpu.emit({launch_record(s.forward, s.forward + 5'000, 7),
            named_kernel_record(s.forward + 10'000, s.forward + 310'000, gemm, 7)});
  const summary sum = t.summary();
  REQUIRE(sum.gpu.has_value());
  REQUIRE(sum.gpu->kernels.has_value());
  CHECK_THAT(sum.table(), Catch::Matchers::Contains("cutlass::Kernel2"));
  const summary back = summary::from_json(sum.json());
  REQUIRE(back.gpu.has_value());
  REQUIRE(back.gpu->kernels.has_value());
  CHECK(back.gpu->kernels->kernels.front().name == gemm);
  CHECK(back.gpu->kernels->ops.front().name == "forward");
}

TEST_CASE("kernel names are interned once each, in bounded memory", "[gpu][kernels]") {
  const std::size_t before = detail::kernel_names_interned();
  const std::uint32_t a = detail::intern_kernel_name("interned_test_kernel_a");
  std::string copy_of_a = "interned_test_kernel_a";  // another pointer, the same text
  CHECK(detail::intern_kernel_name(copy_of_a.c_str()) == a);
  CHECK(detail::kernel_name(a) == "interned_test_kernel_a");
  CHECK(detail::intern_kernel_name(nullptr) == detail::unnamed_kernel);
  CHECK(detail::intern_kernel_name("") == detail::unnamed_kernel);
  // 100,000 distinct names: ids stop at the bound and the rest share one, "(other kernels)".
  std::uint32_t last = 0;
  for (int i = 0; i < 100'000; ++i) {
    const std::string name = "bounded_test_kernel_" + std::to_string(i);
    last = detail::intern_kernel_name(name.c_str());
  }
  CHECK(detail::kernel_names_interned() == detail::max_kernel_names);
  CHECK(detail::kernel_name(last) == "(other kernels)");
  CHECK(before < detail::max_kernel_names);
}

TEST_CASE("where CUPTI can choose, only launch calls are recorded, and kernels keep their launching phase",
          "[gpu][kernels][activity]") {
  constexpr int runtime = 0, driver = 1;
  constexpr CUpti_CallbackId get_device = CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020;
  {
    fake_gpu gpu(true, /*api_selection=*/true);
    tracer t(steptrace::testing::quiet());
    const stamps s = one_step(t);
    REQUIRE(t.summary().backend.cupti);
    // Both kinds on, then every call off but the launches: the one order in which CUPTI 13's choice
    // reaches a context that existed before it (tests/gpu/probe_launch_records.cu).
    CHECK(gpu.kind_enabled(CUPTI_ACTIVITY_KIND_RUNTIME));
    CHECK(gpu.kind_enabled(CUPTI_ACTIVITY_KIND_DRIVER));
    CHECK(gpu.api_recorded(runtime, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
    CHECK(gpu.api_recorded(runtime, 505));  // CUDA 13's __cudaLaunchKernel
    CHECK(gpu.api_recorded(runtime, 506));
    CHECK(gpu.api_recorded(driver, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));  // Triton's
    CHECK_FALSE(gpu.api_recorded(runtime, get_device));  // no other call: torch makes several an op
    CHECK_FALSE(gpu.api_recorded(driver, CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent));
    CHECK_FALSE(gpu.api_recorded(runtime, 700));  // nor one a later CUDA may number
    gpu.emit({launch_record(s.forward, s.forward + 5'000, 9),
              named_kernel_record(s.forward + 10'000, s.forward + 310'000, gemm, 9)});
    const summary sum = t.summary();
    REQUIRE(sum.gpu.has_value());
    REQUIRE(sum.gpu->kernels.has_value());
    CHECK(op_ms(*sum.gpu->kernels, "forward") == Approx(0.3).margin(1e-9));
    detail::yield_cupti("torch.profiler");  // handed over: none recorded for steptrace
    CHECK_FALSE(gpu.api_recorded(runtime, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
    CHECK_FALSE(gpu.kind_enabled(CUPTI_ACTIVITY_KIND_RUNTIME));
    detail::reclaim_cupti();
    CHECK(gpu.api_recorded(runtime, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
    CHECK_FALSE(gpu.api_recorded(runtime, get_device));
  }
  {
    fake_gpu gpu(true, /*api_selection=*/true);
    gpu.know_api_ids_below(505);  // a CUPTI 12: refuses CUDA 13's ids, and still chooses the rest
    tracer t(steptrace::testing::quiet());
    one_step(t);
    REQUIRE(t.summary().backend.cupti);
    CHECK(gpu.api_recorded(runtime, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
    CHECK_FALSE(gpu.api_recorded(runtime, get_device));
  }
  fake_gpu older;  // a CUPTI that cannot choose: every runtime and driver call
  tracer t(steptrace::testing::quiet());
  one_step(t);
  REQUIRE(t.summary().backend.cupti);
  CHECK(older.api_recorded(runtime, get_device));
  CHECK(older.api_recorded(driver, CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent));
}
