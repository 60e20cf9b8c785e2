// Collective kernels beyond NCCL: the name rule on real kernel names, and what it changes in a
// trace's figures and first fix (exposed all-reduce of PyTorch's symmetric memory, DeepEP's
// dispatch hidden behind compute, a step whose one op is the whole step).
#include <catch2/catch.hpp>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "analysis/kernel_table.hpp"
#include "record/collective_kernels.hpp"
#include "report/diagnosis/diagnosis.hpp"
#include "steptrace/profiler_trace.hpp"
#include "steptrace/summary.hpp"
#include "trace_files.hpp"

using namespace steptrace;
using namespace steptrace::detail;
using namespace steptrace::testing;

namespace {

std::string on_stream(int correlation, int stream) {
  return "{\"device\": 0, \"context\": 1, \"stream\": " + std::to_string(stream) +
         ", \"correlation\": " + std::to_string(correlation) + "}";
}

// One op launching one kernel: the op (category `cat`) at `at`, its launch inside it, the kernel
// from `start` for `dur` us on `stream`.
void op_kernel(trace_text& t, int& correlation, const std::string& cat, const std::string& op, double at, double op_dur,
               const std::string& kernel, double start, double dur, int stream) {
  ++correlation;
  t.add(cat, op, 1, at, op_dur);
  t.add("cuda_runtime", "cudaLaunchKernel", 1, at + 1, 4, corr(correlation));
  t.add("kernel", kernel, 0, start, dur, on_stream(correlation, stream), 0);
}

// Four 1 ms steps, each filled by `step(t, correlation, at)`, read back as a trace.
summary four_steps(const std::function<void(trace_text&, int&, double)>& step) {
  trace_text t;
  int correlation = 0;
  for (int i = 0; i < 4; ++i) {
    t.add("user_annotation", "ProfilerStep#" + std::to_string(i), 1, i * 1000.0, 1000);
    step(t, correlation, i * 1000.0);
  }
  return read_profiler_trace(temp_file(t.json()).path);
}

const char* const all_reduce =
    "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*, unsigned long)";
const char* const ep_dispatch = "void deep_ep::internode::dispatch<false, 8, false, 8>(int4*, float*, int*, long*)";
const char* const flash = "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64, 64, 4>>(Flash_fwd_params)";
const char* const gemm =
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_kernel__5x_cublas";

}  // namespace

TEST_CASE("collective kernels are named by their libraries' words, at a word's start", "[kernels]") {
  // real names: NCCL/RCCL, PyTorch's symmetric memory, DeepSeek's and DeepEP's expert parallelism,
  // the custom all-reduce of vLLM/SGLang and TensorRT-LLM, NVSHMEM, Transformer Engine
  for (const char* name :
       {"ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)",
        "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)", all_reduce,
        "void (anonymous namespace)::one_shot_all_reduce_kernel<float, 16>(float*, unsigned long)",
        "void dpsk::ep::internode::combine<false, 8, __nv_bfloat16, 8, 2, 16, 24>(int4*)",
        "void dpsk::ep::internode::cached_notify<false>(int, int, int)", ep_dispatch,
        "void deep_ep::intranode::combine<__nv_bfloat16, 8, 768>(int4*)",
        "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*)",
        "void tensorrt_llm::kernels::oneShotAllReduceKernel<__nv_bfloat16, 8>(AllReduceParams)",
        "nvshmemi_barrier_all_kernel", "void userbuffers_fp16_sum_inplace_gpu_rw(int, int, void**)"}) {
    CHECK(is_collective_kernel(name));
    CHECK(kernel_kind(name) == "collective");
  }
  // computation, though a word appears inside another or a namespace says "ep"
  for (const char* name :
       {"void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>(at::native::ReduceOp<float>)",
        "void cub::DeviceReduceByKeyKernel<cub::DispatchReduceByKey<long*, long*>>(long*)",
        "void (anonymous namespace)::groupnorm_kernel_dispatch_up<__hip_bfloat16, 1024u>(unsigned int)",
        "void dpsk::ep::cuda::get_dispatch_layout<256, 32, 8>(long const*)",
        "void at::native::small_gather_kernel<float>(float*)", "smallreduce_kernel", flash, gemm}) {
    CHECK_FALSE(is_collective_kernel(name));
  }
  CHECK_FALSE(is_collective_kernel(""));
}

