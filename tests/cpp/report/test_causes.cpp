// The causes that real traces showed the first rules misread (HOST-BOUND, COMM-BOUND), each at
// and around its threshold; the thresholds come from the one place they live.
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

constexpr double below = 0.001;

// A trace's summary: `other` is the host outside every op (backend.host_clock "trace").
summary from_trace(summary s) {
  s.backend.host_clock = "trace";
  return s;
}

}  // namespace

TEST_CASE("in a trace, GPU idle outside every op is HOST-BOUND at its threshold, never WAIT-HEAVY",
          "[diagnosis][gpu]") {
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
  stretch.facts = {{"trace.host_gap_longest_ms", "5.5"},
                   {"trace.host_gap_longest_at_ms", "0"},
                   {"trace.host_gap_before_device", "1"},
                   {"trace.host_gaps_per_step", "3"}};
  CHECK_THAT(diagnose(stretch).advice.at(0),
             Catch::Matchers::StartsWith("move the 5.500 ms of Python before the first kernel"));
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
  CHECK_THAT(d.evidence, Catch::Matchers::Contains("3 collective kernels a step run"));
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

TEST_CASE(
    "a host view of a process that put work on a GPU says so, and asks for the GPU's records first where the "
    "label needs them",
    "[diagnosis]") {
  using Catch::Matchers::Contains;
  using Catch::Matchers::StartsWith;
  // compute-heavy host view: with the GPU unseen, the host's compute is launches and waits, not
  // a CPU model to speed up
  summary busy = from_trace(with_shares({{"compute", 0.9}, {"other", 0.1}}));
  const auto cpu = diagnose(busy);
  REQUIRE(cpu.label == "COMPUTE-BOUND");
  CHECK_THAT(cpu.advice.at(0), Contains("bfloat16 where the CPU supports it"));  // a CPU job's advice, unchanged
  busy.facts = {{"trace.device_unrecorded", "104 calls"}};
  const auto gpu = diagnose(busy);
  CHECK(gpu.label == "COMPUTE-BOUND");
  CHECK_THAT(gpu.advice.at(0), StartsWith("record the GPU's activity too"));
  CHECK_THAT(gpu.evidence,
             Contains("The host put work on a GPU (104 runtime calls that launch kernels or copy memory)"));
  for (const std::string& line : gpu.advice) {
    CHECK_THAT(line, !Contains("the CPU supports") && !Contains("set_num_threads"));
  }
  // recorded with the CPU's activity alone: an op only a GPU runs is the evidence
  busy.facts = {{"trace.device_unrecorded", "op aten::cudnn_convolution"}};
  CHECK_THAT(diagnose(busy).advice.at(0), StartsWith("record the GPU's side too: add ProfilerActivity.CUDA"));
  CHECK_THAT(diagnose(busy).evidence, Contains("(`aten::cudnn_convolution`, an op only a GPU runs)"));
  // a host cause the host view proves keeps its own fix first; the record advice comes last
  summary input = from_trace(with_shares({{"input", 0.5}, {"compute", 0.5}}));
  input.facts = {{"trace.device_unrecorded", "1 calls"}};
  const auto in = diagnose(input);
  REQUIRE(in.label == "INPUT-BOUND");
  CHECK_THAT(in.advice.back(), StartsWith("record the GPU's activity too"));
  CHECK_THAT(in.advice.front(), !StartsWith("record"));
  CHECK_THAT(in.evidence, Contains("(1 runtime call that launches kernels or copies memory)"));
  // an accelerator steptrace does not read (MTIA): named, neither a CPU's nor a GPU's advice
  busy.facts = {{"trace.device_unrecorded", "2136 mtia"}};
  const auto mtia = diagnose(busy);
  CHECK(mtia.label == "COMPUTE-BOUND");
  CHECK_THAT(mtia.advice.at(0), StartsWith("read the accelerator's side with a tool that reads its records"));
  CHECK_THAT(mtia.evidence,
             Contains("The trace holds 2136 records of an MTIA accelerator, a device steptrace does not read"));
  for (const std::string& line : mtia.advice) {
    CHECK_THAT(line, !Contains("the CPU supports") && !Contains("set_num_threads") && !Contains("TF32") &&
                         !Contains("record the GPU"));
  }
  input.facts = {{"trace.device_unrecorded", "1 mtia"}};
  CHECK_THAT(diagnose(input).advice.back(), StartsWith("read the accelerator's side"));
  CHECK_THAT(diagnose(input).evidence, Contains("1 record of an MTIA accelerator"));
}
