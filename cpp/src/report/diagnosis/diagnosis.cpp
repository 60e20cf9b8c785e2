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

namespace {

// `threshold` < 0: the share is a fact beside the rule that fired (a device view's), not the rule.
std::string phase_evidence(const summary& s, std::string_view name, double threshold) {
  const phase_stats* own = s.phase(name);
  const bool with_children = own == nullptr || group_share(s, name) > own->share + 1e-12;
  return fmt::format("`{}`{} takes {:.1f}% of step time ({} ms of {} ms per step{}).", name,
                     with_children ? " with the phases inside it" : "", 100 * group_share(s, name),
                     format_ms(mean_of(s, name)), format_ms(s.step_ms.mean),
                     threshold < 0 ? "" : fmt::format("; the rule fires at {:.0f}%", 100 * threshold));
}

// "GPU idle 71% of the step; 93% of that while the host was in `input`."
std::string idle_evidence(const summary& s, std::string_view phase) {
  if (!s.gpu) return "";
  double share = 0;
  for (const auto& [name, value] : s.gpu->idle_by_phase) {
    if (name == phase) share = value;
  }
  return fmt::format(" GPU idle {:.0f}% of the step; {:.0f}% of that while the host was in `{}`.",
                     100 * (1 - s.gpu->busy_share), 100 * share, phase);
}

}  // namespace

namespace {

// " (close: 31.2% against the rule's 30%)" when a deciding share is within the margin.
std::string closeness(double share, double threshold, const diagnosis_thresholds& t) {
  if (std::abs(share - threshold) >= t.close_margin) return "";
  return fmt::format(" Close call: {:.1f}% is within {:.0f} points of the rule's {:.0f}%.", 100 * share,
                     100 * t.close_margin, 100 * threshold);
}

}  // namespace

namespace {

// Causes that hold a real share without deciding the label, said under it ("also: ..."), so a
// run whose label is right is not told all is well with a quarter of each step in `input`.
// `input` and `other` are shares of step time (with a device view: the GPU's idle time then).
// Each finding carries its gain (report/diagnosis/gains.hpp).
std::vector<finding> secondary_findings(const summary& s, const diagnosis_thresholds& t, const cause_shares& c,
                                        const std::string& label) {
  std::vector<finding> out;
  const bool server = is_server_run(s);
  const double input = c.input, other = c.other;
  if (label != "INPUT-BOUND" && input >= t.secondary_input_share) {
    const std::vector<std::string> loader = server ? std::vector<std::string>{} : input_advice(s, t);
    out.push_back({"input",
                   fmt::format("also: `input` holds {:.0f}% of each {}{}: {}", 100 * input, server ? "request" : "step",
                               fact_int(s, "dataloader.num_workers") == 0L ? " on the training thread" : "",
                               server           ? "read and decode request input off the request path"
                               : loader.empty() ? "see INPUT-BOUND's advice"
                                                : loader.front()),
                   input, false});
  }
  if (from_trace(s) && s.gpu && label != "HOST-BOUND" && other >= t.secondary_other_share) {
    out.push_back({"other",
                   fmt::format("also: the GPU idles {:.0f}% of each step while the host runs Python outside every op: "
                               "see HOST-BOUND's advice (preprocessing off the loop's thread, torch.compile)",
                               100 * other),
                   other, false});
  } else if (const std::string framework = between_steps_words(s);
             !from_trace(s) && label != "WAIT-HEAVY" && other >= t.secondary_other_share && !framework.empty()) {
    out.push_back(
        {"other",
         fmt::format("also: {:.0f}% of each step is outside every phase (`other`): {}", 100 * other, framework), other,
         false});
  } else if (!from_trace(s) && label != "WAIT-HEAVY" && other >= t.secondary_other_share) {
    out.push_back({"other",
                   fmt::format("also: {:.0f}% of each {} is outside every phase (`other`): put the work between "
                               "phases ({}) in a phase, or in exclude() when it is not {}, to see what it costs",
                               100 * other, server ? "request" : "step",
                               server ? "logging, metrics, bookkeeping" : "saving images, metrics, logging",
                               server ? "serving" : "training"),
                   other, false});
  }
  if (label != "COMM-BOUND" && c.comm >= t.secondary_other_share) {
    out.push_back({"comm",
                   fmt::format("also: collectives hold {:.0f}% of each step that no compute hides: overlap them with "
                               "compute ({})",
                               100 * c.comm,
                               inference_run(s) ? "async tensor parallelism, sequence parallelism"
                                                : "DDP bucket_cap_mb, FSDP prefetch"),
                   c.comm, false});
  }
  for (const set_aside_stats& a : s.set_aside) {
    if (a.name == one_time_phase) continue;  // once per process: named in the evidence, never advised on
    if (a.run_share >= t.secondary_set_aside_share) {
      out.push_back({a.name,
                     fmt::format("also: `{}` (set aside) takes {:.0f}% of the run: run it less often, or on fewer "
                                 "batches",
                                 a.name, 100 * a.run_share),
                     a.run_share, true});
    }
  }
  return out;
}

}  // namespace

