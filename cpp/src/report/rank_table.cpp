// The table's ranks section (summary::table): rank 0's row per rank with the worst rank against
// the median one, the refused and missing ranks, and the live windows' stragglers.
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "report/diagnosis/straggler.hpp"
#include "report/report.hpp"

namespace steptrace::detail {
namespace {

std::string ms(double v) { return format_ms(v); }

// At most `width` bytes of `text`, never cutting a UTF-8 sequence; "~" marks a cut.
std::string cut(const std::string& text, std::size_t width) {
  if (text.size() <= width) return text;
  std::size_t n = width - 1;
  while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  return text.substr(0, n) + "~";
}

}  // namespace

// Rank 0's view of the job: a row per rank (per-step means), the worst rank against the median
// one by its time outside `wait`, the missing ranks.
void rank_lines(const ranks_view& v, const std::function<void(std::string)>& line) {
  line("");
  line(fmt::format("ranks      {} of {} {}; per step, mean ms of each phase with the phases inside it", v.rows.size(),
                   v.world_size, v.from_files ? "read from files" : "gathered"));
  // From traces, the NCCL time no kernel hid: device time, beside the host phases, never in them.
  const bool device_wait =
      std::any_of(v.rows.begin(), v.rows.end(), [](const rank_row& r) { return r.device_wait_ms > 0; });
  line(fmt::format("  {:>5}  {:<16}{:>7}{:>10}{:>9}{:>9}{:>9}{:>9}{:>9}{}{:>10}{:>9}  {:<14}{}", "rank", "host",
                   "steps", "step p50", "input", "h2d", "compute", "wait", "other",
                   device_wait ? fmt::format("{:>10}", "GPU wait") : "", "GPU busy", "slowest", "label",
                   "gain of its first fix"));
  for (const rank_row& r : v.rows) {
    const std::string busy = r.device_busy_share ? fmt::format("{:.0f}%", 100 * *r.device_busy_share) : "-";
    const std::string slowest = v.steps_compared ? std::to_string(r.slowest_steps) : "-";
    const std::string gain =
        r.gain_cause.empty() ? "-" : fmt::format("up to {:.0f}%, `{}`", 100 * r.gain, r.gain_cause);
    line(fmt::format("  {:>5}  {:<16}{:>7}{:>10}{:>9}{:>9}{:>9}{:>9}{:>9}{}{:>10}{:>9}  {:<14}{}", r.who.rank,
                     cut(r.who.host, 15), r.steps, ms(r.step_p50_ms), ms(r.input_ms), ms(r.h2d_ms), ms(r.compute_ms),
                     ms(r.wait_ms), ms(r.other_ms), device_wait ? fmt::format("{:>10}", ms(r.device_wait_ms)) : "",
                     busy, slowest, r.label.empty() ? "-" : r.label, gain));
  }
  const auto with_steps = std::count_if(v.rows.begin(), v.rows.end(), [](const rank_row& r) { return r.steps > 0; });
  if (with_steps >= 2) {  // ranks with no steps are rows, never the worst or the median
    line(fmt::format("  worst rank {}: {} ms a step outside `wait`{}; the median rank {} ms{}", v.worst_rank,
                     ms(v.worst_ms), device_wait ? " and GPU wait" : "", ms(v.median_ms),
                     v.steps_compared
                         ? fmt::format(" (`slowest`: of the last {} steps, those it waited least in)", v.steps_compared)
                         : std::string()));
  }
  if (v.arrivals) {  // who arrived last at the collectives the ranks share
    const arrival_view& a = *v.arrivals;
    std::vector<const arrival_rank*> most;
    for (const arrival_rank& r : a.ranks) most.push_back(&r);
    std::stable_sort(most.begin(), most.end(), [](auto* x, auto* y) { return x->last > y->last; });
    std::string words;
    for (std::size_t i = 0; i < most.size() && i < 4; ++i) {
      words += fmt::format("{}rank {} at {} ({:.0f}%, median {} ms late{})", i ? "; " : "", most[i]->rank,
                           most[i]->last, 100.0 * static_cast<double>(most[i]->last) / static_cast<double>(a.compared),
                           ms(most[i]->late_ms), most[i]->before.empty() ? "" : ", after `" + most[i]->before + "`");
    }
    line(fmt::format("  arrival at {} collective{} (matched by {}, aligned on their ends), last: {}", a.compared,
                     a.compared == 1 ? "" : "s", a.matched_by, words.empty() ? "no rank" : words));
    if (!a.split.empty()) line("  collective time: " + split_words(a));
  }
  if (!v.straggler_refuted.empty()) line("  no straggler: " + v.straggler_refuted);
  for (const auto& [rank, why] : v.refused) {
    line(
        fmt::format("  refused: rank {}: its summary arrived but did not hold together ({}); the figures are over "
                    "the others",
                    rank, why));
  }
  if (!v.missing.empty()) {
    constexpr std::size_t named = 32;  // a line, not a page: the JSON lists more
    std::string which;
    for (std::size_t i = 0; i < v.missing.size() && i < named; ++i)
      which += (i ? ", " : "") + std::to_string(v.missing[i]);
    if (v.missing_count > named) which += fmt::format(" ... ({} in all)", v.missing_count);
    if (v.from_files) {
      line(fmt::format("  missing: rank{} {}: no file among those read; the figures are over the others",
                       v.missing_count == 1 ? "" : "s", which));
    } else {
      line(
          fmt::format("  missing: rank{} {}: no summary arrived within {} s (it ended early, crashed, or is still "
                      "running); the figures are over the others",
                      v.missing_count == 1 ? "" : "s", which, ms(v.timeout_s)));
    }
  }
}

// Live rank windows: each rank named a window's straggler, how often, and what that looks like.
void live_rank_lines(const live_ranks_view& v, const std::function<void(std::string)>& line) {
  if (v.windows == 0) return;
  line(fmt::format("  live windows: {} judged; {}", v.windows,
                   v.counts.empty() ? "no straggler in any" : "stragglers:"));
  constexpr std::size_t listed = 8;  // the ranks named most often; the JSON has all
  std::vector<const rank_window_count*> most;
  for (const rank_window_count& c : v.counts) most.push_back(&c);
  std::stable_sort(most.begin(), most.end(), [](auto* a, auto* b) { return a->windows > b->windows; });
  for (std::size_t i = 0; i < most.size() && i < listed; ++i) line("    " + live_rank_words(*most[i], v.windows));
  if (most.size() > listed) line(fmt::format("    ... {} ranks in all", most.size()));
}

}  // namespace steptrace::detail
