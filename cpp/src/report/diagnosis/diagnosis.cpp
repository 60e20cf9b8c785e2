#include "report/diagnosis/diagnosis.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <unordered_map>
#include <vector>

#include "report/diagnosis/gains.hpp"
#include "report/diagnosis/hypotheses.hpp"
#include "report/diagnosis/label_words.hpp"
#include "report/report.hpp"

namespace steptrace {
const std::vector<std::string>& diagnosis_labels() {
  // New labels are appended: a label's code (its place here) keeps its meaning for trackers.
  static const std::vector<std::string> labels = {"INPUT-BOUND",  "H2D-BOUND",     "WAIT-HEAVY",
                                                  "LAUNCH-BOUND", "COMPUTE-BOUND", "STRAGGLER",
                                                  "BALANCED",     "HOST-BOUND",    "COMM-BOUND"};
  return labels;
}
}  // namespace steptrace

namespace steptrace::detail {

bool ran_no_gpu_work(const gpu_stats& g) {
  return g.steps_viewed > 0 && g.busy_ms.max == 0 && g.kernels_per_step == 0 && g.syncs_per_step == 0 &&
         g.h2d.count == 0 && g.d2h.count == 0 && g.memory.allocations_per_step == 0;
}

static diagnosis diagnose_steps(const summary& s, const diagnosis_thresholds& t);

// The host rules alone, for a device view that cannot be read: `why` takes the place of the
// "host view only" words (or follows the evidence).
static diagnosis host_view_instead(const summary& s, const diagnosis_thresholds& t, std::string_view why) {
  summary host = s;
  host.gpu.reset();
  diagnosis d = diagnose_steps(host, t);
  if (const auto at = d.evidence.find(host_view_only); at != std::string::npos) {
    d.evidence.replace(at, host_view_only.size(), why);
  } else {
    d.evidence += why;
  }
  return d;
}

// The label is chosen here; its evidence and advice are its cause's (label_words.hpp); the
// findings every label shares follow it.
static diagnosis diagnose_steps(const summary& s, const diagnosis_thresholds& t) {
  if (s.gpu && ran_no_gpu_work(*s.gpu)) {
    return host_view_instead(s, t, " The device view shows no GPU work in these steps (no kernels, copies or syncs).");
  }
  if (const std::string missing = s.gpu ? incomplete_device_view(s) : ""; !missing.empty()) {
    diagnosis d = host_view_instead(s, t,
                                    fmt::format(" The device view is not complete: {}; the GPU's idle time cannot be "
                                                "placed against the host's phases, so the host view decides.",
                                                missing));
    d.hypotheses.push_back({"a complete device view", "", false, missing, 0});
    d.advice.push_back(complete_view_advice(s));
    return d;
  }
  diagnosis d;
  if (s.steps == 0) {
    d.evidence = fmt::format("No steps were counted ({} warm-up, {} failed), so there is nothing to diagnose.",
                             s.warmup_steps, s.failed_steps);
    return d;
  }
  if (start_up_only(s, t, d)) return d;       // nothing left but one-time work: no cause to weigh
  if (too_short_to_judge(s, t, d)) return d;  // no basis for a cause
  if (auto typical = typical_step(s, t)) {    // a one-off stall is not the steady state
    d = diagnose_steps(typical->typical, t);
    one_off_words(s, typical->found, d);
    return d;
  }
  const bool device = s.gpu && s.gpu->steps_viewed > 0;
  const idle_groups idle = device ? idle_by_group(s) : idle_groups{};
  const cause_shares c = cause_shares_of(s, t);

  struct candidate {
    const char* label;
    double share, threshold;
  };
  // The host rules weigh each phase's share of step time; with a device view, the GPU idle time
  // that fell while the host was in it (report/diagnosis/gains.hpp: each is its cause's gain).
  const candidate candidates[] = {
      {"INPUT-BOUND", c.input, device ? t.device_cause_share : t.input_share},
      {"H2D-BOUND", c.h2d, device ? t.device_cause_share : t.h2d_share},
      {"WAIT-HEAVY", c.wait, device ? t.device_cause_share : t.wait_share},
      {"HOST-BOUND", c.host, t.device_cause_share},
      {"COMM-BOUND", c.comm, device ? t.device_cause_share : t.wait_share},
      {"LAUNCH-BOUND", c.launch, t.device_cause_share},
  };
  const candidate* best = nullptr;
  const candidate* nearest = nullptr;  // the closest below its threshold, for a close call
  for (const candidate& x : candidates) {
    if (x.share >= x.threshold && (best == nullptr || x.share > best->share)) best = &x;
    if (x.share < x.threshold && (nearest == nullptr || x.threshold - x.share < nearest->threshold - nearest->share)) {
      nearest = &x;
    }
  }
  d.periodic = periodic_work_of(s, t);
  // Threads that take turns on a lock block in whatever phase it is called: the hypothesis leads
  // when it holds more of the step than any cause the phases' names point to.
  const shared_lock lock = shared_lock_of(s, t);
  const bool lock_leads = lock.h.holds && lock.h.gain >= (device ? t.device_cause_share : t.wait_share) &&
                          (best == nullptr || lock.h.gain > best->share);
  const double busy = device ? s.gpu->busy_share : 0;
  const double compute = group_share(s, "compute");
  const bool compute_idle_largest = device && idle.compute >= std::max({idle.input, idle.h2d, idle.wait + idle.other});
  if (lock_leads) {
    d.label = "WAIT-HEAVY";
  } else if (best) {
    d.label = best->label;
  } else if (device) {
    d.label = busy >= t.device_busy_share                   ? "COMPUTE-BOUND"
              : compute_idle_largest && short_kernels(s, t) ? "LAUNCH-BOUND"
                                                            : "BALANCED";
  } else {
    d.label = compute >= t.compute_share ? "COMPUTE-BOUND" : "BALANCED";
  }
  const std::string label = d.label;
  // A label that no cause fired for, with one cause just under its threshold.
  const std::string near_miss = !best && nearest && nearest->threshold - nearest->share < t.close_margin
                                    ? fmt::format(" Close call: {} is {:.1f}% against its rule's {:.0f}%.",
                                                  nearest->label, 100 * nearest->share, 100 * nearest->threshold)
                                    : "";
  std::optional<double> first_gain;  // the first fix's gain, where checked hypotheses chose it
  const label_reading reading{s,
                              t,
                              c,
                              idle,
                              lock,
                              device,
                              lock_leads,
                              compute_idle_largest,
                              best && !lock_leads ? closeness(best->share, best->threshold, t) : "",
                              near_miss,
                              first_gain};
  label_words_of(label, reading)(reading, d);  // the evidence and advice, in the cause's own file
  one_time_evidence(s, d);
  std::vector<finding> found = secondary_findings(s, t, c, d.label);
  periodic_findings(s, d, found);
  // The cause the rules put next, for a close call: the other candidates; behind COMPUTE-BOUND
  // also the GPU's idle time in `compute` when it is not launches (what BALANCED would name).
  ranked_cause runner;
  for (const candidate& x : candidates) {
    if (x.label != label && x.share > runner.share) runner = {x.label, x.share};
  }
  if (best && !lock_leads) {
    close_call(s, t, best->share - runner.share, runner, found, d);
  } else if (label == "COMPUTE-BOUND") {
    if (device && c.launch == 0 && idle.compute > runner.share) runner = {"BALANCED", idle.compute};
    close_call(s, t, device ? busy - t.device_busy_share : compute - t.compute_share, runner, found, d);
  }
  add_gains(s, found, device && compute_idle_largest, d, first_gain);
  ceiling_advice(s, t, d);
  drift_advice(s, d);
  idle_holder_advice(s, t, d);  // first, with its own gain, when one call or op holds the idle time
  steady_state_advice(s, t, d);
  if (is_server_run(s)) advise_server(s, t, d);
  device_unrecorded_advice(s, d);
  cpu_findings(s, t, d);  // first in the advice, under any label
  return d;
}

diagnosis diagnose(const summary& s, const diagnosis_thresholds& t) {
  diagnosis d = diagnose_steps(s, t);
  if (const std::string dropped = dropped_records_words(s);
      !dropped.empty() && d.evidence.find(dropped) == std::string::npos) {  // under the limit: said beside the figures
    d.evidence += " " + dropped + ": the GPU's busy time is undercounted, its idle time an upper bound.";
  }
  if (const std::string under = under_recorded_words(s);
      !under.empty() && d.evidence.find(under) == std::string::npos) {  // a few steps: said beside the figures
    d.evidence += " " + under + ": the GPU's busy time in them is undercounted, its idle time an upper bound.";
  }
  if (const auto& g = s.gpu; g && g->sample_every > 1 && g->steps_viewed > 0) {  // device_sample: said in the evidence
    d.evidence += fmt::format(
        " The device figures are over the windows CUPTI recorded (device_sample={}: {} of {} steps).", g->sample_every,
        g->steps_viewed, g->steps_viewed + g->steps_sampled_out + g->steps_without_records);
  }
  return d;
}

void complete(summary& s) { s.diag = diagnose(s); }

}  // namespace steptrace::detail
