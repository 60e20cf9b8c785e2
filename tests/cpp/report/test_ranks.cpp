// combine_ranks on hand-made rank summaries: the rows, the missing ranks, the slowest rank per
// step, the JSON, the exit report and the digests. STRAGGLER itself: test_straggler.cpp.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <optional>

#include "helpers.hpp"
#include "rank_summaries.hpp"
#include "report/diagnosis/diagnosis.hpp"
#include "report/report.hpp"
#include "steptrace/request.hpp"
#include "steptrace/summary.hpp"
#include "steptrace/tracer.hpp"

using namespace steptrace;
using Catch::Matchers::Contains;
using steptrace::detail::default_thresholds;
using steptrace::testing::job;
using steptrace::testing::rank_summary;
using steptrace::testing::read_file;
using steptrace::testing::report;

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

TEST_CASE("a world a file claims is bounded: missing ranks are counted, listed up to a bound, and survive JSON",
          "[ranks]") {
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

TEST_CASE("the exit report in two halves: its summary out, the finished one written and printed", "[ranks][exit]") {
  config c;
  c.warmup_steps = 0;
  c.print_at_exit = exit_print::always;
  tracer t(c);
  t.set_rank({0, 2, -1, "h", ""});
  { scoped_step step(t); }
  const std::optional<tracer::exit_state> end = t.exit_summary();
  REQUIRE(end);
  CHECK_FALSE(end->seen);
  CHECK(end->recorded == 1);
  CHECK(end->to_finish());
  std::vector<rank_report> reports{{end->own, {}, 0}};
  const std::string text = t.exit_write(*end, combine_ranks(reports, 2, 3), false);
  CHECK_THAT(text, Contains("missing: rank 1: no summary arrived within 3.000 s"));
  CHECK_FALSE(t.exit_summary());  // once only
  CHECK(t.exit_report().empty());
  CHECK_THROWS_WITH(t.set_rank({2, 2, -1, "h", ""}), Contains("rank 2 is not below the world size 2"));
}

TEST_CASE("a rank's digest always passes the check rank 0 gives it, whatever the summary's shape", "[ranks]") {
  // Each shape a run makes. Before, a custom phase outside every built-in fell out of the digest
  // (its shares summed to 0.96, and rank 0 refused a healthy rank as if it were missing).
  const auto shapes = std::vector<std::pair<const char*, std::function<void(tracer&)>>>{
      {"nested phases",
       [](tracer& t) {
         scoped_step s(t);
         {
           scoped_phase in(t, "input");
           scoped_phase decode(t, "decode");
         }
         scoped_phase c(t, "compute");
         scoped_phase f(t, "forward");
       }},
      {"custom phases outside every built-in, 100 calls a step",
       [](tracer& t) {
         scoped_step s(t);
         for (int i = 0; i < 100; ++i) scoped_phase p(t, i % 2 ? "preprocess" : "(other names)");
         scoped_phase c(t, "compute");
       }},
      {"time set aside",
       [](tracer& t) {
         {
           scoped_step s(t);
           scoped_phase c(t, "compute");
         }
         scoped_exclude v(t, "validation");
       }},
      {"requests",
       [](tracer& t) {
         request r(t);
         { request_phase p(r, register_phase("queue")); }
         { request_phase p(r, register_phase("tokenize")); }
         r.end();
       }},
      {"batches of requests",
       [](tracer& t) {
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
