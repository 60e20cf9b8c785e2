// Fixes as checked hypotheses: each premise tried on record streams made by hand (1 tick = 1 ns),
// through the real step builder, aggregate and flight recorder, so the step series the premise is
// read from is the one a live run keeps. The truth is the stream's own construction.
#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <functional>
#include <nlohmann/json.hpp>

#include "analysis/aggregate.hpp"
#include "analysis/flight_recorder.hpp"
#include "analysis/step_fan_out.hpp"
#include "report/diagnosis/diagnosis.hpp"
#include "report/diagnosis/step_spread.hpp"
#include "report/report.hpp"
#include "summaries.hpp"

using namespace steptrace;
using namespace steptrace::detail;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

constexpr std::uint64_t ms = 1'000'000;

std::uint64_t same(std::uint64_t t) { return t; }

// One thread's steps, each made by `step(index, t)`, which records its phases from t and
// returns where the step ends.
struct loop {
  aggregate totals;
  flight_recorder recorder;
  step_fan_out out{0};
  step_builder builder{0, 0};
  std::uint64_t t = 0;
  loop() {
    recorder.configure(64, 8);
    out.add(totals).add(recorder);
  }
  void add(record_kind kind, std::uint64_t at, std::uint32_t id = 0) { builder.consume(record{at, id, kind}, out); }
  void phase(phase_id p, std::uint64_t& at, std::uint64_t length) {
    add(record_kind::phase_begin, at, p.value);
    at += length;
    add(record_kind::phase_end, at, p.value);
  }
  void run(std::uint64_t steps, const std::function<std::uint64_t(std::uint64_t, std::uint64_t)>& step) {
    for (std::uint64_t i = 0; i < steps; ++i) {
      add(record_kind::step_begin, t);
      t = step(i, t);
      add(record_kind::step_end, t);
      t += 1000;
    }
  }
  summary result(std::vector<std::pair<std::string, std::string>> facts = {{"python.version", "3.11.9"}}) {
    summary s;
    totals.fill(s, 1.0);
    recorder.fill(s.timeline, totals.run_begin(), 1.0, &same);
    s.facts = std::move(facts);
    complete(s);
    return s;
  }
};

const hypothesis* checked(const summary& s, std::string_view fix) {
  for (const hypothesis& h : s.diag.hypotheses) {
    if (h.fix == fix) return &h;
  }
  return nullptr;
}

// A training step of 0.7 ms of compute, and every `every`-th step `extra` ms more outside every
// phase (a checkpoint written between steps), from step `offset` on.
summary checkpointing(std::uint64_t steps, std::uint64_t every, std::uint64_t offset = 9) {
  loop l;
  l.run(steps, [&](std::uint64_t i, std::uint64_t at) {
    l.phase(builtin::compute, at, 700'000);
    if (i % every == offset % every) at += 45 * ms;  // untraced: `other`
    return at;
  });
  return l.result();
}

// 60 steps of 5 ms in `compute` and 5 ms blocked in `wait`, each one: a sync every step.
summary syncing_every_step(std::vector<std::pair<std::string, std::string>> facts) {
  loop l;
  l.run(60, [&](std::uint64_t, std::uint64_t at) {
    l.phase(builtin::compute, at, 5 * ms);
    l.phase(builtin::wait, at, 5 * ms);
    return at;
  });
  return l.result(std::move(facts));
}

}  // namespace

