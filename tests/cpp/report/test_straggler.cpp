// STRAGGLER on hand-made rank summaries (rank_summaries.hpp): the rank, the phase its extra time
// is in and the named phase inside it, at and around the rule's thresholds (which come from the
// one place they live, report/diagnosis/diagnosis.hpp), and what the advice may name.
#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include "rank_summaries.hpp"
#include "report/diagnosis/diagnosis.hpp"
#include "steptrace/summary.hpp"

using namespace steptrace;
using Catch::Matchers::Contains;
using steptrace::detail::default_thresholds;
using steptrace::testing::job;
using steptrace::testing::rank_summary;
using steptrace::testing::report;

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
      reports.push_back(report(rank_summary(
          r, 4, {{"compute", 5}, {"load", 1}, {"data", data}, {"fwd", a}, {"bwd", b}, {"wait", 0.3 + 30 - step}},
          {{"load", "compute"}, {"data", "load"}, {"fwd", "compute"}, {"bwd", "compute"}, {"wait", "compute"}})));
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
  CHECK_THAT(all.prometheus(),
             Contains("# TYPE steptrace_gain gauge") && Contains("steptrace_gain{rank=\"0\",cause=\"rank 1\"} 0.383"));
  const summary none = combine_ranks({report(rank_summary(0, 3, {{"compute", 5}}))}, 3, 0, true);
  CHECK_THAT(none.table(), Contains("missing: ranks 1, 2: no file among those read"));
}

TEST_CASE("the advice names a GPU only in a job where a rank had one", "[ranks]") {
  auto reports = job({{{"compute", 20}}, {{"compute", 30}}, {{"compute", 20}}});
  const summary host = combine_ranks(reports, 3, 30);
  REQUIRE(host.ranks->straggler);
  CHECK(host.ranks->straggler->phase == "compute");
  CHECK_THAT(host.diag.advice.at(0), Contains("look at rank 1's host and its share of the work"));
  CHECK_THAT(host.diag.advice.at(0), !Contains("GPU"));
  reports[2].s.backend.cuda = true;  // one rank had CUDA (no device view: CUPTI off, say)
  const summary gpu = combine_ranks(reports, 3, 30);
  CHECK_THAT(gpu.diag.advice.at(0),
             Contains("look at rank 1's device and its share of the work: a slower or throttled GPU"));
  reports[2].s.backend.cuda = false;
  reports[0].s.gpu.emplace();  // or a device view
  CHECK_THAT(combine_ranks(reports, 3, 30).diag.advice.at(0), Contains("throttled GPU"));
}

TEST_CASE("a straggler's within words never call the part more than the whole within their rounding", "[ranks]") {
  straggler_info s;
  s.rank = 2;
  s.phase = "input";
  s.excess_ms = 7.5;
  s.within = "decode";
  s.within_ms = 7.52;  // the same to the words' 0.05 ms: not "alone: 7.5 ms more" than 7.50
  CHECK(straggler_within_words(s) == ", 7.5 ms of it in `decode`");
  s.within_ms = 9.0;  // the rest of `input` faster than on the others
  CHECK(straggler_within_words(s) == " (`decode` alone: 9.0 ms more)");
  s.within_ms = 3.0;
  CHECK(straggler_within_words(s) == ", 3.0 ms of it in `decode`");
  s.within.clear();
  CHECK(straggler_within_words(s).empty());
}
