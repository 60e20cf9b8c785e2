// Live rank windows on rank 0 (steptrace/ranks.hpp): the count of each window's straggler, which
// the Python package judges from the rows the ranks send through the job's store.
// See cpp/src/report/README.md, "Many ranks".
#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "core/live/live_view.hpp"

namespace steptrace::detail {

rank_window_count live_view::note_rank_window(const std::optional<straggler_info>& straggler,
                                              std::vector<std::uint32_t> late, std::vector<std::uint32_t> missing) {
  rank_window_count named;
  live_ranks_view& v = live_ranks_ ? *live_ranks_ : live_ranks_.emplace();
  const std::uint64_t window = v.windows++;
  v.straggler.reset();
  v.late = std::move(late);
  v.missing = std::move(missing);
  if (!straggler) return named;
  v.straggler = straggler->rank;
  auto at = std::lower_bound(v.counts.begin(), v.counts.end(), straggler->rank,
                             [](const rank_window_count& c, std::uint32_t r) { return c.rank < r; });
  if (at == v.counts.end() || at->rank != straggler->rank) {
    at = v.counts.insert(at, rank_window_count{straggler->rank, 0, window, window, {}, {}});
  }
  at->windows += 1;
  at->last_window = window;
  if (!straggler->node.empty()) at->node = straggler->node;  // its node's latest departures
  // The phase it was named by most often (the first named, on a tie).
  auto& phases = live_rank_phases_[straggler->rank];
  const std::uint64_t n = ++phases[straggler->phase];
  if (at->phase.empty() || (at->phase != straggler->phase && n > phases[at->phase])) at->phase = straggler->phase;
  return *at;
}

}  // namespace steptrace::detail
