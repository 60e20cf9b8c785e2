// combine_ranks on hand-made rank summaries: the rows, the missing ranks, the slowest rank per
// step, and STRAGGLER at and around its thresholds (which come from the one place they live).
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <optional>

#include "helpers.hpp"

#include "report/diagnosis.hpp"
#include "report/report.hpp"
#include "steptrace/request.hpp"
#include "steptrace/summary.hpp"
#include "steptrace/tracer.hpp"

using namespace steptrace;
using Catch::Matchers::Contains;
using steptrace::detail::default_thresholds;
using steptrace::testing::read_file;

namespace {

// One rank's summary: per-step ms of each phase (built-ins or custom, with parents); the step
// is their sum.
summary rank_summary(std::uint32_t rank, std::uint32_t world, std::map<std::string, double> phase_ms,
                     std::map<std::string, std::string> parents = {}) {
  summary s;
  s.steps = 100;
  double step = 0;
  for (const auto& [name, v] : phase_ms) step += v;
  s.step_ms = stat_ms{step * 100, step, step, step, step, step};
  for (const auto& [name, v] : phase_ms) {
    phase_stats p{name, stat_ms{v * 100, v, v, v, v, v}, v / step, 100};
    if (parents.count(name)) p.parent = parents[name];
    s.phases.push_back(p);
  }
  s.rank = rank_info{rank, world, rank, "node-" + std::to_string(rank / 2), "2026-11-21T10:00:00Z"};
  detail::complete(s);
  return s;
}

rank_report report(summary s, std::vector<double> waits = {}, std::uint64_t collectives = 0) {
  return rank_report{std::move(s), std::move(waits), collectives};
}

// Synchronous data parallel: every rank's step takes as long as the slowest rank's work; the
// others spend the difference in `wait`.
std::vector<rank_report> job(const std::vector<std::map<std::string, double>>& work) {
  double slowest = 0;
  std::vector<double> totals;
  for (const auto& w : work) {
    double t = 0;
    for (const auto& [name, v] : w) t += v;
    totals.push_back(t);
    slowest = std::max(slowest, t);
  }
  std::vector<rank_report> out;
  for (std::uint32_t r = 0; r < work.size(); ++r) {
    auto phases = work[r];
    phases["wait"] = 0.2 + slowest - totals[r];  // 0.2 ms: moving the gradients
    out.push_back(report(rank_summary(r, static_cast<std::uint32_t>(work.size()), phases)));
  }
  return out;
}

}  // namespace

TEST_CASE("slow input on one of four ranks: STRAGGLER names the rank, `input` and by how much", "[ranks]") {
  const auto reports = job({{{"input", 1}, {"compute", 20}},
                            {{"input", 1}, {"compute", 20}},
                            {{"input", 10.1}, {"compute", 20}},
                            {{"input", 1}, {"compute", 20}}});
  const summary all = combine_ranks(reports, 4, 30);
  REQUIRE(all.ranks);
  REQUIRE(all.ranks->straggler);
  CHECK(all.ranks->straggler->rank == 2);
  CHECK(all.ranks->straggler->phase == "input");
  CHECK(all.ranks->straggler->excess_ms == Approx(9.1));
  CHECK(all.ranks->straggler->others_wait_ms == Approx(9.3));
  CHECK(all.diag.label == "STRAGGLER");
  CHECK_THAT(all.diag.advice.at(0), Contains("rank 2 spends 9.1 ms more in `input` than the median rank"));
  CHECK_THAT(all.diag.advice.at(0), Contains("the other 3 ranks wait 9.3 ms a step for it"));
  CHECK_THAT(all.diag.advice.at(0), Contains("loader"));
  CHECK(all.ranks->rows.size() == 4);
  CHECK(all.ranks->missing.empty());
  CHECK(all.rank->rank == 0);  // the rest is rank 0's own summary
  CHECK(all.ranks->rows[2].input_ms == Approx(10.1));
  CHECK(all.ranks->rows[0].wait_ms == Approx(9.3));
}

