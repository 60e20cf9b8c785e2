// Each tracer watches its own open steps (hang.hpp): a step held open by the test past
// `hang_after` is reported once, with what the test knows is open (its phase, its collectives,
// the steps before it), and again only for another step. The truth is the test's own: what it
// opened and when, by its own clock; the bounds separate a report from none by seconds.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "helpers.hpp"
#include "steptrace/hang.hpp"
#include "steptrace/steptrace.hpp"

using namespace steptrace;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

using testing::temp_dir;

std::vector<fs::path> reports(const fs::path& dir) {
  std::vector<fs::path> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().string().find("-hang-step") != std::string::npos) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Waits (up to 20 s: a busy machine) until `done()`. The collector writes a report, then names it
// in metrics(), then writes its JSONL line, without the tracer lock: a test waits for each.
template <class F>
bool eventually(F done) {
  for (int i = 0; i < 1000 && !done(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return done();
}

// Waits until `dir` holds `n` reports.
bool wait_for_reports(const fs::path& dir, std::size_t n) {
  return eventually([&] { return reports(dir).size() >= n; });
}

std::string read(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("A step open past hang_after is reported once, with its open phase, collectives and the steps before",
          "[hang]") {
  temp_dir dir;
  config cfg = testing::quiet();
  cfg.hang_after_s = 0.3;
  cfg.capture_dir = (dir.path / "caps").string();
  cfg.jsonl_path = (dir.path / "live.jsonl").string();
  tracer t(cfg);
  const phase_id load = register_phase("load shard");
  for (int i = 0; i < 6; ++i) {
    t.begin_step();
    t.end_step();
  }
  collective_entered("hang-test", "all_reduce");
  collective_left("hang-test", 0);
  const std::uint64_t seq = collective_entered("hang-test", "broadcast");
  CHECK(seq == 1);
  const auto opened = std::chrono::steady_clock::now();
  t.begin_step();  // step 6, held open
  t.begin_phase(load);
  REQUIRE(wait_for_reports(dir.path / "caps", 1));
  const double held_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - opened).count();
  const std::string text = read(reports(dir.path / "caps").front());
  CHECK_THAT(text, Contains("hang suspected: step 6 has been open"));
  CHECK_THAT(text, Contains("`load shard` open"));
  CHECK_THAT(text, Contains("group hang-test: broadcast #1, entered"));
  CHECK_THAT(text, Contains("not left"));
  CHECK_THAT(text, Contains("The last counted steps before it (ms, oldest first):"));
  CHECK_THAT(text, Contains("no Python interpreter"));  // a C++ program has no stacks to give
  // metrics() while it hangs: the open step, past hang_after and no longer than the test held it
  const std::string report = reports(dir.path / "caps").front().string();
  CHECK(eventually([&] {
    const summary now = t.metrics();
    return now.hang && now.hang->report == report;
  }));
  const summary m = t.metrics();
  REQUIRE(m.hang);
  CHECK(m.hang->suspected);
  REQUIRE(m.hang->longest());
  CHECK(m.hang->longest()->open_s >= 0.3);
  CHECK(m.hang->longest()->open_s <= std::chrono::duration<double>(std::chrono::steady_clock::now() - opened).count());
  CHECK(m.hang->phase() == "load shard");
  CHECK(m.hang->report == report);
  CHECK_THAT(m.prometheus(), Contains("steptrace_stuck_seconds "));
  CHECK_THAT(m.prometheus(), !Contains("steptrace_stuck_seconds 0\n"));
  CHECK(eventually(
      [&] { return read(dir.path / "live.jsonl").find("{\"hang\":{\"suspected\":true") != std::string::npos; }));
  CHECK(held_s < 20);
  // once a hang: two more looks (a second apart) write nothing more
  std::this_thread::sleep_for(std::chrono::milliseconds(2200));
  CHECK(reports(dir.path / "caps").size() == 1);
  // the step ends (the job moved); the next one held open is reported again
  t.end_phase(load);
  t.end_step();
  collective_left("hang-test", seq);
  t.begin_step();
  REQUIRE(wait_for_reports(dir.path / "caps", 2));
  CHECK_THAT(read(reports(dir.path / "caps").back()), Contains("step 7 has been open"));
  t.end_step();
  CHECK_FALSE(t.metrics().hang);  // nothing open
}

TEST_CASE("Steps that keep ending are never a hang; a set-aside span is not watched; off watches nothing", "[hang]") {
  temp_dir dir;
  config cfg = testing::quiet();
  cfg.hang_after_s = 1.5;
  cfg.capture_dir = dir.path.string();
  tracer t(cfg);
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(3000);
  while (std::chrono::steady_clock::now() < until) {  // 20 ms steps: far under 1.5 s even when preempted
    t.begin_step();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    t.end_step();
  }
  CHECK(reports(dir.path).empty());
  // a step whose open time is set aside (a checkpoint inside it) is not watched
  const phase_id save = register_phase("checkpoint");
  t.begin_step();
  t.begin_exclude(save);
  std::this_thread::sleep_for(std::chrono::milliseconds(2600));
  CHECK(reports(dir.path).empty());
  const summary m = t.metrics();
  CHECK_FALSE(m.hang);
  t.end_exclude(save);
  t.end_step();

  config off = testing::quiet();
  off.set("hang_after", "off");
  tracer quiet_one(off);
  quiet_one.begin_step();
  const summary o = quiet_one.metrics();
  REQUIRE(o.hang);
  CHECK_FALSE(o.hang->suspected);
  CHECK(o.hang->hang_after_s < 0);
  quiet_one.end_step();
}

TEST_CASE("hang_after auto: 600 s before any counted step, then the larger of 60 s and 10x the p99 step", "[hang]") {
  tracer t(testing::quiet());
  t.begin_step();
  REQUIRE(t.metrics().hang);
  CHECK(t.metrics().hang->hang_after_s == 600);
  t.end_step();
  for (int i = 0; i < 20; ++i) {
    t.begin_step();
    t.end_step();
  }
  t.begin_step();
  CHECK(t.metrics().hang->hang_after_s == 60);  // 10x a step of microseconds is far under the floor
  t.end_step();
  config c;
  CHECK(c.get("hang_after") == "auto");
  c.set("hang_after", "2.5");
  CHECK(c.hang_after_s == 2.5);
  CHECK(c.get("hang_after") == "2.5");
  CHECK_THROWS_WITH(c.set("hang_after", "0.01"), Contains("expected seconds (0.1 to 604800), auto or off"));
  CHECK_THROWS_WITH(c.set("hang_after", "soon"), Contains("'hang_after'"));
}

TEST_CASE("Collectives are numbered per group in the order entered; only the last call's exit counts", "[hang]") {
  const std::uint64_t a = collective_entered("numbering-a", "all_reduce");
  const std::uint64_t b = collective_entered("numbering-b", "barrier");
  const std::uint64_t a2 = collective_entered("numbering-a", "all_gather");
  CHECK(a2 == a + 1);
  collective_left("numbering-a", a);  // an older call's exit: the open one stays open
  collective_left("numbering-b", b);
  bool seen_a = false, seen_b = false;
  for (const collective_mark& m : last_collectives()) {
    if (m.group == "numbering-a") {
      seen_a = true;
      CHECK(m.kind == "all_gather");
      CHECK(m.seq == a2);
      CHECK(m.left_s < 0);
    }
    if (m.group == "numbering-b") {
      seen_b = true;
      CHECK(m.left_s >= 0);
    }
  }
  CHECK(seen_a);
  CHECK(seen_b);
}

TEST_CASE("A fetch in progress past hang_after is a hang; the last fetch of a loop that ran out is none", "[hang]") {
  // steps(iterable) opens `input` before it asks for each item; the last ask finds none and the
  // fetch ends with no step after it, held for a next loop's first step. Found in the suite: a
  // finished loop's tracer named "step 60 open 60 s" a minute later.
  temp_dir dir;
  config cfg = testing::quiet();
  cfg.hang_after_s = 0.5;
  cfg.capture_dir = dir.path.string();
  tracer t(cfg);
  for (int i = 0; i < 3; ++i) {
    t.begin_phase(builtin::input);  // the fetch, outside a step
    t.end_phase(builtin::input);
    t.begin_step();
    t.end_step();
  }
  t.begin_phase(builtin::input);  // a fetch that hangs (a stuck DataLoader worker)
  REQUIRE(wait_for_reports(dir.path, 1));
  CHECK_THAT(read(reports(dir.path).front()), Contains("hang suspected: step 3 has been open"));
  t.end_phase(builtin::input);  // it returns: the iterable ran out, and no step follows
  std::this_thread::sleep_for(std::chrono::milliseconds(1600));  // past hang_after, three watch ticks
  const summary m = t.metrics();
  CHECK_FALSE((m.hang && !m.hang->threads.empty()));  // no step open (metrics carry none then)
  CHECK(reports(dir.path).size() == 1);
  t.begin_step();  // a next loop's first step still claims the held fetch
  t.end_step();
  CHECK(t.summary().steps == 4);
}

TEST_CASE("Two hangs in one process at the same step keep two reports; another user's capture_dir gets none",
          "[hang]") {
  temp_dir dir;
  config cfg = testing::quiet();
  cfg.hang_after_s = 0.3;
  cfg.capture_dir = (dir.path / "caps").string();
  tracer first(cfg), second(cfg);  // two tracers, each its own watch: both stuck in their step 0
  first.begin_step();
  second.begin_step();
  REQUIRE(wait_for_reports(dir.path / "caps", 2));
  const std::vector<fs::path> both = reports(dir.path / "caps");
  REQUIRE(both.size() == 2);
  CHECK(both[0] != both[1]);
  REQUIRE(eventually([&] { return first.metrics().hang->report != second.metrics().hang->report; }));
  for (const fs::path& p : both) CHECK_THAT(read(p), Contains("report: " + p.string()));  // each names itself
  first.end_step();
  second.end_step();

  if (::geteuid() != 0) {
    WARN("not root: cannot give a folder to another user here");
    return;
  }
  const fs::path theirs = dir.path / "shared" / "steptrace-captures";
  fs::create_directories(theirs);
  ::chmod((dir.path / "shared").c_str(), 01777);
  REQUIRE(::chown(theirs.c_str(), 65534, 65534) == 0);  // another user made it first
  config shared = cfg;
  shared.capture_dir = theirs.string();
  shared.jsonl_path = (dir.path / "live.jsonl").string();
  tracer stuck(shared);
  stuck.begin_step();
  REQUIRE(eventually([&] { return fs::exists(dir.path / "live.jsonl"); }));  // the hang is still said there
  CHECK(fs::is_empty(theirs));
  const summary m = stuck.metrics();
  REQUIRE(m.hang);
  CHECK(m.hang->suspected);
  CHECK(m.hang->report.empty());
  stuck.end_step();
}
