// The hang watch as an object of its own (core/hang): driven through a hang_context of
// hand-fed step builders and a recent window, with no tracer, no collector and no thread. The
// steps' begins are stamped hours or seconds before a "now" the context sets (a machine up for
// less than an hour has no host-clock tick an hour back), so no scheduler delay moves a verdict.
#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <string>

#include "analysis/recent_window.hpp"
#include "analysis/step_builder.hpp"
#include "analysis/step_fan_out.hpp"
#include "core/hang/hang_watch.hpp"
#include "helpers.hpp"
#include "record/clock.hpp"
#include "steptrace/phase.hpp"

using namespace steptrace;
using namespace steptrace::detail;
namespace fs = std::filesystem;

namespace {

// Host-clock ticks of `s` seconds.
std::uint64_t ticks_of(double s) { return static_cast<std::uint64_t>(s * 1e9 / host_clock::ns_per_tick()); }

// A "now" a day past the host clock's, its source chosen and calibrated first (as a tracer does
// at its start): steps may begin hours before it on a machine just booted.
std::uint64_t clock_now() {
  host_clock::init();
  (void)host_clock::ns_per_tick();
  return host_clock::now() + ticks_of(86400);
}

std::size_t reports_in(const fs::path& dir) {
  std::size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.path().string().find("-hang-step") != std::string::npos;
  return n;
}

// One thread's builder, fed by hand.
struct thread_records {
  step_builder builder;
  step_fan_out out;
  explicit thread_records(std::uint32_t thread) : builder(0, thread), out(thread) {}
  void add(record_kind kind, std::uint64_t at, std::uint32_t id = 0) { builder.consume(record{at, id, kind}, out); }
};

}  // namespace

TEST_CASE("the hang threshold: the option's, else 10 p99 steps and at least 60 s, else 600 s", "[hang_alone]") {
  hang_watch watch;
  recent_window recent;
  hang_context c;
  c.recent = &recent;
  c.hang_after_s = 30;
  CHECK(watch.after_now(c) == 30);
  c.hang_after_s = 0;
  CHECK(watch.after_now(c) == 600);  // no counted step yet: start-up may compile for minutes
  const std::vector<phase_slice> none;
  const std::vector<host_segment> no_segments;
  const std::vector<stream_key> no_streams;
  const std::vector<phase_span> no_spans;
  for (std::uint64_t i = 0; i < 100; ++i) {  // 98 steps of 1 s, then two of 20 s: the p99 is 20 s
    const std::uint64_t len = ticks_of(i >= 98 ? 20 : 1);
    recent.on_step({0, len, 0, false, false, i == 0, 0, i, none, no_segments, no_streams, no_spans, 0, 0, false}, len);
  }
  CHECK(watch.after_now(c) == Approx(200).epsilon(1e-6));
  recent.clear();
  recent.on_step({0, ticks_of(1), 0, false, false, true, 0, 0, none, no_segments, no_streams, no_spans, 0, 0, false},
                 ticks_of(1));
  CHECK(watch.after_now(c) == 60);  // 10 steps of 1 s is under the floor
}

TEST_CASE("the view lists each open step by how long it has been open, set-aside time left out", "[hang_alone]") {
  const std::uint64_t now = clock_now();
  thread_records stuck(0), aside(1), done(2), fresh(3);
  stuck.add(record_kind::step_begin, now - ticks_of(3600));  // an hour ago
  stuck.add(record_kind::phase_begin, now - ticks_of(1800), builtin::wait.value);
  aside.add(record_kind::step_begin, now - ticks_of(7200));
  aside.add(record_kind::exclude_begin, now - ticks_of(7100), builtin::compute.value);  // still set aside
  done.add(record_kind::step_begin, now - ticks_of(9000));
  done.add(record_kind::step_end, now - ticks_of(8000));
  fresh.add(record_kind::step_begin, now);
  hang_watch watch;
  hang_context c;
  c.hang_after_s = 600;
  c.builders = {&stuck.builder, &aside.builder, &done.builder, &fresh.builder};
  c.now = now;
  const hang_view v = watch.view(c);
  REQUIRE(v.threads.size() == 2);  // the set-aside one and the finished one are not watched
  CHECK(v.threads[0].thread == 0);
  CHECK(v.threads[0].open_s == Approx(3600).margin(1e-3));  // the context's clock: exact
  REQUIRE(v.threads[0].phases.size() == 1);
  CHECK(v.threads[0].phases[0].phase == "wait");
  CHECK(v.threads[0].phases[0].open_s == Approx(1800).margin(1e-3));
  CHECK(v.threads[1].thread == 3);
  CHECK(v.threads[1].open_s == Approx(0).margin(1e-3));
  CHECK(v.suspected);
  c.builders = {&fresh.builder};
  CHECK_FALSE(watch.view(c).suspected);
}

TEST_CASE("a hang is reported once, again only for another step, and never with the watch off", "[hang_alone]") {
  testing::temp_dir dir;
  const std::uint64_t now = clock_now();
  thread_records t(0);
  t.add(record_kind::step_begin, now - ticks_of(3600));
  hang_watch watch;
  recent_window recent;
  hang_context c;
  c.hang_after_s = -1;  // off
  c.capture_dir = dir.path.string();
  c.recent = &recent;
  c.builders = {&t.builder};
  c.now = now;
  std::mutex m;
  std::unique_lock<std::mutex> lock(m);
  watch.tick(lock, c);
  CHECK(watch.reports() == 0);
  CHECK(reports_in(dir.path) == 0);

  c.hang_after_s = 60;
  watch.tick(lock, c);
  CHECK(lock.owns_lock());  // let go while writing, held again after
  CHECK(watch.reports() == 1);
  CHECK(reports_in(dir.path) == 1);
  const std::string report = watch.view(c).report;
  CHECK(fs::exists(report));
  CHECK(fs::path(report).parent_path() == dir.path);
  watch.tick(lock, c);  // the same step, still open: said once
  CHECK(watch.reports() == 1);

  t.add(record_kind::step_end, now);  // the job moved
  t.add(record_kind::step_begin, now - ticks_of(120));
  watch.tick(lock, c);  // the report of the old hang is let go, and the new step is past 60 s
  CHECK(watch.reports() == 2);
  CHECK(reports_in(dir.path) == 2);
  CHECK(watch.view(c).report != report);
}
