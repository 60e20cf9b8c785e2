// Capture on trouble in a C++ program (steptrace/capture.hpp). The rule is proved on windows
// made by hand; the capture on steps the test records itself, whose indices it knows, with a
// phase that sleeps (it only ever runs long on a busy machine, which keeps the label).
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "helpers.hpp"
#include "steptrace/capture.hpp"
#include "steptrace/steptrace.hpp"

using namespace steptrace;
namespace fs = std::filesystem;

namespace {

constexpr double none = std::numeric_limits<double>::quiet_NaN();

using testing::temp_dir;

// One step: `input` sleeping `input_ms`, then `compute` sleeping `compute_ms`.
void step(tracer& t, int input_ms, int compute_ms) {
  scoped_step s(t);
  {
    scoped_phase p(t, builtin::input);
    std::this_thread::sleep_for(std::chrono::milliseconds(input_ms));
  }
  scoped_phase p(t, builtin::compute);
  std::this_thread::sleep_for(std::chrono::milliseconds(compute_ms));
}

// The tracer's forward captures; the retroactive ones that come before each, apart.
std::vector<capture_record> forward(tracer& t, std::vector<capture_record>* back = nullptr) {
  std::vector<capture_record> out;
  for (capture_record& c : t.summary().captures) {
    if (!c.retroactive) {
      out.push_back(std::move(c));
    } else if (back != nullptr) {
      back->push_back(std::move(c));
    }
  }
  return out;
}

// The tracer's forward captures once `n` have been written (or what it has after 20 s).
std::vector<capture_record> wait_for(tracer& t, std::size_t n) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::vector<capture_record> got;
  while ((got = forward(t)).size() < n && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return got;
}

}  // namespace

TEST_CASE("slow fires once a stretch, on p95 and p50 together, against the first stable windows", "[capture]") {
  capture_rule rule("slow");
  CHECK(rule.weigh(100, 300, "", none).empty());                            // the first window: warm-up, left out
  for (int i = 0; i < 3; ++i) CHECK(rule.weigh(10, 12, "", none).empty());  // the baselines: 10 and 12
  CHECK(rule.weigh(11, 30, "", none).empty());  // p95 alone over 2x: a preempted window, not a slow run
  CHECK(rule.weigh(29, 23, "", none).empty());  // p50 2.9x alone (p95 under 2x its baseline): not yet
  const std::string reason = rule.weigh(25, 30, "", none);
  CHECK(reason == "slow: step p95 30.00 ms, over 2x the baseline 12.00 ms (p50 25.00 ms against 10.00)");
  CHECK(rule.weigh(25, 30, "", none).empty());  // the same stretch
  CHECK(rule.weigh(10, 12, "", none).empty());  // one calm window inside it
  CHECK(rule.weigh(25, 30, "", none).empty());
  for (int i = 0; i < capture_rule::cool_down; ++i) CHECK(rule.weigh(10, 12, "", none).empty());
  CHECK_FALSE(rule.weigh(25, 30, "", none).empty());  // a new stretch
  // A loaded host's p95 baseline, inflated by preemption: a window of p50 at 6x counts on its own.
  capture_rule loaded("slow");
  loaded.weigh(100, 300, "", none);
  for (int i = 0; i < 3; ++i) loaded.weigh(10, 60, "", none);  // p95 baseline 60: preempted steps
  CHECK(loaded.weigh(60, 70, "", none) ==
        "slow: step p50 60.00 ms, over 3x the baseline 10.00 ms (p95 70.00 ms against 60.00)");
  capture_rule factor("slow=4");
  for (int i = 0; i < 4; ++i) factor.weigh(10, 12, "", none);
  CHECK(factor.weigh(35, 45, "", none).empty());  // 3.75x: under 4
  CHECK_FALSE(factor.weigh(41, 49, "", none).empty());
}

