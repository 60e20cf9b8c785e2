// The causes that real traces showed the first rules misread (HOST-BOUND, COMM-BOUND), each at
// and around its threshold; the thresholds come from the one place they live.
#include <catch2/catch.hpp>
#include <string>

#include "report/diagnosis.hpp"
#include "summaries.hpp"

using namespace steptrace;
using steptrace::detail::default_thresholds;
using steptrace::detail::diagnose;
using steptrace::testing::with_device;
using steptrace::testing::with_shares;

namespace {

constexpr double below = 0.001;

// A trace's summary: `other` is the host outside every op (backend.host_clock "trace").
summary from_trace(summary s) {
  s.backend.host_clock = "trace";
  return s;
}

}  // namespace

TEST_CASE("in a trace, GPU idle outside every op is HOST-BOUND at its threshold, never WAIT-HEAVY", "[diagnosis][gpu]") {
  const double at = default_thresholds.device_cause_share;
  // the GPU idle all step, `at` of it while the host is outside every op, the rest while it runs
  // long kernels' launches (not short: no LAUNCH-BOUND)
  auto outside = [&](double share) {
    return with_device({{"compute", 0.5}, {"other", 0.5}}, 0.0, 500, {{"other", share}, {"compute", 1 - share}});
  };
  CHECK(diagnose(from_trace(outside(at))).label == "HOST-BOUND");
  CHECK(diagnose(from_trace(outside(at - below))).label != "HOST-BOUND");
  // the same time in a live run is untraced: WAIT-HEAVY's, as before
  CHECK(diagnose(outside(at)).label == "WAIT-HEAVY");
  const auto d = diagnose(from_trace(outside(0.6)));
  REQUIRE_FALSE(d.gains.empty());
  CHECK(d.gains.front().first == "other");
  CHECK(d.gains.front().second == Approx(0.6));
  CHECK_THAT(d.evidence, Catch::Matchers::Contains("while the main thread ran Python outside every op"));
  // one long stretch before the first kernel: preprocessing on the loop's thread
  summary stretch = from_trace(outside(0.6));
  stretch.facts = {{"trace.host_gap_longest_ms", "5.5"}, {"trace.host_gap_longest_at_ms", "0"},
                   {"trace.host_gap_before_device", "1"}, {"trace.host_gaps_per_step", "3"}};
  CHECK_THAT(diagnose(stretch).advice.at(0), Catch::Matchers::StartsWith("move the 5.500 ms of Python before the first kernel"));
  // many short gaps (the longest well under half the 6 ms idle): per-op overhead
  stretch.facts[0].second = "0.2";
  CHECK_THAT(diagnose(stretch).advice.at(0), Catch::Matchers::StartsWith("cut per-op Python overhead"));
}

TEST_CASE("COMM-BOUND from collectives' exposed time and CPU collective waits, at its threshold", "[diagnosis][gpu]") {
  const double at = default_thresholds.device_cause_share;
  // the GPU busy 95% (an all-reduce counts as busy), `at` of the step in NCCL kernels alone
  auto exposed = [&](double share) {
    summary s = with_device({{"compute", 1}}, 0.95, 500, {{"compute", 1}});
    s.gpu->nccl.kernels_per_step = 3;
    s.gpu->nccl.ms_per_step = share * s.step_ms.mean * 1.2;
    s.gpu->nccl.exposed_ms_per_step = share * s.step_ms.mean;
    return s;
  };
  CHECK(diagnose(exposed(at)).label == "COMM-BOUND");
  CHECK(diagnose(exposed(at - below)).label == "COMPUTE-BOUND");
  const auto d = diagnose(exposed(0.66));
  CHECK(d.gains.front().first == "comm");
  CHECK(d.gains.front().second == Approx(0.66));
  CHECK_THAT(d.advice.at(0), Catch::Matchers::StartsWith("overlap communication with compute"));
  CHECK_THAT(d.evidence, Catch::Matchers::Contains("3 NCCL kernels a step run"));
  // host only: the CPU collectives' share, against wait_share; never WAIT-HEAVY's syncs
  const double wait = default_thresholds.wait_share;
  summary gloo = with_shares({{"compute", 1 - wait - 0.05}, {"wait", 0.05}, {"collective", wait}});
  gloo.phases[1].parent = "wait";  // `collective` sits inside `wait` (map order: collective, compute, wait)
  REQUIRE(gloo.phases[0].name == "collective");
  gloo.phases[0].parent = "wait";
  gloo.phases[1].parent = "";
  CHECK(diagnose(gloo).label == "COMM-BOUND");
  CHECK(diagnose(gloo).gains.front().first == "comm");
  CHECK(diagnose(gloo).gains.front().second == Approx(wait));
}
