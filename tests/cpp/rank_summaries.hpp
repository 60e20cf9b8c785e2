// Hand-made rank summaries for the rank tests (test_ranks.cpp, test_straggler.cpp): per-step ms of
// each phase, and a synchronous data-parallel job built from each rank's work.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "report/report.hpp"
#include "steptrace/summary.hpp"

namespace steptrace::testing {

// One rank's summary: per-step ms of each phase (built-ins or custom, with parents); the step
// is their sum.
inline summary rank_summary(std::uint32_t rank, std::uint32_t world, std::map<std::string, double> phase_ms,
                            std::map<std::string, std::string> parents = {}) {
  summary s;
  s.steps = 100;
  double step = 0;
  for (const auto& [name, v] : phase_ms) step += v;
  s.step_ms = stat_ms{step * 100, step, step, step, step, step};
  for (const auto& [name, v] : phase_ms) {
    phase_stats p{name, stat_ms{v * 100, v, v, v, v, v}, v / step, 100};
    if (parents.count(name)) p.parent = parents[name];
    s.phases.push_back(p);
  }
  s.rank = rank_info{rank, world, rank, "node-" + std::to_string(rank / 2), "2026-11-21T10:00:00Z"};
  detail::complete(s);
  return s;
}

inline rank_report report(summary s, std::vector<double> waits = {}, std::uint64_t collectives = 0) {
  return rank_report{std::move(s), std::move(waits), collectives};
}

// Synchronous data parallel: every rank's step takes as long as the slowest rank's work; the
// others spend the difference in `wait`.
inline std::vector<rank_report> job(const std::vector<std::map<std::string, double>>& work) {
  double slowest = 0;
  std::vector<double> totals;
  for (const auto& w : work) {
    double t = 0;
    for (const auto& [name, v] : w) t += v;
    totals.push_back(t);
    slowest = std::max(slowest, t);
  }
  std::vector<rank_report> out;
  for (std::uint32_t r = 0; r < work.size(); ++r) {
    auto phases = work[r];
    phases["wait"] = 0.2 + slowest - totals[r];  // 0.2 ms: moving the gradients
    out.push_back(report(rank_summary(r, static_cast<std::uint32_t>(work.size()), phases)));
  }
  return out;
}

}  // namespace steptrace::testing
