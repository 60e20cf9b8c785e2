// Each rule at and around its threshold; the thresholds come from the one place they live.
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>

#include "report/diagnosis/diagnosis.hpp"
#include "report/report.hpp"
#include "summaries.hpp"

using namespace steptrace;
using steptrace::detail::default_thresholds;
using steptrace::detail::diagnose;
using steptrace::testing::with_device;
using steptrace::testing::with_facts;
using steptrace::testing::with_shares;

namespace {

constexpr double below = 0.001;

std::string fmt(double v) { return std::to_string(v); }

}  // namespace

TEST_CASE("INPUT-BOUND fires at its threshold and not just below it", "[diagnosis]") {
  const double t = default_thresholds.input_share;
  CHECK(diagnose(with_shares({{"input", t}, {"compute", 1 - t}})).label == "INPUT-BOUND");
  CHECK(diagnose(with_shares({{"input", t - below}, {"compute", 1 - t + below}})).label != "INPUT-BOUND");
  const auto d = diagnose(with_shares({{"input", 0.73}, {"compute", 0.27}}));
  CHECK_THAT(d.evidence, Catch::Matchers::Contains("`input` takes 73.0% of step time"));
  CHECK_THAT(d.advice.at(0), Catch::Matchers::Contains("num_workers"));
}

TEST_CASE("H2D-BOUND fires at its threshold and not just below it", "[diagnosis]") {
  const double t = default_thresholds.h2d_share;
  CHECK(diagnose(with_shares({{"h2d", t}, {"compute", 1 - t}})).label == "H2D-BOUND");
  CHECK(diagnose(with_shares({{"h2d", t - below}, {"compute", 1 - t + below}})).label != "H2D-BOUND");
  CHECK_THAT(diagnose(with_shares({{"h2d", 0.5}, {"compute", 0.5}})).advice.at(0),
             Catch::Matchers::Contains("pin_memory=True"));
}

TEST_CASE("WAIT-HEAVY counts wait and untraced time together", "[diagnosis]") {
  const double t = default_thresholds.wait_share;
  CHECK(diagnose(with_shares({{"wait", t / 2}, {"other", t / 2}, {"compute", 1 - t}})).label == "WAIT-HEAVY");
  CHECK(diagnose(with_shares({{"wait", t - below}, {"other", 0}, {"compute", 1 - t + below}})).label != "WAIT-HEAVY");
  // In the program's own terms: a Python program's syncs are .item() and .cpu(), a C++ program's
  // the runtime's calls.
  const summary blocked = with_shares({{"wait", 0.4}, {"compute", 0.6}});
  CHECK_THAT(diagnose(with_facts(blocked, {{"python.version", "3.11.9"}})).advice.at(0),
             Catch::Matchers::Contains(".item()"));
  CHECK_THAT(diagnose(blocked).advice.at(0), Catch::Matchers::Contains("cudaStreamSynchronize"));
}

TEST_CASE("COMPUTE-BOUND needs compute at its threshold and no waste rule firing", "[diagnosis]") {
  const double t = default_thresholds.compute_share;
  CHECK(diagnose(with_shares({{"compute", t}, {"input", 0.2}, {"other", 1 - t - 0.2}})).label == "COMPUTE-BOUND");
  CHECK(diagnose(with_shares({{"compute", t - below}, {"input", 0.2}, {"other", 1 - t - 0.2 + below}})).label ==
        "BALANCED");
  // A waste rule wins over the healthy label.
  CHECK(diagnose(with_shares({{"compute", 0.65}, {"input", 0.35}, {"other", 0}})).label == "INPUT-BOUND");
}

TEST_CASE("when several waste rules fire the largest share wins", "[diagnosis]") {
  CHECK(diagnose(with_shares({{"input", 0.35}, {"h2d", 0.45}, {"other", 0.2}})).label == "H2D-BOUND");
  CHECK(diagnose(with_shares({{"input", 0.45}, {"h2d", 0.25}, {"other", 0.3}})).label == "INPUT-BOUND");
  CHECK(diagnose(with_shares({{"input", 0.31}, {"wait", 0.5}, {"other", 0.19}})).label == "WAIT-HEAVY");
}