TEST_CASE("a straggler whose extra time is in backward, inside `compute`, is found there", "[ranks]") {
  // backward is a custom phase inside compute: the step times are even (the all-reduce evens
  // them out), the waits are not.
  std::vector<rank_report> reports;
  for (std::uint32_t r = 0; r < 2; ++r) {
    const double backward = r == 1 ? 18 : 8;
    reports.push_back(report(rank_summary(r, 2, {{"compute", 5}, {"backward", backward}, {"wait", 0.3 + 18 - backward}},
                                          {{"backward", "compute"}, {"wait", "compute"}})));
  }
  const summary all = combine_ranks(reports, 2, 30);
  REQUIRE(all.ranks->straggler);
  CHECK(all.ranks->straggler->rank == 1);
  CHECK(all.ranks->straggler->phase == "compute");
  CHECK(all.ranks->straggler->excess_ms == Approx(10));
  CHECK(all.ranks->straggler->within == "backward");  // the named phase that holds it
  CHECK(all.ranks->straggler->within_ms == Approx(10));
  CHECK_THAT(all.diag.evidence, Contains("10.00 ms a step more in `compute` than the median of the others, 10.0 ms "
                                         "of it in `backward`"));
  CHECK_THAT(all.diag.advice.at(0), Contains("look at what rank 1 does in `backward` that the others do not"));
  CHECK_THAT(all.diag.advice.at(0), !Contains("GPU"));  // no rank has a device view: nothing says there is one
  CHECK(all.ranks->rows[0].step_mean_ms == Approx(all.ranks->rows[1].step_mean_ms));
}

TEST_CASE("a straggler's extra time is named by the most specific phase holding half of it, or by none", "[ranks]") {
  // Rank 1: `data` (inside `load`, inside `compute`) takes 12 ms more than on the others; `load`
  // holds it too (with 1 ms of its own), so `data` is the one named. Four ranks: the median of
  // three others.
  const auto ranks = [](double data_extra, double spread_extra) {
    std::vector<rank_report> reports;
    for (std::uint32_t r = 0; r < 4; ++r) {
      const double data = 2 + (r == 1 ? data_extra : 0);
      const double a = 3 + (r == 1 ? spread_extra : 0), b = 3 + (r == 1 ? spread_extra : 0);
      const double step = 5 + 1 + data + a + b;
      reports.push_back(report(rank_summary(r, 4, {{"compute", 5}, {"load", 1}, {"data", data}, {"fwd", a}, {"bwd", b},
                                                   {"wait", 0.3 + 30 - step}},
                                            {{"load", "compute"}, {"data", "load"}, {"fwd", "compute"},
                                             {"bwd", "compute"}, {"wait", "compute"}})));
    }
    return combine_ranks(reports, 4, 30);
  };
  const summary named = ranks(12, 0);
  REQUIRE(named.ranks->straggler);
  CHECK(named.ranks->straggler->rank == 1);
  CHECK(named.ranks->straggler->phase == "compute");
  CHECK(named.ranks->straggler->within == "data");
  CHECK(named.ranks->straggler->within_ms == Approx(12));
  // The same 12 ms spread: 5 in `fwd`, 5 in `bwd`, 2 in `data`: no phase holds half of it.
  const summary spread = ranks(2, 5);
  REQUIRE(spread.ranks->straggler);
  CHECK(spread.ranks->straggler->excess_ms == Approx(12));
  CHECK(spread.ranks->straggler->within.empty());
  CHECK_THAT(spread.diag.advice.at(0), Contains("look at rank 1's host and its share of the work"));
  // What it names survives the JSON, and a summary without it reads back without it.
  for (const summary* s : {&named, &spread}) {
    const summary back = summary::from_json(s->json());
    REQUIRE(back.ranks->straggler);
    CHECK(back.ranks->straggler->within == s->ranks->straggler->within);
    CHECK(back.ranks->straggler->within_ms == Approx(s->ranks->straggler->within_ms));
  }
}

