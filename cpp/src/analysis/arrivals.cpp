// The ranks' arrival at the collectives they share (analysis/arrivals.hpp).
#include "analysis/arrivals.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>

#include "base/median.hpp"

namespace steptrace::detail {
namespace {

// Ends this close (us) are one collective's whatever else: its ranks leave it within microseconds
// of each other (a CPU backend's hosts wake up a little apart: within half the way to the next).
constexpr double ends_agree_us = 50;
constexpr double max_call_us = 1e12;  // 11.6 days: longer than any run
// Of each rank's calls of a group, the most read to find its clock's offset (their pairs sorted once).
constexpr std::size_t max_offset_calls = 512;

// One matched collective: each rank's call, by position in `ranks`.
using match = std::vector<const collective_call*>;

std::map<std::string, std::vector<const collective_call*>> by_group(const rank_calls& r) {
  std::map<std::string, std::vector<const collective_call*>> out;
  for (const collective_call& c : r.calls) out[c.group].push_back(&c);
  for (auto& [group, calls] : out) {
    std::stable_sort(calls.begin(), calls.end(), [](const collective_call* a, const collective_call* b) {
      return a->seq != b->seq ? a->seq < b->seq : a->start_us < b->start_us;
    });
  }
  return out;
}

// How far apart one collective's ends may lie on a busy host: a quarter of the median gap between
// the first rank's consecutive calls (`ref_ends`, sorted by end). Such a host wakes a CPU
// backend's thread milliseconds after the call ended; a quarter of the gap still keeps the pairs
// one call apart out of the window.
double busy_window(const std::vector<const collective_call*>& ref_ends) {
  std::vector<double> gaps;
  for (std::size_t i = 1; i < ref_ends.size(); ++i) gaps.push_back(ref_ends[i]->end_us - ref_ends[i - 1]->end_us);
  return gaps.empty() ? 0.0 : median(gaps) / 4;
}

struct offset_found {
  double offset_us = 0;
  std::size_t agree = 0;  // the pairs within the window of it
};

// The offset of `mine`'s clock to `ref`'s: of every pair's end difference, the value with the most
// others within `window` of it (the pairs that are one collective agree; a steady period makes
// the neighbouring periods nearly as many: the one nearest 0, where clocks agree, wins a tie);
// then the median of those.
offset_found clock_offset(const std::vector<const collective_call*>& ref,
                          const std::vector<const collective_call*>& mine, double window) {
  std::vector<double> diffs;
  const std::size_t n = std::min(ref.size(), max_offset_calls), m = std::min(mine.size(), max_offset_calls);
  diffs.reserve(n * m);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < m; ++j) diffs.push_back(mine[j]->end_us - ref[i]->end_us);
  }
  std::sort(diffs.begin(), diffs.end());
  std::size_t best_from = 0, best_to = 0;
  for (std::size_t from = 0, to = 0; from < diffs.size(); ++from) {
    to = std::max(to, from);
    while (to < diffs.size() && diffs[to] - diffs[from] <= window) ++to;
    const std::size_t count = to - from, best = best_to - best_from;
    const double centre = (diffs[from] + diffs[to - 1]) / 2;
    if (count > best || (count == best && std::fabs(centre) < std::fabs((diffs[best_from] + diffs[best_to - 1]) / 2))) {
      best_from = from, best_to = to;
    }
  }
  return {median(std::vector<double>(diffs.begin() + static_cast<std::ptrdiff_t>(best_from),
                                     diffs.begin() + static_cast<std::ptrdiff_t>(best_to))),
          best_to - best_from};
}

// The offset read at the narrowest window where most calls agree: ends within microseconds (a
// quiet host), else within busy_window (the ranks left each call milliseconds apart). The narrow
// window first, since at the wide one a trace that began or ended some calls apart can make a
// shift by those calls agree as often as the true offset.
double clock_offset(const std::vector<const collective_call*>& ref, const std::vector<const collective_call*>& ref_ends,
                    const std::vector<const collective_call*>& mine) {
  const offset_found quiet = clock_offset(ref, mine, 2 * ends_agree_us);
  const std::size_t most = std::min({ref.size(), mine.size(), max_offset_calls});
  const double busy = busy_window(ref_ends);
  if (2 * quiet.agree > most || busy <= 2 * ends_agree_us) return quiet.offset_us;
  return clock_offset(ref, mine, busy).offset_us;
}

// The call of `calls` (sorted by end) whose end is nearest `t`; nullptr for none.
const collective_call* nearest_end(const std::vector<const collective_call*>& calls, double t) {
  const auto at =
      std::lower_bound(calls.begin(), calls.end(), t, [](const collective_call* c, double x) { return c->end_us < x; });
  const collective_call* best = at != calls.end() ? *at : nullptr;
  if (at != calls.begin() && (best == nullptr || t - (*(at - 1))->end_us < best->end_us - t)) best = *(at - 1);
  return best;
}

