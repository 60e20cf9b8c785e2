// The job's view of a hang (steptrace/hang.hpp's window_hang): from each rank's row, where the
// wavefront of collectives stopped: the ranks inside collective k, those that never entered it
// and the phase each is in, those at k in another kind of collective, and those gone. The
// culprits (never entered, mismatched, gone) come first. See cpp/src/report/README.md, "Hangs".
#include "report/diagnosis/hang_wavefront.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>

#include "report/report.hpp"
#include "steptrace/summary.hpp"

namespace steptrace::detail {
namespace {

std::string rank_list(const std::vector<hang_rank>& ranks, std::size_t listed = 16) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size() && i < listed; ++i) out += (i ? ", " : "") + std::to_string(ranks[i].rank);
  if (ranks.size() > listed) out += fmt::format(" ... ({} in all)", ranks.size());
  return out;
}

std::string ranks_word(const std::vector<hang_rank>& ranks) { return ranks.size() == 1 ? "rank" : "ranks"; }

const collective_mark* mark_of(const row_hang& r, const std::string& group) {
  for (const collective_mark& m : r.marks) {
    if (m.group == group) return &m;
  }
  return nullptr;
}

hang_rank rank_of(const row_hang& r, const collective_mark* m) {
  hang_rank h;
  h.rank = r.rank;
  h.step = r.step;
  h.phase = r.phase;
  h.open_s = r.open_s;
  if (m != nullptr) {
    h.group = m->group;
    h.kind = m->kind;
    h.seq = m->seq;
    h.has_collective = true;
    h.in_collective = m->left_s < 0;
  }
  return h;
}

std::string phase_words(const hang_rank& r) {
  return r.phase.empty() ? std::string("in no phase") : fmt::format("in `{}`", r.phase);
}

}  // namespace

