#include "report/diagnosis.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace steptrace::detail {
namespace {

double share_of(const summary& s, std::string_view name) {
  const phase_stats* p = s.phase(name);
  return p ? p->share : 0.0;
}

double mean_of(const summary& s, std::string_view name) {
  const phase_stats* p = s.phase(name);
  return p ? p->ms.mean : 0.0;
}

std::string phase_evidence(const summary& s, std::string_view name, double threshold) {
  return fmt::format("`{}` takes {:.1f}% of step time ({:.3g} ms of {:.3g} ms per step; the rule fires at {:.0f}%).",
                     name, 100 * share_of(s, name), mean_of(s, name), s.step_ms.mean, 100 * threshold);
}

}  // namespace

diagnosis diagnose(const summary& s, const diagnosis_thresholds& t) {
  diagnosis d;
  if (s.steps == 0) {
    d.evidence = fmt::format("No steps were counted ({} warm-up, {} failed), so there is nothing to diagnose.",
                             s.warmup_steps, s.failed_steps);
    return d;
  }
  const double input = share_of(s, "input"), h2d = share_of(s, "h2d");
  const double wait = share_of(s, "wait"), other = share_of(s, "other");
  const double compute = share_of(s, "compute");

  struct candidate {
    const char* label;
    double share;
    bool fired;
  };
  const candidate candidates[] = {
      {"INPUT-BOUND", input, input >= t.input_share},
      {"H2D-BOUND", h2d, h2d >= t.h2d_share},
      {"WAIT-HEAVY", wait + other, wait + other >= t.wait_share},
  };
  const candidate* best = nullptr;
  for (const candidate& c : candidates) {
    if (c.fired && (best == nullptr || c.share > best->share)) best = &c;
  }

  const std::string label = best ? best->label : compute >= t.compute_share ? "COMPUTE-BOUND" : "BALANCED";
  d.label = label;
  if (label == "INPUT-BOUND") {
    d.evidence = phase_evidence(s, "input", t.input_share) + " The training thread waits for data.";
    d.advice = {
        "DataLoader(num_workers=N): start near 4, not above the core count, so loading and collating "
        "leave the training thread",
        "persistent_workers=True and prefetch_factor=2..4 keep workers and batches ready",
        "make each sample cheaper: cache decoded data, move transforms to compiled code or the GPU",
    };
  } else if (label == "H2D-BOUND") {
    d.evidence = phase_evidence(s, "h2d", t.h2d_share);
    d.advice = {
        "DataLoader(pin_memory=True): copies from pinned memory go straight to the device",
        "tensor.to(device, non_blocking=True) overlaps the copy with compute",
        "fewer, larger copies: move one collated batch, not many small tensors",
    };
  } else if (label == "WAIT-HEAVY") {
    d.evidence = fmt::format(
        "{:.1f}% of step time is blocked in `wait` ({:.1f}%) or outside every phase (`other`, {:.1f}%); "
        "the rule fires at {:.0f}%.",
        100 * (wait + other), 100 * wait, 100 * other, 100 * t.wait_share);
    d.advice = {
        "remove per-step host syncs: .item(), .cpu(), printing the loss every step; log every N steps",
        "move checkpointing, validation and logging out of the step, or run them less often",
    };
    if (other > wait) d.advice.push_back("most of it is untraced (`other`): wrap more of the step in phases");
  } else if (label == "COMPUTE-BOUND") {
    d.evidence = phase_evidence(s, "compute", t.compute_share) +
                 " Host view only: no device measurements back this up.";
    d.advice = {
        "the pipeline keeps up; speed up the model: mixed precision (bf16, TF32), fused kernels, torch.compile",
        "check the batch size against device memory",
    };
  } else {
    const auto largest = std::max_element(s.phases.begin(), s.phases.end(),
                                          [](const phase_stats& a, const phase_stats& b) { return a.share < b.share; });
    d.evidence = fmt::format("No rule fires; the largest share is `{}` at {:.1f}% of step time.", largest->name,
                             100 * largest->share);
    d.advice = {fmt::format("no single cause stands out: start with the largest phase, `{}`", largest->name)};
  }
  return d;
}

}  // namespace steptrace::detail
