// A run too short to judge (report/diagnosis/hypotheses.hpp): empty steps that hold almost no
// time are no basis for a cause; what there is to say is how little was measured.
#include <fmt/format.h>

#include "report/diagnosis/hypotheses.hpp"
#include "steptrace/output.hpp"

namespace steptrace::detail {

bool too_short_to_judge(const summary& s, const diagnosis_thresholds& t, diagnosis& d) {
  // A summary made by hand may carry the mean alone; one with no time at all says nothing either way.
  const double total = s.step_ms.total > 0 ? s.step_ms.total : static_cast<double>(s.steps) * s.step_ms.mean;
  if (s.steps == 0 || total <= 0 || total >= t.judge_min_ms) return false;
  // Short steps that did something (phases, device work) are judged: a 100 us inference step is
  // a step. Empty ones, nothing inside them but the time between the marks, are not.
  const phase_stats* other = s.phase("other");
  const bool device_work = s.gpu && s.gpu->steps_viewed > 0 && !ran_no_gpu_work(*s.gpu);
  if (device_work || other == nullptr || other->share < t.judge_empty_share) return false;
  d.label.clear();
  d.evidence = fmt::format(
      "{} step{} of {} ms each, {} ms in all: empty and too short to judge (a cause needs {} ms of steps or work "
      "inside them), so nothing is advised: trace more steps, or steps that do the work.",
      s.steps, s.steps == 1 ? "" : "s", format_ms(total / static_cast<double>(s.steps)), format_ms(total),
      format_ms(t.judge_min_ms));
  d.advice.clear();
  d.hypotheses.push_back(
      {"judge the run", "", false,
       fmt::format("needs {} ms of counted steps; the run has {} ms", format_ms(t.judge_min_ms), format_ms(total)), 0});
  return true;
}

}  // namespace steptrace::detail