TEST_CASE("BALANCED names the largest phase and no steps means no label", "[diagnosis]") {
  const auto d = diagnose(with_shares({{"preprocess", 0.5}, {"compute", 0.45}, {"other", 0.05}}));
  CHECK(d.label == "BALANCED");
  CHECK_THAT(d.evidence, Catch::Matchers::Contains("`preprocess` at 50.0%"));
  summary empty;
  empty.warmup_steps = 5;
  const auto none = diagnose(empty);
  CHECK(none.label.empty());
  CHECK_THAT(none.evidence, Catch::Matchers::Contains("No steps were counted (5 warm-up, 0 failed)"));
}

TEST_CASE("the input advice names the loader settings the tracer was told", "[diagnosis]") {
  summary s = with_shares({{"input", 0.7}, {"compute", 0.3}});
  s.facts = {{"host.cpus", "16"}, {"dataloader.num_workers", "0"}};
  CHECK(diagnose(s).advice.at(0) ==
        "DataLoader(num_workers=0) loads every batch on the training thread; on this 16-core machine try num_workers=8 "
        "(up to 70% shorter steps)");
  s.facts = {{"host.cpus", "16"},
             {"dataloader.num_workers", "2"},
             {"dataloader.persistent_workers", "False"},
             {"dataloader.prefetch_factor", "2"}};
  const auto advice = diagnose(s).advice;
  CHECK(advice.at(0) == "num_workers=2: try 8 (16 cores here) (up to 70% shorter steps)");
  CHECK(advice.at(1) == "persistent_workers=True: workers are restarted every epoch now");
  CHECK(advice.at(2) == "prefetch_factor=2: try 4 so batches are ready ahead");
  s.facts = {{"host.cpus", "2"}, {"dataloader.num_workers", "0"}};
  CHECK_THAT(diagnose(s).advice.at(0), Catch::Matchers::Contains("on this 2-core machine try num_workers=2"));
  s.facts = {{"host.cpus", "1"}, {"dataloader.num_workers", "0"}};
  CHECK_THAT(diagnose(s).advice.at(0), Catch::Matchers::Contains("try num_workers=1"));
}

TEST_CASE("the copy advice starts from pin_memory when it is off", "[diagnosis]") {
  summary s = with_shares({{"h2d", 0.5}, {"compute", 0.5}});
  s.facts = {{"dataloader.pin_memory", "False"}};
  const auto advice = diagnose(s).advice;
  CHECK(advice.at(0) ==
        "DataLoader(pin_memory=False): set pin_memory=True so copies go straight to the device (up to 50% shorter "
        "steps)");
  CHECK(advice.size() == 3);
}

TEST_CASE("the copy advice never asks to pin what the DataLoader already pins", "[diagnosis]") {
  summary s = with_shares({{"h2d", 0.5}, {"compute", 0.5}});
  s.facts = {{"dataloader.pin_memory", "True"}};
  const auto advice = diagnose(s).advice;
  REQUIRE(advice.size() == 3);
  CHECK_THAT(advice.at(0), Catch::Matchers::StartsWith("pin_memory is on: copy the next batch on a side stream") &&
                               Catch::Matchers::EndsWith("(up to 50% shorter steps)"));
  for (const std::string& a : advice) CHECK_THAT(a, !Catch::Matchers::Contains("pin_memory=True"));
}

namespace {

// The GPU idle all step long, that idle time falling in `phase` for `share` of the step and in
// `compute` for the rest.
summary idle_in(const std::string& phase, double share) {
  return with_device({{phase, 0.5}, {"compute", 0.5}}, 0.0, 500, {{phase, share}, {"compute", 1 - share}});
}

}  // namespace