TEST_CASE("an all-reduce no compute hides is COMM-BOUND whatever library runs it", "[kernels][diagnosis]") {
  // Each 1 ms step: a GEMM 0..300 us, then PyTorch's symmetric-memory all-reduce 320..920 us with
  // nothing beside it. Read as busy GPU time before collectives beyond NCCL were counted:
  // COMPUTE-BOUND, "speed up the model".
  const summary s = four_steps([](trace_text& t, int& correlation, double at) {
    op_kernel(t, correlation, "cpu_op", "aten::mm", at + 1, 10, gemm, at + 8, 300, 7);
    op_kernel(t, correlation, "cpu_op", "symm_mem::multimem_all_reduce_", at + 20, 10, all_reduce, at + 320, 600, 7);
  });
  REQUIRE(s.gpu);
  CHECK(s.gpu->nccl.kernels_per_step == Approx(1));
  CHECK(s.gpu->nccl.ms_per_step == Approx(0.6));
  CHECK(s.gpu->nccl.exposed_ms_per_step == Approx(0.6));
  CHECK(s.diag.label == "COMM-BOUND");
  CHECK_THAT(s.diag.evidence, Catch::Matchers::Contains("1 collective kernels a step run 0.600 ms"));
}

TEST_CASE("COMPUTE-BOUND's first place names compute, not collectives that compute hides", "[kernels][diagnosis]") {
  // DeepSeek's overlapped training step, in small: DeepEP's dispatch waits 20..920 us on its own
  // stream (the largest op by device time) while attention (17..507) and a GEMM (507..947) run
  // beside it. The collective is hidden: naming its op first would send the user to the one op
  // whose speed does not set the step's.
  const summary s = four_steps([](trace_text& t, int& correlation, double at) {
    op_kernel(t, correlation, "user_annotation", "dispatch(B)", at + 1, 6, ep_dispatch, at + 20, 900, 8);
    op_kernel(t, correlation, "user_annotation", "attn(B)", at + 10, 6, flash, at + 17, 490, 7);
    op_kernel(t, correlation, "user_annotation", "mlp(B)", at + 20, 6, gemm, at + 507, 440, 7);
  });
  REQUIRE(s.gpu);
  CHECK(s.gpu->nccl.kernels_per_step == Approx(1));
  CHECK(s.gpu->nccl.exposed_ms_per_step == Approx(0.0).margin(1e-9));
  REQUIRE(s.gpu->kernels);
  REQUIRE(s.gpu->kernels->ops.front().name == "dispatch(B)");  // the op with the most device time
  CHECK(s.gpu->kernels->ops.front().collective_ms_per_step == Approx(0.9));
  REQUIRE(s.diag.label == "COMPUTE-BOUND");
  REQUIRE_FALSE(s.diag.advice.empty());
  const std::string& first = s.diag.advice.front();
  CHECK_THAT(first, Catch::Matchers::Contains(
                        "start with `attn(B)`: 27% of the GPU's time; by kind, attention kernels take 27%"));
  CHECK_THAT(first,
             Catch::Matchers::Contains("collective kernels take 49%, 100% of their time beside compute kernels"));
  // the JSON keeps the op's collective time; a summary written before those fields reads them as 0
  const summary back = summary::from_json(s.json());
  CHECK(back.gpu->kernels->ops.front().collective_ms_per_step == Approx(0.9));
  nlohmann::json older = nlohmann::json::parse(s.json());
  for (auto& op : older["gpu"]["kernels"]["ops"]) {
    REQUIRE(op.contains("collective_ms_per_step"));
    op.erase("collective_ms_per_step");
    op.erase("collective_exposed_ms_per_step");
  }
  const summary old = summary::from_json(older.dump());
  REQUIRE(old.gpu->kernels);
  CHECK(old.gpu->kernels->ops.front().name == "dispatch(B)");
  CHECK(old.gpu->kernels->ops.front().collective_ms_per_step == 0);
  CHECK(old.gpu->kernels->ops.front().ms_per_step == Approx(0.9));
}

TEST_CASE("an op that is the whole step is no place to start: its heaviest kernel is", "[kernels][diagnosis]") {
  summary s;
  s.gpu.emplace();
  kernel_stats k;
  k.kernels = {{"(other kernels)", "other", 9, 5, 0.5, 10, false},
               {gemm, "gemm", 32, 4, 0.4, 120, true},
               {flash, "attention", 32, 1, 0.1, 30, false}};
  k.kinds = {{"gemm", 4, 0.4}, {"other", 5, 0.5}, {"attention", 1, 0.1}};
  // a CUDA graph replayed inside one range: every kernel is that range's
  k.ops = {{"step[DECODE bs=32]", 73, 10, default_thresholds.whole_step_op_share, 0, 0}};
  s.gpu->kernels = k;
  CHECK(compute_target(s).rfind("start with the kernel `sm90_xmma_gemm_bf16bf16", 0) == 0);
  CHECK_THAT(compute_target(s),
             Catch::Matchers::Contains(": 40% of the GPU's time (32 calls a step); by kind, gemm kernels take 40%"));
  // just under that share, the op is a part of the step, and named
  s.gpu->kernels->ops.front().busy_share = default_thresholds.whole_step_op_share - 0.01;
  CHECK(compute_target(s).rfind("start with `step[DECODE bs=32]`: 79% of the GPU's time", 0) == 0);
}

