// Internal (not public API): fixes as checked hypotheses. Each candidate fix states what must
// hold in the run for it to help, checks it against the step series and the facts, and carries
// the gain it could give if it holds. The first fix is the largest gain whose premise holds.
// See cpp/src/report/diagnosis/README.md, "Fixes as checked hypotheses".
//
//   std::optional<double> first_gain;
//   wait_hypotheses(s, t, c, d, first_gain);  // WAIT-HEAVY's fixes, refuted ones kept in d.hypotheses
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "report/diagnosis/diagnosis.hpp"
#include "report/diagnosis/gains.hpp"

namespace steptrace::detail {

// Work one step in N carries, per phase (report/diagnosis/periodic.cpp), each holding
// periodic_share of step time or more; largest first.
std::vector<periodic_work> periodic_work_of(const summary& s, const diagnosis_thresholds& t);
// The fix for periodic work, in the program's terms, without its gain.
std::string periodic_words(const summary& s, const periodic_work& p);
// Its key in the gains: "every 10 steps: other".
std::string periodic_cause(const periodic_work& p);
// Its gain: its share of step time, with a device view the GPU's idle time it made.
double periodic_gain(const summary& s, const periodic_work& p);
// "also:" lines for periodic work in a phase the label's own advice does not cover.
void periodic_findings(const summary& s, const diagnosis& d, std::vector<finding>& found);

// A run too short to judge: empty counted steps (judge_empty_share outside every phase, no
// device work) that hold under judge_min_ms in all. The evidence says so and no fix is advised.
// True when it applied.
bool too_short_to_judge(const summary& s, const diagnosis_thresholds& t, diagnosis& d);

// A device view that cannot be read as complete (report/diagnosis/device_view_check.cpp): what is
// missing, in words ("in 9 of 10 steps the device started work 493 ms a step after its launch
// ..."); empty when it is whole.
// CUPTI's records lost to its buffer cap: from this share of those recorded, the view is not
// complete; under it they are said beside the figures (dropped_records_words, empty with none).
// A trace's steps whose kernel launches it holds under half the device records of
// (trace.device_coverage): from half the steps weighed, the view is not complete; fewer are
// said beside the figures (under_recorded_words, empty with none).
inline constexpr double dropped_share_limit = 0.10;
std::string incomplete_device_view(const summary& s);
std::string dropped_records_words(const summary& s);
std::string under_recorded_words(const summary& s);
// The fix for the view incomplete_device_view found lacking.
std::string complete_view_advice(const summary& s);

// Threads serialised on a shared lock or resource (report/diagnosis/lock_hypothesis.cpp): many
// threads in steps at once using about one core between them, on a host
// with cores to spare and no device syncs to explain the blocking. The phase the blocked time
// is in, its gain (the phase's share of each step), and the words.
struct shared_lock {
  hypothesis h;
  std::string phase;  // where the threads block: the largest phase off the CPU
  double threads_in_steps = 0, cores_busy = 0;
};
shared_lock shared_lock_of(const summary& s, const diagnosis_thresholds& t);

// WAIT-HEAVY's fixes (report/diagnosis/wait_hypotheses.cpp): per-step host syncs (the typical
// step carries the blocked or untraced time), periodic work (one step in N does), some steps
// only (no period), a shared lock. Sets d.advice from those that hold, largest gain first, and
// `first_gain` to the first one's gain; every one checked goes to d.hypotheses.
void wait_hypotheses(const summary& s, const diagnosis_thresholds& t, diagnosis& d, std::optional<double>& first_gain);

}  // namespace steptrace::detail
