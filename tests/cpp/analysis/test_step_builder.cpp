// The attribution rules on hand-made record streams with known answers.
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <tuple>
#include <vector>

#include "analysis/step_builder.hpp"
#include "built_steps.hpp"
#include "steptrace/tracer.hpp"

using namespace steptrace;
using namespace steptrace::detail;
using namespace steptrace::testing;

namespace {

struct recording_sink final : step_sink {
  std::vector<step_copy> steps;
  std::map<std::uint32_t, std::uint64_t> unscoped;
  void on_step(const built_step& s) override { steps.push_back(copy_of(s)); }
  void on_unscoped(std::uint32_t id, std::uint64_t ticks) override { unscoped[id] += ticks; }
  std::vector<std::tuple<std::uint32_t, std::uint64_t, std::uint64_t>> set_aside;
  void on_set_aside(std::uint32_t id, std::uint64_t b, std::uint64_t e) override { set_aside.emplace_back(id, b, e); }
};

recording_sink run(const std::vector<record>& records, std::uint32_t warmup = 0, step_builder* keep = nullptr) {
  recording_sink sink;
  step_builder local(warmup, 0);
  step_builder& b = keep ? *keep : local;
  for (const auto& r : records) b.consume(r, sink);
  return sink;
}

constexpr auto other = builtin::other, input = builtin::input, compute = builtin::compute, wait = builtin::wait;

}  // namespace

TEST_CASE("every instant of a step goes to the innermost open phase or to other", "[analysis]") {
  auto sink = run({step_begin(0), begin(compute, 10), begin(wait, 20), end(wait, 30), end(compute, 60), begin(wait, 70),
                   end(wait, 75), step_end(100)});
  REQUIRE(sink.steps.size() == 1);
  const auto& s = sink.steps[0];
  CHECK(s.begin == 0);
  CHECK(s.end == 100);
  CHECK(s.ticks.at(compute.value) == 40);
  CHECK(s.ticks.at(wait.value) == 15);
  CHECK(s.ticks.at(other.value) == 45);
  CHECK(s.calls.at(wait.value) == 2);
  CHECK(s.calls.at(compute.value) == 1);
  std::uint64_t sum = 0;
  for (auto& [id, t] : s.ticks) sum += t;
  CHECK(sum == s.end - s.begin);
}

TEST_CASE("an input fetched before the step is claimed by it and starts its window", "[analysis]") {
  SECTION("the gap between fetch and step is other") {
    auto sink = run(
        {begin(input, 100), end(input, 130), step_begin(140), begin(compute, 140), end(compute, 190), step_end(200)});
    REQUIRE(sink.steps.size() == 1);
    CHECK(sink.steps[0].begin == 100);
    CHECK(sink.steps[0].ticks.at(input.value) == 30);
    CHECK(sink.steps[0].ticks.at(other.value) == 20);
    CHECK(sink.steps[0].ticks.at(compute.value) == 50);
    CHECK(sink.unscoped.empty());
  }
  SECTION("a second fetch before any step releases the first as unscoped") {
    auto sink = run({begin(input, 0), end(input, 10), begin(input, 20), end(input, 50), step_begin(50), step_end(60)});
    REQUIRE(sink.steps.size() == 1);
    CHECK(sink.steps[0].begin == 20);
    CHECK(sink.steps[0].ticks.at(input.value) == 30);
    CHECK(sink.unscoped.at(input.value) == 10);
  }
  SECTION("phases nested inside the fetch come along") {
    const phase_id decode = register_phase("decode");
    auto sink = run({begin(input, 0), begin(decode, 5), end(decode, 25), end(input, 30), step_begin(30), step_end(40)});
    CHECK(sink.steps[0].ticks.at(input.value) == 10);
    CHECK(sink.steps[0].ticks.at(decode.value) == 20);
    CHECK(sink.steps[0].ticks.at(other.value) == 10);
  }
  SECTION("an input still open when the step begins belongs to the step") {
    auto sink = run({begin(input, 0), step_begin(10), end(input, 30), step_end(50)});
    CHECK(sink.steps[0].begin == 0);
    CHECK(sink.steps[0].ticks.at(input.value) == 30);
    CHECK(sink.steps[0].ticks.at(other.value) == 20);
  }
}

