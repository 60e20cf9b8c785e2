// Ground truth for timing tests: busy-waits measured by std::chrono::steady_clock, a clock
// independent of steptrace's TSC-based one.
#pragma once

#include <chrono>

namespace steptrace::testing {

inline void spin_for(std::chrono::microseconds d) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) {
  }
}

}  // namespace steptrace::testing