TEST_CASE("with a device view each cause is weighed by the GPU idle time it holds, at its threshold",
          "[diagnosis][gpu]") {
  const auto& t = default_thresholds;
  const double at = t.device_cause_share;  // the label follows the gains: one threshold for every cause
  CHECK(diagnose(idle_in("input", at)).label == "INPUT-BOUND");
  CHECK(diagnose(idle_in("input", at - below)).label != "INPUT-BOUND");
  CHECK(diagnose(idle_in("h2d", at)).label == "H2D-BOUND");
  CHECK(diagnose(idle_in("h2d", at - below)).label != "H2D-BOUND");
  CHECK(diagnose(idle_in("wait", at)).label == "WAIT-HEAVY");
  CHECK(diagnose(idle_in("wait", at - below)).label != "WAIT-HEAVY");
  // wait and untraced time together
  CHECK(diagnose(with_device({{"compute", 1}}, 0, 500, {{"wait", at / 2}, {"other", at / 2}, {"compute", 1 - at}}))
            .label == "WAIT-HEAVY");
  // whatever the busy share: the 2021 ResNet-50 num_workers=0 sample's shape, GPU busy 70% and
  // idle 20% of the step while the host fetched, is INPUT-BOUND (its fix made steps 17% shorter)
  const auto busy_but_waiting =
      diagnose(with_device({{"input", 0.3}, {"compute", 0.7}}, 0.70, 500, {{"input", 0.68}, {"compute", 0.32}}));
  CHECK(busy_but_waiting.label == "INPUT-BOUND");
  REQUIRE_FALSE(busy_but_waiting.gains.empty());
  CHECK(busy_but_waiting.gains.front().first == "input");
  CHECK(busy_but_waiting.gains.front().second == Approx(0.3 * 0.68));
  // the host spends 70% of the step in `input`, but the GPU is busy through most of it: no cause
  const auto busy_input = diagnose(with_device({{"input", 0.7}, {"compute", 0.3}}, 0.9, 500, {{"input", 1.0}}));
  CHECK(busy_input.label == "COMPUTE-BOUND");
}

TEST_CASE("a saturated GPU is COMPUTE-BOUND even when the host blocks in syncs", "[diagnosis][gpu]") {
  const double busy = default_thresholds.device_busy_share;
  // trace_diff's shape: 44% of host time blocked in `wait`, the GPU idle 1.2% of the step then
  const auto d =
      diagnose(with_device({{"wait", 0.44}, {"compute", 0.55}}, 0.96, 900, {{"wait", 0.3}, {"compute", 0.7}}));
  CHECK(d.label == "COMPUTE-BOUND");
  CHECK_THAT(d.evidence, Catch::Matchers::Contains("removing the syncs would not make the GPU faster"));
  CHECK(diagnose(with_device({{"compute", 0.9}}, busy, 500, {{"compute", 1}})).label == "COMPUTE-BOUND");
  CHECK(diagnose(with_device({{"compute", 0.9}}, busy - below, 500, {{"compute", 1}})).label == "BALANCED");
  // and a GPU idling through a blocking copy stays WAIT-HEAVY
  CHECK(diagnose(with_device({{"wait", 0.7}, {"compute", 0.3}}, 0.36, 5000, {{"wait", 0.7}, {"compute", 0.3}})).label ==
        "WAIT-HEAVY");
}

TEST_CASE("LAUNCH-BOUND: short kernels by time, or by count while the GPU idles most of the step", "[diagnosis][gpu]") {
  const auto& t = default_thresholds;
  const double us = t.launch_kernel_us;
  CHECK(diagnose(with_device({{"compute", 0.9}}, 0.2, us, {{"compute", 1}})).label == "LAUNCH-BOUND");
  // longer than launch_kernel_us by time, and by count longer than the host's 45 us per kernel
  summary longer = with_device({{"compute", 0.9}}, 0.2, us + 0.1, {{"compute", 1}});
  longer.gpu->kernel_median_us = 46;
  CHECK(diagnose(longer).label == "BALANCED");
  // many 2 us kernels by count (an optimizer's), the time in long ones, the GPU busy most of the
  // step (ResNet-50's shape, 77% busy): not launch-bound, whatever the idle time in `compute`
  summary resnet = with_device({{"compute", 0.9}}, t.device_busy_share, 360, {{"compute", 1}});
  resnet.gpu->kernel_median_us = 2;
  CHECK(diagnose(resnet).label == "COMPUTE-BOUND");
  // the same kernels with the GPU idle most of the step (a compiled graph launching thousands of
  // short kernels between a few long ones): the count decides
  summary compiled = with_device({{"compute", 0.9}}, t.device_busy_share - below, 650, {{"compute", 1}});
  compiled.gpu->kernel_median_us = 21.6;  // under the host's own 45 us per kernel
  CHECK(diagnose(compiled).label == "LAUNCH-BOUND");
  compiled.gpu->kernel_median_us = 46;  // longer than the host takes per launch
  CHECK(diagnose(compiled).label != "LAUNCH-BOUND");
  // a host that spends longer than launch_host_us per kernel is doing CPU work, not launching
  summary cpu_work = with_device({{"compute", 0.9}}, 0.2, 5, {{"compute", 1}});
  cpu_work.gpu->kernels_per_step = 1e3 * 0.9 * cpu_work.step_ms.mean / (t.launch_host_us + 1);
  CHECK(diagnose(cpu_work).label == "BALANCED");
  const auto d = diagnose(with_device({{"compute", 0.9}}, 0.2, 5, {{"compute", 1}}));
  CHECK_THAT(d.evidence, Catch::Matchers::Contains("launching 200 kernels a step with a median of 5.0 us"));
  CHECK_THAT(d.advice.at(0), Catch::Matchers::Contains("CUDA graphs replay a step's 200 launches"));
  summary amd = with_device({{"compute", 0.9}}, 0.2, 5, {{"compute", 1}});
  amd.facts.emplace_back("gpu.amd", "1");
  CHECK_THAT(diagnose(amd).advice.at(0), Catch::Matchers::Contains("HIP graphs"));
}

