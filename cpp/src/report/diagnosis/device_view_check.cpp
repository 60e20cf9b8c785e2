// An honest device view (report/diagnosis/hypotheses.hpp): a trace whose device starts work long
// after each launch with nothing traced running before it (another process's work on the GPU, or
// a device clock offset from the host's) cannot place the GPU's idle time against the host's
// phases. It is said as such and the host view decides.
#include <fmt/format.h>

#include <algorithm>
#include <sstream>

#include "report/diagnosis/hypotheses.hpp"
#include "steptrace/output.hpp"

namespace steptrace::detail {

namespace {

// The device records the view was made of, against those CUPTI lost to its buffer cap.
double dropped_share(const gpu_stats& g) {
  const double kept =
      static_cast<double>(g.steps_viewed) *
      (g.kernels_per_step + static_cast<double>(g.h2d.count + g.d2h.count) / std::max<double>(1, g.steps_viewed));
  const double dropped = static_cast<double>(g.dropped_records);
  return dropped > 0 ? dropped / (dropped + kept) : 0.0;
}

}  // namespace

std::string dropped_records_words(const summary& s) {
  if (!s.gpu || s.gpu->dropped_records == 0) return "";
  const double pct = 100 * dropped_share(*s.gpu);
  return fmt::format("CUPTI dropped {} device records to its buffer cap ({}% of those it recorded)",
                     s.gpu->dropped_records, pct >= 10 ? fmt::format("{:.0f}", pct) : fmt::format("{:.1f}", pct));
}

std::string incomplete_device_view(const summary& s) {
  if (!s.gpu) return "";
  if (dropped_share(*s.gpu) >= dropped_share_limit) return dropped_records_words(s);
  const std::string* late = s.fact("trace.device_late");
  if (late == nullptr) return "";
  std::istringstream in(*late);
  std::uint64_t steps_late = 0, weighed = 0;
  double ms = 0;
  if (!(in >> steps_late >> weighed >> ms) || weighed == 0) return "";
  return fmt::format(
      "in {} of {} steps the device started work {} ms a step after its launch with nothing traced running before "
      "it (another process's work on the GPU, or a device clock offset from the host's)",
      steps_late, weighed, format_ms(ms));
}

}  // namespace steptrace::detail
