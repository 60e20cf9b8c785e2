// Internal (not public API): the STRAGGLER rule over a job's rank rows (docs/architecture.md,
// "Ranks"): the rank the others wait for, the phase it spends its extra time in and, where its
// summary has them, the named phase inside that one which holds most of it; and its diagnosis.
#pragma once

#include <optional>
#include <string>
#include <unordered_map>
#include <string_view>
#include <vector>

#include "base/median.hpp"  // median, which the rule and its callers share
#include "steptrace/summary.hpp"

namespace steptrace::detail {

template <typename Row>  // rank_row or const rank_row
auto& phase_of(Row& r, std::string_view phase) {
  if (phase == "input") return r.input_ms;
  if (phase == "h2d") return r.h2d_ms;
  if (phase == "compute") return r.compute_ms;
  if (phase == "wait") return r.wait_ms;
  return r.other_ms;
}

// A rank's wait at the collectives a step: on the host and, from a trace, on the device.
inline double collective_wait(const rank_row& r) { return r.wait_ms + r.device_wait_ms; }

// A rank's row of the ranks table from its summary (report/ranks.cpp), as combine_ranks and a
// live window's row (report/live_rows.cpp) both make it.
rank_row row_of(const rank_report& report);

// The rank that waits least at the collectives, when the others wait for it beyond the
// thresholds (report/diagnosis/diagnosis.hpp) and it does more of its own work, or began late.
std::optional<straggler_info> find_straggler(const ranks_view& view);

// Names, in `s`, the custom phase inside s.phase (at any depth; for `compute`, also one outside
// every built-in) whose time a step, with the phases inside it, exceeds the median of the other
// ranks' by half of s.excess_ms or more: the most specific such phase (the least time of its
// own). `reports` are the job's ranks; s.within stays empty when none holds that much, or when the
// summaries carry no custom phases (a live rank's digest).
void name_within(straggler_info& s, const std::vector<const rank_report*>& reports);
// The same choice from each rank's named phases inside s.phase with their time a step (its
// own, `own`; the other ranks', `others`), as live rank rows carry them (live_rows.cpp).
void choose_within(straggler_info& s, const std::unordered_map<std::string_view, double>& own,
                   const std::vector<std::unordered_map<std::string_view, double>>& others);
// A summary's named phases inside the built-in `group` (for `compute`, also those outside every
// built-in), each with its time a step including the phases inside it.
std::unordered_map<std::string_view, double> named_inside(const summary& s, std::string_view group);
// " (`decode` alone: 12.0 ms more)" or ", 9.5 ms of it in `decode`"; empty without s.within.
std::string within_words(const straggler_info& s);

// `gpu`: a rank of the job had a GPU (a device view, or CUDA there): the advice may name one.
diagnosis straggler_diagnosis(const ranks_view& view, const straggler_info& s, bool gpu);

}  // namespace steptrace::detail
