// A collective's time in two parts (analysis/arrivals.hpp): each rank's wait for the last to
// arrive, and the transfer after it, on calls whose truth is set by construction; and the
// STRAGGLER verdict held to them (report/diagnosis/straggler.hpp).
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "analysis/arrivals.hpp"
#include "rank_summaries.hpp"
#include "report/diagnosis/straggler.hpp"
#include "steptrace/summary.hpp"

using namespace steptrace;
using Catch::Matchers::Contains;

namespace {

// Two or more ranks, 100 steps of `step_ms` (rank r blocked `host_wait_ms[r]` of it), one
// collective a step. Rank r arrives `arrive_ms[r]` after the call opens (plus `once_ms` at call
// `once_at` for rank `once`, which delays every later call); the data moves `transfer_ms` after
// the last arrival, and every rank leaves then. Each rank's clock runs r seconds ahead; the calls
// carry no numbers, so they match by their ends.
std::vector<rank_report> split_job(std::vector<double> arrive_ms, double transfer_ms, double step_ms,
                                   std::vector<double> host_wait_ms, int once = -1, double once_ms = 0,
                                   std::uint64_t once_at = 0) {
  const auto world = static_cast<std::uint32_t>(arrive_ms.size());
  std::vector<rank_report> out;
  for (std::uint32_t r = 0; r < world; ++r) {
    rank_report rep = testing::report(
        testing::rank_summary(r, world, {{"compute", step_ms - host_wait_ms[r]}, {"wait", host_wait_ms[r]}}));
    out.push_back(std::move(rep));
  }
  for (std::uint64_t k = 0; k < 100; ++k) {  // rank_summary's 100 steps
    const double open = 1e3 * step_ms * static_cast<double>(k) + (once >= 0 && k > once_at ? 1e3 * once_ms : 0.0);
    std::vector<double> arrive(world);
    double last = 0;
    for (std::uint32_t r = 0; r < world; ++r) {
      arrive[r] = open + 1e3 * arrive_ms[r] + (static_cast<int>(r) == once && k == once_at ? 1e3 * once_ms : 0.0);
      last = std::max(last, arrive[r]);
    }
    const double end = last + 1e3 * transfer_ms;
    for (std::uint32_t r = 0; r < world; ++r) {
      out[r].calls.push_back({"0", "all-gather", k, arrive[r] + 1e6 * r, end + 1e6 * r, "forward"});
    }
  }
  return out;
}

const collective_split& split_of(const arrival_view& a, std::uint32_t rank) {
  for (const collective_split& s : a.split) {
    if (s.rank == rank) return s;
  }
  FAIL("rank " << rank << " is not in the split");
  return a.split.front();
}

}  // namespace

TEST_CASE("a collective that starts together on every rank is all transfer: no straggler, however long it is",
          "[split][ranks]") {
  // A tensor-parallel forward's 441 ms all-gather: both ranks arrive together (rank 1 0.1 ms after
  // rank 0), and the host of rank 0 blocks longer in `wait` (it syncs on the gather; rank 1 does
  // not), so the host waits alone would name rank 1.
  const auto reports = split_job({0, 0.1}, 441, 500, {441, 5});
  const summary all = combine_ranks(reports, 2, 0, true);
  REQUIRE(all.ranks);
  REQUIRE(all.ranks->arrivals);
  const arrival_view& a = *all.ranks->arrivals;
  CHECK(a.compared == 100);
  CHECK(a.transfer_ms == Approx(441).margin(0.01));
  CHECK(split_of(a, 0).wait_ms == Approx(0.1).margin(0.01));
  CHECK(split_of(a, 1).wait_ms == Approx(0).margin(0.01));
  CHECK(a.collectives.front().transfer_ms == Approx(441).margin(0.01));
  CHECK_FALSE(all.ranks->straggler);  // the rule on host waits alone names rank 1: the arrivals refute it
  CHECK(all.diag.label != "STRAGGLER");
  CHECK_THAT(all.ranks->straggler_refuted, Contains("rank 1 waits least at the collectives"));
  CHECK_THAT(all.ranks->straggler_refuted, Contains("the others do not wait for it"));
  CHECK_THAT(all.diag.evidence, Contains("the collectives move data 441.00 ms, which every rank pays"));
  const std::string table = all.table();
  CHECK_THAT(table, Contains("collective time: of each step, the collectives move data 441.00 ms"));
  CHECK_THAT(table, Contains("no straggler: rank 1 waits least"));
  const summary back = summary::from_json(all.json());
  REQUIRE(back.ranks->arrivals);
  CHECK(back.ranks->arrivals->transfer_ms == Approx(441).margin(0.01));
  CHECK(back.ranks->arrivals->split.size() == 2);
  CHECK(back.ranks->straggler_refuted == all.ranks->straggler_refuted);
  CHECK(back.json() == all.json());
}