// Each group's calls matched by their ends: every rank's clock put on the first's, a call of the
// first rank and a call of another are one collective when each is the other's nearest by end,
// and their ends are closer than half the way to the first rank's neighbouring calls (or within
// ends_agree_us), and their kinds agree where both are told. A call some rank's trace lacks is
// matched on none.
std::vector<match> match_by_end(const std::vector<const rank_calls*>& ranks) {
  auto by_end = [](const collective_call* a, const collective_call* b) { return a->end_us < b->end_us; };
  std::vector<std::map<std::string, std::vector<const collective_call*>>> groups;
  for (const rank_calls* r : ranks) groups.push_back(by_group(*r));
  std::vector<match> out;
  for (const auto& [group, ref] : groups.front()) {
    std::vector<const collective_call*> ref_ends = ref;
    std::sort(ref_ends.begin(), ref_ends.end(), by_end);
    std::vector<std::vector<const collective_call*>> partner(ref.size());
    for (std::size_t i = 0; i < ref.size(); ++i) partner[i].push_back(ref[i]);
    for (std::size_t k = 1; k < ranks.size(); ++k) {
      const auto it = groups[k].find(group);
      if (it == groups[k].end()) return {};
      std::vector<const collective_call*> mine = it->second;
      std::sort(mine.begin(), mine.end(), by_end);
      const double offset = clock_offset(ref, ref_ends, mine);
      for (std::size_t i = 0; i < ref.size(); ++i) {
        if (partner[i].size() != k) continue;  // unmatched on a rank before
        const collective_call* other = nearest_end(mine, ref[i]->end_us + offset);
        if (other == nullptr || nearest_end(ref_ends, other->end_us - offset) != ref[i]) continue;
        if (!ref[i]->kind.empty() && !other->kind.empty() && ref[i]->kind != other->kind) continue;
        const auto at = std::lower_bound(ref_ends.begin(), ref_ends.end(), ref[i], by_end);
        double room = INFINITY;  // half the way to the first rank's neighbouring ends
        if (at != ref_ends.begin()) room = std::min(room, (ref[i]->end_us - (*(at - 1))->end_us) / 2);
        if (at + 1 != ref_ends.end()) room = std::min(room, ((*(at + 1))->end_us - ref[i]->end_us) / 2);
        if (std::fabs(other->end_us - offset - ref[i]->end_us) > std::max(ends_agree_us, room)) continue;
        partner[i].push_back(other);
      }
    }
    for (std::vector<const collective_call*>& m : partner) {
      if (m.size() == ranks.size()) out.push_back(std::move(m));
    }
  }
  return out;
}

// Calls matched by (group, sequence number) present on every rank: each rank's calls sorted by
// that key once and looked up by binary search (no key is built: rank 0 does this for 1,024 rows
// a window).
std::vector<match> match_by_number(const std::vector<const rank_calls*>& ranks) {
  auto before = [](const collective_call* a, const collective_call* b) {
    return a->seq != b->seq ? a->seq < b->seq : a->group < b->group;
  };
  std::vector<std::vector<const collective_call*>> sorted(ranks.size());
  for (std::size_t k = 1; k < ranks.size(); ++k) {
    for (const collective_call& c : ranks[k]->calls) sorted[k].push_back(&c);
    std::sort(sorted[k].begin(), sorted[k].end(), before);
  }
  std::vector<match> out;
  for (const collective_call& c : ranks.front()->calls) {
    match m{&c};
    for (std::size_t k = 1; k < ranks.size(); ++k) {
      const auto it = std::lower_bound(sorted[k].begin(), sorted[k].end(), &c, before);
      if (it == sorted[k].end() || (*it)->seq != c.seq || (*it)->group != c.group) break;
      m.push_back(*it);
    }
    if (m.size() == ranks.size()) out.push_back(std::move(m));
  }
  return out;
}

}  // namespace

