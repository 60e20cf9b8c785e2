// The device's time by kernel, op and kind: hand-made traces against hand-worked sums, the kind
// and tensor-core rules on real kernel names, and bounded memory past the name bound.
#include <catch2/catch.hpp>
#include <string>

#include "analysis/kernel_table.hpp"
#include "report/diagnosis/diagnosis.hpp"
#include "steptrace/profiler_trace.hpp"
#include "steptrace/summary.hpp"
#include "trace_files.hpp"

using namespace steptrace;
using namespace steptrace::detail;
using namespace steptrace::testing;

TEST_CASE("kinds and tensor cores are read from kernel names", "[kernels]") {
  // names from the real traces under tests/data/profiler_traces
  CHECK(kernel_kind("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)") == "collective");
  CHECK(kernel_kind("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128>>(Flash_fwd_params)") ==
        "attention");
  CHECK(kernel_kind("void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>(int, int)") == "convolution");
  CHECK(kernel_kind("void implicit_convolve_sgemm<float, float, 1024, 6, 7, 3, 3, 5, 1, false, true, true>(int)") ==
        "convolution");
  CHECK(kernel_kind(
            "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32_stage4_warpsize2x2x1_tensor16x8x16_kernel") ==
        "gemm");
  CHECK(kernel_kind("volta_sgemm_128x64_nn") == "gemm");
  CHECK(kernel_kind("Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT32x32x16_MI16x16x1_SN_LDSB0") ==
        "gemm");  // ROCm's Tensile
  CHECK(
      kernel_kind("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>(at::native::ReduceOp<float>)") ==
      "reduction");
  CHECK(kernel_kind("void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>(int)") ==
        "elementwise");
  CHECK(kernel_kind("my_own_kernel") == "other");
  CHECK(on_tensor_cores(
      "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32_stage4_warpsize2x2x1_tensor16x8x16_kernel"));
  CHECK(on_tensor_cores("volta_h884gemm_128x128_ldg8_nn"));
  CHECK(on_tensor_cores("cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4"));
  CHECK_FALSE(on_tensor_cores("volta_sgemm_128x64_nn"));
  CHECK(detail::short_kernel_name("void at::native::(anonymous namespace)::f<float, 4>(int, float*)") ==
        "at::native::f<float, 4>");
  CHECK(detail::short_kernel_name("volta_sgemm_128x64_nn") == "volta_sgemm_128x64_nn");
  CHECK(detail::short_kernel_name("(no op)") == "(no op)");
  // ops keep their text: DeepSeek's phases "dispatch(F)" and "dispatch(B)" are two, not "dispatch"
  CHECK(detail::clip_name("dispatch(B)") == "dispatch(B)");
  CHECK(detail::clip_name("## Call CompiledFxGraph fjs75i4jmhjizyb52gwp7gln7sgi42fcmh5x ##") ==
        "## Call CompiledFxGraph fjs75i4jmhjizyb5…");  // 40 bytes kept
  CHECK(detail::clip_name("étape_ü", 2) == "é…");      // cut where a character starts, never inside one
  CHECK(detail::clip_name("étape_ü", 1) == "…");
  CHECK(off_tensor_cores("volta_sgemm_128x64_nn"));
}