TEST_CASE("INPUT-BOUND cites where the GPU was idle", "[diagnosis][gpu]") {
  const auto d =
      diagnose(with_device({{"input", 0.7}, {"compute", 0.3}}, 0.29, 500, {{"input", 0.93}, {"compute", 0.07}}));
  CHECK(d.label == "INPUT-BOUND");
  CHECK_THAT(d.evidence,
             Catch::Matchers::Contains("The GPU sat idle 66.0% of step time while the host was in `input`"));
  CHECK_THAT(d.evidence,
             Catch::Matchers::Contains("GPU idle 71% of the step; 93% of that while the host was in `input`"));
}

TEST_CASE("a deciding share within 2 points of its threshold is called close", "[diagnosis]") {
  const auto& t = default_thresholds;
  const double at = t.device_cause_share;
  CHECK_THAT(diagnose(idle_in("input", at + 0.01)).evidence, Catch::Matchers::Contains("Close call: 16.0%"));
  CHECK_THAT(diagnose(idle_in("input", at + t.close_margin + 0.001)).evidence,
             !Catch::Matchers::Contains("Close call"));
  // just under: the label that won says which rule nearly fired
  const auto under = diagnose(with_device({{"input", 0.4}, {"compute", 0.6}}, 0.85, 500,
                                          {{"input", 0.145 / 0.15}, {"compute", 1 - 0.145 / 0.15}}));
  CHECK(under.label == "COMPUTE-BOUND");
  CHECK_THAT(under.evidence, Catch::Matchers::Contains("Close call: INPUT-BOUND is 14.5% against its rule's 15%"));
  // the host rules too (one program's windows: input 39.6%, 29.7%, 30.1%)
  CHECK_THAT(diagnose(with_shares({{"input", 0.301}, {"compute", 0.699}})).evidence,
             Catch::Matchers::Contains("Close call"));
  CHECK_THAT(diagnose(with_shares({{"input", 0.297}, {"compute", 0.703}})).evidence,
             Catch::Matchers::Contains("Close call: INPUT-BOUND is 29.7%"));
  CHECK_THAT(diagnose(with_shares({{"input", 0.396}, {"compute", 0.604}})).evidence,
             !Catch::Matchers::Contains("Close call"));
}

TEST_CASE("H2D-BOUND names the pageable share", "[diagnosis][gpu]") {
  summary s = with_device({{"h2d", 0.5}, {"compute", 0.5}}, 0.5, 500, {{"h2d", 0.8}, {"compute", 0.2}});
  s.gpu->h2d.count = 10;
  s.gpu->h2d.pageable_share = 0.82;
  const auto d = diagnose(s);
  CHECK(d.label == "H2D-BOUND");
  CHECK_THAT(d.evidence, Catch::Matchers::Contains("82% of the bytes copied to the device came from pageable memory"));
  CHECK_THAT(d.advice.at(0), Catch::Matchers::Contains("82% of the copied bytes are pageable"));
  CHECK(d.advice.size() == 3);
}

