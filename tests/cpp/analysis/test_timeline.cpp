// The flight recorder, the step series, the Chrome trace and the Prometheus text, on hand-made
// record streams with known answers (1 tick = 1 ns here); windows on a real tracer.
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "analysis/aggregate.hpp"
#include "analysis/device_view.hpp"
#include "analysis/flight_recorder.hpp"
#include "analysis/step_fan_out.hpp"
#include "helpers.hpp"
#include "report/report.hpp"
#include "steptrace/tracer.hpp"

using namespace steptrace;
using namespace steptrace::detail;

namespace {

constexpr auto input = builtin::input, compute = builtin::compute;

std::uint64_t same(std::uint64_t t) { return t; }

// Feeds one thread's records to an aggregate and a flight recorder through the collector's fan-out.
struct harness {
  aggregate totals;
  flight_recorder recorder;
  step_fan_out out{0};
  step_builder builder{0, 0};
  harness() { out.add(totals).add(recorder); }
  void add(record_kind kind, std::uint64_t t, std::uint32_t id = 0) { builder.consume(record{t, id, kind}, out); }
  summary result() {
    summary out;
    totals.fill(out, 1.0);
    recorder.fill(out.timeline, totals.run_begin(), 1.0, &same);
    complete(out);
    return out;
  }
};

// A step of `ms` milliseconds from t: input 20%, then compute with `fwd` nested inside it.
std::uint64_t one_step(harness& h, std::uint64_t t, std::uint64_t ms, phase_id fwd) {
  const std::uint64_t len = ms * 1'000'000;
  h.add(record_kind::step_begin, t);
  h.add(record_kind::phase_begin, t, input.value);
  h.add(record_kind::phase_end, t + len / 5, input.value);
  h.add(record_kind::phase_begin, t + len / 5, compute.value);
  h.add(record_kind::phase_begin, t + len / 2, fwd.value);
  h.add(record_kind::phase_end, t + len * 9 / 10, fwd.value);
  h.add(record_kind::phase_end, t + len, compute.value);
  h.add(record_kind::step_end, t + len);
  return t + len + 1000;
}

const timeline_step* find_step(const summary& s, std::uint64_t index) {
  for (const timeline_step& st : s.timeline.steps) {
    if (st.index == index) return &st;
  }
  return nullptr;
}

// Every event of a Chrome trace is well-formed, and slices on one track nest.
void check_trace(const std::string& text, std::size_t& slices) {
  const auto doc = nlohmann::json::parse(text);
  REQUIRE(doc.at("traceEvents").is_array());
  std::map<std::pair<int, long>, std::vector<std::pair<double, double>>> tracks;
  slices = 0;
  for (const auto& e : doc["traceEvents"]) {
    REQUIRE(e.at("ph").is_string());
    REQUIRE(e.at("pid").is_number_integer());
    REQUIRE(e.at("tid").is_number_integer());
    REQUIRE(e.at("name").is_string());
    if (e["ph"] == "M") continue;
    REQUIRE(e["ph"] == "X");
    REQUIRE(e.at("ts").is_number());
    REQUIRE(e.at("dur").get<double>() >= 0);
    tracks[{e["pid"].get<int>(), e["tid"].get<long>()}].emplace_back(e["ts"].get<double>(),
                                                                     e["ts"].get<double>() + e["dur"].get<double>());
    ++slices;
  }
  for (auto& [track, xs] : tracks) {
    std::sort(xs.begin(), xs.end(),
              [](auto a, auto b) { return a.first != b.first ? a.first < b.first : a.second > b.second; });
    std::vector<double> open;  // ends of the enclosing slices
    for (const auto& [b, e] : xs) {
      while (!open.empty() && open.back() <= b) open.pop_back();
      if (!open.empty()) REQUIRE(e <= open.back() + 1e-6);  // inside its parent, never across its end
      open.push_back(e);
    }
  }
}

}  // namespace

