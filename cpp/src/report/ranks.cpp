// combine_ranks(): rank 0's view of a multi-process job — a row per rank, the missing ranks, the
// slowest rank per step, and the STRAGGLER rule (its thresholds live in report/diagnosis/diagnosis.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "analysis/arrivals.hpp"
#include "report/diagnosis/diagnosis.hpp"
#include "report/diagnosis/gains.hpp"
#include "report/diagnosis/straggler.hpp"
#include "report/diagnosis/summary_facts.hpp"
#include "report/json/json_fields.hpp"
#include "report/report.hpp"
#include "steptrace/summary.hpp"

namespace steptrace {
namespace {

using detail::builtin_groups;
using detail::collective_wait;
using detail::find_straggler;
using detail::group_share;
using detail::median;
using detail::phase_of;
using detail::row_of;

// A row's share of `name`: its built-in group; a custom phase outside every built-in is the
// rank's own work, so it counts as `compute` (as the diagnosis weighs it): the row's five shares
// always sum to the step.
double row_share(const summary& s, std::string_view name) {
  double share = group_share(s, name);
  if (name == "compute") {
    const std::vector<std::string_view> groups = builtin_groups(s);
    for (std::size_t i = 0; i < groups.size(); ++i) {
      if (groups[i].empty()) share += s.phases[i].share;
    }
  }
  return share;
}

// Steps every rank kept a wait for: the k-th collective of one rank is the k-th of each. Each
// step's slowest rank is the one that waited least.
void count_slowest(const std::vector<const rank_report*>& reports, ranks_view& view) {
  std::uint64_t first = 0, end = UINT64_MAX;
  for (const rank_report* r : reports) {
    if (r->recent_wait_ms.empty() || r->recent_wait_ms.size() > r->collectives) return;
    first = std::max<std::uint64_t>(first, r->collectives - r->recent_wait_ms.size());
    end = std::min(end, r->collectives);
  }
  if (reports.size() < 2 || first >= end) return;
  view.steps_compared = end - first;
  for (std::uint64_t k = first; k < end; ++k) {
    std::size_t slowest = 0;
    double least = 0;
    for (std::size_t i = 0; i < reports.size(); ++i) {
      const rank_report& r = *reports[i];
      const double wait = r.recent_wait_ms[k - (r.collectives - r.recent_wait_ms.size())];
      if (i == 0 || wait < least) slowest = i, least = wait;
    }
    ++view.rows[slowest].slowest_steps;
  }
}

// The ranks' arrival at their collectives: from their calls (traces), else from the waits at
// DDP's all-reduce each rank kept (a gather: the k-th of one rank is the k-th of each, and the
// ranks leave it together, so a rank arrived its wait before the end).
void read_job_arrivals(const std::vector<const rank_report*>& reports, ranks_view& view) {
  std::vector<detail::rank_calls> ranks;
  std::vector<double> per_step;
  const bool traced =
      std::any_of(reports.begin(), reports.end(), [](const rank_report* r) { return !r->calls.empty(); });
  for (const rank_report* r : reports) {
    detail::rank_calls c;
    c.rank = r->s.rank->rank;
    if (traced) {
      c.calls = r->calls;
      c.numbered = r->calls_numbered;
    } else if (!r->recent_wait_ms.empty() && r->recent_wait_ms.size() <= r->collectives) {
      const std::uint64_t first = r->collectives - r->recent_wait_ms.size();
      for (std::size_t i = 0; i < r->recent_wait_ms.size(); ++i) {
        const double wait = std::isfinite(r->recent_wait_ms[i]) ? std::max(0.0, r->recent_wait_ms[i]) : 0.0;
        c.calls.push_back({"ddp", "all-reduce", first + i, -1e3 * wait, 0.0, ""});
      }
      c.numbered = true;
    }
    if (r->s.steps > 0) {
      per_step.push_back(
          traced ? static_cast<double>(r->calls.size()) / static_cast<double>(r->s.steps + r->s.warmup_steps) : 1.0);
    }
    ranks.push_back(std::move(c));
  }
  detail::apply_arrivals(view, ranks, median(per_step));
}

// What the live windows add to the job's diagnosis at exit: how often its straggler lagged, and
// whether that is its node (chronic) or a stall (one-off); or, with no straggler at exit, the
// ranks the windows named.
void add_live_words(diagnosis& d, const live_ranks_view& live, const std::optional<straggler_info>& straggler) {
  const rank_window_count* named = nullptr;
  for (const rank_window_count& c : live.counts) {
    if (straggler && c.rank == straggler->rank) named = &c;
  }
  if (straggler && named != nullptr && !d.advice.empty()) {
    const std::string pattern = straggler_pattern(*named, live.windows);
    d.evidence += " Live windows: " + detail::live_rank_words(*named, live.windows) + ".";
    if (!named->node.empty()) d.evidence += fmt::format(" Its node, the last window it lagged: {}.", named->node);
    if (pattern == "chronic") {
      d.advice.front() += fmt::format(
          "; it lagged in {} of the {} windows since it first did: a chronic straggler, so look at its node first "
          "(another job on it, a throttled or failing GPU, its storage or network link): the same rank on another "
          "node tells the node from its data",
          named->windows, live.windows - named->first_window);
    } else if (pattern == "one-off") {
      d.advice.front() += fmt::format(
          "; it lagged in one live window only (window {}): a transient stall (a checkpoint, a collection pause, "
          "another job's burst) rather than a steady cost: if it does not come back, there is nothing to change "
          "in the loop",
          named->first_window);
    }
    return;
  }
  if (!live.counts.empty()) {
    std::string words;
    for (const rank_window_count& c : live.counts)
      words += (words.empty() ? "" : "; ") + detail::live_rank_words(c, live.windows);
    d.evidence += " Live windows named a straggler: " + words + ".";
  }
}

// Why the exit's straggler is none by the live windows, or empty when they do not say so: it
// lagged in one window only, and at least two judged windows since found no lag, so its excess is
// one stall the run's means spread over every step (a straggler first named in the last windows
// may be starting to lag: that stays a straggler). One the arrivals held is late at the calls.
std::string live_one_off(const live_ranks_view& live, const straggler_info& s) {
  if (s.arrivals_compared > 0) return {};
  for (const rank_window_count& c : live.counts) {
    if (c.rank != s.rank || straggler_pattern(c, live.windows) != "one-off") continue;
    if (live.windows < c.first_window + 3) return {};
    return fmt::format(
        "rank {} lagged in one live window only (window {}, `{}`) and in none of the {} judged since: a one-off "
        "stall (a checkpoint, a collection pause, another job's burst): its {:.2f} ms a step over the median rank is "
        "that stall spread over the run's steps",
        s.rank, c.first_window, c.phase, live.windows - c.first_window - 1, s.excess_ms);
  }
  return {};
}

// The custom phases a digest carries for the straggler's `within` (report/diagnosis/straggler.hpp): the
// max_digest_phases with the most time of their own, and the custom phases around them (twice
// that many in all at most; a phase whose chain does not fit is left out whole), each
// with its own time a step, its calls and its parent, and no share (the built-in rows already
// hold their time, so every share and row reads as before).
constexpr std::size_t max_digest_phases = 8;

void digest_custom_phases(const summary& s, summary& d) {
  std::unordered_map<std::string_view, std::size_t> index;
  std::vector<std::size_t> custom;
  for (std::size_t i = 0; i < s.phases.size(); ++i) {
    index.emplace(s.phases[i].name, i);
    const double own = s.phases[i].ms.mean;
    if (!detail::is_builtin(s.phases[i].name) && std::isfinite(own) && own > 0) custom.push_back(i);
  }
  std::sort(custom.begin(), custom.end(),
            [&](std::size_t a, std::size_t b) { return s.phases[a].ms.mean > s.phases[b].ms.mean; });
  if (custom.size() > max_digest_phases) custom.resize(max_digest_phases);
  std::vector<bool> kept(s.phases.size(), false);
  std::size_t count = 0;
  std::vector<std::size_t> chain;
  for (std::size_t i : custom) {  // with the custom phases around it, up to a built-in: all or none
    chain.clear();
    for (std::size_t at = i, depth = 0; depth < s.phases.size() && !kept[at]; ++depth) {
      if (detail::is_builtin(s.phases[at].name)) break;
      chain.push_back(at);
      const auto up = s.phases[at].parent.empty() ? index.end() : index.find(s.phases[at].parent);
      if (up == index.end()) break;
      at = up->second;
    }
    if (count + chain.size() > 2 * max_digest_phases) continue;
    for (std::size_t at : chain) kept[at] = true;
    count += chain.size();
  }
  for (std::size_t i = 0; i < s.phases.size(); ++i) {
    if (!kept[i]) continue;
    phase_stats p;
    p.name = s.phases[i].name;
    p.parent = s.phases[i].parent;
    p.calls = s.phases[i].calls;
    p.ms.mean = std::isfinite(s.phases[i].ms.mean) ? std::max(0.0, s.phases[i].ms.mean) : 0.0;
    p.ms.total = p.ms.mean * static_cast<double>(s.steps);
    d.phases.push_back(std::move(p));
  }
}

}  // namespace

rank_row detail::row_of(const rank_report& report) {
  const summary& s = report.s;
  rank_row r;
  r.who = *s.rank;
  r.steps = s.steps;
  r.step_mean_ms = s.step_ms.mean;
  r.step_p50_ms = s.step_ms.p50;
  r.step_p95_ms = s.step_ms.p95;
  for (const char* p : {"input", "h2d", "compute", "wait", "other"}) phase_of(r, p) = row_share(s, p) * s.step_ms.mean;
  if (std::isfinite(report.device_wait_ms) && report.device_wait_ms > 0) r.device_wait_ms = report.device_wait_ms;
  if (s.gpu) r.device_busy_share = s.gpu->busy_share;
  r.label = s.diag.label;
  if (!s.diag.gains.empty()) r.gain_cause = s.diag.gains.front().first, r.gain = s.diag.gains.front().second;
  r.step_begin_us = detail::fact_double(s, "trace.step_begin_us");
  r.first_collective_us = detail::fact_double(s, "trace.first_collective_us");
  return r;
}

std::string detail::live_rank_words(const rank_window_count& c, std::uint64_t windows) {
  const std::string pattern = straggler_pattern(c, windows);
  if (c.windows == 1) return fmt::format("rank {} once, window {} ({}): {}", c.rank, c.first_window, c.phase, pattern);
  return fmt::format("rank {} slowest in {} of {} windows ({}): {}", c.rank, c.windows, windows, c.phase, pattern);
}

summary combine_ranks(const std::vector<rank_report>& reports, std::uint32_t world_size, double timeout_s,
                      bool from_files, const std::vector<std::pair<std::uint32_t, std::string>>& refused) {
  if (world_size > max_world_size) {
    throw std::invalid_argument(
        fmt::format("a world of {} ranks is more than steptrace reads ({} at most)", world_size, max_world_size));
  }
  std::vector<const rank_report*> sorted;
  for (const rank_report& r : reports) {
    if (!r.s.rank) throw std::invalid_argument("combine_ranks: a summary has no rank (tracer::set_rank)");
    sorted.push_back(&r);
  }
  if (sorted.empty()) throw std::invalid_argument("combine_ranks: no summaries to combine");
  std::sort(sorted.begin(), sorted.end(),
            [](const rank_report* a, const rank_report* b) { return a->s.rank->rank < b->s.rank->rank; });
  ranks_view view;
  view.world_size = world_size;
  view.timeout_s = timeout_s;
  view.from_files = from_files;
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    if (i > 0 && sorted[i]->s.rank->rank == sorted[i - 1]->s.rank->rank) {
      throw std::invalid_argument(fmt::format("combine_ranks: two summaries from rank {}", sorted[i]->s.rank->rank));
    }
    view.rows.push_back(row_of(*sorted[i]));
  }
  if (sorted.back()->s.rank->rank >= world_size) {
    throw std::invalid_argument(
        fmt::format("combine_ranks: rank {} in a world of {}", sorted.back()->s.rank->rank, world_size));
  }
  std::vector<bool> seen(world_size, false);
  for (const rank_report* r : sorted) seen[r->s.rank->rank] = true;
  for (const auto& [rank, why] : refused) {
    if (rank < world_size && !seen[rank]) {
      seen[rank] = true;
      view.refused.emplace_back(rank, why);
    }
  }
  for (std::uint32_t rank = 0; rank < world_size; ++rank) {
    if (seen[rank]) continue;
    if (view.missing.size() < missing_listed) view.missing.push_back(rank);
    ++view.missing_count;
  }
  std::vector<double> own_work;
  for (const rank_row& r : view.rows) {
    if (r.steps == 0) continue;  // a rank that recorded nothing is neither the worst nor the median
    own_work.push_back(std::max(0.0, r.step_mean_ms - collective_wait(r)));
    if (own_work.size() == 1 || own_work.back() > view.worst_ms)
      view.worst_rank = r.who.rank, view.worst_ms = own_work.back();
  }
  view.median_ms = median(own_work);
  count_slowest(sorted, view);
  view.straggler = find_straggler(view);
  read_job_arrivals(sorted, view);  // the rank that arrived last at the collectives, when they tell
  if (view.straggler && view.straggler->late_ms == 0) detail::name_within(*view.straggler, sorted);
  if (view.straggler && view.straggler->arrivals_compared > 0 && view.straggler->before.empty()) {
    // Waits alone (a gather) do not say what ran before each arrival: where its extra time went does.
    view.straggler->before = view.straggler->within.empty() ? view.straggler->phase : view.straggler->within;
    for (arrival_rank& r : view.arrivals->ranks) {
      if (r.rank == view.straggler->rank && r.before.empty()) r.before = view.straggler->before;
    }
  }
  summary out = sorted.front()->s;
  if (view.straggler && out.live_ranks) {  // the windows may say its excess is one stall
    view.straggler_refuted = live_one_off(*out.live_ranks, *view.straggler);
    if (!view.straggler_refuted.empty()) {
      const rank_window_count* c = nullptr;
      for (const rank_window_count& n : out.live_ranks->counts) c = n.rank == view.straggler->rank ? &n : c;
      out.diag.advice.push_back(fmt::format(
          "also: rank {} stalled once (live window {}, `{}`), a one-off: if it does not come back, there is nothing "
          "to change in the loop",
          view.straggler->rank, c->first_window, c->phase));
      view.straggler.reset();  // the label and the gains stay rank 0's own, from its typical step
    }
  }
  const bool others_have_steps =
      std::any_of(sorted.begin(), sorted.end(), [](const rank_report* r) { return r->s.steps > 0; });
  if (out.steps == 0 && others_have_steps) {  // a rank 0 that only coordinates: the table is the job's
    out.diag.evidence =
        fmt::format("Rank {} recorded no steps: each rank's figures are in the `ranks` table.", out.rank->rank);
  }
  if (view.straggler) {
    const bool gpu =
        std::any_of(sorted.begin(), sorted.end(), [](const rank_report* r) { return r->s.gpu || r->s.backend.cuda; });
    out.diag = detail::straggler_diagnosis(view, *view.straggler, gpu);
    if (out.live_ranks) add_live_words(out.diag, *out.live_ranks, view.straggler);  // chronic or one-off
    // Every rank waits for the straggler: its excess over the median rank is what its fix can save.
    // A late rank's fix saves the others' wait for it.
    const double step = out.step_ms.mean > 0 ? out.step_ms.mean : view.median_ms;
    // One that arrives last at the collectives: the others' wait for it (their exposed collective
    // time beyond its own, which is the collective's transfer).
    const straggler_info& st = *view.straggler;
    const double saved = st.late_ms > 0             ? st.others_wait_ms
                         : st.arrivals_compared > 0 ? std::max(0.0, st.others_wait_ms - st.own_wait_ms)
                                                    : st.excess_ms;
    const double gain = step > 0 ? std::clamp(saved / step, 0.0, 1.0) : 0.0;
    out.diag.gains = {{fmt::format("rank {}", view.straggler->rank), gain}};
    out.diag.advice.front() += detail::gain_words(gain);
  }
  if (!view.straggler && !view.straggler_refuted.empty()) {  // the host waits named one; its arrivals did not
    out.diag.evidence += " No straggler: " + view.straggler_refuted + ".";
    out.diag.hypotheses.push_back({"a straggler's fix", "straggler", false, "refuted: " + view.straggler_refuted, 0});
  }
  if (out.live_ranks && !view.straggler) add_live_words(out.diag, *out.live_ranks, view.straggler);
  out.ranks = std::move(view);
  return out;
}

