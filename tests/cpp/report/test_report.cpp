#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "helpers.hpp"
#include "steptrace/steptrace.hpp"
#include "summaries.hpp"

using namespace steptrace;
using Catch::Matchers::Contains;

namespace {

summary recorded() {
  tracer t(steptrace::testing::quiet(1));
  for (int i = 0; i < 6; ++i) {
    scoped_step step(t);
    scoped_phase in(t, builtin::input);
    steptrace::testing::spin_for(std::chrono::microseconds(300));
  }
  return t.summary();
}

}  // namespace

TEST_CASE("the JSON follows schema steptrace.summary/1", "[report]") {
  const summary s = recorded();
  const auto j = nlohmann::json::parse(s.json());
  CHECK(j["schema"] == "steptrace.summary/1");
  CHECK(j["steps"] == 5);
  CHECK(j["warmup_steps"] == 1);
  for (const char* key : {"mean", "p50", "p95", "p99", "max"}) CHECK(j["step_ms"].contains(key));
  double shares = 0;
  for (const auto& [name, p] : j["phases"].items()) {
    for (const char* key : {"total_ms", "mean_ms", "p50_ms", "p95_ms", "p99_ms", "max_ms", "share", "calls"}) {
      CHECK(p.contains(key));
    }
    shares += p["share"].get<double>();
  }
  CHECK(shares == Approx(1.0));
  CHECK(j["phases"].contains("other"));
  CHECK(j["diagnosis"]["label"] == "INPUT-BOUND");
  if (!steptrace::testing::driver_here()) {  // on a GPU machine these steps have a device view
    CHECK(j["gpu"].is_null());
    CHECK(j["backend"]["cuda"] == false);
  }
  CHECK(!j["backend"]["reason"].get<std::string>().empty());
}

TEST_CASE("a summary read back from its JSON prints the same table", "[report]") {
  const summary s = recorded();
  const summary back = summary::from_json(s.json());
  CHECK(back.table() == s.table());
  CHECK(back.json() == s.json());
}

TEST_CASE("device times of steps and phases are in the table and survive the JSON", "[report][gpu]") {
  summary s = recorded();
  s.step_device_ms = stat_ms{40.0, 8.0, 7.5, 9.5, 9.9, 10.0};
  s.step_device_steps = 5;
  s.phases[0].device_ms = stat_ms{20.0, 4.0, 4.0, 4.5, 4.6, 4.7};
  s.phases[0].device_calls = 5;
  const auto j = nlohmann::json::parse(s.json());
  CHECK(j["step_device_ms"]["mean"] == 8.0);
  CHECK(j["step_device_steps"] == 5);
  CHECK(j["phases"][s.phases[0].name]["device_ms"]["p95"] == 4.5);
  CHECK_THAT(s.table(), Contains("each step on its stream (CUDA events): 8.000 ms a step"));
  CHECK_THAT(s.table(), Contains("`" + s.phases[0].name + "` on its stream (CUDA events): 4.000 ms a call"));
  const summary back = summary::from_json(s.json());
  CHECK(back.json() == s.json());
  CHECK_FALSE(nlohmann::json::parse(recorded().json()).contains("step_device_ms"));
}

TEST_CASE("the device's own-stream and device-wide busy, and its memory, are in the table and survive the JSON",
          "[report][gpu]") {
  summary s = recorded();
  gpu_stats g;
  g.steps_viewed = 10;
  g.steps_all_streams = 2;
  g.busy_share = 0.4;
  g.device_busy_share = 0.9;
  g.memory.allocations_per_step = 2;
  g.memory.allocated_mb_per_step = 64;
  g.memory.freed_mb_per_step = 32;
  g.memory.net_mb = -12.5;  // released more than it allocated: a change may be negative
  g.memory.step_peak_mb_p50 = 48;
  g.memory.step_peak_mb_max = 96;
  s.gpu = g;
  const std::string table = s.table();
  CHECK_THAT(table, Contains("busy 40.0% of step time"));
  CHECK_THAT(table, Contains("their devices, every stream: busy 90.0% of step time (2 steps named no stream"));
  CHECK_THAT(table, Contains("memory: CUDA allocated 64.00 MB (2.0 calls) and freed 32.00 MB per step"));
  CHECK_THAT(table, Contains("p50 48.00 MB, max 96.00 MB; -12.50 MB over the run"));
  const auto j = nlohmann::json::parse(s.json());
  CHECK(j["gpu"]["device_busy_share"] == 0.9);
  CHECK(j["gpu"]["memory"]["step_peak_mb"]["max"] == 96.0);
  const summary back = summary::from_json(s.json());
  CHECK(back.json() == s.json());
}

TEST_CASE("reading anything but a summary is a clear error", "[report][errors]") {
  CHECK_THROWS_WITH(summary::from_json("not json"), Contains("not valid JSON"));
  CHECK_THROWS_WITH(summary::from_json("[1, 2]"), Contains("no \"schema\" field"));
  CHECK_THROWS_WITH(summary::from_json(R"({"schema": "other/2"})"), Contains("unsupported summary schema \"other/2\""));
  CHECK_THROWS_WITH(summary::from_json(R"({"schema": "steptrace.summary/1", "steps": 1})"), Contains("malformed"));
}

