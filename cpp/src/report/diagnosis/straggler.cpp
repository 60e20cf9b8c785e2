// The STRAGGLER rule: which rank the others wait for, where its extra time goes, and what to look
// at on it (report/diagnosis/straggler.hpp).
#include "report/diagnosis/straggler.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_map>

#include "report/diagnosis/diagnosis.hpp"
#include "report/diagnosis/summary_facts.hpp"
#include "steptrace/phase.hpp"

namespace steptrace::detail {
namespace {

// The phases a straggler is named by: where its own work is, never the wait for the others.
constexpr const char* own_phases[] = {"input", "h2d", "compute", "other"};

// How late `least` started against the others (ms), when every rank's trace says where its first
// step began and `least` reached its first collective last; 0 otherwise.
double late_start_ms(const std::vector<const rank_row*>& rows, const rank_row* least) {
  if (!least->step_begin_us || !least->first_collective_us) return 0;
  std::vector<double> begins;
  for (const rank_row* r : rows) {
    if (r == least) continue;
    if (!r->step_begin_us || !r->first_collective_us || *r->first_collective_us > *least->first_collective_us) return 0;
    begins.push_back(*r->step_begin_us);
  }
  return std::max(0.0, (*least->step_begin_us - median(begins)) / 1e3);
}

// What to look at on the straggler: by the phase its extra time is in and, when one holds most of
// it, the named phase inside that one. A GPU is named only in a job where a rank had one.
std::string where_to_look(const straggler_info& s, bool gpu) {
  const std::uint32_t rank = s.rank;
  if (!s.within.empty()) {
    return fmt::format(
        "look at what rank {} does in `{}` that the others do not: more or longer work landing on it "
        "(its share of the data, longer samples), a wait only it has (storage, a lock, the network), or a "
        "slower or busier host{}",
        rank, s.within, gpu ? " or GPU" : "");
  }
  if (s.phase == "input")
    return fmt::format("look at rank {}'s data loader, storage and host (CPU load, other jobs)", rank);
  if (s.phase == "h2d")
    return fmt::format("look at rank {}'s copies: pinned memory, and its PCIe/NUMA placement", rank);
  if (s.phase == "compute") {
    return gpu ? fmt::format(
                     "look at rank {}'s device and its share of the work: a slower or throttled GPU, another "
                     "process on it, or longer samples (sequence lengths) landing on it",
                     rank)
               : fmt::format(
                     "look at rank {}'s host and its share of the work: a slower or busier machine (other "
                     "processes on its cores), or longer samples (sequence lengths) landing on it",
                     rank);
  }
  return fmt::format(
      "look at what rank {} does outside the traced phases: work only it does (`if rank == {}:` "
      "logging, checkpoints, evaluation), or host syncs",
      rank, rank);
}

}  // namespace

// ", 29.1 ms of it in `data`": the named phase holding most of the excess, when there is one
// (" (`data` alone: 30.2 ms more)" when it exceeds the whole by more than the words' 0.05 ms, the
// rest of the phase being faster; within that, the part is never said to be more than the whole).
std::string within_words(const straggler_info& s) {
  if (s.within.empty()) return {};
  if (s.within_ms > s.excess_ms + 0.05) return fmt::format(" (`{}` alone: {:.1f} ms more)", s.within, s.within_ms);
  return fmt::format(", {:.1f} ms of it in `{}`", std::min(s.within_ms, s.excess_ms), s.within);
}

// Each custom phase counted toward `group` in `s` (for `compute`, also one outside every
// built-in), with its time a step together with the phases inside it but `wait` (DDP's wait for
// the other ranks opens inside the user's `backward`: the others' time, not its own).
std::unordered_map<std::string_view, double> named_inside(const summary& s, std::string_view group) {
  const std::size_t n = s.phases.size();
  std::unordered_map<std::string_view, std::size_t> index;
  for (std::size_t i = 0; i < n; ++i) index.emplace(s.phases[i].name, i);
  std::vector<double> with_inner(n, 0);
  for (std::size_t i = 0; i < n; ++i) {  // each phase's own time, added to it and every phase around it
    const double own = s.phases[i].ms.mean;
    if (!std::isfinite(own) || own <= 0) continue;
    // but the wait for the other ranks (DDP's, inside a `backward` of the user's): not its own work
    if (s.phases[i].name == "wait" || s.phases[i].name == collective_phase) continue;
    std::size_t at = i;
    for (std::size_t depth = 0; depth < n; ++depth) {  // bounded: a cycle of parents read from a file
      with_inner[at] += own;
      const auto up = s.phases[at].parent.empty() ? index.end() : index.find(s.phases[at].parent);
      if (up == index.end()) break;
      at = up->second;
    }
  }
  const std::vector<std::string_view> groups = builtin_groups(s);
  std::unordered_map<std::string_view, double> out;
  for (std::size_t i = 0; i < n; ++i) {
    const std::string_view name = s.phases[i].name;
    if (is_builtin(name) || name == collective_phase || name == one_time_phase || name == queue_phase) continue;
    if (groups[i] == group || (group == "compute" && groups[i].empty())) out.emplace(name, with_inner[i]);
  }
  return out;
}

namespace {

std::vector<const rank_row*> rows_with_steps(const ranks_view& view) {
  std::vector<const rank_row*> rows;
  for (const rank_row& r : view.rows) {
    if (r.steps > 0) rows.push_back(&r);
  }
  return rows;
}

// The straggler's figures for `least`: its wait and the others', the median rank, and the phase
// of its own work it exceeds the others' median most in.
straggler_info describe(const std::vector<const rank_row*>& rows, const rank_row* least) {
  std::vector<double> others_wait;
  for (const rank_row* r : rows) {
    if (r != least) others_wait.push_back(collective_wait(*r));
  }
  straggler_info s;
  s.rank = least->who.rank;
  std::vector<std::pair<double, std::uint32_t>> others_work;
  for (const rank_row* r : rows) {
    if (r != least) others_work.emplace_back(r->step_mean_ms - collective_wait(*r), r->who.rank);
  }
  std::sort(others_work.begin(), others_work.end());
  s.median_rank = others_work[(others_work.size() - 1) / 2].second;
  s.own_wait_ms = collective_wait(*least);
  s.others_wait_ms = median(others_wait);
  s.excess_ms = -1e300;
  for (const char* phase : own_phases) {
    std::vector<double> others;
    for (const rank_row* r : rows) {
      if (r != least) others.push_back(phase_of(*r, phase));
    }
    const double excess = phase_of(*least, phase) - median(others);
    if (excess > s.excess_ms) s.excess_ms = excess, s.phase = phase;
  }
  return s;
}

}  // namespace

std::optional<straggler_info> describe_straggler(const ranks_view& view, std::uint32_t rank) {
  const std::vector<const rank_row*> rows = rows_with_steps(view);
  const auto it = std::find_if(rows.begin(), rows.end(), [&](const rank_row* r) { return r->who.rank == rank; });
  if (rows.size() < 2 || it == rows.end()) return std::nullopt;
  return describe(rows, *it);
}

bool arrival_holds(const arrival_rank& last, double net_late_ms, double calls_per_step, double step_ms) {
  if (last.late_ms < default_thresholds.straggler_gap_ms) return false;
  const double per_step = std::max(0.0, net_late_ms) * std::max(1.0, calls_per_step);
  return per_step >= default_thresholds.straggler_gap_share * step_ms;
}

namespace {

// Why `rank` is no straggler by its arrivals, or empty when they hold it: it is not late at the
// calls a step by the STRAGGLER share (net over every call, as arrival_holds), or it is only with
// the call it was latest at: the first the ranks share (work a rank does once before its first
// collective: start-up), or a later one (a one-off stall). Then what the collectives' time is
// instead. `arrived_last`: the arrivals named it (else the host waits did).
std::string refutation(const ranks_view& view, std::uint32_t rank, double net_late_ms, double step_ms,
                       bool arrived_last) {
  const arrival_view& a = *view.arrivals;
  const auto own = std::find_if(a.ranks.begin(), a.ranks.end(), [&](const arrival_rank& r) { return r.rank == rank; });
  const double calls = std::max(1.0, a.calls_per_step), bar = default_thresholds.straggler_gap_share * step_ms;
  const bool late = std::max(0.0, net_late_ms) * calls >= bar;
  const double worst = own != a.ranks.end() ? own->worst_late_ms : 0.0;
  const bool one_call = late && worst >= default_thresholds.straggler_gap_ms &&
                        std::max(0.0, net_late_ms - worst / static_cast<double>(a.compared)) * calls < bar;
  if (late && !one_call) return {};
  std::string out = arrived_last && own != a.ranks.end()
                        ? fmt::format("rank {} arrived last at {} of the {} collectives the ranks share, yet ", rank,
                                      own->last, a.compared)
                        : fmt::format("rank {} waits least at the collectives, yet ", rank);
  if (one_call && !a.collectives.empty() && own->worst_seq == a.collectives.front().seq) {
    out += fmt::format(
        "its lateness is the first call's: {:.1f} ms at call {}, the first the ranks share, work a rank does once "
        "before its first collective (a first compile, allocation or connection: start-up) rather than a cost each "
        "step",
        worst, own->worst_seq);
  } else if (one_call) {
    out += fmt::format(
        "its lateness is one call's: {:.1f} ms at call {} of the {} the ranks share, a one-off stall rather than a "
        "cost each step",
        worst, own->worst_seq, a.compared);
  } else {
    out += fmt::format("it arrives {:.2f} ms after the others on average over the {} collectives the ranks share",
                       std::max(0.0, net_late_ms), a.compared);
    if (own != a.ranks.end()) out += fmt::format(" (last at {}, a median {:.2f} ms late)", own->last, own->late_ms);
    out += ": the others do not wait for it";
  }
  return out + "; " + split_words(a);
}

}  // namespace

std::string split_words(const arrival_view& a) {
  std::vector<double> waits;
  double most = 0;
  std::uint32_t most_rank = 0;
  for (const collective_split& r : a.split) {
    waits.push_back(r.wait_ms);
    if (r.wait_ms > most) most = r.wait_ms, most_rank = r.rank;
  }
  const bool per_step = a.calls_per_step > 0;
  const double n = per_step ? a.calls_per_step : 1.0;
  std::string out = fmt::format(
      "of each {}, the collectives move data {:.2f} ms, which every rank pays, and the median rank waits "
      "{:.2f} ms for the last to arrive",
      per_step ? "step" : "call", n * a.transfer_ms, n * median(waits));
  if (most > 0) out += fmt::format(" (rank {} the longest, {:.2f} ms)", most_rank, n * most);
  return out;
}

void apply_arrivals(ranks_view& view, const std::vector<rank_calls>& calls, double calls_per_step) {
  std::map<std::uint32_t, double> net;
  view.arrivals = read_arrivals(calls, &net);
  if (!view.arrivals) return;
  view.arrivals->calls_per_step = std::isfinite(calls_per_step) ? std::max(0.0, calls_per_step) : 0.0;
  std::vector<double> steps;
  for (const rank_row& r : view.rows) {
    if (r.steps > 0) steps.push_back(r.step_mean_ms);
  }
  const arrival_rank* last = most_often_last(*view.arrivals);
  if (last == nullptr || !arrival_holds(*last, net[last->rank], calls_per_step, median(steps))) {
    // The host-wait rule's rank, held to its arrivals: one that waits least because the others'
    // collective time is the transfer, or because of one late call, holds no one back.
    if (view.straggler && view.straggler->late_ms == 0 && view.arrivals->compared >= min_arrivals_judged) {
      view.straggler_refuted = refutation(view, view.straggler->rank, net[view.straggler->rank], median(steps), false);
      if (!view.straggler_refuted.empty()) view.straggler.reset();
    }
    return;
  }
  if (view.arrivals->compared >= min_arrivals_judged) {  // last at the calls: late at each, or at one?
    view.straggler_refuted = refutation(view, last->rank, net[last->rank], median(steps), true);
    if (!view.straggler_refuted.empty()) {
      if (view.straggler && view.straggler->rank != last->rank) {  // the host waits named another: its own
        view.straggler_refuted =
            view.straggler->late_ms == 0
                ? refutation(view, view.straggler->rank, net[view.straggler->rank], median(steps), false)
                : std::string();
        if (view.straggler_refuted.empty()) return;  // held: it stands as the host waits named it
      }
      view.straggler.reset();
      return;
    }
  }
  std::optional<straggler_info> s =
      view.straggler && view.straggler->rank == last->rank ? view.straggler : describe_straggler(view, last->rank);
  if (!s) return;
  s->arrivals_last = last->last;
  s->arrivals_compared = view.arrivals->compared;
  s->arrival_late_ms = last->late_ms;
  s->before = last->before;
  view.straggler = std::move(s);
}

std::string arrival_words(const straggler_info& s) {
  if (s.arrivals_compared == 0) return {};
  std::string out = fmt::format(
      "It arrived last at {} of the {} collectives the ranks share ({:.0f}%), a median {:.2f} ms "
      "after the others",
      s.arrivals_last, s.arrivals_compared,
      100.0 * static_cast<double>(s.arrivals_last) / static_cast<double>(s.arrivals_compared), s.arrival_late_ms);
  if (!s.before.empty()) out += fmt::format(", after `{}`", s.before);
  return out;
}

std::optional<straggler_info> find_straggler(const ranks_view& view) {
  const std::vector<const rank_row*> rows = rows_with_steps(view);
  if (rows.size() < 2) return std::nullopt;
  const rank_row* least = *std::min_element(rows.begin(), rows.end(), [](const rank_row* a, const rank_row* b) {
    return collective_wait(*a) < collective_wait(*b);
  });
  std::vector<double> steps;
  for (const rank_row* r : rows) steps.push_back(r->step_mean_ms);
  straggler_info s = describe(rows, least);
  const double gap = s.others_wait_ms - s.own_wait_ms;
  if (gap < default_thresholds.straggler_gap_share * median(steps) || gap < default_thresholds.straggler_gap_ms) {
    return std::nullopt;
  }
  // It began its step late and arrived last at the collectives: late before the traced step, by
  // more than any phase of its own explains.
  const double late = late_start_ms(rows, least);
  if (late >= default_thresholds.straggler_gap_ms && late > s.excess_ms) {
    s.late_ms = late;
    return s;
  }
  if (s.excess_ms <= 0) return std::nullopt;  // it does no more of its own work than the others: not what holds them
  return s;
}

void name_within(straggler_info& s, const std::vector<const rank_report*>& reports) {
  const summary* own = nullptr;
  std::vector<std::unordered_map<std::string_view, double>> others;
  for (const rank_report* r : reports) {
    if (!r->s.rank || r->s.steps == 0) continue;
    if (r->s.rank->rank == s.rank) {
      own = &r->s;
    } else {
      others.push_back(named_inside(r->s, s.phase));
    }
  }
  choose_within(s, own != nullptr ? named_inside(*own, s.phase) : std::unordered_map<std::string_view, double>{},
                others);
}

void choose_within(straggler_info& s, const std::unordered_map<std::string_view, double>& own,
                   const std::vector<std::unordered_map<std::string_view, double>>& others) {
  s.within.clear();
  s.within_ms = 0;
  if (others.empty() || !(s.excess_ms > 0)) return;
  double least_own = 0;
  for (const auto& [name, ms] : own) {
    std::vector<double> theirs;
    for (const auto& other : others) {
      const auto it = other.find(name);
      theirs.push_back(it == other.end() ? 0.0 : it->second);
    }
    const double excess = ms - median(theirs);
    if (excess < 0.5 * s.excess_ms) continue;
    if (s.within.empty() || ms < least_own || (ms == least_own && excess > s.within_ms)) {
      s.within = std::string(name);
      s.within_ms = excess;
      least_own = ms;
    }
  }
}

diagnosis straggler_diagnosis(const ranks_view& view, const straggler_info& s, bool gpu) {
  const std::size_t n = view.rows.size() - 1;
  const std::string others = n == 1 ? "the other rank waits" : fmt::format("the other {} ranks wait", n);
  diagnosis d;
  d.label = "STRAGGLER";
  if (s.late_ms > 0) {
    d.evidence = fmt::format(
        "Rank {} begins its step {:.2f} ms after the others (median) and reaches the collectives last: it was late "
        "before the traced step. It waits {:.2f} ms a step at the collectives while {} {:.2f} ms{} for it; no phase "
        "of its own takes more than {:.2f} ms longer than the others'.",
        s.rank, s.late_ms, s.own_wait_ms, others, s.others_wait_ms, n == 1 ? "" : " (median)",
        std::max(0.0, s.excess_ms));
    d.advice = {
        fmt::format("rank {} starts {:.1f} ms late and {} {:.1f} ms a step for it: trace more steps (a longer "
                    "schedule, more active steps) to see what delays it before the step: the step before, its data "
                    "loader, host work only it does (`if rank == {}:` logging, checkpoints)",
                    s.rank, s.late_ms, others, s.others_wait_ms, s.rank),
        "the fix on that rank speeds up every rank: the job runs at the pace of its slowest rank",
    };
    return d;
  }
  d.evidence = fmt::format("Rank {} waits {:.2f} ms a step at the collectives while {} {:.2f} ms{} for it.", s.rank,
                           s.own_wait_ms, others, s.others_wait_ms, n == 1 ? "" : " (median)");
  if (s.arrivals_compared == 0 || s.excess_ms >= 0.05) {  // no phase of its own is longer: its arrival says it
    d.evidence += fmt::format(" It spends {:.2f} ms a step more in `{}` than the median of the others{}.", s.excess_ms,
                              s.phase, within_words(s));
  }
  for (const rank_row& r : view.rows) {
    if (r.who.rank == s.rank && view.steps_compared > 0) {
      d.evidence +=
          fmt::format(" It was the slowest rank in {} of the last {} steps.", r.slowest_steps, view.steps_compared);
    }
  }
  if (s.arrivals_compared > 0) {  // read from the collectives themselves: the device's view on a GPU
    d.evidence += " " + arrival_words(s) + ".";
    // Where its time went: the phase it exceeds the others in when that explains half its lateness
    // or more, else (its host phases alike the others': a device-bound rank) the phase it ran before arriving.
    straggler_info where = s;
    if (where.within.empty() && s.excess_ms < 0.5 * s.arrival_late_ms && !s.before.empty()) {
      (is_builtin(s.before) ? where.phase : where.within) = s.before;
    }
    d.advice = {
        fmt::format(
            "rank {} arrives last at {} of {} collectives, a median {:.1f} ms after the others{}{}; {} {:.1f} ms a "
            "step for it: {}",
            s.rank, s.arrivals_last, s.arrivals_compared, s.arrival_late_ms,
            s.before.empty() ? std::string() : fmt::format(", after `{}`", s.before),
            s.excess_ms >= 0.05 ? fmt::format(" (it spends {:.1f} ms more in `{}` than the median rank{})", s.excess_ms,
                                              s.phase, within_words(s))
                                : std::string(),
            others, s.others_wait_ms, where_to_look(where, gpu)),
        "the fix on that rank speeds up every rank: the job runs at the pace of its slowest rank",
    };
    return d;
  }
  d.advice = {
      fmt::format("rank {} spends {:.1f} ms more in `{}` than the median rank{}; {} {:.1f} ms a step for it at the "
                  "all-reduce: {}",
                  s.rank, s.excess_ms, s.phase, within_words(s), others, s.others_wait_ms, where_to_look(s, gpu)),
      "the fix on that rank speeds up every rank: the job runs at the pace of its slowest rank",
  };
  return d;
}

}  // namespace steptrace::detail