TEST_CASE("STRAGGLER fires at its gap threshold and not just below it", "[ranks]") {
  const double share = default_thresholds.straggler_gap_share;
  auto gap_of = [](double gap) {
    std::vector<rank_report> reports;
    for (std::uint32_t r = 0; r < 3; ++r) {
      const double wait = r == 1 ? 0.0 : gap;
      reports.push_back(report(rank_summary(r, 3, {{"compute", 40 - wait}, {"wait", wait}})));
    }
    return combine_ranks(reports, 3, 30);
  };
  CHECK(gap_of(40 * share * 1.001).ranks->straggler);
  CHECK_FALSE(gap_of(40 * share * 0.99).ranks->straggler);
  CHECK(gap_of(40 * share * 0.99).diag.label != "STRAGGLER");
  // Tiny steps: the gap must also reach straggler_gap_ms (rank 0 computes what rank 1 waits).
  auto tiny = [](double gap) {
    std::vector<rank_report> reports;
    for (std::uint32_t r = 0; r < 2; ++r) {
      reports.push_back(report(rank_summary(r, 2, {{"compute", r ? 1 : 1 + gap}, {"wait", r ? gap : 0}})));
    }
    return combine_ranks(reports, 2, 30);
  };
  CHECK_FALSE(tiny(default_thresholds.straggler_gap_ms * 0.99).ranks->straggler);
  CHECK(tiny(default_thresholds.straggler_gap_ms * 1.01).ranks->straggler);
}

TEST_CASE("a rank that waits least but does no more of its own work is no straggler", "[ranks]") {
  // Unrelated runs read as one job: rank 0's steps are short and wait little; it holds no one.
  std::vector<rank_report> reports;
  reports.push_back(report(rank_summary(0, 2, {{"compute", 20}, {"wait", 1}})));
  reports.push_back(report(rank_summary(1, 2, {{"compute", 400}, {"wait", 300}})));
  const summary all = combine_ranks(reports, 2, 30);
  CHECK_FALSE(all.ranks->straggler);
  CHECK(all.diag.label != "STRAGGLER");
}

TEST_CASE("a rank's device wait (a trace's exposed NCCL time) is its wait at the collectives", "[ranks]") {
  // Two ranks of one GPU job read from traces: the same step, neither host waits; rank 0's
  // all-reduce kernels run 12 ms a step exposed (waiting for rank 1's data), rank 1's 0.5 ms.
  std::vector<rank_report> reports;
  reports.push_back(report(rank_summary(0, 2, {{"input", 2}, {"compute", 28}})));
  reports.push_back(report(rank_summary(1, 2, {{"input", 13.5}, {"compute", 16.5}})));
  reports[0].device_wait_ms = 12;
  reports[1].device_wait_ms = 0.5;
  const summary all = combine_ranks(reports, 2, 0, true);
  REQUIRE(all.ranks->straggler);
  CHECK(all.ranks->straggler->rank == 1);
  CHECK(all.ranks->straggler->phase == "input");
  CHECK(all.ranks->straggler->excess_ms == Approx(11.5));
  // device time is a column of its own: the host phases still sum to the step (28 + 2 = 30 ms)
  CHECK(all.ranks->rows[0].wait_ms == Approx(0).margin(1e-9));
  CHECK(all.ranks->rows[0].device_wait_ms == Approx(12));
  const rank_row& r0 = all.ranks->rows[0];
  CHECK(r0.input_ms + r0.h2d_ms + r0.compute_ms + r0.wait_ms + r0.other_ms == Approx(r0.step_mean_ms));
  CHECK(summary::from_json(all.json()).ranks->rows[0].device_wait_ms == Approx(12));
  CHECK_THAT(all.table(), Contains("GPU wait") && Contains("outside `wait` and GPU wait"));
  CHECK(all.ranks->from_files);
  CHECK(summary::from_json(all.json()).ranks->from_files);
  // the gain of the straggler's fix: its excess over the median rank, of the step; and each row's
  // own first gain (rank 1 alone is INPUT-BOUND by the host rules: 45% of its step)
  REQUIRE(all.diag.gains.size() == 1);
  CHECK(all.diag.gains[0].first == "rank 1");
  CHECK(all.diag.gains[0].second == Approx(11.5 / 30));
  CHECK_THAT(all.diag.advice.at(0), Contains("(up to 38% shorter steps)"));
  CHECK(all.ranks->rows[1].gain_cause == "input");
  CHECK(all.ranks->rows[1].gain == Approx(0.45));
  CHECK_THAT(all.table(), Contains("up to 45%, `input`"));
  const summary back = summary::from_json(all.json());
  CHECK(back.ranks->rows[1].gain_cause == "input");
  CHECK(back.diag.gains == all.diag.gains);
  CHECK_THAT(all.prometheus(), Contains("# TYPE steptrace_gain gauge") && Contains("steptrace_gain{rank=\"0\",cause=\"rank 1\"} 0.383"));
  const summary none = combine_ranks({report(rank_summary(0, 3, {{"compute", 5}}))}, 3, 0, true);
  CHECK_THAT(none.table(), Contains("missing: ranks 1, 2: no file among those read"));
}

