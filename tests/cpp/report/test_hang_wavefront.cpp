// The job's view of a hang (hang.hpp's window_hang) from the ranks' live rows: each row made by
// live_row from a window whose open step and last collectives are set by hand, so the truth (who
// never entered which call, who is gone) is known. No clock.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "report/report.hpp"
#include "steptrace/hang.hpp"
#include "steptrace/summary.hpp"

using namespace steptrace;
using Catch::Matchers::Contains;

namespace {

// A rank's window: `steps` counted, a step open `open_s` in `phase`, its last collective of group
// "0" (`kind` #seq, left or not; seq < 0: none marked).
std::string row(std::uint32_t rank, std::uint32_t world, const std::string& phase, double open_s, bool suspected,
                const std::string& kind = "all_reduce", long seq = 10, bool left = false, std::uint64_t steps = 0) {
  summary s;
  s.steps = steps;
  if (steps > 0) {
    s.step_ms = stat_ms{10.0 * steps, 10, 10, 10, 10, 10};
    s.phases.push_back(phase_stats{"compute", stat_ms{10.0 * steps, 10, 10, 10, 10, 10}, 1.0, steps});
  }
  s.rank = rank_info{rank, world, rank, "node-a", ""};
  hang_view& h = s.hang.emplace();
  h.suspected = suspected;
  h.hang_after_s = 3;
  h.threads.push_back({0, 41, open_s, {{"compute", open_s}}});
  if (phase != "compute") h.threads.back().phases.push_back({phase, open_s - 0.1});
  if (phase == "-") h.threads.back().phases.clear();
  if (seq >= 0)
    h.collectives.push_back({"0", kind, static_cast<std::uint64_t>(seq), open_s * 0.9, left ? open_s * 0.8 : -1.0});
  detail::complete(s);
  return live_row(s);
}

std::vector<std::uint32_t> ranks_of(const std::vector<hang_rank>& list) {
  std::vector<std::uint32_t> out;
  for (const hang_rank& r : list) out.push_back(r.rank);
  return out;
}

}  // namespace

TEST_CASE("A rank stuck in input before the collective the others wait in is the culprit, with its phase", "[hang]") {
  // rank 2 left all_reduce #9 and never entered #10; the others wait inside #10
  const std::vector<std::string> rows = {row(0, 4, "compute", 5, true), row(1, 4, "compute", 5, true),
                                         row(2, 4, "input", 5.2, true, "all_reduce", 9, true),
                                         row(3, 4, "compute", 5, true)};
  const job_hang h = window_hang(rows);
  REQUIRE(h.hang);
  CHECK(h.kind == "all_reduce");
  CHECK(h.seq == 10);
  CHECK(ranks_of(h.culprits) == std::vector<std::uint32_t>{2});
  CHECK(h.culprits[0].phase == "input");
  CHECK(ranks_of(h.waiting) == std::vector<std::uint32_t>{0, 1, 3});
  CHECK(h.waiting[0].in_collective);
  CHECK_THAT(h.words, Contains("rank 2 never entered all_reduce #10 of group 0: stuck in `input`"));
  CHECK_THAT(h.words, Contains("ranks 0, 1, 3 wait inside all_reduce #10"));
  CHECK_THAT(h.words, Contains("Read rank 2's stack (its hang report) first"));
  CHECK_THAT(h.words, Contains("DataLoader worker"));
}

TEST_CASE("A rank at the same number in another kind of collective is named mismatched, with both kinds", "[hang]") {
  const std::vector<std::string> rows = {row(0, 4, "compute", 5, true), row(1, 4, "compute", 5, true),
                                         row(2, 4, "compute", 5, true), row(3, 4, "compute", 5, true, "broadcast", 10)};
  const job_hang h = window_hang(rows);
  REQUIRE(h.hang);
  CHECK(h.kind == "all_reduce");
  CHECK(ranks_of(h.mismatched) == std::vector<std::uint32_t>{3});
  CHECK(h.culprits.empty());
  CHECK_THAT(h.words, Contains("rank 3 called broadcast #10 where ranks 0, 1, 2 called all_reduce #10"));
  CHECK_THAT(h.words, Contains("Read rank 3's stack (its hang report) first"));
}

TEST_CASE("A rank gone is named with its last row's step and phase, exited or silent", "[hang]") {
  const std::vector<std::string> rows = {row(0, 4, "wait", 5, true), row(1, 4, "wait", 5, true),
                                         row(2, 4, "wait", 5, true)};
  const std::string last = row(3, 4, "compute", 0.2, false, "all_reduce", 9, true);
  job_hang h = window_hang(rows, {{3, last, true}});
  REQUIRE(h.hang);
  CHECK(ranks_of(h.gone) == std::vector<std::uint32_t>{3});
  CHECK(h.gone[0].exited);
  CHECK_THAT(h.words, Contains("rank 3 is gone (its process exited); its last row: step 41, in `compute`"));
  CHECK_THAT(h.words, Contains("Read rank 3's log first"));
  h = window_hang(rows, {{3, last, false}});
  CHECK_THAT(h.words, Contains("rank 3 is gone (no row since: exited, or stuck holding the interpreter)"));
  h = window_hang(rows, {{3, "", false}});  // never wrote a row
  CHECK_THAT(h.words, Contains("its last row had no step open"));
}

TEST_CASE("No hang while a rank still counts steps or none is past hang_after", "[hang]") {
  CHECK_FALSE(
      window_hang({row(0, 2, "compute", 5, true), row(1, 2, "compute", 0.01, false, "all_reduce", 10, true, 40)}).hang);
  CHECK_FALSE(window_hang({row(0, 2, "compute", 2, false), row(1, 2, "input", 2, false, "all_reduce", 9, true)}).hang);
}

TEST_CASE("Every rank inside one call: the collective itself is named; no marks: the odd phase out", "[hang]") {
  job_hang h =
      window_hang({row(0, 3, "compute", 5, true), row(1, 3, "compute", 5, true), row(2, 3, "compute", 5, true)});
  REQUIRE(h.hang);
  CHECK(h.culprits.empty());
  CHECK_THAT(h.words, Contains("the collective itself does not complete"));
  h = window_hang(
      {row(0, 3, "wait", 5, true, "", -1), row(1, 3, "input", 5, true, "", -1), row(2, 3, "wait", 5, true, "", -1)});
  REQUIRE(h.hang);
  CHECK(ranks_of(h.culprits) == std::vector<std::uint32_t>{1});
  CHECK_THAT(h.words, Contains("rank 1 is stuck in `input`"));
}

TEST_CASE("A row's open step survives names with spaces and bytes; a bad one is refused, named", "[hang]") {
  auto own = [](std::uint32_t rank, const std::string& phase, std::uint64_t seq) {
    summary s;
    s.rank = rank_info{rank, 2, rank, "host with space", ""};
    hang_view& h = s.hang.emplace();
    h.suspected = true;
    h.threads.push_back({0, 3, 9, {{phase, 9}}});
    h.collectives.push_back({"tp group", "all to all", seq, 8, -1});
    detail::complete(s);
    return live_row(s);
  };
  const std::string stuck = own(0, "load \xff shard", 4);
  const job_hang j = window_hang({stuck, own(1, "compute", 5)});
  REQUIRE(j.hang);
  REQUIRE(j.culprits.size() == 1);
  CHECK(j.culprits[0].rank == 0);
  CHECK(j.culprits[0].phase == "load \xff shard");
  CHECK(j.culprits[0].group == "tp group");
  CHECK(j.kind == "all to all");
  CHECK_THROWS_WITH(window_hang({stuck + " h x"}), Contains("window_hang: a row that is not one"));
}