TEST_CASE("10,000 steps with one 50x slower: the timeline keeps it with its phases, bounded", "[timeline]") {
  harness h;
  const phase_id fwd = register_phase("forward");
  std::uint64_t t = 1'000'000'000;
  for (std::uint64_t i = 0; i < 10'000; ++i) t = one_step(h, t, i == 6'000 ? 500 : 10, fwd);
  const summary s = h.result();
  REQUIRE(s.steps == 10'000);

  const timeline_step* slow = find_step(s, 6'000);
  REQUIRE(slow != nullptr);
  CHECK(slow->slowest);
  CHECK_FALSE(slow->recent);
  CHECK(slow->step_ms == Approx(500.0));
  REQUIRE(slow->phases.size() == 3);
  CHECK(slow->phases[0].name == "input");
  CHECK(slow->phases[0].end_ms - slow->phases[0].begin_ms == Approx(100.0));
  CHECK(slow->phases[1].name == "compute");
  CHECK(slow->phases[1].depth == 0);
  CHECK(slow->phases[2].name == "forward");
  CHECK(slow->phases[2].depth == 1);
  CHECK(slow->phases[2].end_ms - slow->phases[2].begin_ms == Approx(200.0));
  // Its place in the run: 6000 steps of 10 ms (and 1 µs gaps) before it.
  CHECK(slow->begin_ms == Approx(6000 * 10.001));

  std::size_t recent = 0, slowest = 0;
  for (const timeline_step& st : s.timeline.steps) {
    recent += st.recent;
    slowest += st.slowest;
    if (st.recent) CHECK(st.index >= 10'000 - 64);
  }
  CHECK(recent == 64);
  CHECK(slowest == 8);
  CHECK(s.timeline.steps.size() == 64 + 8);  // the seven other slowest tie at 10 ms: older ones

  // The table names it; the JSON carries it and stays bounded.
  CHECK(s.table().find("slowest step: 6000 of thread 0, 500.0 ms (50.0x the p50)") != std::string::npos);
  const std::string json = s.json();
  CHECK(json.size() < 120'000);
  const summary back = summary::from_json(json);
  REQUIRE(back.timeline.steps.size() == s.timeline.steps.size());
  const timeline_step* again = find_step(back, 6'000);
  REQUIRE(again != nullptr);
  CHECK(again->phases.size() == 3);
  CHECK(again->slowest);

  std::size_t slices = 0;
  check_trace(s.trace(), slices);
  CHECK(slices == 72 * 4);           // each kept step and its three phase calls
  CHECK(back.trace() == s.trace());  // `steptrace trace run.json` makes the same file
  CHECK(h.recorder.bytes() < 72 * 1024);
}

TEST_CASE("the flight recorder's memory does not grow with the run", "[timeline]") {
  harness h;
  const phase_id fwd = register_phase("forward");
  std::uint64_t t = 1'000;
  for (int i = 0; i < 1'000; ++i) t = one_step(h, t, 1 + i % 7, fwd);
  const std::uint64_t after_1k = h.recorder.bytes();
  for (int i = 0; i < 20'000; ++i) t = one_step(h, t, 1 + i % 7, fwd);
  CHECK(h.recorder.bytes() == after_1k);
}

TEST_CASE("set-aside spans and warm-up steps are in the timeline; slowest counts only counted steps", "[timeline]") {
  harness h;
  h.builder.set_warmup(1);
  const phase_id ckpt = register_phase("checkpoint");
  h.add(record_kind::step_begin, 0);  // warm-up: the slowest of all, never among the slowest
  h.add(record_kind::step_end, 900'000'000);
  h.add(record_kind::step_begin, 1'000'000'000);
  h.add(record_kind::exclude_begin, 1'010'000'000, ckpt.value);
  h.add(record_kind::exclude_end, 1'060'000'000, ckpt.value);
  h.add(record_kind::step_end, 1'070'000'000);
  const summary s = h.result();
  REQUIRE(s.timeline.steps.size() == 2);
  CHECK(s.timeline.steps[0].warmup);
  CHECK_FALSE(s.timeline.steps[0].slowest);
  const timeline_step& st = s.timeline.steps[1];
  CHECK(st.slowest);
  CHECK(st.step_ms == Approx(20.0));  // 70 ms window, 50 ms set aside
  REQUIRE(st.set_aside.size() == 1);
  CHECK(st.set_aside[0].name == "checkpoint");
  CHECK(st.set_aside[0].end_ms - st.set_aside[0].begin_ms == Approx(50.0));
  REQUIRE(s.timeline.set_aside.size() == 1);
  std::size_t slices = 0;
  check_trace(s.trace(), slices);
  CHECK(slices == 3);  // two steps and the span (drawn once, with its step)
}

TEST_CASE("device records join the kept steps; the trace marks idle gaps by host phase", "[timeline]") {
  harness h;
  const phase_id fwd = register_phase("forward");
  one_step(h, 1'000'000'000, 10, fwd);  // input [0, 2) ms, compute [2, 10), forward [5, 9)
  device_join join;
  auto kernel = [](std::uint64_t b, std::uint64_t e) {
    device_record r;
    r.kind = device_activity::kernel;
    r.context = 1;
    r.stream = 7;
    r.start = b;
    r.end = e;
    return r;
  };
  device_record copy = kernel(1'002'000'000, 1'003'000'000);
  copy.kind = device_activity::memcpy;
  copy.copy = copy_kind::h2d;
  copy.bytes = 4096;
  join.add_records({copy, kernel(1'005'000'000, 1'009'000'000)});
  h.recorder.attach_device(join, 2'000'000'000, &same);
  const summary s = h.result();
  REQUIRE(s.timeline.steps.size() == 1);
  const timeline_step& st = s.timeline.steps[0];
  REQUIRE(st.device_known);
  REQUIRE(st.device.size() == 2);
  CHECK(st.device[0].kind == "copy HtoD");
  CHECK(st.device[0].bytes == 4096);
  CHECK(st.device[1].kind == "kernel");
  CHECK(st.device[1].begin_ms == Approx(5.0));

  const auto doc = nlohmann::json::parse(s.trace());
  std::map<std::string, double> idle;  // host phase -> idle ms
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "X" && e["cat"] == "idle")
      idle[e["args"]["host_phase"].get<std::string>()] += e["dur"].get<double>() / 1e3;
  }
  // Idle: [0, 2) in input, [3, 5) in compute, [9, 10) in compute (forward ended at 9).
  CHECK(idle["input"] == Approx(2.0));
  CHECK(idle["compute"] == Approx(3.0));
  CHECK(idle.count("forward") == 0);
  const summary back = summary::from_json(s.json());
  CHECK(back.trace() == s.trace());
}

TEST_CASE("the step series covers the whole run in at most 240 points", "[timeline]") {
  harness h;
  const phase_id fwd = register_phase("forward");
  std::uint64_t t = 0;
  for (int i = 0; i < 10'000; ++i) t = one_step(h, t, i < 5'000 ? 10 : 20, fwd);
  const summary s = h.result();
  REQUIRE(s.series.points.size() <= 240);
  REQUIRE(s.series.points.size() >= 120);
  std::uint64_t steps = 0;
  for (const series_point& p : s.series.points) {
    CHECK(p.first_step == steps);
    steps += p.steps;
  }
  CHECK(steps == 10'000);
  CHECK(s.series.points.front().step_ms == Approx(10.0));
  CHECK(s.series.points.back().step_ms == Approx(20.0));
  const auto in = std::find(s.series.phases.begin(), s.series.phases.end(), "input") - s.series.phases.begin();
  CHECK(s.series.points.back().phase_ms[static_cast<std::size_t>(in)] == Approx(4.0));
  const summary back = summary::from_json(s.json());
  CHECK(back.series.points.size() == s.series.points.size());
}

TEST_CASE("windows from 8 threads add up to the whole run, which they leave untouched", "[timeline][windows]") {
  tracer t(testing::quiet());
  const phase_id work = register_phase("work");
  std::atomic<bool> go{true};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      for (int n = 0; n < 3'000; ++n) {
        scoped_step step(t);
        scoped_phase p(t, work);
      }
    });
  }
  std::uint64_t window_steps = 0, window_calls = 0;
  int windows = 0;
  auto take = [&] {
    const summary w = t.window();
    ++windows;
    window_steps += w.steps;
    if (const phase_stats* p = w.phase("work")) window_calls += p->calls;
  };
  for (int i = 0; i < 20; ++i) {
    take();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  for (auto& th : threads) th.join();
  take();
  const summary whole = t.summary();
  CHECK(whole.steps == 8 * 3'000);
  CHECK(window_steps == whole.steps);
  CHECK(window_calls == whole.phase("work")->calls);
  CHECK(t.window().steps == 0);  // nothing since the last one
  CHECK(t.summary().steps == whole.steps);
  CHECK(whole.timeline.steps.size() <= 8 * (64 + 8));
}

TEST_CASE("prometheus text: names, labels escaped, quantiles in seconds", "[timeline]") {
  summary s;
  s.steps = 10;
  s.step_ms = stat_ms{1000, 100, 90, 150, 190, 200};
  phase_stats p;
  p.name = "odd \"name\"\\\n";
  p.ms = stat_ms{500, 50, 40, 80, 90, 95};
  p.share = 0.5;
  p.calls = 10;
  s.phases.push_back(p);
  s.diag.label = "INPUT-BOUND";
  s.rank = rank_info{1, 2, 1, "h", ""};
  const std::string text = s.prometheus("app_steptrace");
  CHECK(text.find("app_steptrace_step_seconds{rank=\"1\",quantile=\"0.5\"} 0.09\n") != std::string::npos);
  CHECK(text.find("app_steptrace_step_seconds_count{rank=\"1\"} 10\n") != std::string::npos);
  CHECK(text.find("app_steptrace_steps_total{rank=\"1\"} 10\n") != std::string::npos);
  CHECK(text.find("app_steptrace_phase_share{rank=\"1\",phase=\"odd \\\"name\\\"\\\\\\n\"} 0.5\n") !=
        std::string::npos);
  CHECK(text.find("app_steptrace_diagnosis{rank=\"1\",label=\"INPUT-BOUND\"} 1\n") != std::string::npos);
  CHECK_THROWS_WITH(s.prometheus("9bad"), Catch::Contains("'9bad' is not a Prometheus metric name prefix"));
}

TEST_CASE("the slowest kept are exactly the slowest counted steps, the recent exactly the last", "[timeline]") {
  harness h;
  const phase_id fwd = register_phase("forward");
  std::vector<std::pair<std::uint64_t, std::uint64_t>> lengths;  // (ms, index)
  std::uint64_t t = 0;
  for (std::uint64_t i = 0; i < 2'000; ++i) {
    const std::uint64_t ms = 1 + (i * 7919) % 1009;  // distinct within each 1009 steps, in no order
    lengths.emplace_back(ms, i);
    t = one_step(h, t, ms, fwd);
  }
  std::sort(lengths.rbegin(), lengths.rend());
  std::vector<std::uint64_t> want, got, recent;
  for (int k = 0; k < 8; ++k) want.push_back(lengths[static_cast<std::size_t>(k)].second);
  const summary s = h.result();
  for (const timeline_step& st : s.timeline.steps) {
    if (st.slowest) got.push_back(st.index);
    if (st.recent) recent.push_back(st.index);
  }
  std::sort(want.begin(), want.end());
  CHECK(got == want);
  REQUIRE(recent.size() == 64);
  CHECK(recent.front() == 2'000 - 64);
  CHECK(recent.back() == 1'999);
}
