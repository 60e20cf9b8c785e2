// Live rank windows (ranks.hpp): a rank's row of a window and the window's straggler among the
// rows (the STRAGGLER rule, the same figures as combine_ranks on those summaries), the count of
// each rank's straggler windows, chronic against one-off, and where they show: the exit
// diagnosis, the table, the JSON and Prometheus. Hand-made summaries, no clock.
#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include "helpers.hpp"
#include "report/report.hpp"
#include "steptrace/summary.hpp"
#include "steptrace/tracer.hpp"

using namespace steptrace;
using Catch::Matchers::Contains;

namespace {

// One rank's window in a synchronous job: its own work a step, and the wait for the slowest.
summary window_of(std::uint32_t rank, std::uint32_t world, double input, double compute, double slowest_work) {
  summary s;
  s.steps = 50;
  const double wait = 0.2 + slowest_work - (input + compute);
  const double step = input + compute + wait;
  s.step_ms = stat_ms{step * 50, step, step, step, step, step};
  for (const auto& [name, v] : std::map<std::string, double>{{"input", input}, {"compute", compute}, {"wait", wait}}) {
    s.phases.push_back(phase_stats{name, stat_ms{v * 50, v, v, v, v, v}, v / step, 50});
  }
  s.rank = rank_info{rank, world, rank, "node", ""};
  detail::complete(s);
  return s;
}

std::vector<std::string> rows(const std::vector<std::pair<double, double>>& work) {
  double slowest = 0;
  for (const auto& [i, c] : work) slowest = std::max(slowest, i + c);
  std::vector<std::string> out;
  for (std::uint32_t r = 0; r < work.size(); ++r) {
    out.push_back(
        live_row(window_of(r, static_cast<std::uint32_t>(work.size()), work[r].first, work[r].second, slowest)));
  }
  return out;
}

}  // namespace

TEST_CASE("a window's straggler among the rows is combine_ranks's on the same summaries", "[live_ranks]") {
  const auto got = window_straggler(rows({{1, 20}, {1, 20}, {11, 20}, {1, 20}}));
  REQUIRE(got);
  CHECK(got->rank == 2);
  CHECK(got->phase == "input");
  CHECK(got->excess_ms == Approx(10));
  CHECK(got->others_wait_ms == Approx(10.2));
  CHECK_FALSE(window_straggler(rows({{1, 20}, {1, 20}, {1, 20}, {1, 20}})));  // balanced
  CHECK_FALSE(window_straggler(rows({{1, 20}})));                             // one row
  CHECK(live_row(window_of(0, 2, 1, 20, 21)).size() < 600);                   // what a rank sends a window
  CHECK_THROWS_WITH(window_straggler({"{\"rank\": 1}"}), Contains("a row that is not one"));
  summary no_rank;
  CHECK_THROWS_AS(live_row(no_rank), std::invalid_argument);
}

namespace {

// window_of with a named phase inside `input` taking `named` ms of it a step.
summary with_named(std::uint32_t rank, std::uint32_t world, double input, double named, const std::string& name) {
  summary s = window_of(rank, world, input, 20, 11 + 20);
  s.phases.push_back(
      phase_stats{name, stat_ms{named * 50, named, named, named, named, named}, named / s.step_ms.mean, 50});
  s.phases.back().parent = "input";
  for (phase_stats& p : s.phases) {
    if (p.name == "input")
      p.ms = stat_ms{(input - named) * 50, input - named, input - named, input - named, input - named, input - named};
  }
  double total = 0;
  for (phase_stats& p : s.phases) total += p.ms.mean;
  for (phase_stats& p : s.phases) p.share = p.ms.mean / total;
  return s;
}

}  // namespace

