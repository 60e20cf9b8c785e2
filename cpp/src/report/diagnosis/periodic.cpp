// Periodic work: one step in N carries time the typical step does not (a checkpoint, an
// evaluation, a log flush every N steps). Named with its period, its share and the fix, in the
// program's own terms (report/diagnosis/hypotheses.hpp).
#include <fmt/format.h>

#include <algorithm>

#include "report/diagnosis/hypotheses.hpp"
#include "report/diagnosis/step_spread.hpp"
#include "report/diagnosis/summary_facts.hpp"
#include "steptrace/output.hpp"

namespace steptrace::detail {

std::vector<periodic_work> periodic_work_of(const summary& s, const diagnosis_thresholds& t) {
  std::vector<periodic_work> out;
  for (const phase_stats& p : s.phases) {
    const step_spread sp = spread_of(s, p.name);
    if (sp.shape != step_spread::periodic || sp.excess_share < t.periodic_share) continue;
    out.push_back({p.name, sp.every, sp.excess_ms, sp.excess_share});
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.share > b.share; });
  return out;
}

double periodic_gain(const summary& s, const periodic_work& p) {
  if (!s.gpu || s.gpu->steps_viewed == 0) return p.share;
  // With a device view, what the GPU idled through of it: the phase group's idle share, in the
  // proportion the periodic part is of the phase.
  const std::vector<std::string_view> groups = builtin_groups(s);
  std::string_view group = "compute";
  for (std::size_t i = 0; i < s.phases.size(); ++i) {
    if (s.phases[i].name == p.phase && !groups[i].empty()) group = groups[i];
  }
  const double share = group_share(s, group);
  const double idle = host_gain(s, group);
  return share > 0 ? std::min(p.share, idle * p.share / share) : 0.0;
}

std::string periodic_words(const summary& s, const periodic_work& p) {
  const bool python = python_program(s);
  const std::string where = p.phase == "other" ? "outside every phase (`other`)" : fmt::format("in `{}`", p.phase);
  const std::string head = fmt::format("1 step in {} carries {} ms more {}, {:.0f}% of step time", p.every,
                                       format_ms(p.excess_ms), where, 100 * p.share);
  if (p.phase == "input") {
    return head + fmt::format(
                      ": a batch every {} steps is not ready in time (loader workers that each deliver in turn, a new "
                      "file or shard every {} batches?): keep more batches in flight ({}), or make the slow one "
                      "cheaper",
                      p.every, p.every, python ? "more workers, prefetch_factor" : "a deeper prefetch queue");
  }
  // Between phases the work has no name yet: what usually runs every N steps is guessed at.
  const bool unnamed = p.phase == "other" || p.phase == "wait";
  const std::string name = unnamed ? "checkpoint" : p.phase;
  const std::string aside = python ? fmt::format("wrap it in `with steptrace.exclude(\"{}\"):`", name)
                                   : fmt::format("wrap it in steptrace::scoped_exclude aside(tracer, \"{}\")", name);
  return head + (unnamed ? fmt::format(" (checkpointing, evaluation or logging every {} steps?)", p.every) : "") +
         fmt::format(": run it less often or in the background ({}), or {} so it is set aside and reported apart",
                     python ? "asynchronous checkpointing, a logging thread" : "a thread of its own", aside);
}

std::string periodic_cause(const periodic_work& p) { return fmt::format("every {} steps: {}", p.every, p.phase); }

void periodic_findings(const summary& s, const diagnosis& d, std::vector<finding>& found) {
  for (const periodic_work& p : d.periodic) {
    const std::string cause = periodic_cause(p);
    const bool said = std::any_of(d.hypotheses.begin(), d.hypotheses.end(),
                                  [&](const hypothesis& h) { return h.holds && h.cause == cause; });
    if (said) continue;  // the label's own advice names it
    found.push_back({cause, "also: " + periodic_words(s, p), periodic_gain(s, p), false});
  }
}

}  // namespace steptrace::detail
