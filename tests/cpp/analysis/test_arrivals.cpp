// The ranks' arrival at the collectives (analysis/arrivals.hpp) on synthetic calls whose truth is
// set by construction: each collective ends at one instant, each rank on its own clock (a fixed
// offset), the late rank starting its call a known time after the others.
#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "analysis/arrivals.hpp"
#include "rank_summaries.hpp"
#include "steptrace/summary.hpp"

using namespace steptrace;
using steptrace::detail::rank_calls;

namespace {

// `world` ranks, `calls` all-reduces 10 ms apart, each 1 ms of transfer after the last arrival;
// rank `late` arrives `late_ms` after the others at every call but those in `on_time`; every
// other arrival jitters by up to 0.2 ms, and each call's start by up to 3 ms (steps vary). Rank
// r's clock is r * `clock_us` ahead.
std::vector<rank_calls> job_calls(std::uint32_t world, std::uint32_t calls, int late, double late_ms,
                                  std::vector<std::uint32_t> on_time = {}, bool numbered = true, double clock_us = 1e9,
                                  double step_jitter_us = 3e3) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> jitter(0, 200), step(0, step_jitter_us);
  std::vector<rank_calls> out(world);
  for (std::uint32_t r = 0; r < world; ++r) out[r].rank = r, out[r].numbered = numbered;
  for (std::uint32_t k = 0; k < calls; ++k) {
    const double t0 = 4e4 * k + step(rng);  // the others arrive from here
    std::vector<double> arrive(world);
    for (std::uint32_t r = 0; r < world; ++r) arrive[r] = t0 + jitter(rng);
    const bool is_late = late >= 0 && std::find(on_time.begin(), on_time.end(), k) == on_time.end();
    if (is_late) arrive[static_cast<std::uint32_t>(late)] = t0 + 200 + 1e3 * late_ms;
    const double end = *std::max_element(arrive.begin(), arrive.end()) + 1e3;
    for (std::uint32_t r = 0; r < world; ++r) {
      const double clock = clock_us * r;
      out[r].calls.push_back({"0", "all-reduce", k, arrive[r] + clock, end + clock, r == 2 ? "backward" : "compute"});
    }
  }
  return out;
}

}  // namespace

TEST_CASE("the rank that starts its collectives last is named, with its lateness and the phase before", "[arrivals]") {
  const auto v = detail::read_arrivals(job_calls(4, 40, 2, 27, {5, 17}));
  REQUIRE(v);
  CHECK(v->matched_by == "sequence");
  CHECK(v->compared == 40);
  const arrival_rank* last = detail::most_often_last(*v);
  REQUIRE(last != nullptr);
  CHECK(last->rank == 2);
  CHECK(last->last == 38);
  // lateness: its arrival after the median of the others' (which jitter within 0.2 ms of t0)
  CHECK(last->late_ms == Approx(27.1).margin(0.1));
  CHECK(last->before == "backward");
  REQUIRE(v->collectives.size() == 40);
  CHECK(v->collectives[5].last_rank != 2);
  CHECK(v->collectives[6].last_rank == 2);
}

TEST_CASE("a balanced job names no one: each rank is last about as often as the others", "[arrivals]") {
  const auto v = detail::read_arrivals(job_calls(4, 200, -1, 0));
  REQUIRE(v);
  CHECK(detail::most_often_last(*v) == nullptr);
  for (const arrival_rank& r : v->ranks) CHECK(r.late_ms < 0.2);
}

TEST_CASE("without sequence numbers, calls match by their ends, on clocks far apart, when traces began or ended apart",
          "[arrivals]") {
  auto ranks = job_calls(4, 40, 2, 27, {}, false);
  ranks[1].calls.erase(ranks[1].calls.begin(), ranks[1].calls.begin() + 3);  // its trace began 3 calls later
  ranks[3].calls.resize(35);                                                 // and this one ended 5 early
  for (auto& r : ranks) {
    for (std::size_t i = 0; i < r.calls.size(); ++i) r.calls[i].seq = i;  // numbered by their place only
  }
  const auto v = detail::read_arrivals(ranks);
  REQUIRE(v);
  CHECK(v->matched_by == "end");
  CHECK(v->compared == 32);  // calls 3..34 are on every rank
  const arrival_rank* last = detail::most_often_last(*v);
  REQUIRE(last != nullptr);
  CHECK(last->rank == 2);
  CHECK(last->last == 32);
  CHECK(last->late_ms == Approx(27.1).margin(0.1));
}

TEST_CASE("a steady period: calls match by their ends where the clocks agree (one host, or synchronised hosts)",
          "[arrivals]") {
  auto ranks = job_calls(3, 30, 1, 5, {}, false, 3.0, 0.0);  // every step alike: any shift keeps one offset
  ranks[2].calls.erase(ranks[2].calls.begin(), ranks[2].calls.begin() + 2);
  for (auto& r : ranks) {
    for (std::size_t i = 0; i < r.calls.size(); ++i) r.calls[i].seq = i;
  }
  const auto v = detail::read_arrivals(ranks);
  REQUIRE(v);
  CHECK(v->compared == 28);
  const arrival_rank* last = detail::most_often_last(*v);
  REQUIRE(last != nullptr);
  CHECK(last->rank == 1);
  CHECK(last->last == 28);
}