TEST_CASE("a summary with negative, fractional or absurd numbers is refused, naming the field", "[report][errors]") {
  const std::string good = recorded().json();
  auto with = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    const auto at = text.find(from);
    REQUIRE(at != std::string::npos);
    return text.replace(at, from.size(), to);
  };
  CHECK_NOTHROW(summary::from_json(good));
  CHECK_THROWS_WITH(summary::from_json(with("\"steps\": 5", "\"steps\": -3")),
                    Contains("\"steps\" must be a non-negative integer"));
  CHECK_THROWS_WITH(summary::from_json(with("\"steps\": 5", "\"steps\": 1e30")), Contains("\"steps\""));
  CHECK_THROWS_WITH(summary::from_json(with("\"steps\": 5", "\"steps\": 2.5")), Contains("\"steps\""));
  CHECK_THROWS_WITH(summary::from_json(with("\"wall_ms\": ", "\"wall_ms\": -")),
                    Contains("\"wall_ms\" must be a finite non-negative number"));
}

TEST_CASE("the table shows every phase and the label and evidence and advice", "[report]") {
  const std::string table = recorded().table();
  CHECK_THAT(table, Contains("5 steps (1 warm-up and 0 failed not counted)"));
  CHECK_THAT(table, Contains("input"));
  CHECK_THAT(table, Contains("other"));
  CHECK_THAT(table, Contains("diagnosis  INPUT-BOUND"));
  CHECK_THAT(table, Contains("try first"));
}

TEST_CASE("the table shows children indented under their parent, and the JSON gives each its parent",
          "[report][tree]") {
  tracer t(steptrace::testing::quiet());
  const phase_id decode = register_phase("report-decode");
  for (int i = 0; i < 4; ++i) {
    scoped_step step(t);
    scoped_phase in(t, builtin::input);
    scoped_phase d(t, decode);
    steptrace::testing::spin_for(std::chrono::microseconds(200));
  }
  const summary s = t.summary();
  REQUIRE(s.phase("report-decode") != nullptr);
  CHECK(s.phase("report-decode")->parent == "input");
  CHECK(s.phase("input")->parent.empty());
  CHECK(s.phase("input")->inclusive_ms.total >= s.phase("report-decode")->ms.total);
  CHECK(s.phase("input")->inclusive_ms.total ==
        Approx(s.phase("input")->ms.total + s.phase("report-decode")->ms.total).epsilon(1e-6));
  const std::string table = s.table();
  const auto input_row = table.find("\ninput "), decode_row = table.find("\n  report-decode");
  REQUIRE(input_row != std::string::npos);
  REQUIRE(decode_row != std::string::npos);
  CHECK(decode_row > input_row);
  CHECK_THAT(table, Contains("`input` with the phases inside it"));
  const summary back = summary::from_json(s.json());
  CHECK(back.phase("report-decode")->parent == "input");
  CHECK(back.phase("input")->inclusive_ms.total == Approx(s.phase("input")->inclusive_ms.total));
  CHECK(nlohmann::json::parse(s.json())["phases"]["input"]["parent"].is_null());
}

TEST_CASE("long phase names (record_function ranges) widen the name column, and the longest are cut", "[report]") {
  summary s;
  s.steps = 10;
  s.step_ms = stat_ms{100, 10, 10, 10, 10, 10};
  const std::string very_long(60, 'x');
  for (const std::string& name :
       {std::string("input"), std::string("Optimizer.zero_grad#SGD.zero_grad"), very_long, std::string("other")}) {
    phase_stats p;
    p.name = name;
    p.ms = stat_ms{25, 2.5, 2.5, 2.5, 2.5, 2.5};
    p.share = 0.25;
    p.calls = 10;
    s.phases.push_back(p);
  }
  std::istringstream table(s.table());
  std::vector<std::size_t> share_columns;
  for (std::string row; std::getline(table, row);) {
    if (row.find("25.0%") != std::string::npos) share_columns.push_back(row.find("25.0%"));
  }
  REQUIRE(share_columns.size() == 4);
  for (std::size_t at : share_columns) CHECK(at == share_columns.front());  // the figures stay in their columns
  CHECK_THAT(s.table(), Contains("Optimizer.zero_grad#SGD.zero_grad "));
  CHECK_THAT(s.table(), Contains(std::string(37, 'x') + "~"));
  CHECK_THAT(s.table(), !Contains(std::string(39, 'x')));
}

TEST_CASE("the table says the GPU ran on past the summary only where that moves the figures by 1% or more",
          "[report][gpu]") {
  summary s = testing::with_device({{"compute", 1.0}}, 0.9, 500);
  s.step_ms.total = 1000;  // 100 steps of 10 ms
  s.facts = {{"gpu.behind_at_summary_ms", "10.0"}};
  CHECK_THAT(s.table(), Contains("the GPU still ran the steps' work for 10.0 ms after the summary was asked (1% of "
                                 "the steps' time)"));
  s.facts = {{"gpu.behind_at_summary_ms", "9.9"}};
  CHECK_THAT(s.table(), !Contains("the GPU still ran"));
}