TEST_CASE("stall fires on one step far past the baseline p50, not on a slow window", "[capture]") {
  capture_rule rule("stall");
  CHECK(rule.weigh(100, 300, "", none, 300).empty());                           // the first window: warm-up, left out
  for (int i = 0; i < 3; ++i) CHECK(rule.weigh(10, 12, "", none, 14).empty());  // the baseline p50: 10
  CHECK(rule.weigh(30, 36, "", none, 145).empty());  // p50 3x the baseline: a slow window, not a one-off
  CHECK(rule.weigh(10, 12, "", none, 45).empty());   // 4.5x: under 5x
  CHECK(rule.weigh(10, 12, "", none, 109).empty());  // 10.9x, but 99 ms past: under stall_min_ms
  CHECK(rule.weigh(10, 12, "", none, 410) ==
        "stall: a step of " + format_ms(410) + " ms, 41x the baseline p50 10.00 ms");
  CHECK(rule.fired() == "stall");
  rule.cool(0);
  CHECK(rule.weigh(25, 300, "", none, 410).empty());  // p50 2.5x: a slow window, `slow`'s to say
  CHECK(rule.fired().empty());
  capture_rule both("slow,stall=20");
  for (int i = 0; i < 4; ++i) both.weigh(10, 12, "", none, 12);
  CHECK(both.weigh(10, 12, "", none, 150).empty());  // 15x: under 20
  CHECK(both.weigh(10, 12, "", none, 260).rfind("stall: ", 0) == 0);
  CHECK_THROWS_WITH(capture_rule("stall=1"), Catch::Contains("'stall=1'"));
}

TEST_CASE("label fires on a label that holds two windows; phase once per crossing; cool-down", "[capture]") {
  capture_rule rule("label,phase=input>0.5");
  CHECK(rule.has("label"));
  CHECK(rule.phase() == "input");
  CHECK_FALSE(rule.has("slow"));
  CHECK(rule.weigh(10, 12, "COMPUTE-BOUND", 0.1).empty());
  CHECK(rule.weigh(10, 12, "COMPUTE-BOUND", 0.1).empty());  // settles: no change yet
  CHECK(rule.weigh(10, 12, "INPUT-BOUND", 0.2).empty());    // one window: a flicker
  CHECK(rule.weigh(10, 12, "COMPUTE-BOUND", 0.2).empty());
  CHECK(rule.weigh(10, 12, "INPUT-BOUND", 0.3).empty());
  CHECK(rule.weigh(10, 12, "INPUT-BOUND", 0.3) == "label: COMPUTE-BOUND -> INPUT-BOUND");
  CHECK(rule.weigh(10, 12, "INPUT-BOUND", 0.61) == "phase: `input` 61.0% of the step, over 50%");
  CHECK(rule.weigh(10, 12, "INPUT-BOUND", 0.7).empty());   // still over: the same crossing
  CHECK(rule.weigh(10, 12, "INPUT-BOUND", none).empty());  // not in the window: no crossing either way
  CHECK(rule.weigh(10, 12, "INPUT-BOUND", 0.2).empty());
  rule.cool();
  CHECK(rule.weigh(10, 12, "INPUT-BOUND", 0.7).empty());  // a crossing while cooling down is not acted on
  CHECK(rule.weigh(10, 12, "INPUT-BOUND", 0.2).empty());
  CHECK_FALSE(rule.weigh(10, 12, "INPUT-BOUND", 0.7).empty());  // cooled down: the next crossing fires
}

TEST_CASE("file fires when the file is touched, and bad words are refused by name", "[capture]") {
  temp_dir dir;
  const std::string path = (dir.path / "go").string();
  capture_rule rule("file=" + path);
  CHECK(rule.weigh(10, 12, "", none).empty());  // no file yet
  std::ofstream(path) << "";
  CHECK(rule.weigh(10, 12, "", none) == "file " + path + " touched");
  CHECK(rule.weigh(10, 12, "", none).empty());
  timespec later[2] = {{0, UTIME_OMIT}, {0, 0}};
  clock_gettime(CLOCK_REALTIME, &later[1]);
  later[1].tv_sec += 5;
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), later, 0) == 0);
  rule.cool(0);
  CHECK_FALSE(rule.weigh(10, 12, "", none).empty());
  CHECK_THROWS_WITH(capture_rule("slow,sometimes"), Catch::Contains("'sometimes'"));
  CHECK_THROWS_WITH(capture_rule("phase=loss>0.3"), Catch::Contains("phase=loss>0.3"));
}

