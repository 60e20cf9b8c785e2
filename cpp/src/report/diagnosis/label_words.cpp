// Which cause speaks for a label, and the evidence the labels share (label_words.hpp).
#include "report/diagnosis/label_words.hpp"

#include <fmt/format.h>

#include <cmath>

#include "report/report.hpp"

namespace steptrace::detail {

label_words label_words_of(std::string_view label, const label_reading& r) {
  struct entry {
    std::string_view label;
    label_words words;
  };
  static constexpr entry table[] = {
      {"INPUT-BOUND", input_bound_words},     {"H2D-BOUND", h2d_bound_words},   {"WAIT-HEAVY", wait_heavy_words},
      {"HOST-BOUND", host_bound_words},       {"COMM-BOUND", comm_bound_words}, {"LAUNCH-BOUND", launch_bound_words},
      {"COMPUTE-BOUND", compute_bound_words},
  };
  for (const entry& e : table) {
    if (e.label == label) return e.words;
  }
  return r.device && r.compute_idle_largest ? host_compute_words : balanced_words;
}

std::string phase_evidence(const summary& s, std::string_view name, double threshold) {
  const phase_stats* own = s.phase(name);
  const bool with_children = own == nullptr || group_share(s, name) > own->share + 1e-12;
  return fmt::format("`{}`{} takes {:.1f}% of step time ({} ms of {} ms per step{}).", name,
                     with_children ? " with the phases inside it" : "", 100 * group_share(s, name),
                     format_ms(mean_of(s, name)), format_ms(s.step_ms.mean),
                     threshold < 0 ? "" : fmt::format("; the rule fires at {:.0f}%", 100 * threshold));
}

std::string idle_evidence(const summary& s, std::string_view phase) {
  if (!s.gpu) return "";
  double share = 0;
  for (const auto& [name, value] : s.gpu->idle_by_phase) {
    if (name == phase) share = value;
  }
  return fmt::format(" GPU idle {:.0f}% of the step; {:.0f}% of that while the host was in `{}`.",
                     100 * (1 - s.gpu->busy_share), 100 * share, phase);
}

std::string closeness(double share, double threshold, const diagnosis_thresholds& t) {
  if (std::abs(share - threshold) >= t.close_margin) return "";
  return fmt::format(" Close call: {:.1f}% is within {:.0f} points of the rule's {:.0f}%.", 100 * share,
                     100 * t.close_margin, 100 * threshold);
}

std::string device_cause_words(const summary& s, std::string_view group, double share, double threshold) {
  return fmt::format("The GPU sat idle {:.1f}% of step time while the host was in `{}`{} (the rule fires at {:.0f}%).",
                     100 * share, group, group == "wait" && !from_trace(s) ? " or outside every phase" : "",
                     100 * threshold);
}

}  // namespace steptrace::detail
