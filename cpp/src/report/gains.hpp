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

// The most removing host phase group `cause` (input, h2d, wait, other, compute) could save, of
// step time.
double host_gain(const summary& s, std::string_view cause);

// " (up to 34% shorter steps)", or "... shorter run" for time set aside.
std::string gain_words(double gain, bool of_run = false);

// A gain as a share of run time, to rank a step's cause against time set aside: a step gain
// applies to the run's steps only.
double run_terms(const summary& s, double gain, bool of_run);

// `gains` largest first; equal gains keep their order.
void sort_gains(std::vector<std::pair<std::string, double>>& gains);

}  // namespace steptrace::detail
