// Listeners of live windows (tracer::listen_windows, next_window): what the Python package's
// on_window and tracker adapters stand on. The truth is the JSONL the same windows are written
// to, and the steps the test itself recorded.
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>

#include "helpers.hpp"
#include "steptrace/steptrace.hpp"

using namespace steptrace;
namespace fs = std::filesystem;

namespace {

config every_second(const std::string& jsonl = "") {
  config c = testing::quiet();
  c.live = 1;  // the shortest period there is
  c.jsonl_path = jsonl;
  return c;
}

// Records steps of ~1 ms on a thread of its own until destroyed.
class loop {
 public:
  explicit loop(tracer& t)
      : worker_([this, &t] {
          while (!stop_.load()) {
            scoped_step s(t);
            scoped_phase p(t, builtin::compute);
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
          }
        }) {}
  ~loop() {
    stop_.store(true);
    worker_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread worker_;
};

std::size_t lines_in(const std::string& path) {
  std::ifstream in(path);
  std::size_t n = 0;
  for (std::string line; std::getline(in, line);) n += !line.empty();
  return n;
}

}  // namespace

TEST_CASE("a listener gets each live window with the loop's step count", "[listeners]") {
  tracer t(every_second());
  t.listen_windows();
  std::optional<live_window> first, second;
  {
    loop running(t);
    first = t.next_window(30);
    second = t.next_window(30);
  }
  REQUIRE(first);
  REQUIRE(second);
  CHECK(first->figures.steps > 0);
  CHECK(second->at_s > first->at_s);
  // Every step that ended between the two windows is in the second one, and only those.
  const summary& w = second->figures;
  CHECK(second->step - first->step == w.steps + w.warmup_steps + w.failed_steps);
  CHECK(w.step_ms.p50 > 0);
  CHECK(t.summary().errors.windows_dropped == 0);
}

TEST_CASE("a listener that falls behind loses the oldest windows, each counted", "[listeners]") {
  const fs::path dir = fs::temp_directory_path() / ("steptrace-listeners-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string jsonl = (dir / "live.jsonl").string();  // every window made, for the count
  tracer t(every_second(jsonl));
  t.listen_windows();
  {
    loop running(t);
    while (lines_in(jsonl) < 4) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const std::size_t before = lines_in(jsonl);
  const std::uint64_t dropped = t.summary().errors.windows_dropped;
  const std::size_t after = lines_in(jsonl);
  // All but the latest two were dropped (a window appends its line before it is queued).
  CHECK(dropped >= 2);
  CHECK(dropped + tracer::queued_windows <= after);
  CHECK(dropped + tracer::queued_windows + 1 >= before);
  const std::optional<live_window> older = t.next_window(0), newer = t.next_window(0);
  REQUIRE(older);
  REQUIRE(newer);
  CHECK(newer->at_s > older->at_s);
  CHECK(newer->figures.errors.windows_dropped >= older->figures.errors.windows_dropped);
  t.count_window_failure();
  const summary s = t.summary();
  CHECK(s.errors.window_calls_failed == 1);
  const summary back = summary::from_json(s.json());
  CHECK(back.errors.windows_dropped == s.errors.windows_dropped);
  CHECK(back.errors.window_calls_failed == 1);
  CHECK(s.table().find("live windows: " + std::to_string(s.errors.windows_dropped) + " dropped") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("stop_listening wakes a waiting listener at once and queues nothing more", "[listeners]") {
  tracer t(every_second());
  t.listen_windows();
  std::optional<live_window> got{live_window{}};
  const auto start = std::chrono::steady_clock::now();
  std::thread waiter([&] { got = t.next_window(120); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  t.stop_listening();
  waiter.join();
  CHECK_FALSE(got);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(60));  // not the 120 s timeout
  CHECK_FALSE(t.next_window(0));
}

TEST_CASE("end_live: the window in progress goes out however short, with every step since the last; then none",
          "[listeners]") {
  const std::string jsonl =
      (fs::temp_directory_path() / ("steptrace-last-" + std::to_string(::getpid()) + ".jsonl")).string();
  fs::remove(jsonl);
  config c = testing::quiet();  // no `live`: windows every 10 s, longer than this run
  c.jsonl_path = jsonl;
  tracer t(c);
  t.listen_windows();
  for (int i = 0; i < 7; ++i) {  // far shorter than a window
    scoped_step s(t);
  }
  CHECK_FALSE(t.next_window(0));  // no window yet: the run is 10 s short of one
  t.end_live();
  const std::optional<live_window> last = t.next_window(0);
  REQUIRE(last);
  CHECK(last->figures.steps == 7);  // no warm-up in the quiet config: every step is counted
  CHECK(last->step == 7);
  CHECK(lines_in(jsonl) == 1);
  t.end_live();  // once only
  { scoped_step s(t); }
  CHECK_FALSE(t.next_window(1.2));
  CHECK(lines_in(jsonl) == 1);
  CHECK(t.summary().steps == 8);  // the whole run is untouched
  fs::remove(jsonl);

  tracer empty(testing::quiet());  // no counted step since the last window: nothing goes out
  empty.listen_windows();
  empty.end_live();
  CHECK_FALSE(empty.next_window(0));
}

TEST_CASE("a new period ends the window in progress at its own next boundary, not at once", "[listeners]") {
  // Turning the period from 1 s to an hour mid-run once cut a window at the next poll (the slot
  // counted in the old period's units), which a listener got and the JSONL, turned off in the
  // same call, did not.
  tracer t(every_second());
  t.listen_windows();
  loop running(t);
  REQUIRE(t.next_window(30));  // the view is on and cutting windows each second
  config hourly = every_second();
  hourly.live = 3600;
  t.configure(hourly);
  const std::optional<live_window> first = t.next_window(0);  // one cut before the change may be queued
  (void)first;
  const std::optional<live_window> after = t.next_window(1.5);
  CHECK_FALSE(after);  // more than a poll later: none cut at once; the next is at the hour's boundary
}

TEST_CASE("{rank} in jsonl_path is each rank's number in the core's window lines, as in Python's", "[listeners]") {
  testing::temp_dir dir;
  tracer t(every_second((dir.path / "live-{rank}.jsonl").string()));
  t.set_rank(rank_info{2, 4, 2, "node", ""});
  {
    loop l(t);
    for (int i = 0; i < 200 && lines_in((dir.path / "live-2.jsonl").string()) == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
  }
  CHECK(lines_in((dir.path / "live-2.jsonl").string()) >= 1);
  CHECK_FALSE(fs::exists(dir.path / "live-{rank}.jsonl"));
  CHECK(rank_path("out/r{rank}/live-{rank}.jsonl", 7) == "out/r7/live-7.jsonl");
}
