// The one fan-out: each finished step to every keeper on its list, batches apart, the recent
// window fed counted steps only, set-aside spans with the fan-out's thread.
#include <catch2/catch.hpp>
#include <cstdint>
#include <stdexcept>
#include <utility>
#include <vector>

#include "analysis/step_fan_out.hpp"

using namespace steptrace;
using namespace steptrace::detail;

namespace {

constexpr std::uint64_t ms = 1'000'000;
std::uint64_t same(std::uint64_t t) { return t; }

const std::vector<phase_slice> no_phases;
const std::vector<host_segment> no_segments;
const std::vector<stream_key> no_streams;
const std::vector<phase_span> no_spans;

built_step step(std::uint64_t begin, std::uint64_t end, std::uint64_t index, bool warmup = false, bool failed = false,
                std::uint32_t batch = 0, std::uint64_t set_aside = 0) {
  return {begin,     end,         set_aside,  failed,   warmup, index == 0, 3,    index,
          no_phases, no_segments, no_streams, no_spans, 0,      batch,      false};
}

// What a keeper outside the analysis hears (an armed capture is one).
struct heard final : step_keeper {
  std::vector<std::uint64_t> steps;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> set_aside;  // (thread, id)
  std::uint64_t unscoped = 0;
  void on_step(const built_step& s) override { steps.push_back(s.index); }
  void on_unscoped(std::uint32_t, std::uint64_t ticks) override { unscoped += ticks; }
  void on_set_aside(std::uint32_t thread, std::uint32_t id, std::uint64_t, std::uint64_t) override {
    set_aside.emplace_back(thread, id);
  }
};

}  // namespace

TEST_CASE("each step reaches every keeper on the list, a batch only the batches", "[fan_out]") {
  aggregate totals, window, batches;
  heard extra;
  step_fan_out out(3);
  out.add_batches(batches).add(totals).add(window).add(extra);
  out.on_step(step(0, 10 * ms, 0));
  out.on_step(step(10 * ms, 20 * ms, 1, false, false, 8));  // a batch of 8 requests
  out.on_step(step(20 * ms, 30 * ms, 2));
  CHECK(totals.steps() == 2);
  CHECK(window.steps() == 2);
  CHECK(batches.steps() == 1);
  CHECK(extra.steps == std::vector<std::uint64_t>{0, 2});
  CHECK(out.steps() == 2);

  step_fan_out no_batch_keeper(0);  // without one, a batch is a step like another
  aggregate all;
  no_batch_keeper.add(all);
  no_batch_keeper.on_step(step(0, ms, 0, false, false, 4));
  CHECK(all.steps() == 1);
}

TEST_CASE("the recent window gets counted steps only, each less its time set aside", "[fan_out]") {
  recent_window recent;
  step_fan_out out(0);
  out.add(recent);
  out.on_step(step(0, 50 * ms, 0, true));                            // warm-up
  out.on_step(step(50 * ms, 60 * ms, 1, false, true));               // failed
  out.on_step(step(60 * ms, 90 * ms, 2, false, false, 0, 20 * ms));  // 30 ms, 20 of them set aside
  out.on_step(step(90 * ms, 95 * ms, 3));
  CHECK(recent.last_lengths(8) == std::vector<std::uint64_t>{10 * ms, 5 * ms});
}

TEST_CASE("set-aside spans and unscoped time carry the fan-out's thread to the keepers that keep them", "[fan_out]") {
  aggregate totals;
  flight_recorder timeline;
  timeline.configure(4, 0);
  heard extra;
  step_fan_out out(7);
  out.add(totals).add(timeline).add(extra);
  out.on_set_aside(42, 0, 5 * ms);
  out.on_unscoped(1, 3 * ms);
  out.on_step(step(5 * ms, 10 * ms, 0));
  CHECK(extra.set_aside == std::vector<std::pair<std::uint32_t, std::uint32_t>>{{7, 42}});
  CHECK(extra.unscoped == 3 * ms);
  summary s;
  totals.fill(s, 1.0);
  CHECK(s.steps == 1);
  timeline.fill(s.timeline, 0, 1.0, &same);
  REQUIRE(s.timeline.steps.size() == 1);
  CHECK(s.timeline.steps.front().thread == 3);  // the step's own thread
  REQUIRE(s.timeline.set_aside.size() == 1);
  CHECK(s.timeline.set_aside.front().thread == 7);  // the span's: the fan-out's
}

TEST_CASE("a fan-out holds at most max_keepers", "[fan_out]") {
  std::vector<aggregate> keepers(step_fan_out::max_keepers + 1);
  step_fan_out out(0);
  for (std::size_t i = 0; i < step_fan_out::max_keepers; ++i) out.add(keepers[i]);
  CHECK_THROWS_AS(out.add(keepers.back()), std::length_error);
}