TEST_CASE("a checkpoint every 10th step is periodic work, not per-step syncs", "[hypotheses]") {
  const summary s = checkpointing(100, 10);
  REQUIRE(s.diag.periodic.size() == 1);
  const periodic_work& p = s.diag.periodic[0];
  CHECK(p.phase == "other");
  CHECK(p.every == 10);
  CHECK(p.excess_ms == Approx(45.0).margin(0.01));
  CHECK(p.share == Approx(450.0 / (70.0 + 450.0)).margin(0.01));
  CHECK(s.diag.label == "WAIT-HEAVY");
  REQUIRE_FALSE(s.diag.advice.empty());
  CHECK_THAT(s.diag.advice[0], Contains("1 step in 10 carries 45.00 ms more outside every phase"));
  CHECK_THAT(s.diag.advice[0], Contains("every 10 steps?"));
  CHECK_THAT(s.diag.evidence, Contains("The typical step carries little of it"));
  for (const std::string& a : s.diag.advice) CHECK_THAT(a, !Contains(".item()"));
  const hypothesis* syncs = checked(s, "per-step host syncs");
  REQUIRE(syncs != nullptr);
  CHECK_FALSE(syncs->holds);
  CHECK_THAT(syncs->premise, Contains("refuted"));
  // The JSON carries both, and reads them back.
  const auto doc = nlohmann::json::parse(s.json());
  CHECK(doc["diagnosis"]["periodic"][0]["every"] == 10);
  CHECK(doc["diagnosis"]["hypotheses"].size() == s.diag.hypotheses.size());
  const summary back = summary::from_json(s.json());
  REQUIRE(back.diag.periodic.size() == 1);
  CHECK(back.diag.periodic[0].every == 10);
  CHECK(back.diag.hypotheses.size() == s.diag.hypotheses.size());
}

TEST_CASE("a period longer than the recent steps is read from the slowest ones", "[hypotheses]") {
  // 1,000 steps, a checkpoint every 50: the 64 recent steps hold one or two, the 8 slowest are
  // checkpoints whose distances are multiples of 50.
  for (const std::uint64_t offset : {0ULL, 17ULL, 49ULL}) {
    const summary s = checkpointing(1000, 50, offset);
    REQUIRE(s.diag.periodic.size() == 1);
    CHECK(s.diag.periodic[0].every == 50);
  }
}

TEST_CASE("a sync in every step keeps the per-step advice", "[hypotheses]") {
  const summary s = syncing_every_step({{"python.version", "3.11.9"}});
  CHECK(s.diag.label == "WAIT-HEAVY");
  CHECK(s.diag.periodic.empty());
  CHECK_THAT(s.diag.advice.at(0), Contains(".item()"));
  const hypothesis* syncs = checked(s, "per-step host syncs");
  REQUIRE(syncs != nullptr);
  CHECK(syncs->holds);
}

TEST_CASE("a few steps at no period are said as such, with capture to see the next", "[hypotheses]") {
  loop l;
  const std::vector<std::uint64_t> slow = {3, 17, 18, 40, 71, 93};
  l.run(100, [&](std::uint64_t i, std::uint64_t at) {
    l.phase(builtin::compute, at, 5 * ms);
    if (std::find(slow.begin(), slow.end(), i) != slow.end()) at += 40 * ms;
    return at;
  });
  const summary s = l.result();
  CHECK(s.diag.periodic.empty());
  REQUIRE_FALSE(s.diag.advice.empty());
  CHECK_THAT(s.diag.advice[0], Contains("at no period"));
  CHECK_THAT(s.diag.advice[0], Contains("capture=\"slow\""));
  for (const std::string& a : s.diag.advice) CHECK_THAT(a, !Contains(".item()"));
}

TEST_CASE("periodic work inside a phase is named under any label", "[hypotheses]") {
  const phase_id eval = register_phase("eval");
  loop l;
  l.run(120, [&](std::uint64_t i, std::uint64_t at) {
    l.add(record_kind::phase_begin, at, builtin::compute.value);
    at += 8 * ms;
    if (i % 20 == 5) l.phase(eval, at, 30 * ms);
    l.add(record_kind::phase_end, at, builtin::compute.value);
    return at;
  });
  const summary s = l.result();
  REQUIRE(s.diag.periodic.size() == 1);
  CHECK(s.diag.periodic[0].phase == "eval");
  CHECK(s.diag.periodic[0].every == 20);
  CHECK(s.diag.periodic[0].excess_ms == Approx(30.0).margin(0.01));
  bool said = false;
  for (const std::string& a : s.diag.advice)
    said = said || a.find("1 step in 20 carries 30.00 ms more in `eval`") != std::string::npos &&
                       a.find("exclude(\"eval\")") != std::string::npos;
  INFO(s.diag.advice.size() << " " << (s.diag.advice.empty() ? "" : s.diag.advice.back()) << " " << s.diag.label);
  CHECK(said);
  CHECK(std::any_of(s.diag.gains.begin(), s.diag.gains.end(),
                    [](const auto& g) { return g.first == "every 20 steps: eval"; }));
}

