// job_timeline: one Chrome trace of a job's slow steps across its ranks (cpp/src/report/README.md,
// "Many ranks"). What is kept of a rank is a few of its steps; the events are trace.cpp's.
#include "steptrace/job_timeline.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>

#include "base/median.hpp"
#include "report/trace_events.hpp"

namespace steptrace {
namespace {

using detail::json_doc;
using detail::median;

// The thread with the most steps in the timeline (the lowest among equals): the loop's.
std::uint32_t main_thread(const timeline_view& t) {
  std::map<std::uint32_t, std::size_t> count;
  for (const timeline_step& s : t.steps) ++count[s.thread];
  std::uint32_t best = 0;
  std::size_t most = 0;
  for (const auto& [thread, n] : count) {
    if (n > most) best = thread, most = n;
  }
  return best;
}

// What a step's anchor is: the instant every rank shares, the best the step has.
enum class anchor_kind { collective_kernel = 0, host_collective = 1, step_end = 2 };
const char* anchor_words(anchor_kind k) {
  return k == anchor_kind::collective_kernel ? "collective kernels"
         : k == anchor_kind::host_collective ? "host collectives"
                                             : "step ends";
}

// The step's last end of the given kind, if it has one.
std::optional<double> anchor(const timeline_step& s, anchor_kind k) {
  double last = -std::numeric_limits<double>::infinity();
  if (k == anchor_kind::collective_kernel) {
    for (const timeline_device& d : s.device) {
      if (d.collective) last = std::max(last, d.end_ms);
    }
  } else if (k == anchor_kind::host_collective) {
    for (const timeline_span& p : s.phases) {
      if (p.name == "collective") last = std::max(last, p.end_ms);
    }
  } else {
    last = s.end_ms;
  }
  if (!std::isfinite(last)) return std::nullopt;
  return last;
}

struct alignment {
  double shift_ms = 0;
  std::optional<anchor_kind> on;  // none: no step in common with the median rank
};

// The move that puts a rank's anchors on the median rank's: the best kind every common step
// has on both sides, the median of the differences.
alignment align(const std::vector<const timeline_step*>& mine, const std::vector<const timeline_step*>& ref) {
  std::vector<std::pair<const timeline_step*, const timeline_step*>> pairs;
  for (const timeline_step* a : mine) {
    for (const timeline_step* b : ref) {
      if (a->index == b->index) pairs.emplace_back(a, b);
    }
  }
  alignment out;
  if (pairs.empty()) return out;
  for (anchor_kind k : {anchor_kind::collective_kernel, anchor_kind::host_collective, anchor_kind::step_end}) {
    std::vector<double> moves;
    for (const auto& [a, b] : pairs) {
      const auto x = anchor(*a, k), y = anchor(*b, k);
      if (!x || !y) break;
      moves.push_back(*y - *x);
    }
    if (moves.size() == pairs.size()) {
      out.shift_ms = median(std::move(moves));
      out.on = k;
      return out;
    }
  }
  return out;  // unreachable: every step has an end
}

}  // namespace

job_timeline::job_timeline(std::uint32_t slowest_per_rank) : slowest_per_rank_(slowest_per_rank) {
  if (slowest_per_rank == 0 || slowest_per_rank > 16) {
    throw std::invalid_argument("job_timeline: slowest steps a rank must be 1 to 16, not " +
                                std::to_string(slowest_per_rank));
  }
}

void job_timeline::add(const summary& s) {
  rank_steps r;
  r.rank = s.rank ? s.rank->rank : ranks_added();
  for (const rank_steps& other : ranks_) {
    if (other.rank == r.rank)
      throw std::invalid_argument("job_timeline: rank " + std::to_string(r.rank) + " added twice");
  }
  r.p50_ms = s.step_ms.p50;
  const std::uint32_t thread = main_thread(s.timeline);
  for (const timeline_step& st : s.timeline.steps) {
    if (st.thread == thread && !st.warmup && !st.failed) r.slowest.push_back(st);
  }
  std::stable_sort(r.slowest.begin(), r.slowest.end(),
                   [](const timeline_step& a, const timeline_step& b) { return a.step_ms > b.step_ms; });
  if (r.slowest.size() > slowest_per_rank_) r.slowest.resize(slowest_per_rank_);
  r.slowest.shrink_to_fit();
  ranks_.push_back(std::move(r));
}

std::optional<std::uint32_t> job_timeline::reference_rank() const {
  std::vector<const rank_steps*> with_steps;
  for (const rank_steps& r : ranks_) {
    if (!r.slowest.empty()) with_steps.push_back(&r);
  }
  if (with_steps.empty()) return std::nullopt;
  std::sort(with_steps.begin(), with_steps.end(), [](const rank_steps* a, const rank_steps* b) {
    return a->p50_ms != b->p50_ms ? a->p50_ms < b->p50_ms : a->rank < b->rank;
  });
  return with_steps[(with_steps.size() - 1) / 2]->rank;
}

std::vector<const job_timeline::rank_steps*> job_timeline::shown() const {
  std::vector<const rank_steps*> order;
  for (const rank_steps& r : ranks_) {
    if (!r.slowest.empty()) order.push_back(&r);
  }
  std::sort(order.begin(), order.end(), [](const rank_steps* a, const rank_steps* b) {
    const double x = a->slowest.front().step_ms, y = b->slowest.front().step_ms;
    return x != y ? x > y : a->rank < b->rank;
  });
  if (order.size() > max_ranks) order.resize(max_ranks);
  const auto ref = reference_rank();
  if (ref && std::none_of(order.begin(), order.end(), [&](const rank_steps* r) { return r->rank == *ref; })) {
    for (const rank_steps& r : ranks_) {
      if (r.rank == *ref) order.push_back(&r);
    }
  }
  std::sort(order.begin(), order.end(), [](const rank_steps* a, const rank_steps* b) { return a->rank < b->rank; });
  return order;
}

std::vector<std::uint64_t> job_timeline::wanted() const {
  std::map<std::uint64_t, double> longest;  // step index: its longest among the shown ranks
  for (const rank_steps* r : shown()) {
    for (const timeline_step& s : r->slowest) longest[s.index] = std::max(longest[s.index], s.step_ms);
  }
  std::vector<std::pair<double, std::uint64_t>> order;
  for (const auto& [index, ms] : longest) order.emplace_back(-ms, index);
  std::sort(order.begin(), order.end());
  std::vector<std::uint64_t> out;
  for (const auto& [ms, index] : order) {
    if (out.size() == max_steps) break;
    out.push_back(index);
  }
  return out;
}

void job_timeline::set_reference(const summary& s) {
  const auto ref = reference_rank();
  const std::uint32_t who = s.rank ? s.rank->rank : UINT32_MAX;
  if (!ref || who != *ref) {
    throw std::invalid_argument("job_timeline: set_reference wants rank " +
                                (ref ? std::to_string(*ref) : std::string("(none)")) + "'s summary, not " +
                                (s.rank ? "rank " + std::to_string(who) : std::string("one without a rank")));
  }
  const std::vector<std::uint64_t> want = wanted();
  const std::set<std::uint64_t> wanted_set(want.begin(), want.end());
  const std::uint32_t thread = main_thread(s.timeline);
  for (rank_steps& r : ranks_) {
    if (r.rank != who) continue;
    r.reference.clear();
    for (const timeline_step& st : s.timeline.steps) {
      if (st.thread == thread && wanted_set.count(st.index)) r.reference.push_back(st);
    }
  }
  reference_set_ = true;
}

std::string job_timeline::trace() const {
  const auto ref_rank = reference_rank();
  const std::vector<const rank_steps*> ranks = shown();
  const std::vector<std::uint64_t> want = wanted();
  // The median rank's steps: its own slowest and those kept as the reference, once each.
  std::vector<const timeline_step*> ref_steps;
  for (const rank_steps* r : ranks) {
    if (!ref_rank || r->rank != *ref_rank) continue;
    std::set<std::uint64_t> seen;
    for (const auto* list : {&r->reference, &r->slowest}) {
      for (const timeline_step& s : *list) {
        if (seen.insert(s.index).second) ref_steps.push_back(&s);
      }
    }
  }
  json_doc events = json_doc::array(), rows = json_doc::array();
  for (const rank_steps* r : ranks) {
    const bool is_ref = ref_rank && r->rank == *ref_rank;
    std::vector<const timeline_step*> steps;
    if (is_ref) {
      steps = ref_steps;
    } else {
      for (const timeline_step& s : r->slowest) steps.push_back(&s);
    }
    std::sort(steps.begin(), steps.end(),
              [](const timeline_step* a, const timeline_step* b) { return a->begin_ms < b->begin_ms; });
    const alignment a = is_ref ? alignment{0, anchor_kind::step_end} : align(steps, ref_steps);
    detail::rank_tracks tracks;
    tracks.rank = r->rank;
    tracks.who = "rank " + std::to_string(r->rank) + (is_ref ? " (median rank) " : " ");
    tracks.shift_ms = a.shift_ms;
    detail::add_trace_events(tracks, steps, {}, events);
    json_doc indices = json_doc::array();
    for (const timeline_step* s : steps) indices.push_back(s->index);
    rows.push_back({{"rank", r->rank},
                    {"step_p50_ms", r->p50_ms},
                    {"steps", indices},
                    {"shift_ms", a.shift_ms},
                    {"aligned_on", is_ref ? json_doc("the median rank")
                                   : a.on ? json_doc(anchor_words(*a.on))
                                          : json_doc(nullptr)}});
  }
  json_doc missing = json_doc::array();
  if (ref_rank) {
    for (std::uint64_t index : want) {
      if (std::none_of(ref_steps.begin(), ref_steps.end(), [&](const timeline_step* s) { return s->index == index; })) {
        missing.push_back(index);
      }
    }
  }
  std::size_t with_steps = 0;
  for (const rank_steps& r : ranks_) with_steps += !r.slowest.empty();
  json_doc doc = {{"traceEvents", events},
                  {"displayTimeUnit", "ms"},
                  {"otherData",
                   {{"producer", "steptrace"},
                    {"what", "each rank's slowest steps and the same steps on the median rank"},
                    {"times", "microseconds from the median rank's first instant; each rank moved by its shift_ms"},
                    {"ranks_read", ranks_.size()},
                    {"ranks_left_out", with_steps - std::min(with_steps, ranks.size())},
                    {"slowest_per_rank", slowest_per_rank_},
                    {"median_rank", ref_rank ? json_doc(*ref_rank) : json_doc(nullptr)},
                    {"steps", want},
                    {"median_rank_lacks", missing},
                    {"ranks", rows}}}};
  return doc.dump(-1, ' ', false, json_doc::error_handler_t::replace);
}

}  // namespace steptrace