TEST_CASE("a custom phase counts toward the built-in phase it sits in: detail never changes the label",
          "[diagnosis][tree]") {
  // input's own share is small; most of its time is in `decode`, opened inside it.
  summary s = with_shares({{"input", 0.04}, {"decode", 0.66}, {"compute", 0.26}});
  for (auto& p : s.phases) {
    if (p.name == "decode") p.parent = "input";
  }
  const auto d = diagnose(s);
  CHECK(d.label == "INPUT-BOUND");
  CHECK_THAT(d.evidence, Catch::Matchers::Contains("`input` with the phases inside it takes 70.0% of step time"));
  summary flat = with_shares({{"input", 0.04}, {"decode", 0.66}, {"compute", 0.26}});  // decode at the top
  CHECK(diagnose(flat).label != "INPUT-BOUND");
}

TEST_CASE("INPUT-BOUND's advice says the CPU is saturated instead of adding workers, at its threshold",
          "[diagnosis][cpu]") {
  auto with_demand = [](double busy, double waiting) {
    summary s = with_shares({{"input", 0.7}, {"compute", 0.3}});
    s.facts = {{"host.cpus", "2"},
               {"dataloader.num_workers", "2"},
               {"cpu.cores_busy", "0.30"},
               {"cpu.cores_waiting", "0.10"},
               {"cpu.workers_cores_busy", fmt(busy)},
               {"cpu.workers_cores_waiting", fmt(waiting)}};
    return diagnose(s);
  };
  const double t = default_thresholds.cpu_demand_share * 2;  // in cores
  const auto saturated = with_demand(t - 0.4 + 0.01, 0.0);
  CHECK(saturated.label == "INPUT-BOUND");
  CHECK_THAT(saturated.advice.at(0), Catch::Matchers::Contains("2 workers and the training thread ask for 1.8") &&
                                         Catch::Matchers::Contains("saturated: more workers or prefetch won't help"));
  const auto free = with_demand(t - 0.4 - 0.05, 0.0);
  for (const auto& line : free.advice) CHECK_THAT(line, !Catch::Matchers::Contains("saturated"));
}

TEST_CASE("a process that waits for a core hears it first, under any label", "[diagnosis]") {
  REQUIRE(default_thresholds.cpu_wait_share == Approx(1.0 / 3));
  const auto busy_host = [&](const char* waiting) {
    return with_facts(with_shares({{"compute", 0.9}}),
                      {{"cpu.cores_busy", "1.0"}, {"cpu.cores_waiting", waiting}, {"host.cpus", "2"}});
  };
  const auto d = diagnose(busy_host("0.334"));
  CHECK(d.label == "COMPUTE-BOUND");
  CHECK_THAT(d.advice.at(0), Catch::Matchers::Contains("free the cores first"));
  CHECK_THAT(d.evidence, Catch::Matchers::Contains("waited for a core 33% as long as it ran"));
  CHECK_THAT(diagnose(busy_host("0.33")).advice.at(0), !Catch::Matchers::Contains("free the cores"));
  // Under INPUT-BOUND too.
  auto input = with_facts(with_shares({{"input", 0.6}, {"compute", 0.4}}),
                          {{"cpu.cores_busy", "1.0"}, {"cpu.cores_waiting", "0.5"}, {"host.cpus", "2"}});
  CHECK(diagnose(input).label == "INPUT-BOUND");
  CHECK_THAT(diagnose(input).advice.at(0), Catch::Matchers::Contains("free the cores first"));
}

