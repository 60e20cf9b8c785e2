// Shared by the diagnosis tests: summaries built to order, so each rule is tried at and around
// its threshold with figures that are the ground truth by construction.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "steptrace/summary.hpp"

namespace steptrace::testing {

// A summary of 100 steady steps (each phase the same in every step) with the given shares;
// whatever is left over goes to `other`.
inline summary with_shares(std::map<std::string, double> shares) {
  summary s;
  s.steps = 100;
  s.step_ms = stat_ms{1000, 10, 10, 10, 10, 10};
  double used = 0;
  for (auto& [name, share] : shares) {
    if (name == "other") continue;
    used += share;
    const double ms = share * 10;
    s.phases.push_back(phase_stats{name, stat_ms{share * 1000, ms, ms, ms, ms, ms}, share, 100});
  }
  const double other = shares.count("other") ? shares["other"] : 1.0 - used;
  const double ms = other * 10;
  s.phases.push_back(phase_stats{"other", stat_ms{other * 1000, ms, ms, ms, ms, ms}, other, 0});
  return s;
}

// The summary with these facts added (as the tracer records them with set_fact).
inline summary with_facts(summary s, std::vector<std::pair<std::string, std::string>> facts) {
  for (auto& f : facts) s.facts.push_back(std::move(f));
  return s;
}

// A summary with a device view: the GPU busy `busy` of step time, its idle time spread over the
// host phases as given (shares of the idle time), kernels holding half their time under
// `kernel_us` and half of them (by count) as long or longer.
inline summary with_device(std::map<std::string, double> shares, double busy, double kernel_us,
                           std::vector<std::pair<std::string, double>> idle = {}) {
  summary s = with_shares(std::move(shares));
  s.gpu = gpu_stats{};
  s.gpu->steps_viewed = s.steps;
  s.gpu->busy_share = busy;
  s.gpu->kernel_time_median_us = kernel_us;
  s.gpu->kernel_median_us = kernel_us;
  s.gpu->kernels_per_step = 200;
  s.gpu->idle_by_phase = std::move(idle);
  return s;
}

}  // namespace steptrace::testing