TEST_CASE("a collective's kind is read from its op's name, else its kernel's", "[kernels]") {
  CHECK(collective_type("nccl:all_to_all") == "all-to-all");
  CHECK(collective_type("c10d::alltoall_base_") == "all-to-all");
  CHECK(collective_type("void dpsk::ep::internode::combine<false, 8, __nv_bfloat16, 8, 2, 16, 24>(int4*)") ==
        "all-to-all");
  CHECK(collective_type("nccl:_all_gather_base") == "all-gather");
  CHECK(collective_type("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)") == "all-gather");
  CHECK(collective_type("c10d::_reduce_scatter_base_") == "reduce-scatter");
  CHECK(collective_type("nccl:all_reduce") == "all-reduce");
  CHECK(collective_type(all_reduce) == "all-reduce");
  CHECK(collective_type("void vllm::cross_device_reduce_2stage<__nv_bfloat16, 8>(vllm::RankData*)") == "all-reduce");
  CHECK(collective_type("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)") == "send/recv");
  CHECK(collective_type("nccl:send") == "send/recv");
  CHECK(collective_type("nccl:broadcast") == "broadcast");
  // names that do not tell: NCCL's generic kernel, the c10d range around every collective
  CHECK(collective_type("ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)").empty());
  CHECK(collective_type("record_param_comms").empty());
}

TEST_CASE("COMM-BOUND's first fix is for the kind of collective no compute hides, not the longest",
          "[kernels][diagnosis]") {
  // Each 1 ms step: a GEMM 2..400 us; a DDP all-reduce 100..550 on a side stream, 150 us of it
  // past the GEMM; then an all-to-all 560..860 with nothing beside it, launched as NCCL's SendRecv
  // kernel. By whole time the all-reduce is the largest (450 us), by kernel name the all-to-all
  // reads as send/recv: only exposed time by the op that launched it says all-to-all.
  const summary s = four_steps([](trace_text& t, int& correlation, double at) {
    op_kernel(t, correlation, "cpu_op", "aten::mm", at + 1, 10, gemm, at + 2, 398, 7);
    op_kernel(t, correlation, "cpu_op", "nccl:all_reduce", at + 20, 10,
              "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", at + 100, 450, 8);
    op_kernel(t, correlation, "cpu_op", "nccl:all_to_all", at + 40, 10,
              "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)", at + 560, 300, 7);
  });
  REQUIRE(s.gpu);
  CHECK(s.gpu->nccl.exposed_ms_per_step == Approx(0.45));
  REQUIRE(s.gpu->kernels);
  for (const op_row& r : s.gpu->kernels->ops) {
    if (r.name == "nccl:all_reduce") CHECK(r.collective_exposed_ms_per_step == Approx(0.15));
    if (r.name == "nccl:all_to_all") CHECK(r.collective_exposed_ms_per_step == Approx(0.3));
  }
  REQUIRE(s.diag.label == "COMM-BOUND");
  CHECK_THAT(
      s.diag.evidence,
      Catch::Matchers::Contains(
          "The largest kind is all-to-all: 0.300 ms a step with no other kernel beside it (`nccl:all_to_all`)."));
  REQUIRE_FALSE(s.diag.advice.empty());
  CHECK_THAT(s.diag.advice.front(), Catch::Matchers::Contains("TrainPipelineSparseDist"));
  CHECK_THAT(s.diag.advice.front(), !Catch::Matchers::Contains("bucket_cap_mb"));
  // its gain is the cause's, every collective's exposed 45%, as the ranks table and the live line say
  CHECK_THAT(s.diag.advice.front(), Catch::Matchers::EndsWith("(up to 45% shorter steps)"));
  REQUIRE_FALSE(s.diag.gains.empty());
  CHECK(s.diag.gains.front().first == "comm");
  CHECK(s.diag.gains.front().second == Approx(0.45));
  CHECK_THAT(s.diag.advice.at(1), Catch::Matchers::Contains("bucket_cap_mb"));  // the all-reduce is still there
}

TEST_CASE("live, where ops are the user's phases, the collective kernels' names give the kind",
          "[kernels][diagnosis]") {
  summary s;
  s.gpu.emplace();
  kernel_stats k;
  k.kernels = {
      {"ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "collective", 8, 6, 0.5, 700, false},
      {"ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "collective", 8, 3, 0.25, 350,
       false},
      {gemm, "gemm", 32, 3, 0.25, 90, true}};
  k.ops = {{"forward", 40, 6, 0.5, 0, 3}, {"backward", 40, 6, 0.5, 0, 6}};  // phases: no kind in their names
  s.gpu->kernels = k;
  s.gpu->nccl = {16, 9, 5};
  CHECK_THAT(comm_advice(s).front(), Catch::Matchers::Contains("BackwardPrefetch.BACKWARD_PRE"));
  // no name that tells: the gradients' all-reduce advice, as before kinds were read
  s.gpu->kernels->kernels[0].name = s.gpu->kernels->kernels[1].name =
      "ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)";
  CHECK_THAT(comm_advice(s).front(), Catch::Matchers::Contains("bucket_cap_mb"));
}
