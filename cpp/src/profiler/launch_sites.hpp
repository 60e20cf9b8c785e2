// Internal (not public API): where a trace's kernels were launched: each launch call by its
// correlation, and the ops open around it on the launching thread (cpp/src/analysis/README.md,
// "Kernels and ops").
#pragma once

#include <cstdint>
#include <map>
#include <string_view>
#include <vector>

#include "profiler/host_forest.hpp"
#include "profiler/trace_events.hpp"

namespace steptrace::detail {

// The ops of one process on every thread, as forests over event indices, and its launches by
// correlation: 4 bytes a launch and 32 an op, never a map node per event.
class launch_sites {
 public:
  launch_sites(const trace_events& t, std::uint32_t pid);
  // The launch call of the kernel with this correlation (the first in file order), or nullptr.
  const trace_event* launch_of(std::uint64_t correlation) const;
  // The name of the innermost op open where the kernel with this correlation was launched, or "".
  std::string_view op_of(std::uint64_t correlation) const;

 private:
  const trace_events& t_;
  std::vector<std::uint32_t> launches_;  // runtime calls with a correlation, by correlation
  std::map<std::uint32_t, forest> threads_;
};

// The innermost node of `f` open at `ts`, or forest::npos.
std::uint32_t innermost_at(const forest& f, std::uint64_t ts);

}  // namespace steptrace::detail
