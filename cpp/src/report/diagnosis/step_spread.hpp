// Internal (not public API): how a phase's time is spread over the steps, the premise most fixes
// rest on. "Remove per-step host syncs" needs the cost in the typical step; "checkpoint less
// often" needs one step in N carrying it. Read at summary time from the phase's statistics and
// the flight recorder's kept steps (each thread's 64 most recent, consecutive, and its slowest).
//
//   const step_spread sp = spread_of(s, "other");
//   if (sp.shape == step_spread::periodic) ... sp.every, sp.excess_ms ...
#pragma once

#include <cstdint>
#include <string_view>

#include "steptrace/summary.hpp"

namespace steptrace::detail {

struct step_spread {
  enum kind {
    unknown,    // too few steps, or the phase is not in the run
    per_step,   // the typical step (the median) carries at least half the phase's time
    periodic,   // one step in `every` carries most of it, on every thread that shows it
    few_steps,  // some steps carry most of it, with no period the kept steps show
  } shape = unknown;
  std::uint64_t every = 0;       // periodic: one step in `every`
  double typical_ms = 0;         // the phase's time in the median step
  double excess_ms = 0;          // the heavy kept steps' median excess over the typical step
  double excess_share = 0;       // the time above the typical step, over the run, of all step time
  std::uint64_t heavy_kept = 0;  // heavy steps among the kept ones
};

// The spread of phase `name`'s own (exclusive) time; `other` is the time outside every phase.
step_spread spread_of(const summary& s, std::string_view name);

}  // namespace steptrace::detail
