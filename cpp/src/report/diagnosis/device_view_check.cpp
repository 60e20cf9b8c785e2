// An honest device view (report/diagnosis/hypotheses.hpp): a trace whose device starts work long
// after each launch with nothing traced running before it (another process's work on the GPU, or
// a device clock offset from the host's) cannot place the GPU's idle time against the host's
// phases. It is said as such and the host view decides.
#include <fmt/format.h>

#include <sstream>

#include "report/diagnosis/hypotheses.hpp"
#include "steptrace/output.hpp"

namespace steptrace::detail {

std::string incomplete_device_view(const summary& s) {
  const std::string* late = s.fact("trace.device_late");
  if (late == nullptr || !s.gpu) return "";
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
