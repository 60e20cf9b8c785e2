// The job's timeline of slow steps (job_timeline.hpp): which ranks and steps it keeps, the median
// rank, and the alignment on the collectives' ends. Hand-made timelines on one true clock: each
// rank's times are the true ones less its own origin, so the right move of each rank is known.
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "steptrace/job_timeline.hpp"
#include "steptrace/summary.hpp"

using namespace steptrace;
using json = nlohmann::json;

namespace {

// Step k of every rank runs [100k, 100k + 95) true ms: compute to 60 (the slow one's to 85),
// then the collective to 90, shared by every rank. `extra` makes a step of a rank longer at its
// start (it began earlier: a slow input), so its step_ms grows and its collective end does not.
struct made {
  std::uint32_t rank;
  double origin_ms;                       // the rank's first instant on the true clock
  std::map<std::uint64_t, double> extra;  // step: ms more
  double p50 = 95;
  bool host_collectives = true;
  std::map<std::uint64_t, double> kernel_end;  // step: a collective kernel ending there (true ms)
};

summary rank_summary(const made& m, std::uint32_t world, std::uint64_t steps = 10) {
  summary s;
  s.steps = steps;
  s.step_ms.p50 = m.p50;
  s.rank = rank_info{m.rank, world, -1, "node", ""};
  for (std::uint64_t k = 0; k < steps; ++k) {
    const double t0 = 100.0 * k - m.origin_ms;
    const double extra = m.extra.count(k) ? m.extra.at(k) : 0.0;
    timeline_step st;
    st.index = k;
    st.begin_ms = t0 - extra;
    st.end_ms = t0 + 95;
    st.step_ms = st.end_ms - st.begin_ms;
    st.phases.push_back({"compute", st.begin_ms, t0 + 60, 0});
    if (m.host_collectives) {
      st.phases.push_back({"wait", t0 + 60, t0 + 90, 0});
      st.phases.push_back({"collective", t0 + 60, t0 + 90, 1});
    }
    if (m.kernel_end.count(k)) {
      st.device_known = true;
      st.device.push_back({"kernel", 0, 1, 7, t0 + 10, m.kernel_end.at(k) - m.origin_ms, 0, true});
    }
    s.timeline.steps.push_back(st);
  }
  return s;
}

json trace_of(const job_timeline& job) { return json::parse(job.trace()); }

// Each (rank, step)'s slice as the trace has it, and its `collective` phase's end, in true ms
// less the median rank's origin.
struct seen_step {
  double begin_ms, end_ms, collective_end_ms = NAN;
};
std::map<std::pair<std::uint32_t, std::uint64_t>, seen_step> steps_in(const json& doc) {
  std::map<std::pair<std::uint32_t, std::uint64_t>, seen_step> out;
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] != "X" || e["cat"].get<std::string>().rfind("step", 0) != 0) continue;
    const std::uint32_t rank = (e["pid"].get<std::uint32_t>() - 1) / 2;
    out[{rank, e["args"]["index"].get<std::uint64_t>()}] = {e["ts"].get<double>() / 1e3,
                                                            (e["ts"].get<double>() + e["dur"].get<double>()) / 1e3};
  }
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] != "X" || e["name"] != "collective") continue;
    const std::uint32_t rank = (e["pid"].get<std::uint32_t>() - 1) / 2;
    const double begin = e["ts"].get<double>() / 1e3, end = begin + e["dur"].get<double>() / 1e3;
    for (auto& [key, st] : out) {
      if (key.first == rank && begin >= st.begin_ms - 1e-9 && end <= st.end_ms + 1e-9) st.collective_end_ms = end;
    }
  }
  return out;
}

}  // namespace

TEST_CASE(
    "a job's timeline keeps each rank's slowest steps and the median rank's same steps, aligned on the collectives",
    "[job_timeline]") {
  // Four ranks whose clocks start apart; rank 2 is slow at steps 3, 6 and 8, rank 0 at step 1.
  const std::vector<made> ranks = {
      {0, 0.0, {{1, 30}}, 96},
      {1, 1234.5, {{5, 2}}, 95},
      {2, -777.25, {{3, 40}, {6, 80}, {8, 60}}, 130},
      {3, 50.0, {{9, 1}}, 97},
  };
  job_timeline job;
  for (const made& m : ranks) job.add(rank_summary(m, 4));
  // p50s 96, 95, 130, 97: sorted 95 (1), 96 (0), 97 (3), 130 (2): the lower middle is rank 0.
  REQUIRE(job.reference_rank() == 0u);
  const std::vector<std::uint64_t> want = job.wanted();
  REQUIRE(want.front() == 6);  // the longest step of the job first
  REQUIRE(std::set<std::uint64_t>(want.begin(), want.end()).count(3));
  job.set_reference(rank_summary(ranks[0], 4));
  const json doc = trace_of(job);
  const auto seen = steps_in(doc);

  // Rank 2's slowest three are there, and not its others.
  for (std::uint64_t k : {3, 6, 8}) REQUIRE(seen.count({2, k}));
  REQUIRE_FALSE(seen.count({2, 0}));
  // The median rank holds every step wanted: its own and the others' slowest.
  for (std::uint64_t k : want) REQUIRE(seen.count({0, k}));
  // Aligned: every rank's collectives end where the median rank's do, and on the true clock
  // (rank 0's origin is 0): step k's collective ends at 100k + 90, whatever the rank's origin.
  for (const auto& [key, st] : seen) {
    INFO("rank " << key.first << " step " << key.second);
    REQUIRE(st.collective_end_ms == Approx(100.0 * key.second + 90).margin(1e-6));
  }
  // The slow step shows its length on the slow rank: it began 80 ms before the median rank's.
  REQUIRE(seen.at({0, 6}).begin_ms - seen.at({2, 6}).begin_ms == Approx(80).margin(1e-6));
  const json& other = doc["otherData"];
  REQUIRE(other["median_rank"] == 0);
  REQUIRE(other["median_rank_lacks"].empty());
  for (const json& row : other["ranks"]) {
    const std::uint32_t r = row["rank"];
    if (r == 0) continue;
    REQUIRE(row["aligned_on"] == "host collectives");
    REQUIRE(row["shift_ms"].get<double>() == Approx(ranks[r].origin_ms).margin(1e-6));
  }
  // One host and one device process a rank, named, ordered by rank.
  std::set<std::string> names;
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") names.insert(e["args"]["name"].get<std::string>());
  }
  REQUIRE(names.count("steptrace rank 0 (median rank) host"));
  REQUIRE(names.count("steptrace rank 2 GPU"));
}