summary rank_digest(const summary& s) {
  if (!s.rank) throw std::invalid_argument("a rank's summary has no rank");
  const auto finite = [](double v) { return std::isfinite(v) && v >= 0; };
  const stat_ms& m = s.step_ms;
  if (!finite(m.mean) || !finite(m.p50) || !finite(m.p95) || !finite(m.p99) || !finite(m.max) || !finite(m.total) ||
      !finite(s.wall_ms)) {
    throw std::invalid_argument(fmt::format("rank {}: step times are not finite, non-negative numbers", s.rank->rank));
  }
  double sum = 0;
  for (const phase_stats& p : s.phases) {
    if (!(p.share >= 0 && p.share <= 1)) {
      throw std::invalid_argument(fmt::format("rank {}: phase share {} is not between 0 and 1", s.rank->rank, p.share));
    }
    sum += p.share;
  }
  if (s.steps > 0 && std::fabs(sum - 1) > 0.001) {
    throw std::invalid_argument(fmt::format("rank {}: phase shares sum to {:.4f}, not 1", s.rank->rank, sum));
  }
  summary d;
  d.steps = s.steps;
  d.warmup_steps = s.warmup_steps;
  d.failed_steps = s.failed_steps;
  d.threads = s.threads;
  d.wall_ms = s.wall_ms;
  d.run_ms = s.run_ms;
  d.step_ms = s.step_ms;
  d.requests = std::min(s.requests, s.steps);
  d.rank = s.rank;
  d.backend = s.backend;
  d.errors = s.errors;
  d.diag.label = s.diag.label;
  d.diag.gains = s.diag.gains;
  for (const char* name : {"input", "h2d", "compute", "wait", "other"}) {
    phase_stats p;
    p.name = name;
    p.share = row_share(s, name);
    p.ms.mean = p.share * s.step_ms.mean;
    p.ms.total = p.share * s.step_ms.total;
    if (const phase_stats* own = s.phase(name)) p.calls = own->calls;
    d.phases.push_back(std::move(p));
  }
  digest_custom_phases(s, d);
  if (s.gpu) d.gpu.emplace().busy_share = std::clamp(s.gpu->busy_share, 0.0, 1.0);
  for (const char* key : {"trace.step_begin_us", "trace.first_collective_us"}) {  // a late start (traces)
    if (const std::string* v = s.fact(key)) d.facts.emplace_back(key, *v);
  }
  return d;
}

std::string rank_path(std::string_view path, std::uint32_t rank) {
  static constexpr std::string_view slot = "{rank}";
  std::string out(path);
  for (std::size_t i = out.find(slot); i != std::string::npos; i = out.find(slot, i)) {
    out.replace(i, slot.size(), std::to_string(rank));
  }
  return out;
}

std::string summary::path_for(std::string_view path) const {
  if (path.find("{rank}") == std::string_view::npos) return rank && rank->rank != 0 ? std::string() : std::string(path);
  return rank_path(path, rank ? rank->rank : 0);
}

}  // namespace steptrace
