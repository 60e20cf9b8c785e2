#include "analysis/kernel_drift.hpp"

#include <algorithm>

#include "analysis/kernel_table.hpp"

namespace steptrace::detail {

std::vector<kernel_drift::finding> kernel_drift::check(const kernel_stats& k, std::uint64_t steps) {
  std::vector<finding> out;
  const double n = static_cast<double>(steps);
  for (const kernel_row& r : k.kernels) {
    const double calls = r.calls_per_step * n;
    if (calls < min_calls || catch_all_row(r.name) || r.kind == "collective") continue;  // a collective waits on ranks
    const double us = 1e3 * r.ms_per_step / r.calls_per_step;  // the mean a call: exact, not the median's bucket
    const auto it = baseline_us_.find(r.name);
    if (it == baseline_us_.end()) {
      if (baseline_us_.size() < max_names) baseline_us_.emplace(r.name, us);
      continue;
    }
    if (us > drift_ratio * it->second) out.push_back({r.name, it->second, us});
  }
  std::sort(out.begin(), out.end(),
            [](const finding& a, const finding& b) { return a.now_us / a.baseline_us > b.now_us / b.baseline_us; });
  return out;
}

}  // namespace steptrace::detail
