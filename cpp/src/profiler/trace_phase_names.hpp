// Internal (not public API): the phases a trace's ranges name (profiler/trace_rules.cpp): a
// record_function range is a custom phase, at most 64 names a trace (past that, or with the
// registry full, its time stays in its parent and is counted as folded); steptrace's own
// `steptrace:<phase>` ranges are the phases steptrace recorded.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

namespace steptrace::detail {

class trace_phase_names {
 public:
  static constexpr std::uint32_t none = 0xffffffffu;
  static constexpr std::size_t max_custom = 64;

  // A record_function range's phase, or none (folded into its parent).
  std::uint32_t custom(std::string_view name);
  // `steptrace:<phase>`: the phase steptrace recorded (none for `steptrace:step`).
  std::uint32_t annotated(std::string_view name);
  // Ranges whose names came past the cap or the registry's room: folded into their parents.
  std::uint64_t folded() const noexcept { return folded_; }

 private:
  std::unordered_map<std::string, std::uint32_t> ids_;
  std::uint64_t folded_ = 0;
};

}  // namespace steptrace::detail