TEST_CASE("capture() keeps the steps that begin after it, writes them, and says their diagnosis", "[capture]") {
  temp_dir dir;
  config cfg = testing::quiet();
  cfg.capture_dir = (dir.path / "captures").string();
  cfg.capture_max = 1;
  tracer t(cfg);
  for (int i = 0; i < 2; ++i) step(t, 0, 3);  // steps 0 and 1: compute only
  REQUIRE(t.capture(3));
  CHECK_FALSE(t.capture(3));                  // one at a time
  for (int i = 0; i < 5; ++i) step(t, 4, 0);  // steps 2-6: input only
  const auto got = wait_for(t, 1);
  REQUIRE(got.size() == 1);
  const capture_record& c = got[0];
  CHECK(c.reason == "on demand: capture()");
  CHECK(c.first_step == 2);
  CHECK(c.last_step == 4);
  CHECK(c.steps == 3);
  CHECK(c.label == "INPUT-BOUND");
  CHECK(c.tool == "steptrace");
  CHECK(c.path == cfg.capture_dir + "/" + program_invocation_short_name + "-rank0-step2-pid" +
                      std::to_string(getpid()) + ".trace.json");
  const std::string trace = testing::read_file(c.path);
  for (int i = 2; i <= 4; ++i) CHECK(trace.find("\"step " + std::to_string(i) + "\"") != std::string::npos);
  for (int i : {1, 5}) CHECK(trace.find("\"step " + std::to_string(i) + "\"") == std::string::npos);
  CHECK(trace.find("\"input\"") != std::string::npos);
  // Steps 0 and 1, kept before capture(), were written at once: the retroactive capture.
  std::vector<capture_record> back;
  forward(t, &back);
  REQUIRE(back.size() == 1);
  CHECK(back[0].indices == std::vector<std::uint64_t>{0, 1});
  CHECK(back[0].tripped == 1);  // on demand: the last step kept
  CHECK(back[0].label == "COMPUTE-BOUND");
  CHECK(back[0].path == cfg.capture_dir + "/" + program_invocation_short_name + "-rank0-back-step1-pid" +
                            std::to_string(getpid()) + ".trace.json");
  const std::string kept = testing::read_file(back[0].path);
  CHECK(kept.find("\"step 1\"") != std::string::npos);
  CHECK(kept.find("\"step 2\"") == std::string::npos);
  CHECK(capture_block(back[0]).find("kept steps 0, 1 (step 1 tripped it): COMPUTE-BOUND\n") != std::string::npos);
  const auto read = summary::from_json(t.summary().json()).captures;  // JSON both ways
  REQUIRE(read.size() == 2);
  CHECK(read.at(0).retroactive);
  CHECK(read.at(0).indices == back[0].indices);
  CHECK(read.at(1).path == c.path);
  CHECK_FALSE(t.capture(3));  // capture_max
  const std::string block = capture_block(c);
  CHECK(block.find("captured steps 2-4: INPUT-BOUND\n") != std::string::npos);
  CHECK(block.find("no profiler run") != std::string::npos);
}

TEST_CASE("a phase trigger captures the steps after the crossing, and the JSONL gets the capture", "[capture]") {
  temp_dir dir;
  config cfg = testing::quiet();
  cfg.capture_dir = dir.path.string();
  cfg.capture = "phase=input>0.5";
  cfg.capture_steps = 4;
  cfg.live = 1;
  cfg.jsonl_path = (dir.path / "live.jsonl").string();
  tracer t(cfg);
  std::uint64_t steps = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
  while (std::chrono::steady_clock::now() < until) step(t, 0, 3), ++steps;  // compute only
  const std::uint64_t first_input = steps;
  std::vector<capture_record> got;
  for (int i = 0; i < 2000 && (got = forward(t)).empty(); ++i) step(t, 4, 0);  // input only
  REQUIRE(got.size() == 1);
  CHECK(got[0].reason.rfind("phase: `input`", 0) == 0);
  CHECK(got[0].first_step >= first_input);
  CHECK(got[0].steps == 4);
  CHECK(got[0].label == "INPUT-BOUND");
  const std::string jsonl = testing::read_file(cfg.jsonl_path);
  CHECK(jsonl.find("{\"capture\":{") != std::string::npos);
  CHECK(jsonl.find(got[0].path) != std::string::npos);
}

namespace {
std::atomic<int> program_handler_calls{0};
void program_handler(int) { program_handler_calls.fetch_add(1); }

// A tracer whose capture (2 steps, into `dir`) SIGUSR2 arms.
config on_signal(const temp_dir& dir) {
  config cfg = testing::quiet();
  cfg.capture_dir = dir.path.string();
  cfg.capture = "signal";
  cfg.capture_steps = 2;
  return cfg;
}

// Steps on `t` until it has a capture, for at most 15 s (with a driver the capture waits a second
// for device records its steps never launch).
std::vector<capture_record> step_until_captured(tracer& t) {
  std::vector<capture_record> got;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while ((got = forward(t)).empty() && std::chrono::steady_clock::now() < until) step(t, 0, 2);
  return got;
}

}  // namespace