TEST_CASE("workers that sleep on I/O get more workers, beyond the core count", "[diagnosis]") {
  const auto run = [](const char* workers_busy) {
    return with_facts(with_shares({{"input", 0.6}, {"compute", 0.4}}), {{"dataloader.num_workers", "2"},
                                                                        {"host.cpus", "2"},
                                                                        {"cpu.cores_busy", "0.3"},
                                                                        {"cpu.cores_waiting", "0.0"},
                                                                        {"cpu.workers_cores_busy", workers_busy},
                                                                        {"cpu.workers_cores_waiting", "0.0"}});
  };
  const auto sleeping = diagnose(run("0.0"));
  CHECK(sleeping.label == "INPUT-BOUND");
  CHECK_THAT(sleeping.advice.at(0), Catch::Matchers::Contains("wait on I/O, not the CPU"));
  CHECK_THAT(sleeping.advice.at(0), Catch::Matchers::Contains("num_workers=4"));
  for (const std::string& a : sleeping.advice) CHECK_THAT(a, !Catch::Matchers::Contains("persistent_workers"));
  // Workers that use their cores: the CPU rule, not more workers.
  const auto busy = diagnose(run("1.6"));
  CHECK_THAT(busy.advice.at(0), Catch::Matchers::Contains("CPU is saturated"));
}

TEST_CASE("no device advice without a device", "[diagnosis]") {
  summary host_only = with_shares({{"compute", 0.9}});
  const auto d = diagnose(host_only);
  CHECK(d.label == "COMPUTE-BOUND");
  for (const std::string& a : d.advice) {
    CHECK_THAT(a, !Catch::Matchers::Contains("device memory"));
    CHECK_THAT(a, !Catch::Matchers::Contains("TF32"));
  }
  host_only.backend.cuda = true;  // a GPU, even without a device view
  CHECK_THAT(diagnose(host_only).advice.at(0), Catch::Matchers::Contains("TF32"));
}

TEST_CASE("times print for people at any size", "[diagnosis]") {
  CHECK(format_ms(1630.4) == "1630");
  CHECK(format_ms(123456789.0) == "123456789");
  CHECK(format_ms(16.523) == "16.52");
  CHECK(format_ms(0.4124) == "0.412");
  auto slow = with_shares({{"input", 0.6}, {"compute", 0.4}});
  slow.step_ms.mean = 2715;
  CHECK_THAT(diagnose(slow).evidence, Catch::Matchers::Contains("(1629 ms of 2715 ms per step"));
}

TEST_CASE("causes below their threshold that hold a real share are said under the label", "[diagnosis]") {
  const double in = default_thresholds.secondary_input_share, out = default_thresholds.secondary_other_share;
  auto run = with_facts(with_shares({{"input", 0.26}, {"compute", 0.64}, {"other", 0.10}}),
                        {{"dataloader.num_workers", "0"}, {"host.cpus", "2"}});
  const auto d = diagnose(run);
  REQUIRE(d.label == "COMPUTE-BOUND");
  for (const std::string& a : d.advice) CHECK_THAT(a, !Catch::Matchers::Contains("pipeline keeps up"));
  const auto has = [&](const diagnosis& x, const std::string& text) {
    return std::any_of(x.advice.begin(), x.advice.end(),
                       [&](const std::string& a) { return a.find(text) != std::string::npos; });
  };
  CHECK(has(d, "also: `input` holds 26% of each step on the training thread: DataLoader(num_workers=0)"));
  CHECK(has(d, "also: 10% of each step is outside every phase"));
  // Just below each threshold: nothing said.
  const auto quiet_run =
      diagnose(with_shares({{"input", in - below}, {"compute", 1 - in - out}, {"other", out - below}}));
  CHECK_FALSE(has(quiet_run, "also:"));
  CHECK(has(quiet_run, "pipeline keeps up"));
  // Set-aside time, as a share of the run.
  summary validation = with_shares({{"compute", 0.9}});
  validation.set_aside.push_back({"validation", 3, 2800, 933, 1000, 0.28});
  CHECK(has(diagnose(validation), "also: `validation` (set aside) takes 28% of the run"));
  validation.set_aside.back().run_share = default_thresholds.secondary_set_aside_share - below;
  CHECK_FALSE(has(diagnose(validation), "also:"));
}