TEST_CASE("phases outside any step are kept apart from step statistics", "[analysis]") {
  const phase_id checkpoint = register_phase("checkpoint");
  auto sink =
      run({step_begin(0), step_end(10), begin(checkpoint, 10), end(checkpoint, 510), step_begin(510), step_end(520)});
  REQUIRE(sink.steps.size() == 2);
  CHECK(sink.steps[1].end - sink.steps[1].begin == 10);
  CHECK(sink.steps[1].ticks.count(checkpoint.value) == 0);
  CHECK(sink.unscoped.at(checkpoint.value) == 500);
}

TEST_CASE("failed and warm-up steps are flagged", "[analysis]") {
  auto sink = run({step_begin(0),
                   step_end(1),
                   step_begin(1),
                   step_end(2),
                   step_begin(2),
                   {3, 0, record_kind::step_end_failed},
                   step_begin(3),
                   step_end(4)},
                  2);
  REQUIRE(sink.steps.size() == 4);
  CHECK(sink.steps[0].warmup);
  CHECK(sink.steps[1].warmup);
  CHECK(!sink.steps[2].warmup);
  CHECK(sink.steps[2].failed);
  CHECK(!sink.steps[3].failed);
}

TEST_CASE("ending a phase that is not open or an outer one first is counted as unbalanced", "[analysis]") {
  step_builder b(0, 0);
  auto sink =
      run({step_begin(0), end(compute, 5), begin(compute, 10), begin(wait, 20), end(compute, 40), step_end(50)}, 0, &b);
  REQUIRE(sink.steps.size() == 1);
  CHECK(b.unbalanced() == 2);
  CHECK(sink.steps[0].ticks.at(compute.value) == 10);
  CHECK(sink.steps[0].ticks.at(wait.value) == 20);
  CHECK(sink.steps[0].ticks.at(other.value) == 20);
}

TEST_CASE("a step's host segments tile its window in time order", "[analysis]") {
  auto sink = run({begin(input, 0), end(input, 30), step_begin(40), begin(compute, 40), begin(wait, 50), end(wait, 60),
                   end(compute, 90), step_end(100)});
  REQUIRE(sink.steps.size() == 1);
  const auto& segs = sink.steps[0].segments;
  const std::vector<std::tuple<std::uint64_t, std::uint64_t, std::uint32_t>> expected = {
      {0, 30, input.value}, {30, 40, other.value},   {40, 50, compute.value},
      {50, 60, wait.value}, {60, 90, compute.value}, {90, 100, other.value}};
  REQUIRE(segs.size() == expected.size());
  for (std::size_t i = 0; i < segs.size(); ++i) {
    CHECK(std::make_tuple(segs[i].begin, segs[i].end, segs[i].phase) == expected[i]);
  }
}

TEST_CASE("runs of records give the same steps as records one at a time, with or without segments", "[analysis]") {
  const std::vector<record> records = {begin(input, 0), end(input, 30),   step_begin(40),   begin(compute, 40),
                                       begin(wait, 50), end(wait, 60),    end(compute, 90), step_end(100),
                                       step_begin(100), begin(wait, 120), end(wait, 170),   step_end(180)};
  const recording_sink one_by_one = run(records);
  for (bool segments : {true, false}) {
    recording_sink runs;
    step_builder b(0, 0);
    b.keep_segments(segments);
    b.consume(records.data(), records.data() + 5, runs);  // split mid-step, as a ring wrap would
    b.consume(records.data() + 5, records.data() + records.size(), runs);
    REQUIRE(runs.steps.size() == 2);
    for (std::size_t i = 0; i < 2; ++i) {
      CHECK(runs.steps[i].begin == one_by_one.steps[i].begin);
      CHECK(runs.steps[i].end == one_by_one.steps[i].end);
      CHECK(runs.steps[i].ticks == one_by_one.steps[i].ticks);
      CHECK(runs.steps[i].calls == one_by_one.steps[i].calls);
      CHECK(runs.steps[i].segments.size() == (segments ? one_by_one.steps[i].segments.size() : 0));
    }
  }
}

