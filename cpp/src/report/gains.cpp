#include "report/gains.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "report/summary_facts.hpp"

namespace steptrace::detail {

double host_gain(const summary& s, std::string_view cause) {
  if (!s.gpu || s.gpu->steps_viewed == 0) return group_share(s, cause);
  const idle_groups idle = idle_by_group(s);
  if (cause == "input") return idle.input;
  if (cause == "h2d") return idle.h2d;
  if (cause == "wait") return idle.wait;
  if (cause == "other") return idle.other;
  return idle.compute;
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
      if (const double g = host_gain(s, c); g > 0) causes.emplace_back(c, g);
    }
  }
  if (label == "LAUNCH-BOUND" || (label == "BALANCED" && compute_idle)) causes.emplace_back("compute", host_gain(s, "compute"));
  return causes;
}

}  // namespace

void add_gains(const summary& s, const std::vector<finding>& found, bool compute_idle, diagnosis& d) {
  const auto causes = label_causes(s, d.label, compute_idle);
  double label_gain = 0;
  for (const auto& [cause, gain] : causes) label_gain += gain;
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
