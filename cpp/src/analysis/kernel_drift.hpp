// Internal (not public API): a kernel growing slower between live windows. Each kernel's time a
// call is kept from the first window it ran min_calls times in; a later window where it takes more
// than drift_ratio of that a call is drift: clocks held lower by heat or power, or its shapes grew
// (docs/diagnosis.md, "The ceiling").
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "steptrace/summary.hpp"

namespace steptrace::detail {

class kernel_drift {
 public:
  static constexpr double drift_ratio = 1.10;
  static constexpr double min_calls = 20;         // in one window, for a time a call to hold
  static constexpr std::size_t max_names = 1024;  // kernels with a baseline; later names are not watched

  struct finding {
    std::string name;
    double baseline_us = 0, now_us = 0;
  };
  // The window's kernels (kernel_stats over `steps` steps): those drifted, the most first; the
  // kernels seen for the first time become baselines.
  std::vector<finding> check(const kernel_stats& k, std::uint64_t steps);
  void clear() { baseline_us_.clear(); }

 private:
  std::unordered_map<std::string, double> baseline_us_;
};

}  // namespace steptrace::detail