TEST_CASE("CUDA event slots around a phase are paired for harvesting", "[analysis][gpu]") {
  step_builder b(0, 0);
  const auto event = [](record_kind kind, std::uint32_t slot, std::uint64_t t) { return record{t, slot, kind}; };
  run({step_begin(0), begin(compute, 10), event(record_kind::event_begin, 3, 10), begin(wait, 20), end(wait, 30),
       event(record_kind::event_end, 4, 40), end(compute, 40), step_end(50)},
      0, &b);
  REQUIRE(b.event_pairs().size() == 1);
  CHECK(b.event_pairs()[0].phase == compute.value);
  CHECK(b.event_pairs()[0].begin == 3);
  CHECK(b.event_pairs()[0].end == 4);
  b.event_pairs().clear();
  SECTION("a phase whose end event could not be recorded frees its begin slot") {
    run({begin(compute, 60), event(record_kind::event_begin, 5, 60), event(record_kind::event_end, no_event, 70),
         end(compute, 70)},
        0, &b);
    REQUIRE(b.event_pairs().size() == 1);
    CHECK(b.event_pairs()[0].begin == 5);
    CHECK(b.event_pairs()[0].end == no_event);
  }
  SECTION("a phase in a warm-up step frees its slots without timing them") {
    step_builder warm(1, 0);
    run({step_begin(0), begin(compute, 10), event(record_kind::event_begin, 3, 10),
         event(record_kind::event_end, 4, 40), end(compute, 40), step_end(50)},
        0, &warm);
    REQUIRE(warm.event_pairs().size() == 1);
    CHECK(warm.event_pairs()[0].end == 4);
    CHECK_FALSE(warm.event_pairs()[0].timed);
  }
  SECTION("slots of phases still open when the thread goes are freed") {
    recording_sink sink;
    b.consume(begin(compute, 60), sink);
    b.consume(event(record_kind::event_begin, 6, 60), sink);
    b.finish(sink);
    REQUIRE(b.event_pairs().size() == 1);
    CHECK(b.event_pairs()[0].begin == 6);
    CHECK(b.event_pairs()[0].end == no_event);
  }
}

TEST_CASE("CUDA event slots around a step are timed for counted steps only", "[analysis][gpu]") {
  const auto event = [](record_kind kind, std::uint32_t slot, std::uint64_t t) { return record{t, slot, kind}; };
  const auto step_with_events = [&](std::uint32_t b, std::uint32_t e, record_kind end_kind) {
    return std::vector<record>{step_begin(0),    event(record_kind::step_event_begin, b, 0), begin(compute, 10),
                               end(compute, 40), event(record_kind::step_event_end, e, 50),  record{50, 0, end_kind}};
  };
  step_builder b(1, 0);  // the first step is warm-up
  recording_sink sink;
  const auto feed = [&](const std::vector<record>& records) {
    for (const auto& r : records) b.consume(r, sink);
  };
  feed(step_with_events(1, 2, record_kind::step_end));         // warm-up: slots freed, no time
  feed(step_with_events(3, 4, record_kind::step_end));         // counted: timed
  feed(step_with_events(5, 6, record_kind::step_end_failed));  // failed: slots freed, no time
  REQUIRE(sink.steps.size() == 3);
  const auto& pairs = b.event_pairs();
  REQUIRE(pairs.size() == 3);
  const std::vector<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t, bool>> expected = {
      {event_pair::step, 1, 2, false}, {event_pair::step, 3, 4, true}, {event_pair::step, 5, 6, false}};
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    CHECK(std::make_tuple(pairs[i].phase, pairs[i].begin, pairs[i].end, pairs[i].timed) == expected[i]);
  }
  b.event_pairs().clear();
  SECTION("a step whose end event could not be recorded frees its begin slot") {
    feed({step_begin(60), event(record_kind::step_event_begin, 7, 60), step_end(70)});
    REQUIRE(b.event_pairs().size() == 1);
    CHECK(b.event_pairs()[0].begin == 7);
    CHECK(b.event_pairs()[0].end == no_event);
  }
  SECTION("the slots of a step still open when the thread goes are freed") {
    feed({step_begin(60), event(record_kind::step_event_begin, 8, 60)});
    b.finish(sink);
    REQUIRE(b.event_pairs().size() == 1);
    CHECK(b.event_pairs()[0].begin == 8);
    CHECK_FALSE(b.event_pairs()[0].timed);
  }
}

