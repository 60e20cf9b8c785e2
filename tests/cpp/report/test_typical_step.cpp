// Close calls and one-off stalls (report/diagnosis/close_call.cpp, one_off.cpp): each rule at and
// around its bound, on summaries whose figures are worked by hand.
#include <catch2/catch.hpp>
#include <string>

#include "report/diagnosis/diagnosis.hpp"
#include "summaries.hpp"

using namespace steptrace;
using steptrace::detail::default_thresholds;
using steptrace::detail::diagnose;
using steptrace::testing::with_device;
using steptrace::testing::with_shares;

namespace {

bool says(const diagnosis& d, const std::string& part) {
  for (const std::string& a : d.advice) {
    if (a.find(part) != std::string::npos) return true;
  }
  return false;
}

// 100 steps of 10 ms with `input` at its share every step, but step 42 stalled `stall_ms` more in
// it: the table's figures as the tracer would give them.
summary stalled(double input_share, double stall_ms) {
  summary s = with_shares({{"input", input_share}, {"compute", 1 - input_share}});
  for (phase_stats& p : s.phases) {
    const double each = p.share * 10;
    p.ms = stat_ms{each * 100, each, each, each, each, each};
    if (p.name == "input") {
      p.ms.total += stall_ms;
      p.ms.max += stall_ms;
      p.ms.mean = p.ms.total / 100;
    }
  }
  s.step_ms = stat_ms{1000 + stall_ms, (1000 + stall_ms) / 100, 10, 10, 10, 10 + stall_ms};
  for (phase_stats& p : s.phases) p.share = p.ms.total / s.step_ms.total;
  timeline_step st;
  st.index = 42;
  st.slowest = true;
  st.step_ms = 10 + stall_ms;
  st.phases.push_back({"input", 0, input_share * 10 + stall_ms, 0});
  s.timeline.steps.push_back(st);
  return s;
}

}  // namespace

TEST_CASE("a close call names the runner-up and its gain; a clear lead does not", "[diagnosis]") {
  // COMPUTE-BOUND at 61.7% busy, the GPU idle the rest while the host is in `compute` with long
  // kernels (no launch cause): 1.7 points past its rule, the host's 38.3% named
  const double busy = 0.617;
  const diagnosis d = diagnose(with_device({{"compute", 1.0}}, busy, 100.0, {{"compute", 1.0}}));
  REQUIRE(d.label == "COMPUTE-BOUND");
  CHECK(d.runner_up == "BALANCED");
  CHECK_THAT(d.evidence, Catch::Matchers::Contains("A close call: BALANCED is 1.7 points of the step behind (38.3% of "
                                                   "the step; the GPU idles 38.3% of the step in all)."));
  CHECK(says(d, "also: a close call, BALANCED: the GPU idles 38% of each step while the host is in `compute`"));
  CHECK(says(d, "(up to 38% shorter steps)"));
  // 10 points past the rule is no close call
  const double clear = default_thresholds.device_busy_share + default_thresholds.close_call_points + 0.001;
  const diagnosis far = diagnose(with_device({{"compute", 1.0}}, clear, 100.0, {{"compute", 1.0}}));
  CHECK(far.label == "COMPUTE-BOUND");
  CHECK(far.runner_up.empty());
  CHECK_FALSE(says(far, "close call"));
  // two causes 4 points apart: the label's and the one behind it
  const diagnosis two = diagnose(with_shares({{"input", 0.36}, {"wait", 0.32}, {"compute", 0.32}}));
  REQUIRE(two.label == "INPUT-BOUND");
  CHECK(two.runner_up == "WAIT-HEAVY");
  CHECK(says(two, "also: a close call, WAIT-HEAVY"));
  const diagnosis apart = diagnose(with_shares({{"input", 0.45}, {"wait", 0.31}, {"compute", 0.24}}));
  CHECK(apart.label == "INPUT-BOUND");
  CHECK(apart.runner_up.empty());
}

TEST_CASE("a one-off stall is named and the typical step decides the label", "[diagnosis]") {
  // input 3% of a 10 ms step, one step stalled 2 s in it: the mean step puts `input` at 66%
  const summary s = stalled(0.03, 2000);
  REQUIRE(s.phase("input")->share > 0.6);
  const diagnosis d = diagnose(s);
  CHECK(d.label == "COMPUTE-BOUND");
  CHECK_THAT(d.evidence, Catch::Matchers::StartsWith("Read from the typical step"));
  CHECK_THAT(d.evidence, Catch::Matchers::Contains("`compute` takes 97.0% of step time"));
  CHECK_THAT(d.evidence, Catch::Matchers::Contains("The one-off: step 42: 2000 ms in `input`, once, 6668x its "
                                                   "median of 0.300 ms."));
  CHECK(says(d, "capture on trouble"));
  // below the bound (the stall under 10% of all step time) the run is read as it is
  const double small = 0.5 * default_thresholds.one_off_share * 1000;
  const diagnosis as_is = diagnose(stalled(0.03, small));
  CHECK_THAT(as_is.evidence, !Catch::Matchers::Contains("one-off"));
  // a phase heavy in every step is the steady state: no one-off
  const diagnosis steady = diagnose(stalled(0.5, 300));
  CHECK(steady.label == "INPUT-BOUND");
  CHECK_THAT(steady.evidence, !Catch::Matchers::Contains("one-off"));
}
