// Internal (not public API): what the report layer adds to measured numbers.
#pragma once

#include "steptrace/summary.hpp"

namespace steptrace::detail {

// Adds the diagnosis to a summary whose numbers are filled in.
void complete(summary& s);

}  // namespace steptrace::detail
