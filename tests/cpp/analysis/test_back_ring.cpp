// The retroactive capture's ring (analysis/back_ring.hpp) on hand-made record streams whose
// answers are known (1 tick = 1 ns): which kept steps each choice writes, the window ring's
// reach, and the figures of the steps chosen, replayed.
#include <catch2/catch.hpp>
#include <vector>

#include "analysis/aggregate.hpp"
#include "analysis/back_ring.hpp"
#include "analysis/step_builder.hpp"
#include "analysis/step_fan_out.hpp"
#include "helpers.hpp"
#include "steptrace/tracer.hpp"

using namespace steptrace;
using namespace steptrace::detail;

namespace {

constexpr auto input = builtin::input, compute = builtin::compute;
constexpr std::uint64_t ms = 1'000'000;

std::uint64_t same(std::uint64_t t) { return t; }

// One thread's records into a ring, through the collector's fan-out.
struct harness {
  back_ring ring;
  step_fan_out out{0};
  step_builder builder{0, 0};
  std::uint64_t t = 1'000;
  explicit harness(std::uint32_t k) {
    ring.configure(k);
    builder.keep_spans(true);
    out.add(ring);
  }
  void add(record_kind kind, std::uint64_t at, std::uint32_t id = 0) { builder.consume(record{at, id, kind}, out); }
  // A step: `input_ms` of input, then 10 ms of compute.
  void step(std::uint64_t input_ms) {
    add(record_kind::step_begin, t);
    add(record_kind::phase_begin, t, input.value);
    add(record_kind::phase_end, t + input_ms * ms, input.value);
    add(record_kind::phase_begin, t + input_ms * ms, compute.value);
    add(record_kind::phase_end, t + (input_ms + 10) * ms, compute.value);
    add(record_kind::step_end, t + (input_ms + 10) * ms);
    t += (input_ms + 10) * ms + ms;
  }
};

// The figures of the steps a choice took: replayed into an aggregate, as the capture does.
summary figures_of(const flight_recorder& chosen) {
  aggregate totals;
  chosen.replay(totals);
  summary out;
  totals.fill(out, 1.0);
  return out;
}

}  // namespace

TEST_CASE("the ring writes the last steps on demand and a window's slowest for its trigger", "[capture][back]") {
  harness h(4);
  for (int i = 0; i < 20; ++i) h.step(i == 7 ? 400 : 1);  // step 7 stalls 400 ms in `input`
  flight_recorder chosen;
  std::uint64_t lead = 0;
  CHECK(h.ring.choose(back_ring::choice::recent, {}, chosen, lead) == std::vector<std::uint64_t>{16, 17, 18, 19});
  CHECK(lead == 19);
  const std::vector<std::uint64_t> slowest = h.ring.choose(back_ring::choice::slowest, {}, chosen, lead);
  REQUIRE(slowest.size() == 4);
  CHECK(lead == 7);
  CHECK(std::find(slowest.begin(), slowest.end(), 7) != slowest.end());
  // Replayed, the chosen steps give their own figures: the stall in `input`, to the tick.
  const summary s = figures_of(chosen);
  CHECK(s.steps == 4);
  CHECK(s.step_ms.max == Approx(410).margin(1e-9));
  const phase_stats* in = s.phase("input");
  REQUIRE(in != nullptr);
  CHECK(in->ms.total == Approx(400 + 3 * 1).margin(1e-9));
  CHECK(s.phase("compute")->ms.total == Approx(40).margin(1e-9));
  // And the timeline of them holds step 7's phase calls.
  timeline_view view;
  chosen.fill(view, 0, 1.0, &same);
  const auto seven =
      std::find_if(view.steps.begin(), view.steps.end(), [](const timeline_step& st) { return st.index == 7; });
  REQUIRE(seven != view.steps.end());
  REQUIRE(seven->phases.size() == 2);
  CHECK(seven->phases[0].name == "input");
  CHECK(seven->phases[0].end_ms - seven->phases[0].begin_ms == Approx(400).margin(1e-9));
}

TEST_CASE("a window's slowest are kept for the last 8 windows; numbered steps are found there", "[capture][back]") {
  harness h(2);
  for (int i = 0; i < 10; ++i) h.step(i == 3 ? 50 : 1);
  flight_recorder chosen;
  std::uint64_t lead = 0;
  for (int w = 0; w < 7; ++w) {  // seven windows close after it: step 3 is still kept
    h.ring.next_window();
    for (int i = 0; i < 10; ++i) h.step(1);
  }
  CHECK(h.ring.choose(back_ring::choice::numbered, {3, 79}, chosen, lead) == std::vector<std::uint64_t>{3, 79});
  CHECK(h.ring.choose(back_ring::choice::slowest, {}, chosen, lead).size() == 2);
  CHECK(lead == 3);
  h.ring.next_window();  // the eighth: its window is let go
  CHECK(h.ring.choose(back_ring::choice::numbered, {3}, chosen, lead).empty());
  CHECK(h.ring.choose(back_ring::choice::slowest, {}, chosen, lead).size() == 2);
  CHECK(lead != 3);
}

TEST_CASE("the ring is bounded in steps whatever the run's length, and off at 0", "[capture][back]") {
  harness h(8);
  for (int i = 0; i < 100; ++i) h.step(1 + i % 7);
  const std::uint64_t after_100 = h.ring.bytes();
  for (int i = 0; i < 2000; ++i) h.step(1 + i % 7);
  CHECK(after_100 > 0);
  CHECK(h.ring.bytes() <= after_100 + after_100 / 10);
  h.ring.configure(0);
  h.step(1);
  flight_recorder chosen;
  std::uint64_t lead = 0;
  CHECK(h.ring.bytes() == 0);
  CHECK(h.ring.choose(back_ring::choice::recent, {}, chosen, lead).empty());
}