TEST_CASE("a rank late at every call: its lateness is the others' wait, the transfer is apart, STRAGGLER stands",
          "[split][ranks]") {
  // 4 ranks, 100 ms steps; rank 2 arrives 30 ms after the others at each call, then the data moves 5 ms.
  const auto reports = split_job({0, 0.2, 30, 0.1}, 5, 100, {35, 34.8, 5, 34.9});
  const summary all = combine_ranks(reports, 4, 0, true);
  REQUIRE(all.ranks);
  REQUIRE(all.ranks->arrivals);
  const arrival_view& a = *all.ranks->arrivals;
  CHECK(a.transfer_ms == Approx(5).margin(0.01));
  CHECK(split_of(a, 0).wait_ms == Approx(30).margin(0.01));
  CHECK(split_of(a, 2).wait_ms == Approx(0).margin(0.01));
  REQUIRE(all.ranks->straggler);
  CHECK(all.ranks->straggler->rank == 2);
  CHECK(all.diag.label == "STRAGGLER");
  CHECK(all.ranks->straggler_refuted.empty());
  CHECK_THAT(detail::split_words(a), Contains("the median rank waits 29.85 ms for the last to arrive"));
}

TEST_CASE("a rank late at one call only is a one-off, not the straggler the summed waits make it", "[split][ranks]") {
  // Rank 1 stalls 2 s once (call 7 of 100), on time otherwise: summed over the run the others' host
  // waits (22 ms a step on average, of 100 ms steps) name it; its arrivals say one call holds its lateness.
  const auto reports = split_job({0, 0.1, 0.05}, 2, 100, {22, 2, 22}, 1, 2000, 7);
  const summary all = combine_ranks(reports, 3, 0, true);
  REQUIRE(all.ranks);
  CHECK_FALSE(all.ranks->straggler);
  CHECK_THAT(all.ranks->straggler_refuted, Contains("its lateness is one call's: 2000.1 ms at call 7 of the 100"));
  CHECK(all.diag.label != "STRAGGLER");
  REQUIRE_FALSE(all.diag.hypotheses.empty());
  CHECK(all.diag.hypotheses.back().fix == "a straggler's fix");
  CHECK_FALSE(all.diag.hypotheses.back().holds);
}

TEST_CASE("a rank last at every call whose lateness is the first call's is start-up, not a straggler",
          "[split][ranks]") {
  // Rank 1 arrives 0.6 ms after the others at each call, and 2 s late at the first (its first
  // compile): over the run it nets 20.6 ms a call of 100 ms steps, all but 0.6 of it that one call.
  const auto reports = split_job({0, 0.6, 0}, 2, 100, {21, 1, 21}, 1, 2000, 0);
  const summary all = combine_ranks(reports, 3, 0, true);
  REQUIRE(all.ranks);
  REQUIRE(all.ranks->arrivals);
  CHECK_FALSE(all.ranks->straggler);
  CHECK(all.diag.label != "STRAGGLER");
  CHECK_THAT(all.ranks->straggler_refuted, Contains("rank 1 arrived last at 100 of the 100 collectives"));
  CHECK_THAT(all.ranks->straggler_refuted, Contains("its lateness is the first call's: 2000.6 ms at call 0"));
  CHECK_THAT(all.ranks->straggler_refuted, Contains("start-up"));
  // the same lateness every call is a straggler: the first call's share is what tells them apart
  const auto chronic = split_job({0, 20.6, 0}, 2, 100, {21, 1, 21});
  const summary held = combine_ranks(chronic, 3, 0, true);
  REQUIRE(held.ranks);
  REQUIRE(held.ranks->straggler);
  CHECK(held.ranks->straggler->rank == 1);
  CHECK(held.diag.label == "STRAGGLER");
}

TEST_CASE("a rank whose main thread waits for a core is said to, in words", "[split][ranks]") {
  node_health own, other;
  own.others_cpu_share = 0.6;
  own.involuntary_per_s = 3083;
  other.others_cpu_share = 0.05;
  other.involuntary_per_s = 813;
  const std::string words = detail::node_departures(own, {other, other, other});
  CHECK_THAT(words, Contains("its main thread waited for a core 60% of the time against 5% median"));
  CHECK_THAT(words, Contains(": it waits for a core, other processes share its CPU"));
  CHECK_THAT(detail::node_departures(other, {other, other}), !Contains("waits for a core"));
}
