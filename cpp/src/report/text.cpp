// The public text helpers of output.hpp: a time in milliseconds as the reports print it, and any
// text made printable (control characters and bytes outside UTF-8 escaped).
#include <fmt/format.h>

#include <cmath>
#include <string>
#include <string_view>

#include "base/utf8.hpp"
#include "steptrace/output.hpp"

namespace steptrace {

std::string printable_text(std::string_view text) { return detail::escaped_controls(text); }

std::string format_ms(double v) {
  if (!std::isfinite(v)) return v != v ? "nan" : v > 0 ? "inf" : "-inf";
  if (v == 0) return "0";
  const double size = std::fabs(v);
  if (size >= 1000) return fmt::format("{:.0f}", v);
  if (size >= 100) return fmt::format("{:.1f}", v);
  if (size >= 10) return fmt::format("{:.2f}", v);
  return fmt::format("{:.3f}", v);
}

}  // namespace steptrace
