// Internal (not public API): the gain of each fix. Every cause the diagnosis names carries the
// most removing it could save, an upper bound, as a fraction of step time:
// - with a device view, the GPU idle time that fell while the host was in that cause (the device
//   work stays, so the step cannot shrink by more than the idle time the cause made);
// - host-only, the cause's share of step time;
// - time set aside (validation, checkpoints): its share of run time;
// - STRAGGLER (report/ranks.cpp): the straggler's excess over the median rank, of step time.
// COMPUTE-BOUND names no host gain. See docs/architecture.md, "Definitions".
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "steptrace/summary.hpp"

namespace steptrace::detail {

// A finding the diagnosis says under its label ("also: ..."), with its cause and gain.
struct finding {
  std::string cause, text;
  double gain;
  bool of_run;  // a share of run time (time set aside), not of step time
};

// Puts the gains where the user reads them: the label's causes (`compute_idle`: BALANCED names
// `compute`, the GPU idling mostly there) and each finding's, in d.gains largest first; "(up to N%
// shorter steps)" on the label's first advice and on each finding, appended to d.advice; a
// finding whose gain beats the label's own, in run terms, goes first. A label that names no
// cause (COMPUTE-BOUND: the model) keeps its advice first.
void add_gains(const summary& s, const std::vector<finding>& found, bool compute_idle, diagnosis& d);

// The most removing host phase group `cause` (input, h2d, wait, other, compute) could save, of
// step time.
double host_gain(const summary& s, std::string_view cause);

// " (up to 34% shorter steps)", or "... shorter run" for time set aside.
std::string gain_words(double gain, bool of_run = false);

}  // namespace steptrace::detail
