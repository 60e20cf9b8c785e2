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

double run_terms(const summary& s, double gain, bool of_run) {
  if (of_run) return gain;
  double aside = 0;
  for (const set_aside_stats& a : s.set_aside) aside += a.run_share;
  return gain * std::max(0.0, 1 - aside);
}

void sort_gains(std::vector<std::pair<std::string, double>>& gains) {
  std::stable_sort(gains.begin(), gains.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
}

}  // namespace steptrace::detail
