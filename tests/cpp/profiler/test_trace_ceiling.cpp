// The ceiling from a trace's recorded shapes (profiler/op_cost.hpp, analysis/ceiling.hpp): FLOPs by
// the textbook formulas, each counted once, against hand-worked truth; the peaks table's names;
// COMPUTE-BOUND's fix and gain.
#include <catch2/catch.hpp>
#include <string>

#include "analysis/ceiling.hpp"
#include "analysis/device_peaks.hpp"
#include "analysis/kernel_drift.hpp"
#include "report/diagnosis/diagnosis.hpp"
#include "report/report.hpp"
#include "steptrace/profiler_trace.hpp"
#include "steptrace/summary.hpp"
#include "trace_files.hpp"

using namespace steptrace;
using namespace steptrace::testing;

namespace {

std::string shapes(const std::string& dims, const std::string& types, const std::string& concrete = "") {
  return "{\"Input Dims\": " + dims + ", \"Input type\": " + types +
         (concrete.empty() ? "" : ", \"Concrete Inputs\": " + concrete) + "}";
}

// A trace on `gpu` of `steps` steps of `step_us`, each running `op` (with its args) launching one
// kernel of `kernel_us` (the op's time on the device), and a bare elementwise kernel of `pad_us`.
std::string one_op_trace(const std::string& gpu, const std::string& op, const std::string& args, int steps,
                         double step_us, double kernel_us) {
  trace_text t;
  for (int k = 0; k < steps; ++k) {
    const double at = 1000 + k * step_us;
    t.add("user_annotation", "ProfilerStep#" + std::to_string(k + 1), 1, at, step_us - 10);
    t.add("cpu_op", op, 1, at + 5, 50, args);
    t.add("cuda_runtime", "cudaLaunchKernel", 1, at + 10, 5, corr(k + 1));
    t.add("kernel", "sm90_xmma_gemm_bf16", 7, at + 20, kernel_us, device_args(k + 1), 0);
  }
  std::string json = t.json();
  const std::string from = "\"name\": \"Test GPU\"";
  json.replace(json.find(from), from.size(), "\"name\": \"" + gpu + "\"");
  return json;
}

const ceiling_row* row(const summary& s, const std::string& op) {
  for (const ceiling_row& r : s.ceiling->ops) {
    if (r.op == op) return &r;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("the peaks table names each device by its words, the more specific first", "[ceiling]") {
  using detail::find_device;
  CHECK(std::string(find_device("NVIDIA H100 80GB HBM3")->name) == "H100 SXM");
  CHECK(std::string(find_device("NVIDIA H100 PCIe")->name) == "H100 PCIe");
  CHECK(std::string(find_device("NVIDIA GH200 480GB")->name) == "GH200");  // not H200
  CHECK(std::string(find_device("NVIDIA H200")->name) == "H200");
  CHECK(std::string(find_device("NVIDIA A10")->name) == "A10");  // not A100
  CHECK(std::string(find_device("NVIDIA A100-SXM4-80GB")->name) == "A100 80GB SXM");
  CHECK(std::string(find_device("NVIDIA A100-PG509-200")->name) == "A100 40GB");
  CHECK(std::string(find_device("Tesla V100-SXM2-32GB")->name) == "V100 SXM2");
  CHECK(std::string(find_device("AMD Instinct MI300X VF")->name) == "MI300X");
  CHECK(std::string(find_device("NVIDIA L4")->name) == "L4");
  CHECK(find_device("NVIDIA L40S") == nullptr);
  CHECK(find_device("NVIDIA GeForce RTX 4090") == nullptr);
  CHECK(find_device("") == nullptr);
  // A dtype without units of its own runs on the next wider one's.
  const detail::device_peak& v100 = *find_device("Tesla V100-SXM2-16GB");
  CHECK(detail::peak_tflops(v100, detail::dtype_class::bf16) == 15.7);
  CHECK(detail::peak_tflops(v100, detail::dtype_class::fp16) == 125.0);
  for (const detail::device_peak& d : detail::device_peaks()) {
    INFO(d.name);
    CHECK(d.fp32 > 0);
    CHECK(d.memory_gb_s > 0);
    CHECK(std::string(d.source).size() > 10);
  }
}

TEST_CASE("a bf16 matmul's FLOPs, achieved rate and MFU are the textbook's", "[ceiling]") {
  // mm [4096, 8192] x [8192, 2048]: 2*m*k*n FLOPs; 200 us on the device of a 1000 us step.
  const double flops = 2.0 * 4096 * 8192 * 2048;
  const temp_file f(one_op_trace("NVIDIA H100 80GB HBM3", "aten::mm",
                                 shapes("[[4096, 8192], [8192, 2048]]", "[\"c10::BFloat16\", \"c10::BFloat16\"]"), 6,
                                 1000, 200));
  const summary s = read_profiler_trace(f.path);
  REQUIRE(s.ceiling);
  const ceiling_stats& c = *s.ceiling;
  CHECK(c.device == "H100 SXM");
  CHECK(c.peak_dtype == "bf16");
  CHECK(c.peak_tflops == 989.5);
  CHECK(c.gflop_per_step == Approx(flops / 1e9).epsilon(1e-12));
  const double step_ms = s.step_ms.mean;
  CHECK(c.tflops == Approx(flops / 1e12 / (step_ms / 1e3)).epsilon(1e-9));
  CHECK(c.mfu == Approx(flops / 989.5e12 / (step_ms / 1e3)).epsilon(1e-9));
  REQUIRE(row(s, "aten::mm"));
  const ceiling_row& r = *row(s, "aten::mm");
  CHECK(r.dtype == "bf16");
  CHECK(r.kind == "gemm");
  CHECK(r.calls_per_step == 1.0);
  CHECK(r.ms_per_step == Approx(0.2));
  CHECK(r.tflops == Approx(flops / 200e-6 / 1e12).epsilon(1e-9));  // 687 TFLOP/s
  // Bytes: A, B read, C written, two bytes each: intensity far over H100's ridge.
  CHECK(r.mb_per_step == Approx(2.0 * (4096.0 * 8192 + 8192.0 * 2048 + 4096.0 * 2048) / 1e6).epsilon(1e-12));
  CHECK(r.bound == "compute");
  CHECK(r.roof_share == Approx(r.tflops / 989.5).epsilon(1e-9));
  CHECK(c.costed_share == 1.0);
}

TEST_CASE("an op inside a costed op is not counted again, and each formula is the textbook's", "[ceiling]") {
  struct op_case {
    std::string op, args;
    double flops;
  };
  const std::string bf = "\"c10::BFloat16\"", f32 = "\"float\"";
  const std::vector<op_case> cases = {
      // linear: input [..., in], weight [out, in]
      {"aten::linear", shapes("[[8, 128, 1024], [4096, 1024], [4096]]", "[" + bf + "," + bf + "," + bf + "]"),
       2.0 * 8 * 128 * 1024 * 4096},
      {"aten::addmm",
       shapes("[[4096], [512, 1024], [1024, 4096], [], []]",
              "[" + bf + "," + bf + "," + bf + ", \"Scalar\", \"Scalar\"]"),
       2.0 * 512 * 1024 * 4096},
      {"aten::bmm", shapes("[[12, 256, 64], [12, 64, 256]]", "[" + bf + "," + bf + "]"), 2.0 * 12 * 256 * 64 * 256},
      {"aten::matmul", shapes("[[2, 3, 128, 64], [64, 32]]", "[" + bf + "," + bf + "]"), 2.0 * 6 * 128 * 64 * 32},
      // conv2d, stride 2, padding 1: out (56 + 2 - 3) / 2 + 1 = 28
      {"aten::conv2d",
       shapes("[[32, 64, 56, 56], [128, 64, 3, 3], [128], [], [], [], []]",
              "[" + f32 + "," + f32 + "," + f32 + ", \"ScalarList\", \"ScalarList\", \"ScalarList\", \"Scalar\"]",
              "[\"\", \"\", \"\", \"[2, 2]\", \"[1, 1]\", \"[1, 1]\", \"1\"]"),
       2.0 * 32 * (128 * 64 * 3 * 3) * 28 * 28},
      // grouped: weight [128, 64/4, 3, 3], 'same' padding
      {"aten::conv2d",
       shapes("[[8, 64, 20, 20], [128, 16, 3, 3], [], [], [], [], []]", "[" + f32 + "," + f32 + "]",
              "[\"\", \"\", \"\", \"[1, 1]\", \"same\", \"[1, 1]\", \"4\"]"),
       2.0 * 8 * (128 * 16 * 9) * 20 * 20},
      // transposed: weight [C_in, C_out/groups, k, k]; the input's positions
      {"aten::convolution",
       shapes("[[4, 32, 14, 14], [32, 16, 4, 4], [], [], [], [], [], [], []]", "[" + f32 + "," + f32 + "]",
              "[\"\", \"\", \"\", \"[2, 2]\", \"[1, 1]\", \"[1, 1]\", \"True\", \"[0, 0]\", \"1\"]"),
       2.0 * 4 * (32 * 16 * 4 * 4) * 14 * 14},
      // backward, both gradients: twice the forward's, from grad_output's positions
      {"aten::convolution_backward",
       shapes("[[32, 128, 28, 28], [32, 64, 56, 56], [128, 64, 3, 3], [], [], [], [], [], [], [], []]",
              "[" + f32 + "," + f32 + "," + f32 + "]",
              "[\"\", \"\", \"\", \"[128]\", \"[2, 2]\", \"[1, 1]\", \"[1, 1]\", \"False\", \"[0, 0]\", \"1\", "
              "\"[True, True, False]\"]"),
       2 * 2.0 * 32 * (128 * 64 * 3 * 3) * 28 * 28},
      {"aten::convolution_backward",
       shapes("[[32, 128, 28, 28], [32, 64, 56, 56], [128, 64, 3, 3], [], [], [], [], [], [], [], []]",
              "[" + f32 + "," + f32 + "," + f32 + "]",
              "[\"\", \"\", \"\", \"[128]\", \"[2, 2]\", \"[1, 1]\", \"[1, 1]\", \"False\", \"[0, 0]\", \"1\", "
              "\"[False, True, False]\"]"),
       2.0 * 32 * (128 * 64 * 3 * 3) * 28 * 28},
      // attention [B, H, S, D]: Q K^T and P V
      {"aten::scaled_dot_product_attention",
       shapes("[[4, 16, 1024, 64], [4, 16, 1024, 64], [4, 16, 1024, 64], [], [], [], [], []]",
              "[" + bf + "," + bf + "," + bf + "]"),
       4.0 * 4 * 16 * 1024 * 1024 * 64},
      // flash's own layout [B, S, H, D], cross-attention (S_q 128, S_k 512)
      {"aten::_flash_attention_forward",
       shapes("[[2, 128, 8, 64], [2, 512, 8, 64], [2, 512, 8, 64], [], []]", "[" + bf + "," + bf + "," + bf + "]"),
       4.0 * 2 * 8 * 128 * 512 * 64},
      // its backward: four products, twice the forward
      {"aten::_scaled_dot_product_flash_attention_backward",
       shapes("[[4, 16, 1024, 64], [4, 16, 1024, 64], [4, 16, 1024, 64], [4, 16, 1024, 64]]",
              "[" + bf + "," + bf + "," + bf + "," + bf + "]"),
       8.0 * 4 * 16 * 1024 * 1024 * 64},
      {"aten::_scaled_mm",
       shapes("[[1024, 4096], [4096, 2048], [], []]", "[\"c10::Float8_e4m3fn\", \"c10::Float8_e4m3fn\"]"),
       2.0 * 1024 * 4096 * 2048},
  };
  for (const op_case& c : cases) {
    INFO(c.op << " " << c.args);
    const temp_file f(one_op_trace("NVIDIA H100 80GB HBM3", c.op, c.args, 4, 1000, 100));
    const summary s = read_profiler_trace(f.path);
    REQUIRE(s.ceiling);
    CHECK(s.ceiling->gflop_per_step == Approx(c.flops / 1e9).epsilon(1e-12));
  }
  // aten::linear around aten::addmm around the launch: the linear's FLOPs once.
  trace_text t;
  const std::string lin = shapes("[[512, 1024], [4096, 1024], [4096]]", "[" + bf + "," + bf + "," + bf + "]");
  const std::string add = shapes("[[4096], [512, 1024], [1024, 4096], [], []]", "[" + bf + "," + bf + "," + bf + "]");
  for (int k = 0; k < 4; ++k) {
    const double at = 1000 + k * 1000;
    t.add("user_annotation", "ProfilerStep#" + std::to_string(k + 1), 1, at, 990);
    t.add("cpu_op", "aten::linear", 1, at + 5, 80, lin);
    t.add("cpu_op", "aten::addmm", 1, at + 8, 60, add);
    t.add("cuda_runtime", "cudaLaunchKernel", 1, at + 10, 5, corr(k + 1));
    t.add("kernel", "gemm", 7, at + 20, 100, device_args(k + 1), 0);
  }
  const temp_file f(t.json());
  const summary s = read_profiler_trace(f.path);
  REQUIRE(s.ceiling);
  CHECK(s.ceiling->gflop_per_step == Approx(2.0 * 512 * 1024 * 4096 / 1e9).epsilon(1e-12));
  REQUIRE(s.ceiling->ops.size() == 1);
  CHECK(s.ceiling->ops[0].op == "aten::linear");
  CHECK(s.ceiling->device.empty());  // "Test GPU": achieved figures, no MFU
  CHECK(s.ceiling->mfu == 0);
  CHECK(s.ceiling->gain == 0);
}

TEST_CASE("COMPUTE-BOUND's fix names fp32 matmuls in bf16, with the ceiling's gain", "[ceiling]") {
  // An fp32 mm at 4096^3 taking 9 ms of a 10 ms step on an H100: 15.3 TFLOP/s, under fp32's 67.
  const double flops = 2.0 * 4096 * 4096 * 4096;
  const temp_file f(one_op_trace("NVIDIA H100 80GB HBM3", "aten::mm",
                                 shapes("[[4096, 4096], [4096, 4096]]", "[\"float\", \"float\"]"), 6, 10000, 9000));
  const summary s = read_profiler_trace(f.path);
  REQUIRE(s.diag.label == "COMPUTE-BOUND");
  REQUIRE(s.ceiling);
  const ceiling_row& r = s.ceiling->ops.at(0);
  CHECK(r.to_half);
  CHECK(r.roof_share == Approx(flops / 9e-3 / 67e12).epsilon(1e-9));
  // At 60% of bf16's 989.5 TFLOP/s the mm takes flops / (0.6 * 989.5e12) s.
  const double target_ms = flops / (0.6 * 989.5e12) * 1e3;
  CHECK(r.gain_ms_per_step == Approx(9.0 - target_ms).epsilon(1e-9));
  const double step_ms = s.step_ms.mean;
  CHECK(s.ceiling->gain == Approx(std::min((9.0 - target_ms) / step_ms, s.gpu->busy_share)).epsilon(1e-9));
  bool named = false;
  for (const auto& [cause, gain] : s.diag.gains) named = named || (cause == "ceiling" && gain == s.ceiling->gain);
  CHECK(named);
  bool advised = false;
  for (const std::string& a : s.diag.advice)
    advised = advised || (a.find("bf16") != std::string::npos && a.find("aten::mm") != std::string::npos);
  CHECK(advised);
  CHECK(s.diag.evidence.find("MFU is") != std::string::npos);
  // The JSON keeps it whole.
  const summary back = summary::from_json(s.json());
  REQUIRE(back.ceiling);
  CHECK(back.ceiling->gain == s.ceiling->gain);
  CHECK(back.ceiling->ops.at(0).to_half);
  CHECK(back.table().find("ceiling") != std::string::npos);
}

TEST_CASE("a kernel taking 10% longer a call than in its first window is drift, said as a finding", "[ceiling]") {
  detail::kernel_drift drift;
  auto window = [](double us_a_call, double calls_per_step) {
    kernel_stats k;
    k.kernels.push_back({"gemm_a", "gemm", calls_per_step, calls_per_step * us_a_call / 1e3, 0.5, us_a_call, true});
    k.kernels.push_back({"nccl:all_reduce", "collective", 2, 2 * us_a_call * 3 / 1e3, 0.2, 3 * us_a_call, false});
    return k;
  };
  CHECK(drift.check(window(100, 1), 10).empty());  // 10 calls: too few to hold a baseline
  CHECK(drift.check(window(100, 4), 10).empty());  // the baseline: 100 us a call
  CHECK(drift.check(window(109, 4), 10).empty());  // within 10%
  const auto found = drift.check(window(125, 4), 10);
  REQUIRE(found.size() == 1);  // a collective waits on ranks: never drift
  CHECK(found[0].name == "gemm_a");
  CHECK(found[0].baseline_us == Approx(100));
  CHECK(found[0].now_us == Approx(125));
  // The window's fact becomes an "also:" line under any label.
  summary s;
  s.steps = 10;
  s.step_ms = {100, 10, 10, 10, 10, 10};
  phase_stats p;
  p.name = "compute";
  p.ms = s.step_ms;
  p.share = 1;
  s.phases.push_back(p);
  s.facts.emplace_back("gpu.kernel_drift", "gemm_a\t100.000\t125.000");
  const diagnosis d = detail::diagnose(s);
  bool said = false;
  for (const std::string& a : d.advice) said = said || a.find("`gemm_a` takes 25% longer a call") != std::string::npos;
  CHECK(said);
}

TEST_CASE("FLOPs no device runs are said as impossible, with their cause, never printed as a measurement",
          "[ceiling]") {
  // crafted shapes: 2 * 1e15 * 1e15 * 1e15 FLOPs in a 200 us kernel (1e46 % of an H100's peak)
  const temp_file f(one_op_trace("NVIDIA H100 80GB HBM3", "aten::mm",
                                 shapes("[[1000000000000000, 1000000000000000], [1000000000000000, 1000000000000000]]",
                                        "[\"c10::BFloat16\", \"c10::BFloat16\"]"),
                                 6, 1000, 200));
  const summary s = read_profiler_trace(f.path);
  REQUIRE(s.ceiling);
  CHECK(s.ceiling->mfu == 0);
  CHECK(s.ceiling->gain == 0);
  CHECK_THAT(s.ceiling->impossible, Catch::Contains("`aten::mm` would run at") && Catch::Contains("no device does") &&
                                        Catch::Contains("a shape recorded wrong, or crafted"));
  const std::string table = s.table();
  CHECK_THAT(table, Catch::Contains("no MFU: the FLOPs are impossible"));
  CHECK_THAT(table, !Catch::Contains("MFU 1") && !Catch::Contains("e+46"));
  // --kernels: every figure in its column, however large the trace made it
  const std::string kernels = detail::ceiling_table_text(*s.ceiling);
  for (std::size_t at = kernels.find("aten::mm ("); at != std::string::npos; at = kernels.find("aten::mm (", at + 1)) {
    const std::size_t begin = kernels.rfind('\n', at) + 1;
    CHECK(at - begin < 11 + 10 + 12 + 10 + 12 + 10 + 2 + 8 + 6 + 14 + 1);  // the columns' widths: none ran over
  }
  // read back from its JSON: the same
  const summary back = summary::from_json(s.json());
  REQUIRE(back.ceiling);
  CHECK(back.ceiling->impossible == s.ceiling->impossible);
  CHECK(back.ceiling->mfu == 0);

  // told: 1e21 FLOPs a 10 ms step is 1e11 TFLOP/s; 2e13 is 2,000 TFLOP/s, past an H100's bf16 peak; 5e12 is 50%
  const ceiling_stats told =
      detail::told_ceiling(1e21, detail::dtype_class::bf16, "flops_per_step", 10, "NVIDIA H100 80GB HBM3");
  CHECK(told.mfu == 0);
  CHECK_THAT(told.impossible, Catch::Contains("TFLOP/s, which no device does (flops_per_step is wrong)"));
  const ceiling_stats over =
      detail::told_ceiling(2e13, detail::dtype_class::bf16, "flops_per_step", 10, "NVIDIA H100 80GB HBM3");
  CHECK(over.mfu == 0);
  CHECK_THAT(over.impossible, Catch::Contains("% of the H100 SXM's peak, more than it can (flops_per_step is wrong)"));
  const ceiling_stats fine =
      detail::told_ceiling(5e12, detail::dtype_class::bf16, "flops_per_step", 10, "NVIDIA H100 80GB HBM3");
  CHECK(fine.impossible.empty());
  CHECK(fine.mfu == Approx(5e12 / 1e-2 / 989.5e12));
}