TEST_CASE("a collective's kernel end is the anchor before a host span, and a step's end without either",
          "[job_timeline]") {
  // The kernels end 3 ms after the host collective (NCCL's host call returns at launch): the
  // kernels' ends are what the ranks share.
  made a{0, 0.0, {{2, 10}}, 95, true, {}}, b{1, 500.0, {{4, 10}}, 96, true, {}};
  for (std::uint64_t k = 0; k < 10; ++k) {
    a.kernel_end[k] = 100.0 * k + 93;
    b.kernel_end[k] = 100.0 * k + 93;
  }
  b.host_collectives = true;
  // Rank b's host span ends 1 ms earlier than a's: aligning on it would be off by 1 ms.
  summary sb = rank_summary(b, 2);
  for (timeline_step& st : sb.timeline.steps) {
    for (timeline_span& p : st.phases) {
      if (p.name == "collective") p.end_ms -= 1;
    }
  }
  job_timeline job;
  job.add(rank_summary(a, 2));
  job.add(sb);
  REQUIRE(job.reference_rank() == 0u);
  job.set_reference(rank_summary(a, 2));
  json doc = trace_of(job);
  for (const json& row : doc["otherData"]["ranks"]) {
    if (row["rank"] == 1) {
      REQUIRE(row["aligned_on"] == "collective kernels");
      REQUIRE(row["shift_ms"].get<double>() == Approx(500).margin(1e-6));
    }
  }
  // Without collectives at all, the steps' ends.
  made c{0, 0.0, {{2, 10}}, 95, false, {}}, d{1, -20.0, {{2, 10}}, 96, false, {}};
  job_timeline plain;
  plain.add(rank_summary(c, 2));
  plain.add(rank_summary(d, 2));
  plain.set_reference(rank_summary(c, 2));
  doc = trace_of(plain);
  for (const json& row : doc["otherData"]["ranks"]) {
    if (row["rank"] == 1) {
      REQUIRE(row["aligned_on"] == "step ends");
      REQUIRE(row["shift_ms"].get<double>() == Approx(-20).margin(1e-6));
    }
  }
}

TEST_CASE("a job's timeline stays bounded whatever the job, and says what it left out", "[job_timeline]") {
  job_timeline job(2);
  const std::uint32_t world = 300;
  for (std::uint32_t r = 0; r < world; ++r) {
    made m{r, 0.0, {}, 95.0 + r * 0.01};
    m.extra[r % 40] = 1.0 + r;  // each rank's slowest step: ranks 236-299 the slowest
    m.extra[(r + 1) % 40] = 0.5;
    job.add(rank_summary(m, world, 40));
  }
  REQUIRE(job.ranks_added() == world);
  const auto want = job.wanted();
  REQUIRE(want.size() <= job_timeline::max_steps);
  const auto median = job.reference_rank();
  REQUIRE(median == 149u);  // p50 95 + 0.01 r: the lower middle of 300
  job.set_reference(rank_summary(made{149, 0.0, {{149 % 40, 150}, {150 % 40, 0.5}}, 95 + 1.49}, world, 40));
  const json doc = trace_of(job);
  std::set<std::uint32_t> ranks_seen;
  for (const json& e : doc["traceEvents"]) ranks_seen.insert((e["pid"].get<std::uint32_t>() - 1) / 2);
  REQUIRE(ranks_seen.size() <= job_timeline::max_ranks + 1);
  REQUIRE(ranks_seen.count(299));  // the slowest rank
  REQUIRE(ranks_seen.count(149));  // the median rank
  REQUIRE_FALSE(ranks_seen.count(3));
  REQUIRE(doc["otherData"]["ranks_read"] == world);
  REQUIRE(doc["otherData"]["ranks_left_out"] == world - (ranks_seen.size()));
  REQUIRE(job.trace().size() < 2'000'000);
}

TEST_CASE("a job's timeline refuses what it cannot use, naming it", "[job_timeline]") {
  REQUIRE_THROWS_WITH(job_timeline(0), Catch::Matchers::Contains("1 to 16"));
  job_timeline job;
  job.add(rank_summary(made{0, 0.0, {}}, 2));
  REQUIRE_THROWS_WITH(job.add(rank_summary(made{0, 0.0, {}}, 2)), Catch::Matchers::Contains("rank 0 added twice"));
  job.add(rank_summary(made{1, 0.0, {}, 99}, 2));
  REQUIRE_THROWS_WITH(job.set_reference(rank_summary(made{1, 0.0, {}}, 2)), Catch::Matchers::Contains("wants rank 0"));
}
