#include "report/diagnosis/gains.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "report/diagnosis/diagnosis.hpp"
#include "report/diagnosis/summary_facts.hpp"

namespace steptrace::detail {

namespace {

double phase_share(const summary& s, std::string_view name) {
  const phase_stats* p = s.phase(name);
  return p ? p->share : 0.0;
}

bool viewed(const summary& s) { return s.gpu && s.gpu->steps_viewed > 0; }

// Collective kernels' time no other kernel hides, of step time.
double exposed_comm(const summary& s) {
  return viewed(s) && s.step_ms.mean > 0 ? s.gpu->nccl.exposed_ms_per_step / s.step_ms.mean : 0.0;
}

// Host-to-device copy time no kernel hides, of step time: the device is busy copying but computes
// nothing (a large pageable batch keeps it so through the whole `h2d` phase).
double exposed_h2d(const summary& s) {
  return viewed(s) && s.step_ms.mean > 0 ? std::min(1.0, s.gpu->h2d.exposed_ms_per_step / s.step_ms.mean) : 0.0;
}

}  // namespace

double host_gain(const summary& s, std::string_view cause) {
  if (!viewed(s)) {
    if (cause == "comm") return phase_share(s, collective_phase);
    if (cause == "wait") return std::max(0.0, group_share(s, "wait") - phase_share(s, collective_phase));
    return group_share(s, cause);
  }
  const idle_groups idle = idle_by_group(s);
  if (cause == "input") return idle.input;
  if (cause == "h2d") return idle.h2d + exposed_h2d(s);
  if (cause == "wait") return std::max(0.0, idle.wait - idle.collective);
  if (cause == "other") return idle.other;
  if (cause == "comm") return exposed_comm(s) + idle.collective;
  return idle.compute;
}

double host_us_per_kernel(const summary& s) {
  const double launches = host_launches_per_step(s);
  return viewed(s) && launches > 0 ? 1e3 * mean_of(s, "compute") / launches : 0.0;
}

double host_launches_per_step(const summary& s) {
  if (!viewed(s)) return 0.0;
  const gpu_stats& g = *s.gpu;
  return fact_double(s, "trace.launches_per_step")
      .value_or(g.kernels_per_step - g.graph_kernels_per_step + g.graph_replays_per_step);
}

bool short_kernels(const summary& s, const diagnosis_thresholds& t) {
  if (!viewed(s) || s.gpu->kernels_per_step <= 0) return false;
  const double per_kernel = host_us_per_kernel(s);
  if (per_kernel > t.launch_host_us) return false;  // CPU work in the ops, not launches
  if (s.gpu->kernel_time_median_us <= t.launch_kernel_us) return true;
  if (s.gpu->busy_share >= t.device_busy_share) return false;  // long kernels hold the GPU most of the step
  return s.gpu->kernel_median_us <= std::max(t.launch_kernel_us, per_kernel);
}

cause_shares cause_shares_of(const summary& s, const diagnosis_thresholds& t) {
  cause_shares c;
  const bool trace = from_trace(s);
  c.input = host_gain(s, "input");
  c.h2d = host_gain(s, "h2d");
  c.other = host_gain(s, "other");
  c.wait = host_gain(s, "wait") + (trace ? 0.0 : c.other);
  c.comm = host_gain(s, "comm");
  if (viewed(s)) {
    c.host = trace ? c.other : 0.0;
    c.launch = short_kernels(s, t) ? host_gain(s, "compute") : 0.0;
  }
  return c;
}

std::string gain_words(double gain, bool of_run) {
  const double pct = 100 * gain;
  return fmt::format(" (up to {}% shorter {})", pct >= 10 ? fmt::format("{:.0f}", pct) : fmt::format("{:.1f}", pct),
                     of_run ? "run" : "steps");
}

namespace {

// A gain as a share of run time, to rank a step's cause against time set aside: a step gain
// applies to the run's steps only.
double run_terms(const summary& s, double gain, bool of_run) {
  if (of_run) return gain;
  double aside = 0;
  for (const set_aside_stats& a : s.set_aside) aside += a.run_share;
  return gain * std::max(0.0, 1 - aside);
}

// The causes a label names, each with its gain.
std::vector<std::pair<std::string, double>> label_causes(const summary& s, std::string_view label, bool compute_idle) {
  std::vector<std::pair<std::string, double>> causes;
  if (label == "INPUT-BOUND") causes.emplace_back("input", host_gain(s, "input"));
  if (label == "H2D-BOUND") causes.emplace_back("h2d", host_gain(s, "h2d"));
  if (label == "WAIT-HEAVY") {
    for (const char* c : {"wait", "other"}) {
      // a trace's `other` is HOST-BOUND's; phases never entered leave it untraced, not saved
      if ((from_trace(s) || phases_never_entered(s)) && std::string_view(c) == "other") continue;
      if (const double g = host_gain(s, c); g > 0) causes.emplace_back(c, g);
    }
  }
  if (label == "HOST-BOUND") causes.emplace_back("other", host_gain(s, "other"));
  if (label == "COMM-BOUND") causes.emplace_back("comm", host_gain(s, "comm"));
  if (label == "LAUNCH-BOUND" || (label == "BALANCED" && compute_idle))
    causes.emplace_back("compute", host_gain(s, "compute"));
  return causes;
}

}  // namespace

void add_gains(const summary& s, const std::vector<finding>& found, bool compute_idle, diagnosis& d,
               std::optional<double> first_gain) {
  std::vector<std::pair<std::string, double>> causes = label_causes(s, d.label, compute_idle);
  double label_gain = 0;
  for (const auto& [cause, gain] : causes) label_gain += gain;
  if (first_gain) {  // each hypothesis that holds is a fix of its own, beside its cause's bound
    label_gain = *first_gain;
    for (const hypothesis& h : d.hypotheses) {
      const bool listed = std::any_of(causes.begin(), causes.end(), [&](const auto& c) { return c.first == h.cause; });
      if (h.holds && h.gain > 0 && !h.cause.empty() && !listed) causes.emplace_back(h.cause, h.gain);
    }
  }
  if (!causes.empty() && !d.advice.empty()) d.advice.front() += gain_words(label_gain);
  d.gains = causes;
  const finding* first = nullptr;  // the finding that beats the label's own gain, if any
  for (const finding& f : found) {
    d.gains.emplace_back(f.cause, f.gain);
    const double run = run_terms(s, f.gain, f.of_run);
    if (!causes.empty() && run > run_terms(s, label_gain, false) &&
        (first == nullptr || run > run_terms(s, first->gain, first->of_run))) {
      first = &f;
    }
  }
  for (const finding& f : found) {
    const std::string line = f.text + gain_words(f.gain, f.of_run);
    if (&f == first) {
      d.advice.insert(d.advice.begin(), line.substr(std::string_view("also: ").size()));
    } else {
      d.advice.push_back(line);
    }
  }
  std::stable_sort(d.gains.begin(), d.gains.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
}

}  // namespace steptrace::detail