TEST_CASE("balanced ranks: no STRAGGLER, and rank 0's own diagnosis stands", "[ranks]") {
  const auto reports = job({{{"input", 8}, {"compute", 12}}, {{"input", 8.1}, {"compute", 12}}});
  const summary all = combine_ranks(reports, 2, 30);
  CHECK_FALSE(all.ranks->straggler);
  CHECK(all.diag.label == reports[0].s.diag.label);
  CHECK(all.diag.label == "INPUT-BOUND");
}

TEST_CASE("missing ranks are named, and the rest are combined", "[ranks]") {
  auto reports = job({{{"compute", 10}}, {{"compute", 10}}, {{"compute", 10}}, {{"compute", 10}}});
  reports.erase(reports.begin() + 3);
  reports.erase(reports.begin() + 1);
  const summary all = combine_ranks(reports, 4, 7.5);
  CHECK(all.ranks->missing == std::vector<std::uint32_t>{1, 3});
  CHECK(all.ranks->rows.size() == 2);
  const std::string table = all.table();
  CHECK_THAT(table, Contains("2 of 4 gathered"));
  CHECK_THAT(table, Contains("missing: ranks 1, 3: no summary arrived within 7.500 s"));
}

TEST_CASE("the slowest rank per step comes from the waits of the same steps on every rank", "[ranks]") {
  auto reports = job({{{"compute", 10}}, {{"compute", 10}}, {{"compute", 10}}});
  // Rank 0 kept collectives 2..9, rank 1 5..11, rank 2 0..9 (it has done fewer): steps 5..9.
  reports[0].recent_wait_ms = {9, 9, 9, 0.1, 9, 9, 9, 9};
  reports[0].collectives = 10;
  reports[1].recent_wait_ms = {9, 9, 9, 9, 9, 0.2, 9};
  reports[1].collectives = 12;
  reports[2].recent_wait_ms = {9, 9, 9, 9, 9, 0.3, 0.3, 0.3, 9, 9};
  reports[2].collectives = 10;
  // Steps 5..9: rank 0 waits {0.1 at 5, 9...}; step 5 -> rank 0, 6 and 7 -> rank 2, 8 and 9 -> tie
  // broken by rank order among equal waits (9 everywhere): rank 0.
  const summary all = combine_ranks(reports, 3, 30);
  CHECK(all.ranks->steps_compared == 5);
  CHECK(all.ranks->rows[0].slowest_steps == 3);
  CHECK(all.ranks->rows[1].slowest_steps == 0);
  CHECK(all.ranks->rows[2].slowest_steps == 2);
  // A rank that kept none: nothing is compared.
  reports[1].recent_wait_ms.clear();
  CHECK(combine_ranks(reports, 3, 30).ranks->steps_compared == 0);
}

