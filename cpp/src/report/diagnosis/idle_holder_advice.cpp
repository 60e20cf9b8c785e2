// What held the GPU idle, named in the first fix (cpp/src/report/diagnosis/README.md, "Definitions"): a trace's
// blocking runtime calls and the op holding the most idle time (profiler/idle_holders.hpp), and
// the graph replays a step makes beside its eager launches.
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <string_view>

#include "report/diagnosis/diagnosis.hpp"
#include "report/diagnosis/gains.hpp"

namespace steptrace::detail {
namespace {

void sort_gains(diagnosis& d) {
  std::stable_sort(d.gains.begin(), d.gains.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
}

bool has(std::string_view name, std::string_view part) { return name.find(part) != std::string_view::npos; }

// The fix for a kind of blocking runtime call, by its name.
std::string blocking_fix(std::string_view call) {
  if (has(call, "HostAlloc") || has(call, "HostRegister") || has(call, "HostUnregister") || has(call, "MemHost") ||
      has(call, "MallocHost") || has(call, "FreeHost")) {
    return "pinning host memory takes the runtime milliseconds: make the pinned buffers once and reuse them "
           "(DataLoader(pin_memory=True) keeps its own)";
  }
  if (has(call, "EventCreate") || has(call, "StreamCreate")) {
    return "make the events and streams once, outside the loop, and reuse them";
  }
  if (has(call, "ModuleLoad") || has(call, "LibraryLoad")) {
    return "GPU code loaded inside the steps: run each kernel once before the loop (a warm-up step) so its module "
           "is loaded before timing counts";
  }
  return "allocation and release through the runtime (cudaFree waits for the device): keep PyTorch's caching "
         "allocator on (PYTORCH_NO_CUDA_MEMORY_CACHING unset) and allocate outside the loop";
}

// What an op holding the GPU's idle time usually means, by its name; "" for an op that says
// nothing by its name (its CPU work, or its launches).
std::string op_meaning(std::string_view op) {
  for (const char* made : {"randn", "rand", "randint", "randperm", "normal", "arange", "zeros", "ones", "empty", "full",
                           "linspace", "scalar_tensor", "tensor", "from_numpy", "as_tensor"}) {
    if (op == fmt::format("aten::{}", made) || op == fmt::format("aten::{}_like", made)) {
      return "tensors built on the CPU each step and then copied over: make them on the device (device=\"cuda\" on "
             "the call), or once outside the loop";
    }
  }
  if (op == "aten::to" || op == "aten::_to_copy" || op == "aten::copy_") {
    return "copies from host memory: pinned memory and non_blocking=True, or keep the data on the device";
  }
  return "";
}

}  // namespace

void idle_holder_advice(const summary& s, const diagnosis_thresholds& t, diagnosis& d) {
  if (!s.gpu || !from_trace(s) || d.label == "COMPUTE-BOUND" || d.label.empty()) return;
  const double idle = 1 - s.gpu->busy_share;
  if (idle <= 0) return;
  // Blocking runtime calls: under any label, first when they hold enough of the idle time.
  const double blocking = fact_double(s, "trace.blocking_idle_share").value_or(0);
  if (const std::string* call = s.fact("trace.blocking_call");
      call != nullptr && blocking >= t.holder_idle_share * idle && blocking >= t.secondary_other_share) {
    d.evidence += fmt::format(
        " Blocking runtime calls, neither syncs nor copies, held the GPU idle {:.1f}% of the step: "
        "{}.",
        100 * blocking, *s.fact("trace.blocking_calls"));
    d.advice.insert(
        d.advice.begin(),
        fmt::format("the host sat {} ms a step in {:.0f} blocking runtime calls, most idle time in `{}`: "
                    "{}",
                    format_ms(fact_double(s, "trace.blocking_ms_per_step").value_or(0)),
                    fact_double(s, "trace.blocking_calls_per_step").value_or(0), *call, blocking_fix(*call)) +
            gain_words(blocking));
    d.gains.emplace_back("runtime_calls", blocking);
    sort_gains(d);
    return;
  }
  // One op: where the GPU idles in `compute` (BALANCED, LAUNCH-BOUND).
  if (d.label != "BALANCED" && d.label != "LAUNCH-BOUND") return;
  const std::string* op = s.fact("trace.idle_op");
  const double of_idle = fact_double(s, "trace.idle_op_share").value_or(0);
  const double of_step = fact_double(s, "trace.idle_op_step_share").value_or(0);
  const double host_ms = fact_double(s, "trace.idle_op_ms_per_step").value_or(0);
  if (op == nullptr || of_idle < t.holder_idle_share || of_step < t.secondary_other_share ||
      host_ms >= t.whole_step_op_share * s.step_ms.mean) {  // an op around the whole step says nothing
    return;
  }
  // Under LAUNCH-BOUND the idle time in an op is its launches, unless its name says otherwise.
  const std::string meaning = op_meaning(*op);
  if (d.label == "LAUNCH-BOUND" && meaning.empty()) return;
  // A range the program opened holding the idle time (BALANCED's advice names it) says more.
  if (meaning.empty() && !idle_custom_in_compute(s).empty()) return;
  d.evidence += fmt::format(
      " The op holding the most of the GPU's idle time is `{}`: {:.0f}% of it, {:.1f} calls and "
      "{} ms of host time a step.",
      *op, 100 * of_idle, fact_double(s, "trace.idle_op_calls_per_step").value_or(0), format_ms(host_ms));
  d.advice.insert(d.advice.begin(),
                  fmt::format("start with `{}`: the GPU spends {:.0f}% of its idle time while the host is in it; {}",
                              *op, 100 * of_idle,
                              meaning.empty() ? "profile its CPU side (torch.profiler with_stack=True): move that work "
                                                "off the step, batch it, or do it on the device"
                                              : "such an op usually means " + meaning) +
                      gain_words(of_step));
  d.gains.emplace_back("op", of_step);
  sort_gains(d);
}

}  // namespace steptrace::detail
