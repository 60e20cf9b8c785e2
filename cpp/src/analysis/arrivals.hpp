// Internal (not public API): the ranks' arrival at the collectives they share
// (cpp/src/report/README.md, "Arrival at the collectives").
//
// Usage:
//   std::vector<rank_calls> ranks = ...;       // each rank's collective calls, any order
//   std::optional<arrival_view> v = read_arrivals(ranks);   // none: fewer than two ranks matched
//
// A collective's k-th call on one rank is its k-th on every rank. The calls are matched by
// (group, sequence) when every rank's calls carry the trace's sequence numbers, else by their
// ends: the ranks leave a collective together, so once each rank's clock is put on the lowest
// rank's (the offset most calls' ends agree on), a call is matched to the call of each other rank
// that ends with it. Traces that began or ended at different calls, or that hold calls of their
// own (an all-to-all's exchanges), match on the calls they share.
// Each matched call is aligned on its own end, so a rank arrived `end - start` before it; the one
// that arrived last is what the others waited for, by its arrival less the median of theirs.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "steptrace/summary.hpp"

namespace steptrace::detail {

struct rank_calls {
  std::uint32_t rank = 0;
  std::vector<collective_call> calls;
  bool numbered = false;  // the calls' seq are the trace's own numbers, not their order
};

// `net_late_ms`, when given: each rank's mean over every matched call of its arrival less the
// median of the others' (signed: a rank last by chance as often as it is first nets about 0).
std::optional<arrival_view> read_arrivals(const std::vector<rank_calls>& ranks,
                                          std::map<std::uint32_t, double>* net_late_ms = nullptr);

// The rank that arrived last most often, when it was last at more than half of the compared
// collectives and at least `min_last` of them; none otherwise.
const arrival_rank* most_often_last(const arrival_view& v, std::uint64_t min_last = 3);

}  // namespace steptrace::detail