TEST_CASE("a window's straggler names the phase inside, from the named phases the rows carry", "[live_ranks]") {
  // rank 2 fetches 10 ms longer a step, 9.5 ms of it in `decode` (a phase inside `input`)
  const std::string odd = "de code%\xff";  // a space, a percent sign and a byte that is not UTF-8
  for (const std::string& name : {std::string("decode"), odd}) {
    std::vector<std::string> rows;
    for (std::uint32_t r = 0; r < 4; ++r) {
      rows.push_back(live_row(r == 2 ? with_named(r, 4, 11, 10, name) : with_named(r, 4, 1, 0.5, name)));
    }
    const auto got = window_straggler(rows);
    REQUIRE(got);
    CHECK(got->rank == 2);
    CHECK(got->phase == "input");
    CHECK(got->within == name);  // the bytes as written
    CHECK(got->within_ms == Approx(9.5));
    CHECK(got->excess_ms == Approx(10));
    CHECK(straggler_within_words(*got) == ", 9.5 ms of it in `" + name + "`");  // the exit's words
  }
  // a row of the version before named phases is still read: no `within` from it
  std::vector<std::string> old = rows({{1, 20}, {1, 20}, {11, 20}, {1, 20}});
  for (std::string& row : old) {
    REQUIRE(row.rfind("r2 ", 0) == 0);
    row[1] = '1';
  }
  const auto before = window_straggler(old);
  REQUIRE(before);
  CHECK(before->rank == 2);
  CHECK(before->within.empty());
  // at most 8 named phases a row, the largest, names cut at 64 bytes: a row stays small
  summary many = window_of(0, 2, 1, 20, 21);
  for (int i = 0; i < 40; ++i) {
    many.phases.push_back(phase_stats{std::string(200, static_cast<char>('a' + i % 26)) + std::to_string(i),
                                      stat_ms{50.0 * i, 0.01 * i, 0, 0, 0, 0}, 0, 50});
  }
  const std::string row = live_row(many);
  CHECK(row.size() < 8 * 80 + 150);
  CHECK(row.find(" " + std::string(64, 'n') + " ") != std::string::npos);  // the largest (i = 39): cut at 64 bytes
  CHECK(row.find(std::string(65, 'n')) == std::string::npos);
  CHECK_THAT(row, Catch::Matchers::EndsWith(" " + std::string(64, 'g')));  // i = 32: the eighth largest, the last
  CHECK(row.find(std::string(64, 'f')) == std::string::npos);              // i = 31: not among them
  CHECK_THROWS_WITH(window_straggler({"r2 0 2 50 1 1 1 1 0 20 0.2 0 0 0 1 bad%G1"}), Contains("a row that is not one"));
  CHECK_THROWS_WITH(window_straggler({"r2 0 2 50 1 1 1 1 0 20 0.2 0 0 7 1 name"}), Contains("a row that is not one"));
}

TEST_CASE("chronic, one-off, intermittent", "[live_ranks]") {
  CHECK(straggler_pattern({3, 1, 12, 12, "wait"}, 48) == "one-off");
  CHECK(straggler_pattern({17, 41, 7, 47, "input"}, 48) == "chronic");
  CHECK(straggler_pattern({17, 3, 45, 47, "input"}, 48) == "chronic");      // every window since hour 7
  CHECK(straggler_pattern({5, 2, 10, 30, "input"}, 48) == "intermittent");  // twice
  CHECK(straggler_pattern({5, 4, 2, 40, "input"}, 48) == "intermittent");   // 4 of the 46 since it first did
}

TEST_CASE("the tracer counts each rank's straggler windows, and the exit says chronic or one-off", "[live_ranks]") {
  tracer t(testing::quiet());
  straggler_info two{2, "input", 10, 0.2, 10.2};
  straggler_info three{3, "wait", 5, 0.2, 5.2};
  t.note_rank_window(std::nullopt, {}, {});
  for (int w = 0; w < 6; ++w) t.note_rank_window(two, {}, {});
  t.note_rank_window(three, {1}, {});
  const rank_window_count now = t.note_rank_window(two, {}, {5});
  CHECK(now.rank == 2);
  CHECK(now.windows == 7);
  CHECK(now.first_window == 1);
  summary s = t.summary();
  REQUIRE(s.live_ranks);
  CHECK(s.live_ranks->windows == 9);
  CHECK(s.live_ranks->straggler == 2u);
  CHECK(s.live_ranks->missing == std::vector<std::uint32_t>{5});
  REQUIRE(s.live_ranks->counts.size() == 2);
  CHECK(s.live_ranks->counts[1].rank == 3);
  CHECK(s.live_ranks->counts[1].first_window == 7);
  CHECK(detail::live_rank_words(s.live_ranks->counts[0], 9) == "rank 2 slowest in 7 of 9 windows (input): chronic");
  CHECK(detail::live_rank_words(s.live_ranks->counts[1], 9) == "rank 3 once, window 7 (wait): one-off");
  // The JSON both ways, and Prometheus.
  const summary back = summary::from_json(s.json());
  REQUIRE(back.live_ranks);
  CHECK(back.live_ranks->counts[0].windows == 7);
  CHECK(back.live_ranks->counts[1].phase == "wait");
  const std::string prom = s.prometheus();
  CHECK_THAT(prom, Contains("steptrace_straggler_rank 2\n"));
  CHECK_THAT(prom, Contains("steptrace_rank_slowest_windows{straggler=\"2\"} 7\n"));
  CHECK_THAT(prom, Contains("steptrace_rank_windows_total 9\n"));

  // At exit, rank 0's summary carries the count into the job's diagnosis.
  std::vector<rank_report> reports;
  double slowest = 21;
  for (std::uint32_t r = 0; r < 4; ++r) {
    summary w = window_of(r, 4, r == 2 ? 11 : 1, 20, slowest + 10);
    if (r == 0) w.live_ranks = s.live_ranks;
    reports.push_back({w, {}, 0});
  }
  const summary all = combine_ranks(reports, 4, 30);
  CHECK(all.diag.label == "STRAGGLER");
  CHECK_THAT(all.diag.evidence, Contains("Live windows: rank 2 slowest in 7 of 9 windows (input): chronic."));
  CHECK_THAT(all.diag.advice.at(0), Contains("a chronic straggler, so look at its node first"));
  CHECK_THAT(all.table(), Contains("rank 3 once, window 7 (wait): one-off"));
}

