// Internal (not public API): which kernels move data between GPUs, one rule for CUPTI's records,
// torch.profiler traces and the kernel table's "collective" kind (cpp/src/analysis/README.md, "Kernels
// and ops").
//
// Usage:
//   if (is_collective_kernel(name)) ...  // counted apart: its time waits on other ranks' data
//
// A collective kernel runs as long as the slowest rank's data takes to arrive, so its time is
// communication, not compute, whatever library launched it: NCCL and RCCL, MSCCL++, NVSHMEM,
// Transformer Engine's userbuffers, DeepEP's expert dispatch and combine, the custom all-reduce of
// inference servers (vLLM's and SGLang's cross_device_reduce, TensorRT-LLM's AllReduce kernels)
// and PyTorch's symmetric-memory collectives (multimem_all_reduce_kernel, ...).
#pragma once

#include <string_view>

namespace steptrace::detail {

bool is_collective_kernel(std::string_view name) noexcept;

// What a collective op or kernel does, from the same words: "all-to-all" (DeepEP's dispatch and
// combine too), "reduce-scatter", "all-gather", "all-reduce", "send/recv", "broadcast", or ""
// when the name does not tell (NCCL's ncclDevKernel_Generic, record_param_comms).
std::string_view collective_type(std::string_view name) noexcept;

}  // namespace steptrace::detail