TEST_CASE("a combined summary survives JSON, and its table shows every rank", "[ranks]") {
  auto reports = job({{{"input", 1}, {"compute", 20}}, {{"input", 12}, {"compute", 20}}});
  reports[0].recent_wait_ms = {11, 11, 0.1};
  reports[0].collectives = 3;
  reports[1].recent_wait_ms = {0.2, 0.2, 0.2};
  reports[1].collectives = 3;
  const summary all = combine_ranks(reports, 2, 30);
  const summary back = summary::from_json(all.json());
  REQUIRE(back.ranks);
  REQUIRE(back.rank);
  CHECK(back.rank->host == "node-0");
  CHECK(back.rank->started_at == "2026-11-21T10:00:00Z");
  CHECK(back.ranks->rows.size() == 2);
  CHECK(back.ranks->rows[1].input_ms == Approx(12));
  CHECK(back.ranks->rows[1].slowest_steps == 2);
  CHECK(back.ranks->straggler->rank == 1);
  CHECK(back.ranks->straggler->phase == "input");
  CHECK(back.diag.label == "STRAGGLER");
  CHECK(back.json() == all.json());
  std::string bad = all.json();
  const std::string none = "\"missing\": []";
  bad.replace(bad.find(none), none.size(), "\"missing\": [7]");
  CHECK_THROWS_WITH(summary::from_json(bad), Contains("a missing rank must be a rank of the world, not 7"));
  const std::string table = all.table();
  CHECK_THAT(table, Contains("rank 0 of 2 on node-0 (local rank 0)"));
  CHECK_THAT(table, Contains("2 of 2 gathered"));
  CHECK_THAT(table, Contains("worst rank 1: 32.00 ms a step outside `wait`; the median rank 26.50 ms"));
  CHECK_THAT(table, Contains("STRAGGLER"));
}

TEST_CASE("a world a file claims is bounded: missing ranks are counted, listed up to a bound, and survive JSON", "[ranks]") {
  auto reports = job({{{"compute", 10}}, {{"compute", 10}}});
  const summary all = combine_ranks(reports, max_world_size, 7.5);
  CHECK(all.ranks->missing_count == max_world_size - 2);
  CHECK(all.ranks->missing.size() == missing_listed);
  CHECK(all.ranks->missing.front() == 2);
  const std::string table = all.table();
  CHECK_THAT(table, Contains("missing: ranks 2, 3, 4,") && Contains("(1048574 in all)"));
  CHECK(table.size() < 8000);  // a line, not 1 M numbers
  const std::string json = all.json();
  CHECK(json.size() < 64 * 1024);
  const summary back = summary::from_json(json);
  CHECK(back.ranks->missing_count == max_world_size - 2);
  CHECK(back.ranks->missing == all.ranks->missing);
  CHECK_THROWS_WITH(combine_ranks(reports, max_world_size + 1, 7.5), Contains("more than steptrace reads"));
  std::string forged = json;
  const std::string world = "\"world_size\": " + std::to_string(max_world_size);
  REQUIRE(forged.find(world) != std::string::npos);
  forged.replace(forged.find(world), world.size(), "\"world_size\": 4294967294");
  CHECK_THROWS_WITH(summary::from_json(forged), Contains("more than the ranks steptrace reads"));
}

TEST_CASE("combine_ranks refuses reports it cannot place", "[ranks]") {
  auto reports = job({{{"compute", 10}}, {{"compute", 10}}});
  CHECK_THROWS_WITH(combine_ranks(reports, 1, 30), Contains("rank 1 in a world of 1"));
  reports[1].s.rank->rank = 0;
  CHECK_THROWS_WITH(combine_ranks(reports, 2, 30), Contains("two summaries from rank 0"));
  reports[1].s.rank.reset();
  CHECK_THROWS_WITH(combine_ranks(reports, 2, 30), Contains("has no rank"));
  CHECK_THROWS_WITH(combine_ranks({}, 2, 30), Contains("no summaries"));
}

