// Internal (not public API): the STRAGGLER rule over a job's rank rows (cpp/src/report/README.md,
// "Many ranks"): the rank the others wait for, the phase it spends its extra time in and, where its
// summary has them, the named phase inside that one which holds most of it; and its diagnosis.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "analysis/arrivals.hpp"
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
// The same figures for a given rank (its wait, the others', the median rank, the phase it exceeds
// the others' median most in), whatever the thresholds: the rank its arrival at the collectives
// named (view.arrivals). None when it recorded no steps or is the only rank that did.
std::optional<straggler_info> describe_straggler(const ranks_view& view, std::uint32_t rank);
// Whether the rank that arrived last most often at the collectives holds the others back by the
// STRAGGLER thresholds: its median lateness at the collectives it was last at (0.5 ms at least),
// and its net lateness over every call (`net_late_ms`, read_arrivals'), times the calls a step
// (`calls_per_step`), against the median step: a rank last by chance as often as first nets ~0.
bool arrival_holds(const arrival_rank& last, double net_late_ms, double calls_per_step, double step_ms);
// The arrival rule on a job's view (its rows and find_straggler's verdict in): reads the ranks'
// arrival at `calls` into view.arrivals, and when the rank that arrived last most often holds the
// others back (arrival_holds), makes it the straggler with its arrival figures (the rank the
// host-wait rule named keeps its figures). `calls_per_step`: the ranks' median. A rank the
// host-wait rule named whose arrivals do not hold the others back is no straggler: why goes to
// view.straggler_refuted.
void apply_arrivals(ranks_view& view, const std::vector<rank_calls>& calls, double calls_per_step);
// The arrival rule judges the host-wait rule's rank from this many matched calls.
inline constexpr std::uint64_t min_arrivals_judged = 3;
// "of each step, the collectives move data 441.00 ms, which every rank pays, and the median rank
// waits 0.10 ms for the last to arrive (rank 0 the longest, 0.20 ms)": the split in words.
std::string split_words(const arrival_view& a);
// The readings of `own` that depart from the median of `others`' ("SM clock 1410 MHz against 1980
// median, thermal slowdown"); empty when none does, or with no others.
std::string node_departures(const node_health& own, const std::vector<node_health>& others);
// "It arrived last at 38 of the 40 collectives the ranks share (95%), a median 27.1 ms after the
// others, after `backward`"; empty without arrivals.
std::string arrival_words(const straggler_info& s);

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
// built-in), each with its time a step including the phases inside it but `wait` (the other ranks' time).
std::unordered_map<std::string_view, double> named_inside(const summary& s, std::string_view group);
// " (`decode` alone: 12.0 ms more)" or ", 9.5 ms of it in `decode`"; empty without s.within.
std::string within_words(const straggler_info& s);

// `gpu`: a rank of the job had a GPU (a device view, or CUDA there): the advice may name one.
diagnosis straggler_diagnosis(const ranks_view& view, const straggler_info& s, bool gpu);

}  // namespace steptrace::detail