TEST_CASE("every cause named carries its gain, and the largest gain comes first", "[diagnosis][gains]") {
  // Host-only: the label's cause and each finding, by its share; COMPUTE-BOUND names no host gain.
  const auto d = diagnose(with_shares({{"input", 0.26}, {"compute", 0.64}, {"other", 0.10}}));
  REQUIRE(d.label == "COMPUTE-BOUND");
  REQUIRE(d.gains.size() == 2);
  CHECK(d.gains[0] == std::pair<std::string, double>{"input", 0.26});
  CHECK(d.gains[1] == std::pair<std::string, double>{"other", 0.10});
  CHECK_THAT(d.advice.at(0), Catch::Matchers::Contains("speed up"));  // a label with no bound stays first
  CHECK(std::find(d.advice.begin(), d.advice.end(),
                  "also: 10% of each step is outside every phase (`other`): put the work between phases (saving "
                  "images, metrics, logging) in a phase, or in exclude() when it is not training, to see what it "
                  "costs (up to 10% shorter steps)") != d.advice.end());
  // H2D-BOUND at 22% with `input` at 26% (under its 30%): the larger gain is tried first.
  const auto copy = diagnose(with_shares({{"h2d", 0.22}, {"input", 0.26}, {"compute", 0.52}}));
  REQUIRE(copy.label == "H2D-BOUND");
  CHECK(copy.gains.front().first == "input");
  CHECK_THAT(copy.advice.at(0), Catch::Matchers::StartsWith("`input` holds 26% of each step") &&
                                    Catch::Matchers::EndsWith("(up to 26% shorter steps)"));
  CHECK_THAT(copy.advice.at(1), Catch::Matchers::EndsWith("(up to 22% shorter steps)"));
  // WAIT-HEAVY names both of its causes; time set aside is a share of the run.
  summary waits = with_shares({{"wait", 0.25}, {"other", 0.15}, {"compute", 0.6}});
  waits.set_aside.push_back({"checkpoint", 3, 2800, 933, 1000, 0.5});
  const auto w = diagnose(waits);
  REQUIRE(w.label == "WAIT-HEAVY");
  CHECK(w.gains == std::vector<std::pair<std::string, double>>{{"checkpoint", 0.5}, {"wait", 0.25}, {"other", 0.15}});
  // in run terms the steps' 40% is 20% of the run: the checkpoint's 50% comes first
  CHECK_THAT(w.advice.at(0), Catch::Matchers::StartsWith("`checkpoint` (set aside) takes 50% of the run") &&
                                 Catch::Matchers::EndsWith("(up to 50% shorter run)"));
  // the live line says the first fix's worth
  summary window = with_shares({{"h2d", 0.22}, {"input", 0.26}, {"compute", 0.52}});
  window.diag = diagnose(window);
  CHECK_THAT(detail::live_line(window, 5), Catch::Matchers::EndsWith("H2D-BOUND (up to 26% from input)\n"));
  CHECK_THAT(detail::live_line(window, 5), Catch::Matchers::StartsWith("steptrace live 5.0 s: "));
  window.rank = rank_info{2, 4};  // in a job each rank's line says which it is
  CHECK_THAT(detail::live_line(window, 5), Catch::Matchers::StartsWith("steptrace live 5.0 s, rank 2 of 4: "));
  window.rank = rank_info{0, 1};  // a lone process with a rank of its own says none
  CHECK_THAT(detail::live_line(window, 5), Catch::Matchers::StartsWith("steptrace live 5.0 s: "));
  // JSON carries them, largest first, and reads them back
  summary json_run = with_shares({{"h2d", 0.22}, {"input", 0.26}, {"compute", 0.52}});
  json_run.diag = diagnose(json_run);
  const summary back = summary::from_json(json_run.json());
  CHECK(back.diag.gains == json_run.diag.gains);
}

TEST_CASE("a C++ program's compute advice names its own tools, a Python program's torch's", "[diagnosis]") {
  summary cpp = with_shares({{"compute", 0.9}, {"other", 0.1}});  // live, no GPU, no python.version fact
  const auto own = diagnose(cpp);
  REQUIRE(own.label == "COMPUTE-BOUND");
  for (const std::string& line : own.advice) CHECK_THAT(line, !Catch::Matchers::Contains("torch"));
  CHECK_THAT(own.advice.at(0), Catch::Matchers::Contains("vectorise the hot loops"));
  summary python = cpp;
  python.facts.emplace_back("python.version", "3.11.2");
  const auto py = diagnose(python);
  CHECK_THAT(py.advice.at(0), Catch::Matchers::Contains("torch.compile"));
  CHECK_THAT(py.advice.at(1), Catch::Matchers::Contains("torch.set_num_threads"));
}
