// One-time work in words: what a trace set aside as initialisation (never advised on), a trace
// that is nothing else, and one mostly start-up told to trace the steady state.
#include <fmt/format.h>

#include <string>

#include "report/diagnosis/diagnosis.hpp"
#include "report/diagnosis/summary_facts.hpp"
#include "report/report.hpp"

namespace steptrace::detail {

void one_time_evidence(const summary& s, diagnosis& d) {
  for (const set_aside_stats& a : s.set_aside) {
    if (a.name != one_time_phase) continue;
    const std::string* calls = s.fact("trace.one_time_calls");
    d.evidence += fmt::format(
        " Set aside as one-time initialisation, not advised on: {} ms ({}), {:.0f}% of the "
        "trace, work a process does once (context creation, module loading, a JIT's or "
        "compiler's first run).",
        format_ms(a.total_ms), calls ? *calls : "runtime calls that blocked with the device idle", 100 * a.run_share);
    if (const auto captures = fact_int(s, "trace.graph_captures"); captures && *captures > 0) {
      d.evidence += fmt::format(
          " It holds {} graph capture{}: the launches inside record a graph and run nothing on "
          "the GPU, so the GPU's idle time there is no cause; a trace of the graphs' replays shows "
          "the steady state.",
          *captures, *captures == 1 ? "" : "s");
    }
  }
}

void steady_state_advice(const summary& s, const diagnosis_thresholds& t, diagnosis& d) {
  for (const set_aside_stats& a : s.set_aside) {
    if (a.name != one_time_phase || a.run_share < t.start_up_mostly_share) continue;
    d.advice.push_back(
        fmt::format("{:.0f}% of this trace is start-up, set aside: trace the steady state, "
                    "torch.profiler.schedule(wait=N, warmup=1, active=3) past the first iterations, for "
                    "figures that hold",
                    100 * a.run_share));
  }
}

bool start_up_only(const summary& s, const diagnosis_thresholds& t, diagnosis& d) {
  if (s.steps != 1) return false;
  for (const set_aside_stats& a : s.set_aside) {
    if (a.name != one_time_phase || a.run_share < t.start_up_only_share) continue;
    const auto captures = fact_int(s, "trace.graph_captures");
    d.label = "BALANCED";
    d.evidence = fmt::format(
        "This trace is {:.0f}% one-time start-up work{}, set aside; the {} ms left is no basis for "
        "a cause.",
        100 * a.run_share,
        captures && *captures > 0 ? fmt::format(" ({} graph capture{}: launches that record a graph and run nothing)",
                                                *captures, *captures == 1 ? "" : "s")
                                  : std::string(),
        format_ms(s.step_ms.mean));
    one_time_evidence(s, d);
    d.advice = {
        "trace the steady state instead: torch.profiler.schedule(wait=N, warmup=1, active=3) past the first "
        "iterations (or, for a server, its requests after start-up)"};
    d.gains.clear();
    return true;
  }
  return false;
}

}  // namespace steptrace::detail
