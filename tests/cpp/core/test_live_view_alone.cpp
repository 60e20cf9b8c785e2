// The live view as an object of its own (core/live): driven through a live_context the test
// writes, with hand-made steps, no tracer, no collector and no GPU. Each window is checked where
// it goes: the JSONL file, the program's queue, and the subsystems that listen.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "analysis/step_fan_out.hpp"
#include "core/live/live_view.hpp"
#include "helpers.hpp"
#include "report/report.hpp"

using namespace steptrace;
using namespace steptrace::detail;

namespace {

constexpr std::uint64_t ms = 1'000'000;  // ticks are nanoseconds here

// A tracer as the live view sees it: options, no rank, no device; it counts the windows it makes.
struct fake_tracer final : live_context {
  config cfg;
  std::optional<rank_info> who;
  std::uint64_t ended = 0;
  int windows_made = 0;
  const config& options() const override { return cfg; }
  const std::optional<rank_info>& rank() const override { return who; }
  device_join* device() override { return nullptr; }
  summary window_of(aggregate& from) override {
    ++windows_made;
    summary out;
    from.fill(out, 1.0);
    from.clear();
    return out;
  }
  std::uint32_t sample_every(const gpu_stats&) const override { return 1; }
  std::uint64_t steps_ended() const override { return ended; }
  void finish(summary& w) const override { complete(w); }
};

// A subsystem listening to the windows: what it adds, and what it heard.
struct listener final : window_listener {
  bool wants = false;
  std::vector<std::uint64_t> heard;  // each window's counted steps
  std::vector<bool> lasts;
  bool wants_windows() const override { return wants; }
  void on_window_closing(summary& w) override { w.facts.emplace_back("test.listener", "was here"); }
  void on_window(const summary& w, bool last) override {
    heard.push_back(w.steps);
    lasts.push_back(last);
  }
};

const std::vector<phase_slice> no_phases;
const std::vector<host_segment> no_segments;
const std::vector<stream_key> no_streams;
const std::vector<phase_span> no_spans;

// `n` counted steps of 10 ms into the view's totals, through the one fan-out the drain uses.
void feed(live_view& live, std::uint64_t n, std::uint64_t first_index) {
  step_fan_out out(0);
  out.add(live.totals());
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::uint64_t index = first_index + i, begin = index * 10 * ms;
    out.on_step({begin, begin + 10 * ms, 0, false, false, false, 0, index, no_phases, no_segments, no_streams, no_spans,
                 0, 0, false});
  }
}

// A view with a subsystem and the program listening, its first window started (the first pass
// with the view on starts it and sends nothing), the lock held as the collector holds it.
struct started_view {
  explicit started_view(fake_tracer& t) {
    live.listen(heard);
    live.listen_windows();
    live.tick(lock, t);
  }
  live_view live;
  listener heard;
  std::mutex m;
  std::unique_lock<std::mutex> lock{m};
};

}  // namespace

TEST_CASE("the live view is on only when asked, and a listener may ask for it", "[live_alone]") {
  live_view live;
  config cfg;
  CHECK_FALSE(live.on(cfg));
  listener l;
  live.listen(l);
  CHECK_FALSE(live.on(cfg));
  l.wants = true;  // capture's triggers, weighed in C++
  CHECK(live.on(cfg));
  l.wants = false;
  cfg.jsonl_path = "/tmp/x.jsonl";
  CHECK(live.on(cfg));
  cfg.jsonl_path.clear();
  live.listen_windows();  // the program listens
  CHECK(live.on(cfg));
  live.end();
  CHECK_FALSE(live.on(cfg));  // never after its end
}

TEST_CASE("the run's last window goes out however short: the JSONL line, the queue, then the listeners",
          "[live_alone]") {
  testing::temp_dir dir;
  fake_tracer t;
  t.cfg.jsonl_path = (dir.path / "live.jsonl").string();
  started_view v(t);
  live_view& live = v.live;
  const listener& l = v.heard;
  std::unique_lock<std::mutex>& lock = v.lock;
  CHECK(t.windows_made == 0);
  feed(live, 7, 0);
  t.ended = 7;
  live.tick(lock, t, true);
  CHECK(lock.owns_lock());
  CHECK(live.ended());
  REQUIRE(l.heard == std::vector<std::uint64_t>{7});
  CHECK(l.lasts == std::vector<bool>{true});
  std::ifstream in(t.cfg.jsonl_path);
  std::string line;
  REQUIRE(std::getline(in, line));
  const nlohmann::json read = nlohmann::json::parse(line);
  CHECK(read["steps"] == 7);
  CHECK(read["step_ms"]["mean"].get<double>() == Approx(10.0));
  CHECK(read["facts"]["test.listener"] == "was here");  // what a listener adds goes out with the window
  CHECK_FALSE(std::getline(in, line));                  // one window
  const std::optional<live_window> w = live.next_window(lock, 0);
  REQUIRE(w);
  CHECK(w->figures.steps == 7);
  CHECK(w->step == 7);
  feed(live, 3, 7);
  live.tick(lock, t, true);  // after the end: nothing more
  CHECK(l.heard.size() == 1);
  CHECK(t.windows_made == 1);
}

TEST_CASE("windows close on the wall clock's period; a listener that falls behind loses the oldest, counted",
          "[live_alone]") {
  fake_tracer t;
  t.cfg.live = 1;  // 1 s windows; the live line goes to stderr
  t.cfg.log_level = "off";
  started_view v(t);
  live_view& live = v.live;
  const listener& l = v.heard;
  std::unique_lock<std::mutex>& lock = v.lock;
  // Each pass feeds a step; windows close only when the second changes: at most one a second
  // whatever the passes, and at least three in 4.5 s however busy the machine (a bound, not a time).
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(4500);
  std::uint64_t fed = 0;
  int passes = 0;
  while (std::chrono::steady_clock::now() < until) {
    feed(live, 1, fed++);
    live.tick(lock, t);
    ++passes;
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    lock.lock();
  }
  CHECK(passes > 20);
  CHECK(l.heard.size() >= 3);
  CHECK(l.heard.size() <= 5);
  std::uint64_t in_windows = 0;
  for (std::uint64_t n : l.heard) in_windows += n;
  CHECK(in_windows + live.totals().steps() == fed);  // every step fed is in one window: sent, or in progress
  CHECK(live.windows_dropped() == l.heard.size() - live_view::queued);  // the queue keeps the latest 2
  live.stop_listening();
  CHECK_FALSE(live.next_window(lock, 0));
}

TEST_CASE("rank 0's live windows count each straggler and the phase it was named by most often", "[live_alone]") {
  live_view live;
  straggler_info s;
  s.rank = 2;
  s.phase = "input";
  live.note_rank_window(s, {2}, {});
  live.note_rank_window(std::nullopt, {}, {3});
  s.phase = "compute";
  live.note_rank_window(s, {}, {});
  const rank_window_count c = live.note_rank_window(s, {}, {});
  CHECK(c.rank == 2);
  CHECK(c.windows == 3);
  CHECK(c.first_window == 0);
  CHECK(c.last_window == 3);
  CHECK(c.phase == "compute");  // twice against once
  REQUIRE(live.live_ranks());
  CHECK(live.live_ranks()->windows == 4);
  live.restart();
  CHECK_FALSE(live.live_ranks());
}
