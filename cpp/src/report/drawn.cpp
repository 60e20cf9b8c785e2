// summary::drawn(): the summary cut to what the HTML report draws, so that a report's memory and
// page are bounded by what it shows, not by the file it was made from.
#include <algorithm>

#include "steptrace/summary.hpp"

namespace steptrace {
namespace {

constexpr std::size_t spans_drawn = 256;  // a step's phase spans and device records: as many as a run keeps

}  // namespace

summary summary::drawn(std::size_t steps) const {
  summary out = *this;
  std::vector<timeline_step>& kept = out.timeline.steps;
  kept.erase(std::remove_if(kept.begin(), kept.end(), [](const timeline_step& s) { return !s.slowest; }), kept.end());
  if (kept.size() > steps) {
    std::partial_sort(kept.begin(), kept.begin() + static_cast<std::ptrdiff_t>(steps), kept.end(),
                      [](const timeline_step& a, const timeline_step& b) { return a.step_ms > b.step_ms; });
    kept.resize(steps);
  }
  std::sort(kept.begin(), kept.end(), [](const timeline_step& a, const timeline_step& b) {
    return a.thread != b.thread ? a.thread < b.thread : a.begin_ms < b.begin_ms;
  });
  for (timeline_step& s : kept) {
    if (s.phases.size() > spans_drawn) {
      s.phases_dropped += static_cast<std::uint32_t>(s.phases.size() - spans_drawn);
      s.phases.resize(spans_drawn);
    }
    if (s.device.size() > spans_drawn) {
      s.device_dropped += static_cast<std::uint32_t>(s.device.size() - spans_drawn);
      s.device.resize(spans_drawn);
    }
  }
  out.timeline.set_aside.clear();
  return out;
}

}  // namespace steptrace
