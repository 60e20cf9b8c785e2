// Internal (not public API): what the phase-name registry tells the reports.
#pragma once

#include <cstdint>

namespace steptrace::detail {

// Distinct names registered past the registry's bound: they share the overflow phase's row
// (its label says so). A lower bound once very many have been folded.
std::uint64_t folded_phase_names() noexcept;

}  // namespace steptrace::detail
