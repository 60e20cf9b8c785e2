// Internal (not public API): one rank's steps as Chrome trace events (trace.cpp), shared by
// summary::trace() and the job's timeline of slow steps (job_timeline.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "report/json/json_fields.hpp"
#include "steptrace/timeline.hpp"

namespace steptrace::detail {

// Where a rank's events go: processes 1 + 2 * rank (host) and 2 + 2 * rank (device), named
// "steptrace <who>host" and "steptrace <who>GPU"; every time moved by shift_ms.
struct rank_tracks {
  std::uint32_t rank = 0;
  std::string who;  // "rank 3 ", or "" for a run without ranks
  double shift_ms = 0;
};

// The steps (any of a timeline's, by thread then start) with their phases, set-aside spans,
// device records and the device's idle gaps cut along host phases, then `set_aside` spans that
// lie outside every step given, and the tracks' names.
void add_trace_events(const rank_tracks& tracks, const std::vector<const timeline_step*>& steps,
                      const std::vector<timeline_set_aside>& set_aside, json_doc& events);

}  // namespace steptrace::detail