TEST_CASE("the phase tree: inclusive time holds the phases opened inside, each knows its parent", "[analysis][tree]") {
  const phase_id decode = register_phase("tree-decode"), again = register_phase("tree-again");
  SECTION("decode inside input, with a fetch before the step") {
    auto sink = run({begin(input, 0), begin(decode, 10), end(decode, 50), end(input, 60), step_begin(60),
                     begin(compute, 60), end(compute, 90), step_end(100)});
    REQUIRE(sink.steps.size() == 1);
    const auto& s = sink.steps[0];
    CHECK(s.ticks.at(input.value) == 20);
    CHECK(s.ticks.at(decode.value) == 40);
    CHECK(s.incl.at(input.value) == 60);
    CHECK(s.incl.at(decode.value) == 40);
    CHECK(s.incl.at(compute.value) == 30);
    CHECK(s.parent.at(decode.value) == input.value);
    CHECK(s.parent.at(input.value) == phase_slice::no_parent);
    CHECK(s.ticks.at(other.value) == 10);
  }
  SECTION("a phase opened inside itself is counted once") {
    auto sink = run({step_begin(0), begin(again, 0), begin(again, 20), end(again, 40), end(again, 80), step_end(100)});
    REQUIRE(sink.steps.size() == 1);
    CHECK(sink.steps[0].incl.at(again.value) == 80);
    CHECK(sink.steps[0].ticks.at(again.value) == 80);
  }
  SECTION("a phase open across steps: each step gets the part inside it") {
    auto sink =
        run({step_begin(0), begin(compute, 50), step_end(100), step_begin(100), end(compute, 130), step_end(200)});
    REQUIRE(sink.steps.size() == 2);
    CHECK(sink.steps[0].incl.at(compute.value) == 50);
    CHECK(sink.steps[1].incl.at(compute.value) == 30);
    CHECK(sink.steps[1].ticks.at(compute.value) == 30);
  }
}

TEST_CASE("time set aside is in no step: the window skips it, and what runs inside goes with it",
          "[analysis][set-aside]") {
  const phase_id ckpt = register_phase("sa-checkpoint"), val = register_phase("sa-validation");
  SECTION("a checkpoint in the middle of a step") {
    auto sink = run({step_begin(0), begin(compute, 0), end(compute, 30), exclude(ckpt, 40), begin(wait, 50),
                     end(wait, 60), resume(ckpt, 90), begin(compute, 90), end(compute, 100), step_end(110)});
    REQUIRE(sink.steps.size() == 1);
    const auto& s = sink.steps[0];
    CHECK(s.set_aside == 50);
    CHECK(s.ticks.at(compute.value) == 40);
    CHECK(s.ticks.at(other.value) == 20);   // 30..40 and 100..110
    CHECK(s.ticks.count(wait.value) == 0);  // the wait inside the checkpoint went with it
    std::uint64_t sum = 0;
    for (auto& [id, t] : s.ticks) sum += t;
    CHECK(sum == s.end - s.begin - s.set_aside);  // shares still sum to 100%
    REQUIRE(sink.set_aside.size() == 1);
    CHECK(sink.set_aside[0] == std::make_tuple(ckpt.value, std::uint64_t{40}, std::uint64_t{90}));
  }
  SECTION("validation between a fetch and its step: its steps and fetches are set aside too") {
    auto sink =
        run({begin(input, 0), end(input, 20), exclude(val, 20), begin(input, 25), end(input, 35), step_begin(35),
             begin(compute, 36), end(compute, 40), step_end(60), resume(val, 70), step_begin(80), step_end(100)});
    REQUIRE(sink.steps.size() == 1);  // the validation step is not a training step
    const auto& s = sink.steps[0];
    CHECK(s.begin == 0);
    CHECK(s.set_aside == 50);
    CHECK(s.ticks.at(input.value) == 20);
    CHECK(s.ticks.at(other.value) == 30);  // 70..80 and 80..100
    CHECK(sink.unscoped.empty());
  }
  SECTION("inclusive time of a phase skips the span set aside inside it") {
    auto sink =
        run({step_begin(0), begin(compute, 0), exclude(ckpt, 10), resume(ckpt, 60), end(compute, 70), step_end(70)});
    CHECK(sink.steps.at(0).incl.at(compute.value) == 20);
    CHECK(sink.steps.at(0).ticks.at(compute.value) == 20);
  }
  SECTION("nested spans report once, under the outermost name") {
    auto sink =
        run({step_begin(0), exclude(val, 10), exclude(ckpt, 20), resume(ckpt, 30), resume(val, 40), step_end(50)});
    REQUIRE(sink.set_aside.size() == 1);
    CHECK(std::get<0>(sink.set_aside[0]) == val.value);
    CHECK(sink.steps.at(0).set_aside == 30);
  }
}

