// Shared by the diagnosis tests: summaries built to order, so each rule is tried at and around
// its threshold with figures that are the ground truth by construction.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "steptrace/summary.hpp"

namespace steptrace::testing {

// A one-step summary with the given shares; whatever is left over goes to `other`.
inline summary with_shares(std::map<std::string, double> shares) {
  summary s;
  s.steps = 100;
  s.step_ms.mean = 10;
  double used = 0;
  for (auto& [name, share] : shares) {
    if (name == "other") continue;
    used += share;
    s.phases.push_back(phase_stats{name, stat_ms{share * 1000, share * 10, 0, 0, 0, 0}, share, 100});
  }
  const double other = shares.count("other") ? shares["other"] : 1.0 - used;
  s.phases.push_back(phase_stats{"other", stat_ms{other * 1000, other * 10, 0, 0, 0, 0}, other, 0});
  return s;
}

// The summary with these facts added (as the tracer records them with set_fact).
inline summary with_facts(summary s, std::vector<std::pair<std::string, std::string>> facts) {
  for (auto& f : facts) s.facts.push_back(std::move(f));
  return s;
}

}  // namespace steptrace::testing