TEST_CASE("a trace's kernels add up by name, by the op around their launch and by kind", "[kernels]") {
  // two steps of 1 ms; in each: aten::mm launches a 300 us sgemm (no tensor cores) and a 100 us
  // h884 gemm (tensor cores), aten::add a 50 us elementwise kernel; a 20 us copy; a kernel in no step
  trace_text t;
  int c = 0;
  for (int i = 0; i < 2; ++i) {
    const double at = i * 1000.0;
    t.add("user_annotation", "ProfilerStep#" + std::to_string(i), 1, at, 1000);
    t.add("cpu_op", "aten::mm", 1, at + 10, 100);
    t.add("cuda_runtime", "cudaLaunchKernel", 1, at + 20, 5, corr(++c));
    t.add("kernel", "volta_sgemm_128x64_nn", 7, at + 30, 300, device_args(c), 0);
    t.add("cuda_runtime", "cudaLaunchKernel", 1, at + 40, 5, corr(++c));
    t.add("kernel", "volta_h884gemm_128x128_nn", 7, at + 330, 100, device_args(c), 0);
    t.add("cpu_op", "aten::add", 1, at + 200, 50);
    t.add("cuda_runtime", "cudaLaunchKernel", 1, at + 210, 5, corr(++c));
    t.add("kernel", "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>(int)", 7,
          at + 430, 50, device_args(c), 0);
    t.add("cuda_runtime", "cudaMemcpyAsync", 1, at + 300, 5, corr(++c));
    t.add("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 7, at + 500, 20, device_args(c, 64), 0);
  }
  t.add("cuda_runtime", "cudaLaunchKernel", 1, 2500, 5, corr(++c));
  t.add("kernel", "late_kernel", 7, 2600, 999, device_args(c), 0);  // after the last step: in no step
  const summary s = read_profiler_trace(temp_file(t.json()).path);
  REQUIRE(s.gpu);
  REQUIRE(s.gpu->kernels);
  const kernel_stats& k = *s.gpu->kernels;
  const double total = 0.300 + 0.100 + 0.050 + 0.020;  // ms per step
  CHECK(k.ms_per_step == Approx(total).margin(1e-9));
  REQUIRE(k.kernels.size() == 3);
  CHECK(k.kernels[0].name == "volta_sgemm_128x64_nn");
  CHECK(k.kernels[0].ms_per_step == Approx(0.300).margin(1e-9));
  CHECK(k.kernels[0].calls_per_step == Approx(1.0));
  CHECK(k.kernels[0].busy_share == Approx(0.300 / total));
  CHECK(k.kernels[0].median_us == Approx(300).epsilon(0.09));
  CHECK_FALSE(k.kernels[0].tensor_core);
  CHECK(k.kernels[1].tensor_core);
  REQUIRE(k.ops.size() == 2);
  CHECK(k.ops[0].name == "aten::mm");
  CHECK(k.ops[0].ms_per_step == Approx(0.400).margin(1e-9));
  CHECK(k.ops[0].kernels_per_step == Approx(2.0));
  CHECK(k.ops[1].name == "aten::add");
  REQUIRE(k.kinds.size() == 3);
  CHECK(k.kinds[0].kind == "gemm");
  CHECK(k.kinds[2].kind == "copy");
  CHECK(k.gemm_tensor_core_share == Approx(0.100 / 0.400));
  CHECK(k.gemm_named_share == Approx(1.0));
  CHECK_THAT(s.table(), Catch::Matchers::Contains("by op: aten::mm 85.1%, aten::add 10.6%"));
  CHECK_THAT(s.kernels_table(), Catch::Matchers::Contains("volta_h884gemm_128x128_nn"));
  const summary back = summary::from_json(s.json());  // read back whole
  REQUIRE(back.gpu->kernels);
  CHECK(back.gpu->kernels->kernels[1].tensor_core);
  CHECK(back.kernels_table() == s.kernels_table());
}

TEST_CASE("kernel names past the bound fold into one row, counted, in bounded memory", "[kernels]") {
  kernel_table table;
  for (int i = 0; i < 100000; ++i)
    table.add_kernel("kernel_" + std::to_string(i), "aten::op" + std::to_string(i % 7), 1000);
  const kernel_stats k = table.stats(10);
  CHECK(k.names == kernel_table::max_names);
  CHECK(k.calls_folded == 100000 - kernel_table::max_names);
  REQUIRE(k.kernels.size() == kernel_stats::max_rows);
  CHECK(k.kernels[0].name == kernel_table::folded_kernels);  // the folded row holds the most time
  CHECK(k.kernels[0].calls_per_step == Approx((100000.0 - kernel_table::max_names) / 10));
  CHECK(k.ms_per_step == Approx(100000 * 1e-3 / 10));
  CHECK(k.ops.size() == 7);
  kernel_table other;
  other.add_kernel("kernel_late", "", 5000);
  table.merge(other);
  CHECK(table.stats(10).calls_folded == 100000 - kernel_table::max_names + 1);
}

TEST_CASE("a kernel's median call holds however its calls come: out of order, in batches, merged", "[kernels]") {
  // Each median within 9% (a bucket is an eighth of a power of two); the counts are kept only
  // from the shortest call's bucket to the longest's, so they widen both ways here.
  const auto median_of = [](const kernel_table& t) { return t.stats(1).kernels.at(0).median_us; };
  kernel_table table;
  for (int i = 0; i < 4; ++i) table.add_kernel("k", "", 100'000);  // 100 us first
  CHECK(median_of(table) == Approx(100).epsilon(0.09));
  const std::uint64_t short_calls[] = {1'000, 1'000, 1'000, 1'000, 1'000};  // then five of 1 us
  table.add_kernels("k", "", short_calls, 5);
  CHECK(median_of(table) == Approx(1).epsilon(0.09));  // 5 of 9 calls: the middle one is short
  kernel_table later;
  for (int i = 0; i < 3; ++i) later.add_kernel("k", "", 10'000'000);  // 10 ms, beyond both
  later.add_kernel("k", "", 50);                                      // and 50 ns, below both
  table.merge(later);  // 13 calls: 6 short (1 us and below), 4 of 100 us, 3 of 10 ms
  CHECK(median_of(table) == Approx(100).epsilon(0.09));
  CHECK(table.stats(1).kernels.at(0).calls_per_step == Approx(13));
  kernel_table one;
  one.add_kernel("k", "", 1);  // the shortest bucket
  CHECK(median_of(one) > 0);
}

TEST_CASE("LAUNCH-BOUND names the ops launching the most short kernels", "[kernels][diagnosis]") {
  // Steps of 1 ms of host ops, each launching one kernel that runs at once: 40 `aten::add_` of
  // 20 us launching a 4 us kernel, then 20 `aten::mul_` of 9 us launching a 6 us kernel, then one
  // `aten::mm` of 20 us launching a 60 us GEMM (not short). The GPU idles most of the step while
  // the host is in those ops: launch overhead.
  trace_text t;
  int c = 0;
  const int steps = 4;
  for (int i = 0; i < steps; ++i) {
    double at = i * 1000.0;
    t.add("user_annotation", "ProfilerStep#" + std::to_string(i), 1, at, 1000);
    auto op = [&](const char* name, double host_us, const char* kernel, double kernel_us) {
      t.add("cpu_op", name, 1, at, host_us);
      t.add("cuda_runtime", "cudaLaunchKernel", 1, at + 1, 2, corr(++c));
      t.add("kernel", kernel, 7, at + 3, kernel_us, device_args(c), 0);
      at += host_us;
    };
    for (int k = 0; k < 40; ++k) op("aten::add_", 20, "void at::native::vectorized_elementwise_kernel<4, add>(int)", 4);
    for (int k = 0; k < 20; ++k) op("aten::mul_", 9, "void at::native::vectorized_elementwise_kernel<4, mul>(int)", 6);
    op("aten::mm", 20, "ampere_sgemm_64x64_nn", 60);
  }
  const summary s = read_profiler_trace(temp_file(t.json()).path);
  REQUIRE(s.gpu);
  REQUIRE(s.gpu->kernels);
  // Counted over the steps the reading kept (warm-up by evidence may set the first aside).
  const kernel_stats& k = *s.gpu->kernels;
  auto op_row_of = [&](const std::string& name) -> const op_row& {
    for (const op_row& r : k.ops) {
      if (r.name == name) return r;
    }
    FAIL("no op row " << name);
    throw;
  };
  CHECK(op_row_of("aten::add_").short_kernels_per_step == Approx(40));
  CHECK(op_row_of("aten::mul_").short_kernels_per_step == Approx(20));
  CHECK(op_row_of("aten::mm").short_kernels_per_step == Approx(0));
  CHECK(op_row_of("aten::mm").kernels_per_step == Approx(1));
  REQUIRE(s.diag.label == "LAUNCH-BOUND");
  CHECK_THAT(s.diag.evidence,
             Catch::Matchers::Contains(
                 "launching the most kernels of at most 20 us: `aten::add_` (40 a step), `aten::mul_` (20)."));
  CHECK_THAT(s.diag.evidence, !Catch::Matchers::Contains("`aten::mm`"));
  bool advised = false;
  for (const std::string& a : s.diag.advice)
    advised =
        advised || a.find("fewer, larger kernels, starting where the short ones come from (`aten::add_` (40 a step)") !=
                       std::string::npos;
  CHECK(advised);
  const summary back = summary::from_json(s.json());
  CHECK(back.gpu->kernels->ops.front().short_kernels_per_step == k.ops.front().short_kernels_per_step);
}

TEST_CASE("the first place to look is a real op or phase, never one of steptrace's catch-all rows", "[kernels]") {
  // The H100 run of 2026-11-27: CUPTI gave no launch records, every kernel's row was "(launch not
  // seen)", and the advice said to start there.
  summary s;
  s.gpu.emplace();
  kernel_stats k;
  k.ops = {{"(launch not seen)", 14.5, 12.8, 0.98, 0}, {"(launched outside the step's phases)", 1, 0.1, 0.01, 0}};
  k.kinds = {{"gemm", 12.3, 0.96}, {"elementwise", 0.5, 0.02}};
  s.gpu->kernels = k;
  std::string target = compute_target(s);
  CHECK(target.find("(launch") == std::string::npos);
  CHECK(target.rfind("by kind, gemm kernels take 96% of the GPU's time", 0) == 0);
  s.gpu->kernels->ops.push_back({"forward", 1, 0.1, 0.01, 0});
  target = compute_target(s);
  CHECK(target.rfind("start with `forward`: 1% of the GPU's time; by kind, gemm kernels take 96%", 0) == 0);
  CHECK(catch_all_row("(other ops)"));
  CHECK_FALSE(catch_all_row("aten::mm"));
  CHECK_FALSE(catch_all_row("("));
}
