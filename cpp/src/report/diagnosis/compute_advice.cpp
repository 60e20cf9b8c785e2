// COMPUTE-BOUND's advice (report/diagnosis/diagnosis.hpp): the op or kernel to start with where the
// device view names one, else the model's speed in the terms of the program and its device (an
// accelerator steptrace does not read, a GPU, a C++ program's own loops, a Python CPU loop).
#include <string>
#include <vector>

#include "report/diagnosis/diagnosis.hpp"

namespace steptrace::detail {

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