TEST_CASE("a one-off straggler's advice is a transient stall", "[live_ranks]") {
  tracer t(testing::quiet());
  for (int w = 0; w < 5; ++w) t.note_rank_window(std::nullopt, {}, {});
  t.note_rank_window(straggler_info{1, "input", 900, 0.2, 900}, {}, {});
  std::vector<rank_report> reports;
  for (std::uint32_t r = 0; r < 3; ++r) {
    summary w = window_of(r, 3, r == 1 ? 11 : 1, 20, 31);
    if (r == 0) w.live_ranks = t.summary().live_ranks;
    reports.push_back({w, {}, 0});
  }
  const summary all = combine_ranks(reports, 3, 30);
  CHECK_THAT(all.diag.advice.at(0), Contains("it lagged in one live window only (window 5): a transient stall"));
  CHECK_THAT(all.diag.evidence, Contains("rank 1 once, window 5 (input): one-off"));
}

TEST_CASE("a straggler the windows saw once, with judged windows since, leaves the label to the typical step",
          "[live_ranks]") {
  // 7 judged windows, rank 1 named in window 4 alone: the exit's means (its `input` 10 ms over the
  // others a step) are one stall spread over the run; rank 0's own reading decides the label.
  tracer t(testing::quiet());
  for (int w = 0; w < 7; ++w) {
    t.note_rank_window(w == 4 ? std::optional<straggler_info>(straggler_info{1, "input", 900, 0.2, 900}) : std::nullopt,
                       {}, {});
  }
  std::vector<rank_report> reports;
  for (std::uint32_t r = 0; r < 3; ++r) {
    summary w = window_of(r, 3, r == 1 ? 11 : 1, 20, 31);
    if (r == 0) w.live_ranks = t.summary().live_ranks;
    reports.push_back({w, {}, 0});
  }
  const summary all = combine_ranks(reports, 3, 30);
  REQUIRE(all.ranks);
  CHECK_FALSE(all.ranks->straggler);
  CHECK(all.diag.label == reports[0].s.diag.label);  // rank 0's own, not STRAGGLER
  CHECK(all.diag.label != "STRAGGLER");
  CHECK(all.diag.gains == reports[0].s.diag.gains);
  CHECK_THAT(all.ranks->straggler_refuted,
             Contains("rank 1 lagged in one live window only (window 4, `input`) and in none of the 2 judged since"));
  CHECK_THAT(all.diag.evidence, Contains("No straggler: rank 1 lagged in one live window only"));
  CHECK_THAT(all.diag.advice.back(), Contains("if it does not come back, there is nothing to change in the loop"));
  REQUIRE_FALSE(all.diag.hypotheses.empty());
  CHECK(all.diag.hypotheses.back().fix == "a straggler's fix");
  CHECK_FALSE(all.diag.hypotheses.back().holds);
}

TEST_CASE("a row carrying a figure no run or device can have is refused, never judged", "[live_ranks]") {
  std::vector<std::string> good = rows({{1, 20}, {1, 20}, {11, 20}, {1, 20}});
  std::string crafted = good[1];
  const std::size_t step =
      crafted.find(' ', crafted.find(' ', crafted.find(' ', 3) + 1) + 1);      // after "r2 RANK WORLD STEPS"
  crafted.replace(step + 1, crafted.find(' ', step + 1) - step - 1, "5e296");  // its mean step
  CHECK_THROWS_WITH(window_straggler({good[0], crafted}), Contains("a figure no run can have (5e+296)"));
  CHECK(window_straggler(good));
}
