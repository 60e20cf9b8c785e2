// summary::phase() and summary::fact(): a phase's figures and a fact's value, by name.
#include <string>
#include <string_view>

#include "steptrace/summary.hpp"

namespace steptrace {

const phase_stats* summary::phase(std::string_view name) const noexcept {
  for (const phase_stats& p : phases) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

const std::string* summary::fact(std::string_view key) const noexcept {
  for (const auto& [k, v] : facts) {
    if (k == key) return &v;
  }
  return nullptr;
}

}  // namespace steptrace
