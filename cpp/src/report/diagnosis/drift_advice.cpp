// A kernel growing slower between live windows (analysis/kernel_drift.hpp): a finding of its own,
// under any label, from the window's fact gpu.kernel_drift (docs/diagnosis.md, "The ceiling").
#include <fmt/format.h>

#include "analysis/kernel_table.hpp"
#include "report/diagnosis/diagnosis.hpp"

namespace steptrace::detail {

void drift_advice(const summary& s, diagnosis& d) {
  const std::string* fact = s.fact("gpu.kernel_drift");
  if (fact == nullptr || d.label.empty()) return;
  const std::size_t a = fact->find('\t'), b = a == std::string::npos ? a : fact->find('\t', a + 1);
  if (b == std::string::npos) return;
  const double base = std::atof(fact->substr(a + 1, b - a - 1).c_str()), now = std::atof(fact->substr(b + 1).c_str());
  if (base <= 0 || now <= base) return;
  d.advice.push_back(fmt::format(
      "also: the kernel `{}` takes {:.0f}% longer a call than in the first window it ran in ({:.1f} us against "
      "{:.1f} us): clocks held lower by heat or power (nvidia-smi -q -d PERFORMANCE names the reason), or its "
      "shapes grew",
      short_kernel_name(fact->substr(0, a)), 100 * (now / base - 1), now, base));
}

}  // namespace steptrace::detail
