// Internal: a tracer's watch over its own open steps (tracer_impl::hang; core/hang_watch.cpp),
// under the tracer lock. See cpp/src/report/README.md, "Hangs".
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace steptrace::detail {

struct hang_state {
  std::chrono::steady_clock::time_point last_check{};  // looked once a second
  // The hang reported: the thread and step that were stuck. Another report only once that step
  // is no longer the one open on that thread (the job moved).
  bool reported = false;
  std::uint32_t thread = 0;
  std::uint64_t step = 0;
  std::string report;         // its file ("" while being written, or when it could not be)
  std::uint64_t reports = 0;  // hangs reported in this run

  // tracer::reset: the watch goes on (a hang outlives a reset), so nothing is cleared.
  void restart() {}
};

}  // namespace steptrace::detail
