// Internal (not public API): a tracer's captures on trouble (steptrace/capture.hpp). The
// collector arms one when its rule fires on a live window, on SIGUSR2, or when the program asks
// (tracer::capture); the fan-out gives it the steps that begin after that; once it has them, the
// collector writes them as a Chrome trace and says their diagnosis. cpp/src/core/README.md,
// "Capture on trouble".
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/aggregate.hpp"
#include "analysis/back_ring.hpp"
#include "analysis/flight_recorder.hpp"
#include "steptrace/capture.hpp"

namespace steptrace::detail {

// The kept steps a trigger's retroactive capture writes: a window's trigger (slow, stall, label,
// phase), the window's slowest; one from outside the loop's figures (file, signal), the last ones.
kept_steps back_choice(const capture_rule& rule);

struct capture_state {  // under tracer_impl::mutex
  // The triggers, weighed by the collector on each live window: a C++ program's. The Python
  // binding weighs its own (elsewhere), with torch.profiler's captures and the job's store.
  std::optional<capture_rule> rule;  // made at configure
  bool elsewhere = false;

  // The capture armed: the first `steps` steps that begin after `armed_at`.
  bool armed = false, complete = false, device_ready = false;
  std::string reason;
  std::uint32_t steps = 0, seen = 0;
  std::uint64_t armed_at = 0, last_end = 0;  // ticks
  std::uint64_t first_index = 0, last_index = 0;
  std::chrono::steady_clock::time_point complete_at{};
  flight_recorder kept;  // those steps' raw intervals
  aggregate totals;      // and their figures, for the diagnosis of those steps alone

  // The retroactive capture: the ring of kept steps (capture_back), and the steps chosen from it
  // when a trigger fired, waiting for the collector to write them.
  back_ring back;
  struct {
    bool pending = false, writing = false;
    std::string reason;
    std::vector<std::uint64_t> indices;
    std::uint64_t lead = 0;
    std::chrono::steady_clock::time_point armed_at{};
    flight_recorder steps;
  } back_chosen;

  std::vector<capture_record> done;
  bool writing = false;  // a capture's files are being written (the lock let go): it counts toward capture_max
  std::size_t sent = 0;  // done[0, sent) went out in a live window
  bool said_limit = false;
};

}  // namespace steptrace::detail