TEST_CASE("past 256 phase calls a step keeps its first 192 and its last 64, the middle counted",
          "[analysis][timeline]") {
  struct spans_sink final : step_sink {
    std::vector<phase_span> spans;
    std::uint32_t dropped = 0;
    void on_step(const built_step& s) override {
      spans = s.spans;
      dropped = s.spans_dropped;
    }
    void on_unscoped(std::uint32_t, std::uint64_t) override {}
    void on_set_aside(std::uint32_t, std::uint64_t, std::uint64_t) override {}
  } sink;
  step_builder b(0, 0);
  b.keep_spans(true);
  std::vector<record> records = {step_begin(0)};
  std::uint64_t t = 10;
  for (int i = 0; i < 1000; ++i, t += 10) {  // call i runs [t, t + 5)
    records.push_back(begin(compute, t));
    records.push_back(end(compute, t + 5));
  }
  records.push_back(begin(wait, t));  // the collective at the step's end
  records.push_back(end(wait, t + 50));
  records.push_back(step_end(t + 60));
  for (const auto& r : records) b.consume(r, sink);
  REQUIRE(sink.spans.size() == step_builder::max_spans);
  REQUIRE(sink.dropped == 1001 - step_builder::max_spans);
  std::vector<std::uint64_t> begins;
  for (const phase_span& s : sink.spans) begins.push_back(s.begin);
  std::sort(begins.begin(), begins.end());
  for (std::size_t i = 0; i < 192; ++i) REQUIRE(begins[i] == 10 + 10 * i);                     // the first 192 calls
  for (std::size_t i = 0; i < 63; ++i) REQUIRE(begins[192 + i] == 10 + 10 * (1000 - 63 + i));  // the last 63
  REQUIRE(begins.back() == t);                                                                 // and the collective
  const auto last =
      std::find_if(sink.spans.begin(), sink.spans.end(), [&](const phase_span& s) { return s.begin == t; });
  REQUIRE(last->phase == wait.value);
  REQUIRE(last->end == t + 50);
}

TEST_CASE("past 256 phase calls, an anchor phase's calls keep their place among the last 64", "[analysis][timeline]") {
  struct spans_sink final : step_sink {
    std::vector<phase_span> spans;
    void on_step(const built_step& s) override { spans = s.spans; }
    void on_unscoped(std::uint32_t, std::uint64_t) override {}
    void on_set_aside(std::uint32_t, std::uint64_t, std::uint64_t) override {}
  };
  const phase_id collective = register_phase(collective_phase);
  for (bool anchored : {false, true}) {
    spans_sink sink;
    step_builder b(0, 0);
    b.keep_spans(true);
    if (anchored) b.set_anchor_phase(collective.value);
    std::vector<record> records = {step_begin(0)};
    std::uint64_t t = 10;
    for (int i = 0; i < 1000; ++i, t += 10) {
      if (i == 900) {  // the collective, then 99 more calls: past the ring of the last 64
        records.push_back(begin(collective, t));
        records.push_back(end(collective, t + 5));
        continue;
      }
      records.push_back(begin(compute, t));
      records.push_back(end(compute, t + 5));
    }
    records.push_back(step_end(t));
    for (const auto& r : records) b.consume(r, sink);
    REQUIRE(sink.spans.size() == step_builder::max_spans);
    const bool kept = std::any_of(sink.spans.begin(), sink.spans.end(),
                                  [&](const phase_span& s) { return s.phase == collective.value; });
    CHECK(kept == anchored);
    std::vector<std::uint64_t> begins;
    for (const phase_span& s : sink.spans) begins.push_back(s.begin);
    std::sort(begins.begin(), begins.end());
    CHECK(begins[191] == 10 + 10 * 191);    // the first 192 calls, always
    CHECK(begins.back() == 10 + 10 * 999);  // and the latest
  }
}
