// Internal (not public API): what a torch.profiler trace's names mean to the rules
// (cpp/src/profiler/README.md, "Reading torch.profiler traces"). ROCm traces name the runtime `hip*`:
// each counts as its `cuda*` twin.
#pragma once

#include <string>
#include <string_view>

#include "gpu/device_record.hpp"

namespace steptrace::detail {

// The prefix of steptrace's own annotations in a profiler's trace: `steptrace:step` for a step,
// `steptrace:<phase>` for a phase.
inline constexpr std::string_view annotation_prefix = "steptrace:";
inline constexpr std::string_view own_step_name = "steptrace:step";

inline bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
inline bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

inline bool is_profiler_step(std::string_view n) { return starts_with(n, "ProfilerStep#"); }

// A blocking synchronisation: the host waits for the device.
inline bool is_sync(std::string_view n) {
  if (starts_with(n, "hip"))
    n.remove_prefix(3);  // hipDeviceSynchronize is cudaDeviceSynchronize
  else if (starts_with(n, "cuda"))
    n.remove_prefix(4);
  else if (starts_with(n, "cu"))
    n.remove_prefix(2);
  else
    return false;
  return n == "StreamSynchronize" || n == "DeviceSynchronize" || n == "EventSynchronize" || n == "CtxSynchronize";
}

inline bool is_copy_op(std::string_view n) { return n == "aten::to" || n == "aten::_to_copy" || n == "aten::copy_"; }

inline bool is_input_op(std::string_view n) {
  return (starts_with(n, "enumerate(DataLoader)#") && ends_with(n, "__next__")) ||
         starts_with(n, "enumerate(DataPipe)#");
}
// torch.optim's range around an optimizer's step (`Optimizer.step#SGD.step`): once an iteration.
inline bool is_optimizer_step(std::string_view n) { return starts_with(n, "Optimizer.step#"); }

// A range the program itself names warm-up: "warmup", "warm_up", "warm-up" or "warm up", in any
// case, as a word of the name ("[param|alex_net|warmup|forward]", "warmup_iter"; not "WarmupLR").
inline bool names_warmup(std::string_view n) {
  auto letter = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  for (std::size_t i = 0; i + 6 <= n.size(); ++i) {
    if (lower(n[i]) != 'w' || (i > 0 && letter(n[i - 1]))) continue;
    std::size_t j = i;
    for (char c : std::string_view("warm")) {
      if (j >= n.size() || lower(n[j]) != c) break;
      ++j;
    }
    if (j != i + 4) continue;
    if (j < n.size() && (n[j] == '_' || n[j] == '-' || n[j] == ' ')) ++j;
    if (j + 2 > n.size() || lower(n[j]) != 'u' || lower(n[j + 1]) != 'p') continue;
    if (j + 2 == n.size() || !letter(n[j + 2])) return true;
  }
  return false;
}

// A stream's graph capture opens and closes (cuda/hip/cu: cudaStreamBeginCapture,
// hipStreamEndCapture, cuStreamBeginCapture_v2, cudaStreamBeginCaptureToGraph).
inline bool is_capture_begin(std::string_view n) { return n.find("StreamBeginCapture") != std::string_view::npos; }
inline bool is_capture_end(std::string_view n) { return n.find("StreamEndCapture") != std::string_view::npos; }

inline bool is_item_op(std::string_view n) { return n == "aten::item" || n == "aten::_local_scalar_dense"; }

// A collective on the host: the process group's own range (gloo, NCCL) or the c10d op.
inline bool is_collective(std::string_view n) {
  return starts_with(n, "gloo:") || starts_with(n, "nccl:") || starts_with(n, "c10d::") || n == "record_param_comms";
}

// A CPU-backend collective: the host itself blocks until the other ranks arrive. An NCCL/RCCL
// range only enqueues device work (its waiting shows on the device).
inline bool is_cpu_collective(std::string_view n) { return starts_with(n, "gloo:"); }

// A runtime call that copies or sets memory: it may wait on the stream (a pageable copy runs
// inside the call), so a long one is the device's time, never a one-time cost.
inline bool is_copy_call(std::string_view n) {
  return n.find("Memcpy") != std::string_view::npos || n.find("Memset") != std::string_view::npos;
}

// A runtime or driver call that puts work on the GPU: a kernel or graph launch, a copy, a memset
// (cudaLaunchKernel, cuLaunchKernel, hipExtLaunchKernel, cudaGraphLaunch, cudaMemcpyAsync, ...).
inline bool is_device_work_call(std::string_view n) {
  if (starts_with(n, "__")) n.remove_prefix(2);  // __cudaLaunchKernel (CUDA 13's <<<...>>>)
  if (!starts_with(n, "cu") && !starts_with(n, "hip")) return false;
  return n.find("Launch") != std::string_view::npos || is_copy_call(n);
}

// A graph's replay: one host call for all the kernels the graph holds (cudaGraphLaunch,
// hipGraphLaunch, cuGraphLaunch).
inline bool is_graph_launch(std::string_view n) {
  return (starts_with(n, "cu") || starts_with(n, "hip")) && n.find("GraphLaunch") != std::string_view::npos;
}

// A runtime or driver call that blocks the host without being a sync or a copy: allocation and
// release (cudaMalloc, cudaFree, hipFree, cudaHostAlloc, cudaHostRegister; not the stream-ordered
// ...Async ones), event and stream creation, module loads. cudaFree waits for the device.
inline bool is_blocking_runtime_call(std::string_view n) {
  if (starts_with(n, "hip"))
    n.remove_prefix(3);
  else if (starts_with(n, "cuda"))
    n.remove_prefix(4);
  else if (starts_with(n, "cu"))
    n.remove_prefix(2);
  else
    return false;
  if (ends_with(n, "Async")) return false;
  for (std::string_view p :
       {"Malloc", "Free", "HostAlloc", "HostRegister", "HostUnregister", "MemAlloc", "MemFree", "MemHostAlloc",
        "MemHostRegister", "EventCreate", "StreamCreate", "ModuleLoad", "LibraryLoad"}) {
    if (starts_with(n, p)) return true;
  }
  return false;
}

// A range whose name says it compiles or searches: "compile" or "compilation" as in
// torch.compile's `compile_fx_inner`, `inductor_compile` (not "Compiled", the compiled code's own
// calls in every step), "autotun" (Triton's autotuning), "cudnnFind" (cuDNN's benchmark search).
inline bool names_compile_work(std::string_view n) {
  auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  std::string low(n.size(), ' ');
  for (std::size_t i = 0; i < n.size(); ++i) low[i] = lower(n[i]);
  for (std::size_t at = low.find("compil"); at != std::string::npos; at = low.find("compil", at + 1)) {
    if (low.compare(at, 7, "compile") == 0 && (at + 7 >= low.size() || low[at + 7] != 'd')) return true;
    if (low.compare(at, 11, "compilation") == 0) return true;
  }
  return low.find("autotun") != std::string::npos || low.find("cudnnfind") != std::string::npos;
}

// Names only a JIT's or compiler's runs carry: TorchScript's profiling executor
// (`fallback_function`, `<forward op>`), torch.compile's (`Torch-Compiled Region`, `CompiledFunction`,
// `## Call CompiledFxGraph`, `TorchDynamo Cache Lookup`).
inline bool names_jit_run(std::string_view n) {
  return n == "fallback_function" || n == "<forward op>" || starts_with(n, "Torch-Compiled Region") ||
         starts_with(n, "CompiledFunction") || n.find("CompiledFxGraph") != std::string_view::npos ||
         starts_with(n, "TorchDynamo");
}

// An op only a GPU runs: a cuDNN, MIOpen or cuBLAS call, or an NCCL/RCCL collective's range.
// Seen with no device record, the trace was recorded without the GPU's activity.
inline bool is_gpu_op(std::string_view n) {
  if (n.find("is_acceptable") != std::string_view::npos) return false;  // aten::cudnn_is_acceptable: a check
  return n.find("cudnn") != std::string_view::npos || n.find("miopen") != std::string_view::npos ||
         n.find("cublas") != std::string_view::npos || starts_with(n, "nccl:");
}

// A copy's direction from its name: "Memcpy HtoD (Pageable -> Device)".
inline copy_kind copy_of(std::string_view name) {
  if (name.find("HtoD") != std::string_view::npos) return copy_kind::h2d;
  if (name.find("DtoH") != std::string_view::npos) return copy_kind::d2h;
  if (name.find("DtoD") != std::string_view::npos) return copy_kind::d2d;
  return copy_kind::other;
}

}  // namespace steptrace::detail
