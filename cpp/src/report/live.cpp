// The live view's line for one window (option `live`; cpp/src/core/README.md, "Windows").
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "report/report.hpp"

namespace steptrace::detail {

std::string live_line(const summary& w, double at_s) {
  char head[160];
  std::snprintf(head, sizeof head, "steptrace live %.1f s", at_s);
  std::string line = head;
  if (w.rank && w.rank->world_size > 1) {  // under torchrun every rank's lines share one terminal
    std::snprintf(head, sizeof head, ", rank %u of %u", w.rank->rank, w.rank->world_size);
    line += head;
  }
  std::snprintf(head, sizeof head, ": %llu steps", static_cast<unsigned long long>(w.steps));
  line += head;
  if (w.steps > 0) {
    char stats[96];
    std::snprintf(stats, sizeof stats, ", step p50 %.1f ms p95 %.1f ms", w.step_ms.p50, w.step_ms.p95);
    line += stats;
    std::vector<const phase_stats*> top;
    for (const phase_stats& p : w.phases) {
      if (p.share >= 0.01) top.push_back(&p);
    }
    std::stable_sort(top.begin(), top.end(),
                     [](const phase_stats* a, const phase_stats* b) { return a->share > b->share; });
    if (top.size() > 3) top.resize(3);
    for (std::size_t i = 0; i < top.size(); ++i) {
      char share[24];
      std::snprintf(share, sizeof share, " %.0f%%", top[i]->share * 100);
      line += (i == 0 ? "; " : ", ") + top[i]->name + share;
    }
    if (!w.diag.label.empty()) line += "; " + w.diag.label;
    if (!w.diag.gains.empty()) {  // the largest gain: what the first fix is worth
      char gain[48];
      std::snprintf(gain, sizeof gain, " (up to %.0f%% from ", 100 * w.diag.gains.front().second);
      line += gain + w.diag.gains.front().first + ")";
    }
  }
  return line + "\n";
}

}  // namespace steptrace::detail
