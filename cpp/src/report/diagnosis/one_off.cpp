// One-off stalls (cpp/src/report/diagnosis/README.md, "Definitions"): a phase whose time a few steps hold is
// not the steady state; the diagnosis reads the typical step, and names the stall apart.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "report/diagnosis/diagnosis.hpp"

namespace steptrace::detail {
namespace {

// The time a few steps hold above the typical step in phase `p`, in ms summed over the steps: the
// slowest step's excess over the median, or, with 100 steps or more, the time above the p99 (at
// most 1% of the steps hold it).
double few_steps_excess(const phase_stats& p, std::uint64_t steps) {
  const double one = p.ms.max - p.ms.p50;
  const double above_p99 = steps >= 100 ? p.ms.total - static_cast<double>(steps) * p.ms.p99 : 0.0;
  return std::max({0.0, one, above_p99});
}

// The kept step holding the most of `phase` (the timeline's slowest steps): its index and time.
const timeline_step* step_with(const summary& s, const std::string& phase, double& ms) {
  const timeline_step* best = nullptr;
  ms = 0;
  for (const timeline_step& st : s.timeline.steps) {
    if (st.warmup || st.failed) continue;
    double in = 0;
    for (const timeline_span& sp : st.phases) in += sp.name == phase ? sp.end_ms - sp.begin_ms : 0.0;
    if (in > ms) {
      ms = in;
      best = &st;
    }
  }
  return best;
}

}  // namespace

std::optional<typical_reading> typical_step(const summary& s, const diagnosis_thresholds& t) {
  if (s.steps < t.one_off_min_steps || s.step_ms.total <= 0 || s.fact("diagnosis.typical") != nullptr)
    return std::nullopt;
  typical_reading out{s, {}};
  summary& typ = out.typical;
  double removed = 0;
  for (phase_stats& p : typ.phases) {
    const double excess = few_steps_excess(p, s.steps);
    if (excess < 0.5 * p.ms.total || excess < t.one_off_share * s.step_ms.total) continue;
    out.found.push_back({p.name, excess, p.ms.max, p.ms.p50});
    p.ms.total -= excess;
    p.ms.mean = p.ms.total / static_cast<double>(s.steps);
    removed += excess;
  }
  if (out.found.empty()) return std::nullopt;
  const double before = s.step_ms.total, after = before - removed;
  if (after <= 0) return std::nullopt;
  typ.step_ms.total = after;
  typ.step_ms.mean = after / static_cast<double>(s.steps);
  for (phase_stats& p : typ.phases) p.share = p.ms.total / after;
  if (typ.gpu && typ.gpu->steps_viewed > 0) {
    // The GPU idled through the stall (up to the idle time the phase holds): that idle time goes.
    gpu_stats& g = *typ.gpu;
    const double idle_before = (1 - g.busy_share) * before;
    std::vector<std::pair<std::string, double>> idle_ms;
    double idle_after = 0;
    for (const auto& [name, share] : g.idle_by_phase) {
      double ms = share * idle_before;
      for (const one_off& f : out.found) ms = f.phase == name ? std::max(0.0, ms - f.excess_ms) : ms;
      idle_ms.emplace_back(name, ms);
      idle_after += ms;
    }
    g.busy_share = std::min(1.0, g.busy_share * before / after);
    for (std::size_t i = 0; i < idle_ms.size(); ++i) {
      g.idle_by_phase[i].second = idle_after > 0 ? idle_ms[i].second / idle_after : 0.0;
    }
    std::stable_sort(g.idle_by_phase.begin(), g.idle_by_phase.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
  }
  typ.facts.emplace_back("diagnosis.typical", "1");
  return out;
}

void one_off_words(const summary& s, const std::vector<one_off>& found, diagnosis& d) {
  std::string said, brief;
  for (const one_off& f : found) {
    double ms = 0;
    const timeline_step* st = step_with(s, f.phase, ms);
    const bool once = f.max_ms - f.p50_ms >= 0.9 * f.excess_ms;
    const std::string where = fmt::format(
        "{}: {} ms in `{}`{}",
        st != nullptr && ms >= 0.5 * f.max_ms ? fmt::format("step {}", st->index) : std::string("its slowest step"),
        format_ms(f.max_ms), f.phase, once ? ", once" : ", and a few more like it");
    said += fmt::format("{}{}, {:.0f}x its median of {} ms", said.empty() ? "" : "; ", where,
                        f.p50_ms > 0 ? f.max_ms / f.p50_ms : 0.0, format_ms(f.p50_ms));
    brief += (brief.empty() ? "" : "; ") + where;
  }
  d.evidence = "Read from the typical step, the one-off stall below left out of the label and gains: " + d.evidence +
               fmt::format(" The one-off: {}.", said);
  d.advice.push_back(
      fmt::format("a one-off stall is not the steady state ({}): capture on trouble (capture=\"slow\") "
                  "records the ops of the next one",
                  brief));
}

}  // namespace steptrace::detail
