// Kernels joined to their launch calls across CUPTI's buffers (gpu/launch_match): synthetic
// records, a fake clock.
#include <algorithm>
#include <catch2/catch.hpp>
#include <vector>

#include "analysis/device_view.hpp"
#include "gpu/launch_match.hpp"

using steptrace::detail::device_activity;
using steptrace::detail::device_record;
using steptrace::detail::launch_matcher;

namespace {

// A record of `kind` starting at `start`; a copy takes no correlation id.
device_record rec(device_activity kind, std::uint32_t correlation, std::uint64_t start) {
  device_record r;
  r.kind = kind;
  r.correlation = correlation;
  r.start = start;
  r.end = start + 5;
  return r;
}
device_record kernel(std::uint32_t correlation, std::uint64_t start) {
  return rec(device_activity::kernel, correlation, start);
}
device_record launch(std::uint32_t correlation, std::uint64_t start) {
  return rec(device_activity::launch, correlation, start);
}
device_record copy(std::uint64_t start) { return rec(device_activity::memcpy, 0, start); }

constexpr std::uint64_t ms = 1'000'000;

}  // namespace

TEST_CASE("a kernel whose launch call comes in a later buffer gets its launch time", "[gpu][launches]") {
  launch_matcher m;
  std::vector<device_record> ready;
  m.take({kernel(7, 1000), copy(1100), kernel(8, 1200)}, 0, ready);  // the kernels' buffer first
  REQUIRE(ready.size() == 1);                                        // the copy: not a kernel, never held
  CHECK(ready[0].kind == device_activity::memcpy);
  CHECK(m.waiting() == 2);
  m.take({launch(7, 900), launch(8, 950)}, 100 * ms, ready);  // the calls' buffer, later
  REQUIRE(ready.size() == 3);
  CHECK(ready[1].correlation == 7);
  CHECK(ready[1].launched == 900);
  CHECK(ready[2].launched == 950);
  CHECK(m.waiting() == 0);
  CHECK(m.launches_seen() == 2);
  CHECK(m.unmatched() == 0);
}

TEST_CASE("a launch call before its kernel, in the same buffer or an earlier one, is found at once",
          "[gpu][launches]") {
  launch_matcher m;
  std::vector<device_record> ready;
  m.take({kernel(3, 500), launch(3, 400)}, 0, ready);  // the call after its kernel in one buffer
  m.take({launch(4, 600)}, 0, ready);
  m.take({kernel(4, 700)}, 0, ready);
  REQUIRE(ready.size() == 2);
  CHECK(ready[0].launched == 400);
  CHECK(ready[1].launched == 600);
  CHECK(m.waiting() == 0);
}

TEST_CASE("a kernel whose launch never comes goes on unmatched after the hold, or after a flush", "[gpu][launches]") {
  launch_matcher m;
  std::vector<device_record> ready;
  m.take({kernel(11, 100)}, 0, ready);
  m.release(launch_matcher::hold_ns - 1, false, ready);
  CHECK(ready.empty());  // still waiting
  m.take({kernel(12, 200)}, launch_matcher::hold_ns - 1, ready);
  m.release(launch_matcher::hold_ns, false, ready);
  REQUIRE(ready.size() == 1);  // the first one's time is up, the second waits on
  CHECK(ready[0].correlation == 11);
  CHECK(ready[0].launched == 0);
  m.release(launch_matcher::hold_ns, true, ready);  // after a flush: everything goes
  REQUIRE(ready.size() == 2);
  CHECK(ready[1].correlation == 12);
  CHECK(m.waiting() == 0);
  m.take({kernel(0, 300)}, 0, ready);  // no correlation id: nothing to wait for
  CHECK(ready.size() == 3);
  CHECK(m.unmatched() == 2);  // counted: the kernels that went on with no launch
  CHECK(m.launches_seen() == 0);
}

TEST_CASE("the kernels waiting are bounded: the oldest go on unmatched", "[gpu][launches]") {
  launch_matcher m;
  std::vector<device_record> ready;
  std::vector<device_record> many;
  for (std::uint32_t i = 1; i <= launch_matcher::max_waiting + 10; ++i) many.push_back(kernel(i, i));
  m.take(many, 0, ready);
  CHECK(m.waiting() == launch_matcher::max_waiting);
  REQUIRE(ready.size() == 10);
  CHECK(ready.front().correlation == 1);
  CHECK(ready.back().correlation == 10);
}

TEST_CASE("kernels in plenty and not one launch record: kernels stop waiting for one", "[gpu][launches]") {
  launch_matcher m;
  std::vector<device_record> ready;
  std::vector<device_record> first;
  for (std::uint32_t i = 1; i <= launch_matcher::give_up_after; ++i) first.push_back(kernel(i, i));
  m.take(first, 0, ready);
  CHECK_FALSE(m.launches_absent());  // waiting: their launches may be in a buffer still to come
  m.release(launch_matcher::hold_ns, false, ready);
  CHECK(m.launches_absent());  // all went on unmatched, and no launch record ever came
  CHECK(ready.size() == launch_matcher::give_up_after);
  m.take({kernel(5000, 9000)}, launch_matcher::hold_ns, ready);
  CHECK(m.waiting() == 0);  // straight through
  REQUIRE(ready.size() == launch_matcher::give_up_after + 1);
  CHECK(ready.back().launched == 0);
  CHECK(m.unmatched() == launch_matcher::give_up_after + 1);
  m.take({launch(6000, 100), kernel(6000, 9100)}, launch_matcher::hold_ns, ready);  // launches after all
  CHECK_FALSE(m.launches_absent());
  CHECK(ready.back().launched == 100);
}

TEST_CASE("a graph's replay marks the kernels it ran, and a step counts it once", "[gpu][launches]") {
  // CUPTI's cudaGraphLaunch record (decoded with `graph` set) and three kernels of that replay,
  // beside an eager launch and its kernel, in two buffers.
  launch_matcher m;
  std::vector<device_record> ready;
  device_record replay = launch(40, 100);
  replay.graph = true;
  m.take({kernel(40, 200), kernel(40, 210)}, 0, ready);
  m.take({replay, launch(41, 150), kernel(40, 220), kernel(41, 230)}, 1, ready);
  REQUIRE(ready.size() == 4);
  int graph = 0;
  for (const device_record& r : ready) graph += r.graph ? 1 : 0;
  CHECK(graph == 3);
  for (const device_record& r : ready) CHECK(r.graph == (r.correlation == 40));
  // the step's view: 4 kernels, 3 of them one replay's
  std::sort(ready.begin(), ready.end(),
            [](const device_record& a, const device_record& b) { return a.start < b.start; });
  const steptrace::detail::step_device_view v = steptrace::detail::view_step(0, 1000, {}, ready);
  CHECK(v.kernels == 4);
  CHECK(v.graph_kernels == 3);
  CHECK(v.graph_launches.size() == 1);
}