TEST_CASE("a run of empty steps is too short to judge, and advises nothing", "[hypotheses]") {
  loop l;
  l.run(3, [](std::uint64_t, std::uint64_t at) { return at + 2000; });
  const summary s = l.result();
  REQUIRE(s.steps == 3);
  CHECK(s.diag.label.empty());
  CHECK(s.diag.advice.empty());
  CHECK(s.diag.gains.empty());
  CHECK_THAT(s.diag.evidence, Contains("too short to judge"));
  // Short steps that hold work are judged.
  loop busy;
  busy.run(3, [&](std::uint64_t, std::uint64_t at) {
    busy.phase(builtin::compute, at, 100'000);
    return at;
  });
  CHECK_FALSE(busy.result().diag.label.empty());
}

TEST_CASE("threads that take turns on a lock are told so, whatever the phase is called", "[hypotheses]") {
  // 4 request threads in steps all the time, 1.0 core busy between them on an 8-core host: one runs
  // at a time. The blocked time is in a phase named `lock` (62%), or in `wait`.
  auto server = [](std::string_view blocked, std::string busy, std::string waiting) {
    summary s = testing::with_shares({{std::string(blocked), 0.62}, {"compute", 0.38}});
    s.threads = 4;
    s.step_ms.total = 4000;
    s.wall_ms = 1000;
    return testing::with_facts(s, {{"cpu.cores_busy", busy}, {"cpu.cores_waiting", waiting}, {"host.cpus", "8"}});
  };
  for (const std::string_view name : {"lock", "wait"}) {
    const diagnosis d = diagnose(server(name, "1.00", "0.02"));
    CHECK(d.label == "WAIT-HEAVY");
    REQUIRE_FALSE(d.advice.empty());
    CHECK_THAT(d.advice[0], Contains("take turns on a shared lock"));
    CHECK_THAT(d.advice[0], Contains(fmt::format("`{}` holds 62%", name)));
    for (const std::string& a : d.advice) CHECK_THAT(a, !Contains(".item()"));
  }
  // The same shares with the threads running (3.6 cores), or waiting for cores: no lock.
  CHECK(diagnose(server("lock", "3.60", "0.02")).label == "BALANCED");
  const diagnosis starved = diagnose(server("lock", "1.00", "2.50"));
  CHECK(starved.label == "BALANCED");
  for (const hypothesis& h : starved.hypotheses) CHECK_FALSE((h.fix == "a shared lock" && h.holds));
}

TEST_CASE("a C++ program's blocked time is advised in its own terms", "[hypotheses]") {
  const summary s = syncing_every_step({});
  CHECK(s.diag.label == "WAIT-HEAVY");
  CHECK_THAT(s.diag.advice.at(0), Contains("cudaStreamSynchronize"));
  for (const std::string& a : s.diag.advice) CHECK_THAT(a, !Contains(".item()"));
}

TEST_CASE("a framework's loop is told its own knobs", "[hypotheses]") {
  const summary loader_bound = testing::with_shares({{"input", 0.6}, {"compute", 0.4}});
  auto first = [](const summary& s) { return diagnose(s).advice.at(0); };
  const auto facts = [&](std::string framework) {
    return testing::with_facts(
        loader_bound,
        {{"python.version", "3.11.9"}, {"framework", framework}, {"dataloader.num_workers", "0"}, {"host.cpus", "8"}});
  };
  CHECK_THAT(first(facts("transformers")), Contains("TrainingArguments(dataloader_num_workers=0)"));
  CHECK_THAT(first(facts("transformers")), Contains("try dataloader_num_workers=4"));
  CHECK_THAT(first(facts("lightning")), Contains("DataLoader(num_workers=0) in train_dataloader()"));
  CHECK_THAT(first(facts("")), StartsWith("DataLoader(num_workers=0)"));
  // Lightning's time between steps is its own work: callbacks, self.log, the progress bar.
  const summary between = testing::with_facts(testing::with_shares({{"other", 0.5}, {"compute", 0.5}}),
                                              {{"python.version", "3.11.9"}, {"framework", "lightning"}});
  CHECK_THAT(first(between), Contains("Lightning's own work between training steps"));
  CHECK_THAT(first(between), !Contains(".item()"));
}

TEST_CASE("a process whose own threads outnumber its cores hears to run fewer first", "[hypotheses]") {
  // torch's 8 intra-op threads get 1.1 cores: fewer threads comes before freeing the cores.
  auto with_threads = [](std::string threads) {
    return testing::with_facts(testing::with_shares({{"compute", 0.9}}), {{"python.version", "3.11.9"},
                                                                          {"torch.num_threads", threads},
                                                                          {"cpu.cores_busy", "1.10"},
                                                                          {"cpu.cores_waiting", "2.40"},
                                                                          {"host.cpus", "8"}});
  };
  const diagnosis d = diagnose(with_threads("8"));
  REQUIRE(d.advice.size() >= 2);
  CHECK_THAT(d.advice[0], StartsWith("run fewer threads of its own first: torch.set_num_threads(1)"));
  CHECK_THAT(d.advice[0], Contains("(up to 62% shorter steps)"));  // compute 90% x 2.4 / 3.5 of its wanted cores
  CHECK_THAT(d.advice[1], StartsWith("free the cores first"));
  // As many threads as the cores it gets: no such advice, and the hypothesis says why.
  const diagnosis fits = diagnose(with_threads("1"));
  CHECK_THAT(fits.advice.at(0), StartsWith("free the cores first"));
  CHECK(std::any_of(fits.hypotheses.begin(), fits.hypotheses.end(),
                    [](const hypothesis& h) { return h.fix == "fewer intra-op threads" && !h.holds; }));
}

TEST_CASE("loader workers that only wait are not told to make samples cheaper", "[hypotheses]") {
  // The process tree asks for all 2 cores, but the 2 workers use 0.1 of them: the training
  // process's own threads hold the CPU.
  const summary s = testing::with_facts(testing::with_shares({{"input", 0.6}, {"compute", 0.4}}),
                                        {{"python.version", "3.11.9"},
                                         {"dataloader.num_workers", "2"},
                                         {"torch.num_threads", "2"},
                                         {"cpu.cores_busy", "1.20"},
                                         {"cpu.cores_waiting", "0.70"},
                                         {"cpu.workers_cores_busy", "0.10"},
                                         {"cpu.workers_cores_waiting", "0.05"},
                                         {"host.cpus", "2"}});
  const diagnosis d = diagnose(s);
  CHECK(d.label == "INPUT-BOUND");
  CHECK_THAT(d.advice.at(0), Contains("the samples are not what holds the CPU"));
  CHECK_THAT(d.advice.at(0), Contains("its 2 intra-op threads"));
  for (const std::string& a : d.advice) CHECK_THAT(a, !Contains("make samples cheaper"));
}

TEST_CASE("a live device view that lost records to CUPTI's cap says so, and is not read as whole", "[hypotheses]") {
  // 100 steps of 200 kernels recorded; the GPU idles 40% of the step while the host is in `wait`.
  auto live = [](std::uint64_t dropped) {
    summary s = testing::with_device({{"wait", 0.4}, {"compute", 0.6}}, 0.6, 50, {{"wait", 1.0}});
    s.gpu->dropped_records = dropped;
    return testing::with_facts(s, {{"python.version", "3.11.9"}});
  };
  const diagnosis few = diagnose(live(100));  // 0.5% of them: said beside the figures
  CHECK(few.label == "WAIT-HEAVY");
  CHECK_THAT(few.evidence, Contains("CUPTI dropped 100 device records to its buffer cap (0.5% of those it recorded): "
                                    "the GPU's busy time is undercounted, its idle time an upper bound."));
  const diagnosis many = diagnose(live(5000));  // 20%: the host view decides
  CHECK_THAT(many.evidence, Contains("The device view is not complete: CUPTI dropped 5000 device records"));
  CHECK_THAT(many.evidence, !Contains("The GPU sat idle"));
  CHECK_THAT(many.advice.back(), Contains("device_sample=4"));
  CHECK(std::any_of(many.hypotheses.begin(), many.hypotheses.end(),
                    [](const hypothesis& h) { return h.fix == "a complete device view" && !h.holds; }));
  CHECK_THAT(diagnose(live(0)).evidence, !Contains("dropped"));
}