TEST_CASE("at exit, only rank 0 prints and writes a plain path; {rank} gives each rank its file", "[ranks][exit]") {
  const std::string dir = "/tmp/steptrace-ranks-" + std::to_string(getpid());
  auto exit_of = [&](std::optional<rank_info> who, const std::string& path) {
    config c;
    c.warmup_steps = 0;
    c.json_path = dir + path;
    c.print_at_exit = exit_print::always;
    tracer t(c);
    if (who) t.set_rank(*who);
    { scoped_step step(t); }
    return t.exit_report();
  };
  auto exists = [](const std::string& p) { return std::ifstream(p).good(); };
  REQUIRE(std::system(("mkdir -p " + dir).c_str()) == 0);
  CHECK(exit_of(rank_info{1, 2, 1, "h", ""}, "/plain.json").empty());  // rank 1: silent, no file
  CHECK_FALSE(exists(dir + "/plain.json"));
  CHECK_THAT(exit_of(rank_info{0, 2, 0, "h", ""}, "/plain.json"), Contains("rank 0 of 2 on h"));
  CHECK(exists(dir + "/plain.json"));
  CHECK(exit_of(rank_info{1, 2, 1, "h", ""}, "/run-{rank}.json").empty());
  CHECK(exists(dir + "/run-1.json"));
  CHECK_FALSE(exists(dir + "/run-0.json"));
  CHECK_THAT(exit_of(std::nullopt, "/alone-{rank}.json"), Contains("steptrace summary"));  // a lone process is rank 0
  CHECK(exists(dir + "/alone-0.json"));
  CHECK(summary::from_json(read_file(dir + "/run-1.json")).rank->rank == 1);
  REQUIRE(std::system(("rm -rf " + dir).c_str()) == 0);
}

TEST_CASE("the exit report gives its summary to `finish` and reports what comes back", "[ranks][exit]") {
  config c;
  c.warmup_steps = 0;
  c.print_at_exit = exit_print::always;
  tracer t(c);
  t.set_rank({0, 2, -1, "h", ""});
  { scoped_step step(t); }
  bool was_shown = true;
  const std::string text = t.exit_report([&](const summary& own, bool shown) {
    was_shown = shown;
    std::vector<rank_report> reports{{own, {}, 0}};
    return std::make_pair(combine_ranks(reports, 2, 3), false);
  });
  CHECK_FALSE(was_shown);
  CHECK_THAT(text, Contains("missing: rank 1: no summary arrived within 3.000 s"));
  CHECK(t.exit_report().empty());  // once only
  CHECK_THROWS_WITH(t.set_rank({2, 2, -1, "h", ""}), Contains("rank 2 is not below the world size 2"));
}

TEST_CASE("a rank's digest always passes the check rank 0 gives it, whatever the summary's shape", "[ranks]") {
  // Each shape a run makes. Before, a custom phase outside every built-in fell out of the digest
  // (its shares summed to 0.96, and rank 0 refused a healthy rank as if it were missing).
  const auto shapes = std::vector<std::pair<const char*, std::function<void(tracer&)>>>{
      {"nested phases", [](tracer& t) {
         scoped_step s(t);
         { scoped_phase in(t, "input"); scoped_phase decode(t, "decode"); }
         scoped_phase c(t, "compute");
         scoped_phase f(t, "forward");
       }},
      {"custom phases outside every built-in, 100 calls a step", [](tracer& t) {
         scoped_step s(t);
         for (int i = 0; i < 100; ++i) scoped_phase p(t, i % 2 ? "preprocess" : "(other names)");
         scoped_phase c(t, "compute");
       }},
      {"time set aside", [](tracer& t) {
         { scoped_step s(t); scoped_phase c(t, "compute"); }
         scoped_exclude v(t, "validation");
       }},
      {"requests", [](tracer& t) {
         request r(t);
         { request_phase p(r, register_phase("queue")); }
         { request_phase p(r, register_phase("tokenize")); }
         r.end();
       }},
      {"batches of requests", [](tracer& t) {
         {
           scoped_step s(t);
           t.set_batch_size(4);
           scoped_phase p(t, "batch.run");
         }
         request r(t);
         { request_phase p(r, register_phase("queue")); }
         r.end();
       }},
  };
  for (const auto& [name, body] : shapes) {
    INFO(name);
    config c = steptrace::testing::quiet();
    c.timeline_recent = 1024;
    tracer t(c);
    for (int i = 0; i < 20; ++i) body(t);
    summary s = t.summary();
    REQUIRE(s.steps > 0);
    s.rank = rank_info{1, 2, 1, "node-0", ""};
    const summary digest = rank_digest(s);
    double sum = 0;
    for (const phase_stats& p : digest.phases) sum += p.share;
    CHECK(sum == Approx(1).margin(1e-9));
    CHECK_NOTHROW(rank_digest(summary::from_json(digest.json())));  // what rank 0 runs on arrival
  }
}