namespace {

constexpr std::string_view host_view_only = " Host view only: no device measurements back this up.";

}  // namespace

bool ran_no_gpu_work(const gpu_stats& g) {
  return g.steps_viewed > 0 && g.busy_ms.max == 0 && g.kernels_per_step == 0 && g.syncs_per_step == 0 &&
         g.h2d.count == 0 && g.d2h.count == 0 && g.memory.allocations_per_step == 0;
}

std::string device_cause_words(const summary& s, std::string_view group, double share, double threshold) {
  return fmt::format("The GPU sat idle {:.1f}% of step time while the host was in `{}`{} (the rule fires at {:.0f}%).",
                     100 * share, group, group == "wait" && !from_trace(s) ? " or outside every phase" : "",
                     100 * threshold);
}

static diagnosis diagnose_steps(const summary& s, const diagnosis_thresholds& t) {
  if (s.gpu && ran_no_gpu_work(*s.gpu)) {  // the host rules alone, and the reason said
    summary host = s;
    host.gpu.reset();
    diagnosis d = diagnose_steps(host, t);
    constexpr std::string_view said =
        " The device view shows no GPU work in these steps (no kernels, copies or syncs).";
    if (const auto at = d.evidence.find(host_view_only); at != std::string::npos) {
      d.evidence.replace(at, host_view_only.size(), said);
    } else {
      d.evidence += said;
    }
    return d;
  }
  if (const std::string missing = s.gpu ? incomplete_device_view(s) : ""; !missing.empty()) {
    summary host = s;  // the host rules decide, and what the device view lacks is said
    host.gpu.reset();
    diagnosis d = diagnose_steps(host, t);
    const std::string said = fmt::format(
        " The device view is not complete: {}; the GPU's idle time cannot be placed "
        "against the host's phases, so the host view decides.",
        missing);
    if (const auto at = d.evidence.find(host_view_only); at != std::string::npos) {
      d.evidence.replace(at, host_view_only.size(), said);
    } else {
      d.evidence += said;
    }
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
  const double input = group_share(s, "input");
  const double wait = group_share(s, "wait");
  const double compute = group_share(s, "compute");
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
  for (const candidate& c : candidates) {
    if (c.share >= c.threshold && (best == nullptr || c.share > best->share)) best = &c;
    if (c.share < c.threshold && (nearest == nullptr || c.threshold - c.share < nearest->threshold - nearest->share)) {
      nearest = &c;
    }
  }
  d.periodic = periodic_work_of(s, t);
  // Threads that take turns on a lock block in whatever phase it is called: the hypothesis leads
  // when it holds more of the step than any cause the phases' names point to.
  const shared_lock lock = shared_lock_of(s, t);
  const bool lock_leads = lock.h.holds && lock.h.gain >= (device ? t.device_cause_share : t.wait_share) &&
                          (best == nullptr || lock.h.gain > best->share);
  const double busy = device ? s.gpu->busy_share : 0;
  const bool compute_idle_largest = device && idle.compute >= std::max({idle.input, idle.h2d, idle.wait + idle.other});
  std::string label;
  if (lock_leads) {
    label = "WAIT-HEAVY";
  } else if (best) {
    label = best->label;
  } else if (device) {
    label = busy >= t.device_busy_share                   ? "COMPUTE-BOUND"
            : compute_idle_largest && short_kernels(s, t) ? "LAUNCH-BOUND"
                                                          : "BALANCED";
  } else {
    label = compute >= t.compute_share ? "COMPUTE-BOUND" : "BALANCED";
  }
  d.label = label;
  const std::string close = best && !lock_leads ? closeness(best->share, best->threshold, t) : "";
  // A label that no cause fired for, with one cause just under its threshold.
  const std::string near_miss = !best && nearest && nearest->threshold - nearest->share < t.close_margin
                                    ? fmt::format(" Close call: {} is {:.1f}% against its rule's {:.0f}%.",
                                                  nearest->label, 100 * nearest->share, 100 * nearest->threshold)
                                    : "";
  // A server's words: requests rather than a training thread, and time in `queue` counts
  // toward `wait`, so the evidence names both.
  const bool server = is_server_run(s);
  const std::string_view waits_for_data =
      server ? " Requests wait for their input." : " The training thread waits for data.";
  std::optional<double> first_gain;  // the first fix's gain, where checked hypotheses chose it
  auto device_cause = [&](std::string_view group, double share, double threshold) {
    return device_cause_words(s, group, share, threshold);
  };
  if (label == "INPUT-BOUND") {
    d.evidence = device ? device_cause("input", idle.input, t.device_cause_share) + idle_evidence(s, "input") + " " +
                              phase_evidence(s, "input", -1)
                        : phase_evidence(s, "input", t.input_share) + std::string(waits_for_data);
    d.evidence += close;
    if (!server) d.advice = input_advice(s, t);  // a server's input advice is its own (server_advice.cpp)
  } else if (label == "H2D-BOUND") {
    if (device && c.h2d - idle.h2d > 0.005) {  // copies the compute units waited through
      d.evidence = fmt::format(
          "The GPU computed nothing {:.1f}% of step time for host-to-device copies: idle {:.1f}% while the host was "
          "in `h2d`, and copying with no kernel running {:.1f}% (the rule fires at {:.0f}%).",
          100 * c.h2d, 100 * idle.h2d, 100 * (c.h2d - idle.h2d), 100 * t.device_cause_share);
    } else {
      d.evidence = device ? device_cause("h2d", idle.h2d, t.device_cause_share) + idle_evidence(s, "h2d")
                          : phase_evidence(s, "h2d", t.h2d_share);
    }
    const bool measured = s.gpu && s.gpu->h2d.count > 0;
    if (measured) {
      d.evidence += fmt::format(" {:.0f}% of the bytes copied to the device came from pageable memory.",
                                100 * s.gpu->h2d.pageable_share);
    }
    d.evidence += close;
    d.advice = copy_advice(s);
  } else if (label == "WAIT-HEAVY") {
    wait_heavy_words(s, t, c, idle, lock, lock_leads, close, d, first_gain);
  } else if (label == "HOST-BOUND") {
    d.evidence = fmt::format(
                     "The GPU sat idle {:.1f}% of step time while the main thread ran Python outside every op "
                     "(the rule fires at {:.0f}%); the host was blocked in `wait` (syncs, blocking copies) "
                     "{:.1f}% of the step, the GPU idle only {:.1f}% of the step meanwhile.",
                     100 * c.host, 100 * t.device_cause_share, 100 * wait, 100 * c.wait) +
                 close;
    host_bound_advice(s, c, d);
  } else if (label == "COMM-BOUND") {
    d.evidence = comm_evidence(s, c, idle, t) + close;
    d.advice = comm_advice(s);
  } else if (label == "LAUNCH-BOUND") {
    launch_bound_words(s, idle, d);
    d.evidence += close;
  } else if (label == "COMPUTE-BOUND") {
    if (device) {
      d.evidence = fmt::format(
          "The GPU is busy {:.1f}% of the step (the rule fires at {:.0f}%), and no host phase "
          "holds enough of its idle time to blame.",
          100 * busy, 100 * t.device_busy_share);
      if (wait >= t.wait_share / 2) {
        d.evidence += fmt::format(
            " The host blocks in `wait` {:.1f}% of the step, but the GPU idles only {:.1f}% of it meanwhile: the host "
            "waits on the GPU, and removing the syncs would not make the GPU faster.",
            100 * wait, 100 * idle.wait);
      }
      d.evidence += closeness(busy, t.device_busy_share, t);
    } else {
      d.evidence = phase_evidence(s, "compute", t.compute_share) + std::string(host_view_only) +
                   closeness(compute, t.compute_share, t);
    }
    d.evidence += near_miss;
    // The pipeline keeps up unless `input` holds a secondary share (said under the label then).
    const std::string keeps_up =
        (device ? idle.input : input) >= t.secondary_input_share ? "" : "the pipeline keeps up; ";
    d.advice = compute_advice(s, t, keeps_up);
  } else if (device && compute_idle_largest) {
    d.evidence = fmt::format(
        "The GPU is busy only {:.1f}% of the step and idles mostly while the host is in `compute` ({:.1f}% of step "
        "time), yet not for launches: half the kernel time is in kernels over {:.1f} us, and the host spends {:.1f} "
        "us in `compute` per launch: the host-side work in `compute` is what the GPU waits on.",
        100 * busy, 100 * idle.compute, s.gpu->kernel_time_median_us, host_us_per_kernel(s));
    d.evidence += graph_replay_words(s) + near_miss;
    d.advice = {"profile the host side of `compute` (Python overhead, CPU ops, host syncs inside the phase)" +
                idle_custom_in_compute(s)};
  } else {
    const auto largest = std::max_element(s.phases.begin(), s.phases.end(),
                                          [](const phase_stats& a, const phase_stats& b) { return a.share < b.share; });
    d.evidence = fmt::format("No rule fires; the largest share is `{}` at {:.1f}% of step time.", largest->name,
                             100 * largest->share);
    if (device) d.evidence += fmt::format(" The GPU is busy {:.1f}% of the step.", 100 * busy);
    d.evidence += near_miss;
    d.advice = {fmt::format("no single cause stands out: start with the largest phase, `{}`", largest->name)};
  }
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
  if (server) advise_server(s, t, d);
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