TEST_CASE("fewer than two ranks with calls, or no call in common, read no arrivals", "[arrivals]") {
  auto ranks = job_calls(2, 5, -1, 0);
  ranks[1].calls.clear();
  CHECK_FALSE(detail::read_arrivals(ranks));
  ranks = job_calls(2, 5, -1, 0);
  for (auto& c : ranks[1].calls) c.group = "other group";
  CHECK_FALSE(detail::read_arrivals(ranks));
}

TEST_CASE("a job whose hosts never wait: STRAGGLER from the collective kernels' arrival, the others' wait its gain",
          "[arrivals][ranks]") {
  // Every rank's host phases alike (NCCL: the host never blocks); only the calls show rank 2 late.
  std::vector<rank_report> reports;
  const auto calls = job_calls(4, 40, 2, 27);
  for (std::uint32_t r = 0; r < 4; ++r) {
    rank_report rep = testing::report(testing::rank_summary(r, 4, {{"input", 1}, {"compute", 60}}));
    rep.device_wait_ms = r == 2 ? 1.0 : 28.0;  // the others' collective kernels ran long waiting for it
    rep.calls = calls[r].calls;
    rep.calls_numbered = true;
    reports.push_back(std::move(rep));
  }
  const summary all = combine_ranks(reports, 4, 0, true);
  REQUIRE(all.ranks);
  REQUIRE(all.ranks->straggler);
  const straggler_info& s = *all.ranks->straggler;
  CHECK(s.rank == 2);
  CHECK(s.arrivals_last == 40);
  CHECK(s.arrivals_compared == 40);
  CHECK(s.arrival_late_ms == Approx(27.1).margin(0.1));
  CHECK(s.before == "backward");
  CHECK_THAT(all.diag.evidence, Catch::Matchers::Contains("arrived last at 40 of the 40 collectives"));
  CHECK_THAT(all.diag.advice.front(), Catch::Matchers::Contains("after `backward`"));
  REQUIRE(all.diag.gains.size() == 1);
  CHECK(all.diag.gains.front().second == Approx(27.0 / 61).margin(0.01));  // the others' wait for it, of the step
  CHECK_THAT(all.table(), Catch::Matchers::Contains("arrival at 40 collectives (matched by sequence"));
  const summary back = summary::from_json(all.json());
  REQUIRE(back.ranks->arrivals);
  CHECK(back.ranks->arrivals->compared == 40);
  CHECK(back.ranks->straggler->arrivals_last == 40);
  CHECK(back.ranks->straggler->before == "backward");
}

TEST_CASE("a rank last by chance a little more often than the other is no straggler: its lateness nets out",
          "[arrivals][ranks]") {
  // Two ranks, 40 all-reduces, 20 ms steps of the same work; rank 1 happens to be last at 24 of
  // them and rank 0 at 16, each by 3 ms (a busy machine's preemptions): more than half, well over
  // 0.5 ms, but it nets 1.2 ms a step, under 10% of the step.
  std::vector<rank_report> reports;
  for (std::uint32_t r = 0; r < 2; ++r) {
    rank_report rep = testing::report(testing::rank_summary(r, 2, {{"compute", 18}, {"wait", 2}}));
    for (std::uint64_t k = 0; k < 40; ++k) {
      const bool late = (k < 24) == (r == 1);
      rep.calls.push_back({"0", "all-reduce", k, 1e5 * k + (late ? 3e3 : 0), 1e5 * k + 4e3, "compute"});
    }
    rep.calls_numbered = true;
    reports.push_back(std::move(rep));
  }
  const summary all = combine_ranks(reports, 2, 0, true);
  REQUIRE(all.ranks);
  REQUIRE(all.ranks->arrivals);
  CHECK(detail::most_often_last(*all.ranks->arrivals) != nullptr);  // the count alone would name rank 1
  CHECK_FALSE(all.ranks->straggler);
}

TEST_CASE("a loaded host: ranks leave each call milliseconds apart, and the calls still match by their ends",
          "[arrivals]") {
  // Three ranks on one host (their clocks agree), 5 all-reduces about 45 ms apart, rank 2 arriving
  // 40 ms after the others. A busy machine wakes each rank's backend thread up to 5 ms after the
  // call ended (a CI runner's preemption): no two ends agree within microseconds any more. Every
  // one of 200 such jobs must still match all 5 calls and name rank 2 (before, 1 in 30 matched 2).
  int matched_all = 0;
  for (std::uint32_t seed = 0; seed < 200; ++seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> arrive_jitter(0, 200), step(0, 5e3), wake(0, 5e3);
    std::vector<rank_calls> ranks(3);
    for (std::uint32_t r = 0; r < 3; ++r) ranks[r].rank = r;
    for (std::uint32_t k = 0; k < 5; ++k) {
      const double t0 = 4.5e4 * k + step(rng);
      const double last = t0 + 4e4;
      for (std::uint32_t r = 0; r < 3; ++r) {
        const double start = r == 2 ? last : t0 + arrive_jitter(rng);
        ranks[r].calls.push_back({"", "all-reduce", k, start, last + 1e3 + wake(rng), "compute"});
      }
    }
    const auto v = detail::read_arrivals(ranks);
    const arrival_rank* named = v ? detail::most_often_last(*v) : nullptr;
    if (v && v->compared == 5 && named != nullptr && named->rank == 2) ++matched_all;
  }
  CHECK(matched_all == 200);
}