TEST_CASE("SIGUSR2 arms a capture and the program's own handler still runs", "[capture]") {
  temp_dir dir;
  struct sigaction mine {};
  mine.sa_handler = &program_handler;
  sigemptyset(&mine.sa_mask);
  struct sigaction old {};
  REQUIRE(sigaction(SIGUSR2, &mine, &old) == 0);
  tracer t(on_signal(dir));
  step(t, 0, 1);
  ::raise(SIGUSR2);
  CHECK(program_handler_calls.load() == 1);
  const std::vector<capture_record> got = step_until_captured(t);
  REQUIRE(got.size() == 1);
  CHECK(got[0].reason == "signal SIGUSR2");
  CHECK(got[0].steps == 2);
}

TEST_CASE("SIGUSR2 arms the tracer that asked for it, not another one in the process", "[capture]") {
  temp_dir dir;
  struct sigaction old {};
  REQUIRE(sigaction(SIGUSR2, nullptr, &old) == 0);
  tracer other(testing::quiet());  // no capture asked: its collector polls fast while it is busy
  std::atomic<bool> busy{true};
  std::thread other_loop([&] {
    while (busy.load()) {
      scoped_step s(other);
      scoped_phase p(other, builtin::compute);
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  tracer t(on_signal(dir));
  step(t, 0, 1);
  ::raise(SIGUSR2);  // the busy tracer's collector looks at the signal far more often than t's
  const std::vector<capture_record> got = step_until_captured(t);
  busy.store(false);
  other_loop.join();
  CHECK(other.summary().captures.empty());  // neither forward nor retroactive
  REQUIRE(got.size() == 1);
  CHECK(got[0].reason == "signal SIGUSR2");
  sigaction(SIGUSR2, &old, nullptr);
}

TEST_CASE("a run that ends inside a capture writes the steps it has", "[capture]") {
  temp_dir dir;
  config cfg = testing::quiet();
  cfg.capture_dir = dir.path.string();
  tracer t(cfg);
  step(t, 0, 1);
  REQUIRE(t.capture(10));
  for (int i = 0; i < 3; ++i) step(t, 2, 0);
  t.end_live();
  const auto got = forward(t);
  REQUIRE(got.size() == 1);
  CHECK(got[0].steps == 3);
  CHECK(got[0].first_step == 1);
  CHECK(got[0].last_step == 3);
  CHECK(fs::exists(got[0].path));
}

TEST_CASE("a stall already past is written at once: the kept steps that tripped it, the stall in its phase",
          "[capture][back]") {
  temp_dir dir;
  config cfg = testing::quiet();
  cfg.capture_dir = dir.path.string();
  cfg.capture_back = 4;
  tracer t(cfg);
  for (int i = 0; i < 30; ++i) step(t, 0, 2);
  const auto before = std::chrono::steady_clock::now();
  step(t, 150, 2);  // step 30 stalls in `input`
  const double stamped_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - before).count();
  for (int i = 0; i < 10; ++i) step(t, 0, 2);
  const std::vector<std::uint64_t> chosen = t.capture_kept("test: the stall", kept_steps::slowest);
  REQUIRE(std::find(chosen.begin(), chosen.end(), 30) != chosen.end());
  std::vector<capture_record> back;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (back.empty() && std::chrono::steady_clock::now() < until) {
    forward(t, &back);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  REQUIRE(back.size() == 1);
  CHECK(back[0].tripped == 30);
  CHECK(back[0].indices == chosen);
  CHECK(back[0].label == "INPUT-BOUND");
  CHECK(forward(t).empty());  // capture_kept alone arms no forward capture
  // The file holds step 30 with its stall in `input`: at least the sleep, at most the test's own clock.
  const auto trace = nlohmann::json::parse(testing::read_file(back[0].path));
  double longest_input_us = 0;
  bool has_30 = false;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.value("name", "") == "step 30") has_30 = true;
    if (e.value("name", "") == "input" && e.value("cat", "") == "phase") {
      longest_input_us = std::max(longest_input_us, e.at("dur").get<double>());
    }
  }
  CHECK(has_30);
  CHECK(longest_input_us >= 150'000);
  CHECK(longest_input_us <= stamped_ms * 1000 + 1);
}
