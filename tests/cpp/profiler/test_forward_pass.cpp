// A forward pass (inference, serving) is advised in its own terms: a tensor-parallel trace whose
// collectives are exposed is told a forward pass's fixes, never DDP's buckets or FSDP's
// prefetch; a training trace keeps them. The traces are made by hand, their truth by construction.
#include <catch2/catch.hpp>
#include <string>

#include "steptrace/profiler_trace.hpp"
#include "steptrace/summary.hpp"
#include "trace_files.hpp"

using namespace steptrace;
using namespace steptrace::testing;
using Catch::Matchers::Contains;

namespace {

// Four 10 ms steps: 12 linear layers of 0.2 ms kernels, then a 4 ms collective kernel with
// nothing beside it; `backward` adds a backward op after them.
summary tensor_parallel(const std::string& collective, bool backward) {
  trace_text t;
  int c = 1;
  for (int k = 0; k < 4; ++k) {
    const double at = 10000.0 * k;
    t.add("user_annotation", "ProfilerStep#" + std::to_string(k + 1), 1, at, 10000);
    for (int layer = 0; layer < 12; ++layer) {
      const double op = at + 100 + 250 * layer;
      t.add("cpu_op", "aten::linear", 1, op, 20);
      t.add("cuda_runtime", "cudaLaunchKernel", 1, op + 5, 5, corr(c));
      t.add("kernel", "sm90_xmma_gemm_bf16", 7, op + 12, 200, device_args(c), 0);
      ++c;
    }
    t.add("cpu_op", collective == "AllGather" ? "nccl:all_gather" : "nccl:all_reduce", 1, at + 3200, 20);
    t.add("cuda_runtime", "cudaLaunchKernel", 1, at + 3205, 5, corr(c));
    t.add("kernel", "ncclDevKernel_" + collective + "_Sum_bf16_RING_LL", 7, at + 3212, 4000, device_args(c), 0);
    ++c;
    if (backward) t.add("cpu_op", "autograd::engine::evaluate_function: MmBackward0", 1, at + 7300, 50);
    t.add("cuda_runtime", "cudaStreamSynchronize", 1, at + 7400, 2600, corr(c++));
  }
  const temp_file f(t.json());
  return read_profiler_trace(f.path);
}

std::string all_advice(const summary& s) {
  std::string out;
  for (const std::string& a : s.diag.advice) out += a + "\n";
  return out;
}

}  // namespace

TEST_CASE("a forward pass's exposed collectives get a forward pass's fixes", "[profiler][forward]") {
  const summary reduce = tensor_parallel("AllReduce", false);
  CHECK(*reduce.fact("trace.training") == "0");
  CHECK(reduce.diag.label == "COMM-BOUND");
  CHECK_THAT(reduce.diag.advice.at(0), Contains("tensor-parallel collectives inside each layer"));
  const summary gather = tensor_parallel("AllGather", false);
  CHECK(gather.diag.label == "COMM-BOUND");
  CHECK_THAT(gather.diag.advice.at(0), Contains("keep the output sharded"));
  for (const summary* s : {&reduce, &gather}) {
    CHECK_THAT(all_advice(*s), !Contains("bucket_cap_mb"));
    CHECK_THAT(all_advice(*s), !Contains("backward_prefetch"));
    CHECK_THAT(all_advice(*s), !Contains("gradient"));
  }
  // The same trace with a backward in it is training: the trainer's fixes.
  const summary training = tensor_parallel("AllReduce", true);
  CHECK(*training.fact("trace.training") == "1");
  CHECK(training.diag.label == "COMM-BOUND");
  CHECK_THAT(training.diag.advice.at(0), Contains("bucket_cap_mb"));
}
