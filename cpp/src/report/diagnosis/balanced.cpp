// BALANCED's words: no cause's rule fired. The GPU idling mostly while the host is in `compute`,
// yet not for launches, is the host side of `compute`; else the largest phase is where to start.
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "report/diagnosis/label_words.hpp"

namespace steptrace::detail {

std::string idle_custom_in_compute(const summary& s) {
  if (!s.gpu) return "";
  const std::vector<std::string_view> groups = builtin_groups(s);
  for (const auto& [name, share] : s.gpu->idle_by_phase) {  // largest first
    if (share < 0.25) break;
    if (is_builtin(name)) continue;
    for (std::size_t i = 0; i < s.phases.size(); ++i) {
      if (s.phases[i].name == name && (groups[i].empty() || groups[i] == "compute")) {
        return fmt::format(", starting with `{}`: the GPU spends {:.0f}% of its idle time while the host is in it",
                           name, 100 * share);
      }
    }
  }
  return "";
}

void host_compute_words(const label_reading& r, diagnosis& d) {
  const summary& s = r.s;
  d.evidence = fmt::format(
      "The GPU is busy only {:.1f}% of the step and idles mostly while the host is in `compute` ({:.1f}% of step "
      "time), yet not for launches: half the kernel time is in kernels over {:.1f} us, and the host spends {:.1f} "
      "us in `compute` per launch: the host-side work in `compute` is what the GPU waits on.",
      100 * s.gpu->busy_share, 100 * r.idle.compute, s.gpu->kernel_time_median_us, host_us_per_kernel(s));
  d.evidence += graph_replay_words(s) + r.near_miss;
  d.advice = {"profile the host side of `compute` (Python overhead, CPU ops, host syncs inside the phase)" +
              idle_custom_in_compute(s)};
}

void balanced_words(const label_reading& r, diagnosis& d) {
  const summary& s = r.s;
  const auto largest = std::max_element(s.phases.begin(), s.phases.end(),
                                        [](const phase_stats& a, const phase_stats& b) { return a.share < b.share; });
  d.evidence = fmt::format("No rule fires; the largest share is `{}` at {:.1f}% of step time.", largest->name,
                           100 * largest->share);
  if (r.device) d.evidence += fmt::format(" The GPU is busy {:.1f}% of the step.", 100 * s.gpu->busy_share);
  d.evidence += r.near_miss;
  d.advice = {fmt::format("no single cause stands out: start with the largest phase, `{}`", largest->name)};
}

}  // namespace steptrace::detail