std::optional<arrival_view> read_arrivals(const std::vector<rank_calls>& all,
                                          std::map<std::uint32_t, double>* net_late_ms) {
  std::vector<const rank_calls*> ranks;
  for (const rank_calls& r : all) {
    if (!r.calls.empty()) ranks.push_back(&r);
  }
  if (ranks.size() < 2) return std::nullopt;
  std::sort(ranks.begin(), ranks.end(), [](const rank_calls* a, const rank_calls* b) { return a->rank < b->rank; });
  const bool numbered = std::all_of(ranks.begin(), ranks.end(), [](const rank_calls* r) { return r->numbered; });
  std::vector<match> matched = numbered ? match_by_number(ranks) : match_by_end(ranks);
  if (matched.empty()) return std::nullopt;
  std::stable_sort(matched.begin(), matched.end(),
                   [](const match& a, const match& b) { return a[0]->start_us < b[0]->start_us; });

  // A call no clock can give (not finite, or lasting longer than any run: a crafted or broken
  // record) is left out with its match, never read as a rank's lateness.
  const auto impossible = [](const match& m) {
    return std::any_of(m.begin(), m.end(), [](const collective_call* c) {
      return !std::isfinite(c->start_us) || !std::isfinite(c->end_us) ||
             std::fabs(c->end_us - c->start_us) > max_call_us;
    });
  };
  matched.erase(std::remove_if(matched.begin(), matched.end(), impossible), matched.end());
  if (matched.empty()) return std::nullopt;

  arrival_view v;
  v.matched_by = numbered ? "sequence" : "end";
  v.compared = matched.size();
  std::map<std::uint32_t, std::vector<double>> lateness;
  std::map<std::uint32_t, std::map<std::string, std::uint64_t>> befores;
  std::map<std::uint32_t, arrival_rank> worst;    // each last rank's summed and largest lateness
  std::vector<double> waited(ranks.size(), 0.0);  // each rank's wait for the last, summed (ms)
  double transfer = 0;                            // summed (ms)
  std::vector<double> others;
  for (const match& m : matched) {
    std::size_t last = 0;
    for (std::size_t k = 1; k < m.size(); ++k) {
      if (m[k]->start_us - m[k]->end_us > m[last]->start_us - m[last]->end_us) last = k;
    }
    // Aligned on its end, the last rank arrived `arrived` before it: what is left is the transfer.
    const double arrived = m[last]->end_us - m[last]->start_us;
    const double transfer_ms = std::max(0.0, arrived) / 1e3;
    transfer += transfer_ms;
    for (std::size_t k = 0; k < m.size(); ++k) waited[k] += ((m[k]->end_us - m[k]->start_us) - arrived) / 1e3;
    others.clear();
    for (std::size_t k = 0; k < m.size(); ++k) {
      if (k != last) others.push_back(m[k]->start_us - m[k]->end_us);
    }
    const double late_ms = std::max(0.0, (m[last]->start_us - m[last]->end_us) - median(others)) / 1e3;
    if (net_late_ms != nullptr) {  // every rank's arrival against the median of the others'
      std::vector<double> rest;
      for (std::size_t k = 0; k < m.size(); ++k) {
        rest.clear();
        for (std::size_t j = 0; j < m.size(); ++j) {
          if (j != k) rest.push_back(m[j]->start_us - m[j]->end_us);
        }
        (*net_late_ms)[ranks[k]->rank] += ((m[k]->start_us - m[k]->end_us) - median(rest)) / 1e3;
      }
    }
    const std::uint32_t rank = ranks[last]->rank;
    lateness[rank].push_back(late_ms);
    arrival_rank& w = worst[rank];
    w.total_late_ms += late_ms;
    if (late_ms > w.worst_late_ms) w.worst_late_ms = late_ms, w.worst_seq = m[last]->seq;
    if (!m[last]->before.empty()) ++befores[rank][m[last]->before];
    if (v.collectives.size() < max_arrival_rows) {
      v.collectives.push_back({m[0]->group, m[0]->kind, m[0]->seq, rank, late_ms, m[last]->before, transfer_ms});
    }
  }
  const double calls = static_cast<double>(matched.size());
  v.transfer_ms = transfer / calls;
  for (std::size_t k = 0; k < ranks.size(); ++k) v.split.push_back({ranks[k]->rank, std::max(0.0, waited[k] / calls)});
  if (net_late_ms != nullptr) {
    for (auto& [rank, sum] : *net_late_ms) sum /= static_cast<double>(matched.size());
  }
  for (auto& [rank, late] : lateness) {
    arrival_rank r;
    r.rank = rank;
    r.last = late.size();
    r.late_ms = median(late);
    r.total_late_ms = worst[rank].total_late_ms;
    r.worst_late_ms = worst[rank].worst_late_ms;
    r.worst_seq = worst[rank].worst_seq;
    std::uint64_t most = 0;
    for (const auto& [phase, n] : befores[rank]) {
      if (n > most) most = n, r.before = phase;
    }
    v.ranks.push_back(std::move(r));
  }
  return v;
}

const arrival_rank* most_often_last(const arrival_view& v, std::uint64_t min_last) {
  const arrival_rank* best = nullptr;
  for (const arrival_rank& r : v.ranks) {
    if (best == nullptr || r.last > best->last) best = &r;
  }
  if (best == nullptr || 2 * best->last <= v.compared || best->last < min_last) return nullptr;
  return best;
}

}  // namespace steptrace::detail
