// Internal (not public API): what the phase-name registry tells the reports.
#pragma once

#include <cstdint>

namespace steptrace::detail {

// Distinct names registered past the registry's bound: they share the overflow phase's row
// (its label says so). The first 65,536 folded names are remembered, each counted once; past
// those, a registration of a name not remembered counts again.
std::uint64_t folded_phase_names() noexcept;

}  // namespace steptrace::detail
