// A summary read from a file holds together before any of it is shown as a figure: the checks
// after summary::from_json has read every field (cpp/src/report/json/README.md, "The summary JSON").
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "report/json/json_fields.hpp"

namespace steptrace::detail {
namespace {

// Room for the rounding a number takes on its way through text: a thousandth, or a nanosecond.
bool at_most(double a, double b) { return a <= b + std::max(1e-6, 1e-9 * std::fabs(b)); }

// A rank digest carries a phase's mean only: its max is 0, and the mean then is not held to it.
void check_order(const stat_ms& m, const std::string& what) {
  if (!(at_most(m.p50, m.p95) && at_most(m.p95, m.p99) && at_most(m.p99, m.max) &&
        (m.max == 0 || at_most(m.mean, m.max)))) {
    throw std::invalid_argument(
        fmt::format("{}: p50 {:.4g} p95 {:.4g} p99 {:.4g} max {:.4g} (mean {:.4g}) are not in order", what, m.p50,
                    m.p95, m.p99, m.max, m.mean));
  }
}

}  // namespace

void check_figures(const summary& s) {
  check_order(s.step_ms, "step_ms");
  if (s.step_device_ms) check_order(*s.step_device_ms, "step_device_ms");
  double shares = 0;
  // A phase's time a step fits inside the step it belongs to: no phase's mean or max (with the
  // phases inside it) is longer than the longest step (steps of 0 ms beside 3 ms of phases made
  // `compare` call a run 100% faster).
  const double longest = std::max({s.step_ms.max, s.step_ms.p99, s.step_ms.mean});
  for (const phase_stats& p : s.phases) {
    if (p.share > 1.000001) throw std::invalid_argument("phase \"" + p.name + "\" has a share above 1");
    check_order(p.ms, "phase \"" + p.name + "\"");
    const double phase_longest = std::max({p.ms.mean, p.ms.max, p.inclusive_ms.mean, p.inclusive_ms.max});
    if (s.steps > 0 && !at_most(phase_longest, longest)) {
      throw std::invalid_argument(
          fmt::format("phase \"{}\" takes {:.4g} ms a step, more than the longest step ({:.4g} ms): "
                      "a phase fits inside its step",
                      p.name, phase_longest, longest));
    }
    shares += p.share;
  }
  // A run's phases (with `other`) share out its step time: their shares sum to 1 (to rounding),
  // or to 0 when no step is counted.
  if (s.steps > 0 && !s.phases.empty() && std::fabs(shares - 1) > 0.01) {
    throw std::invalid_argument(fmt::format("the phases' shares sum to {:.3f}, not 1", shares));
  }
  const auto& labels = diagnosis_labels();
  if (!s.diag.label.empty() && std::find(labels.begin(), labels.end(), s.diag.label) == labels.end()) {
    throw std::invalid_argument("the diagnosis label " + s.diag.label.substr(0, 40) + " is none of steptrace's labels");
  }
}

}  // namespace steptrace::detail
