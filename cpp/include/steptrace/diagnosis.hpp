// steptrace/diagnosis.hpp — what a summary concludes: the label, why, the fixes and their gains.
//
//   const steptrace::diagnosis& d = tracer.summary().diag;
//   std::cerr << d.label << ": " << d.advice.front() << "\n";   // "INPUT-BOUND: DataLoader(...)"
//   for (const auto& [cause, gain] : d.gains) std::cerr << cause << " up to " << gain << "\n";
//
// The rules and their thresholds: docs/diagnosis.md.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "steptrace/export.hpp"

namespace steptrace {

// A candidate fix checked against the run: what must hold for it to help, what the data said, and
// what it could save if it holds (the gains' terms).
struct hypothesis {
  std::string fix;      // "per-step host syncs", "periodic work", "a shared lock", ...
  std::string cause;    // the gains' key it saves from: `wait`, `other`, a phase's name
  bool holds = false;   // the premise holds in this run
  std::string premise;  // what was checked, and what the run showed
  double gain = 0;      // of step time, as diagnosis::gains
};

// Work that one step in `every` carries on top of the typical step (a checkpoint every 10 steps).
struct periodic_work {
  std::string phase;  // where it runs: a phase's name, or `other` (outside every phase)
  std::uint64_t every = 0;
  double excess_ms = 0;  // on each step that carries it, over the typical step
  double share = 0;      // of all step time
};

struct diagnosis {
  std::string label;                // one of diagnosis_labels(); empty when there were no steps
  std::string evidence;             // one sentence
  std::vector<std::string> advice;  // the fix to try first comes first
  // The gain of each fix: for each cause the diagnosis names (the label's, each secondary
  // finding's), the most that removing it could save, an upper bound, as a fraction of step time
  // (of run time for time set aside). Keys are phase names (`input`, `h2d`, `wait`, `other`,
  // `compute`), `comm` (collectives no compute hides), a set-aside name, `rank N` (STRAGGLER), or
  // from a trace `runtime_calls` (blocking runtime calls) and `op` (the op holding the idle time).
  // Largest first. COMPUTE-BOUND names no host gain.
  std::vector<std::pair<std::string, double>> gains;
  // A close call: the label the rules put next, within 10 points of the step; "" otherwise.
  std::string runner_up;
  // Each candidate fix the rules checked, in the order they were weighed: the first fix is the
  // largest gain whose premise holds.
  std::vector<hypothesis> hypotheses;
  std::vector<periodic_work> periodic;  // largest share first
};

// Every label the diagnosis can give, in the order its rules are documented.
STEPTRACE_API const std::vector<std::string>& diagnosis_labels();

}  // namespace steptrace