job_hang wavefront(const std::vector<row_hang>& live, const std::vector<std::pair<row_hang, bool>>& gone) {
  job_hang out;
  const bool suspected = std::any_of(live.begin(), live.end(), [](const row_hang& r) { return r.suspected; });
  const bool moved = std::any_of(live.begin(), live.end(), [](const row_hang& r) { return r.steps > 0; });
  if (!suspected || moved) return out;  // a job that still moves is never hung
  out.hang = true;
  for (const auto& [row, exited] : gone) {
    hang_rank g = rank_of(row, row.marks.empty() ? nullptr : &row.marks.front());
    g.exited = exited;
    out.gone.push_back(g);
  }
  // The group whose call was entered last by any rank: where the wavefront is.
  const collective_mark* latest = nullptr;
  for (const row_hang& r : live) {
    for (const collective_mark& m : r.marks) {
      if (latest == nullptr || m.entered_s < latest->entered_s) latest = &m;
    }
  }
  std::string words;
  if (latest != nullptr) {
    out.group = latest->group;
    std::uint64_t k = 0;
    for (const row_hang& r : live) {
      if (const collective_mark* m = mark_of(r, out.group)) k = std::max(k, m->seq);
    }
    out.seq = k;
    std::map<std::string, std::size_t> kinds;  // at k: how many ranks called each kind
    for (const row_hang& r : live) {
      if (const collective_mark* m = mark_of(r, out.group); m && m->seq == k) ++kinds[m->kind];
    }
    // the kind most ranks called at k (ties: the first in name order)
    out.kind = std::max_element(kinds.begin(), kinds.end(), [](const auto& a, const auto& b) {
                 return a.second < b.second;
               })->first;
    for (const row_hang& r : live) {
      const collective_mark* m = mark_of(r, out.group);
      if (m == nullptr || m->seq < k) {
        out.culprits.push_back(rank_of(r, m));
      } else if (m->kind != out.kind) {
        out.mismatched.push_back(rank_of(r, m));
      } else {
        out.waiting.push_back(rank_of(r, m));
      }
    }
  } else {  // no collective marked: the ranks in another phase than most are the odd ones
    std::map<std::string, std::size_t> phases;
    for (const row_hang& r : live) ++phases[r.phase];
    const std::string usual = phases.empty()
                                  ? std::string()
                                  : std::max_element(phases.begin(), phases.end(), [](const auto& a, const auto& b) {
                                      return a.second < b.second;
                                    })->first;
    for (const row_hang& r : live) (r.phase == usual ? out.waiting : out.culprits).push_back(rank_of(r, nullptr));
  }
  // The words: the culprits first, each with where it is; then who waits where.
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < out.gone.size(); ++i) {
    const hang_rank& g = out.gone[i];
    const bool seen = gone[i].first.open;
    parts.push_back(
        fmt::format("rank {} is gone ({}); {}", g.rank,
                    g.exited ? "its process exited" : "no row since: exited, or stuck holding the interpreter",
                    seen ? fmt::format("its last row: step {}, {}", g.step, phase_words(g))
                         : std::string("its last row had no step open")));
  }
  const std::string call =
      out.kind.empty() ? std::string() : fmt::format("{} #{} of group {}", out.kind, out.seq, out.group);
  for (const hang_rank& c : out.culprits) {
    parts.push_back(call.empty()
                        ? fmt::format("rank {} is stuck {} for {}", c.rank, phase_words(c), seconds_text(c.open_s))
                        : fmt::format("rank {} never entered {}: stuck {} for {}", c.rank, call, phase_words(c),
                                      seconds_text(c.open_s)));
  }
  for (const hang_rank& m : out.mismatched) {
    parts.push_back(
        fmt::format("rank {} called {} #{} where {} {} called {} #{} (a mismatched collective: a rank that "
                    "took another branch)",
                    m.rank, m.kind, m.seq, ranks_word(out.waiting), rank_list(out.waiting), out.kind, out.seq));
  }
  if (!out.waiting.empty()) {
    const bool inside =
        std::all_of(out.waiting.begin(), out.waiting.end(), [](const hang_rank& w) { return w.in_collective; });
    if (!call.empty() && inside) {
      parts.push_back(fmt::format("{} {} wait inside {}", ranks_word(out.waiting), rank_list(out.waiting), call));
    } else if (!call.empty()) {  // its call returned: a launch (NCCL, async_op), or they are stuck after it
      parts.push_back(fmt::format("{} {} entered {} (its call returned: with NCCL, a launch) and are {}",
                                  ranks_word(out.waiting), rank_list(out.waiting), call,
                                  phase_words(out.waiting.front())));
    } else {
      parts.push_back(
          fmt::format("{} {} {}", ranks_word(out.waiting), rank_list(out.waiting), phase_words(out.waiting.front())));
    }
  }
  std::vector<hang_rank> first;  // whose stack to read first
  for (const auto* list : {&out.gone, &out.culprits, &out.mismatched})
    first.insert(first.end(), list->begin(), list->end());
  out.words = "HANG: " + fmt::format("{}", fmt::join(parts, "; "));
  if (first.empty() && !call.empty()) {
    out.words += fmt::format(
        ". Every rank reached {}: the collective itself does not complete (the network, NCCL): "
        "read NCCL's log and its Flight Recorder",
        call);
  } else if (!first.empty()) {
    const hang_rank& f = first.front();
    std::string causes;
    if (!out.gone.empty()) {
      causes =
          "a process killed (the kernel's out-of-memory killer: dmesg; the scheduler) or crashed: read its log and "
          "exit code";
    } else if (out.culprits.empty()) {
      causes = "a rank that took another branch and calls a different collective: read its stack";
    } else {
      std::vector<open_phase_now> where;
      if (!f.phase.empty()) where.push_back({f.phase, f.open_s});
      causes = stuck_phase_causes(where);
    }
    out.words += fmt::format(". Read rank {}'s {} first; the usual causes: {}", f.rank,
                             out.gone.empty() ? "stack (its hang report)" : "log", causes);
  }
  return out;
}

}  // namespace steptrace::detail
