// COMPUTE-BOUND's words (report/diagnosis/label_words.hpp): the evidence, the op or kernel to start with where the
// device view names one, else the model's speed in the terms of the program and its device (an
// accelerator steptrace does not read, a GPU, a C++ program's own loops, a Python CPU loop).
#include <fmt/format.h>

#include <string>
#include <vector>

#include "analysis/kernel_table.hpp"
#include "report/diagnosis/diagnosis.hpp"
#include "report/diagnosis/label_words.hpp"
#include "report/report.hpp"

namespace steptrace::detail {

std::string compute_target(const summary& s, const diagnosis_thresholds& t) {
  if (!s.gpu || !s.gpu->kernels) return {};
  const kernel_stats& k = *s.gpu->kernels;
  if (k.kinds.empty()) return {};
  // The op holding the most device time, not a catch-all row, nor one whose time is mostly
  // collective kernels: those wait on other ranks' data, no compute to speed up.
  const op_row* op = nullptr;
  for (const op_row& r : k.ops) {
    if (!catch_all_row(r.name) && 2 * r.collective_ms_per_step <= r.ms_per_step) {
      op = &r;
      break;
    }
  }
  // An op holding nearly all of it is the step itself (a range around the whole step, a CUDA
  // graph's replay, a compiled graph's call): naming it says nothing, its heaviest kernel does.
  const kernel_row* kernel = nullptr;
  if (op != nullptr && op->busy_share >= t.whole_step_op_share) {
    op = nullptr;
    for (const kernel_row& r : k.kernels) {
      if (r.kind != "collective" && r.kind != "copy" && r.kind != "memset" && !catch_all_row(r.name)) {
        kernel = &r;
        break;
      }
    }
  }
  const kind_row* kind = &k.kinds.front();  // the kind with the most time, collectives aside
  double collective = 0;
  for (const kind_row& r : k.kinds) {
    if (r.kind == "collective") {
      collective = r.busy_share;
      if (kind == &r && k.kinds.size() > 1) kind = &k.kinds[1];
    }
  }
  const std::string kinds = fmt::format("{} kernels take {:.0f}%", kind->kind, 100 * kind->busy_share);
  // No op or phase to name (every launch unseen, say): the kernels' kinds alone.
  std::string text =
      op != nullptr ? fmt::format("start with `{}`: {:.0f}% of the GPU's time; by kind, {}", op->name,
                                  100 * op->busy_share, kinds)
      : kernel != nullptr
          ? fmt::format(
                "start with the kernel `{}`: {:.0f}% of the GPU's time ({:.0f} calls a step); by "
                "kind, {}",
                clip_name(short_kernel_name(kernel->name), 60), 100 * kernel->busy_share, kernel->calls_per_step, kinds)
          : fmt::format("by kind, {} of the GPU's time", kinds);
  // Collectives that take much of the time yet run beside compute are not what holds the step.
  if (const nccl_stats& c = s.gpu->nccl; collective >= t.collective_note_share && c.ms_per_step > 0) {
    text += fmt::format("; collective kernels take {:.0f}%, {:.0f}% of their time beside compute kernels",
                        100 * collective, 100 * (1 - c.exposed_ms_per_step / c.ms_per_step));
  }
  double matrix = 0;
  for (const kind_row& r : k.kinds) {
    if (r.kind == "gemm" || r.kind == "convolution") matrix += r.busy_share;
  }
  // Matrix work worth moving, mostly off the tensor cores: lower precision would put it there.
  if (matrix >= 0.2 && k.gemm_named_share >= 0.5 && k.gemm_tensor_core_share < 0.5) {
    // Tensor cores before Ampere (Volta, Turing) take fp16 only: no bf16, no TF32.
    const std::string* gpu = s.fact("gpu.name");
    bool fp16_only = false;
    for (const char* older : {"V100", "T4", "TITAN V", "RTX 20", "Quadro RTX"}) {
      fp16_only = fp16_only || (gpu != nullptr && gpu->find(older) != std::string::npos);
    }
    text += fmt::format("; {:.0f}% of the GEMM and convolution time is not on tensor cores: {} would use them",
                        100 * (1 - k.gemm_tensor_core_share),
                        fp16_only ? "fp16 autocast (torch.autocast(\"cuda\", dtype=torch.float16), with a GradScaler)"
                                  : "bf16 autocast, or TF32 (torch.backends.cuda.matmul.allow_tf32 and "
                                    "torch.backends.cudnn.allow_tf32)");
  }
  return text;
}

void compute_bound_words(const label_reading& r, diagnosis& d) {
  const summary& s = r.s;
  const diagnosis_thresholds& t = r.t;
  const double wait = group_share(s, "wait"), compute = group_share(s, "compute");
  if (r.device) {
    const double busy = s.gpu->busy_share;
    d.evidence = fmt::format(
        "The GPU is busy {:.1f}% of the step (the rule fires at {:.0f}%), and no host phase "
        "holds enough of its idle time to blame.",
        100 * busy, 100 * t.device_busy_share);
    if (wait >= t.wait_share / 2) {
      d.evidence += fmt::format(
          " The host blocks in `wait` {:.1f}% of the step, but the GPU idles only {:.1f}% of it meanwhile: the host "
          "waits on the GPU, and removing the syncs would not make the GPU faster.",
          100 * wait, 100 * r.idle.wait);
    }
    d.evidence += closeness(busy, t.device_busy_share, t);
  } else {
    d.evidence = phase_evidence(s, "compute", t.compute_share) + std::string(host_view_only) +
                 closeness(compute, t.compute_share, t);
  }
  d.evidence += r.near_miss;
  // The pipeline keeps up unless `input` holds a secondary share (said under the label then).
  const std::string keeps_up =
      (r.device ? r.idle.input : group_share(s, "input")) >= t.secondary_input_share ? "" : "the pipeline keeps up; ";
  d.advice = compute_advice(s, t, keeps_up);
}

std::vector<std::string> compute_advice(const summary& s, const diagnosis_thresholds& t, const std::string& keeps_up) {
  const bool device = s.gpu && s.gpu->steps_viewed > 0;
  if (const std::string target = compute_target(s, t); device && !target.empty()) {
    return {
        keeps_up + target,
        "speed up the model: mixed precision (bf16, TF32), fused kernels, torch.compile",
        "check the batch size against device memory",
    };
  } else if (const std::string* unrecorded = s.fact("trace.device_unrecorded");
             !device && unrecorded != nullptr && device_unread(*unrecorded)) {
    return {
        keeps_up +
            "speed up the model: lower precision where the accelerator supports it, fused ops, "
            "torch.compile",
        "check the batch size against device memory",
    };
  } else if (s.backend.cuda || device || unrecorded != nullptr) {
    return {
        keeps_up + "speed up the model: mixed precision (bf16, TF32), fused kernels, torch.compile",
        "check the batch size against device memory",
    };
  } else if (!python_program(s)) {  // a C++ program with no GPU: its own code's compute
    return {
        keeps_up +
            "speed up the compute itself: vectorise the hot loops (SIMD, a BLAS), build with -O2 or -O3 "
            "and -march for this CPU, no allocation inside the step",
        "threads: as many workers as free cores, pinned (pthread affinity, taskset); OMP_NUM_THREADS for "
        "OpenMP code",
    };
  } else {  // no GPU here: advice for the host's own compute
    return {
        keeps_up +
            "speed up the compute itself: torch.compile, batched tensor operations instead of "
            "Python loops, bfloat16 where the CPU supports it",
        "intra-op threads: torch.set_num_threads(N) up to the free cores (not beyond them)",
    };
  }
}

}  // namespace steptrace::detail
