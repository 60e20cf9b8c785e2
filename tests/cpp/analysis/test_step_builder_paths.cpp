// The step builder's short way for a phase's end, held to its general rules on random record
// streams: every step, span, unscoped and set-aside figure the same either way.
#include <catch2/catch.hpp>
#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

#include "analysis/step_builder.hpp"
#include "built_steps.hpp"

using namespace steptrace;
using namespace steptrace::detail;
using namespace steptrace::testing;

namespace {

// Everything a builder hands its sink, spans included, for comparing two builders.
struct full_sink final : step_sink {
  std::vector<step_copy> steps;
  std::vector<std::vector<std::tuple<std::uint64_t, std::uint64_t, std::uint32_t, std::uint32_t>>> spans;
  std::vector<std::pair<std::uint32_t, std::uint64_t>> unscoped;
  std::vector<std::tuple<std::uint32_t, std::uint64_t, std::uint64_t>> set_aside;
  void on_step(const built_step& s) override {
    steps.push_back(copy_of(s));
    spans.emplace_back();
    for (const auto& sp : s.spans) spans.back().emplace_back(sp.begin, sp.end, sp.phase, sp.depth);
  }
  void on_unscoped(std::uint32_t id, std::uint64_t ticks) override { unscoped.emplace_back(id, ticks); }
  void on_set_aside(std::uint32_t id, std::uint64_t b, std::uint64_t e) override { set_aside.emplace_back(id, b, e); }
};

bool same(const step_copy& a, const step_copy& b) {
  auto segs = [](const step_copy& c) {
    std::vector<std::tuple<std::uint64_t, std::uint64_t, std::uint32_t>> v;
    for (const auto& s : c.segments) v.emplace_back(s.begin, s.end, s.phase);
    return v;
  };
  return std::tie(a.begin, a.end, a.set_aside, a.failed, a.warmup, a.ticks, a.calls, a.incl, a.parent) ==
             std::tie(b.begin, b.end, b.set_aside, b.failed, b.warmup, b.ticks, b.calls, b.incl, b.parent) &&
         segs(a) == segs(b);
}

}  // namespace

TEST_CASE("a phase's end on the fast path gives what the general path gives, on random record streams",
          "[step_builder]") {
  std::uint64_t seed = 12345;
  auto next = [&seed](std::uint32_t n) {  // a fixed sequence: the same streams every run
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<std::uint32_t>((seed >> 33) % n);
  };
  std::size_t fast_steps = 0;
  for (int stream = 0; stream < 300; ++stream) {
    std::vector<record> records;
    std::vector<std::uint32_t> open;  // the phases this stream has opened, to end most of them in order
    std::uint64_t t = 1000;
    for (int i = 0; i < 400; ++i) {
      t += next(4) == 0 ? 0 : 1 + next(50);  // equal stamps too
      const std::uint32_t id = 1 + next(6);  // input, h2d, compute, wait and two custom ones
      switch (next(12)) {
        case 0:
          records.push_back(step_begin(t));
          break;
        case 1:
          records.push_back(next(5) == 0 ? record{t, 0, record_kind::step_end_failed} : step_end(t));
          break;
        case 2:
          records.push_back(exclude(phase_id{20}, t));
          break;
        case 3:
          records.push_back(resume(phase_id{20}, t));
          break;
        case 4:
          records.push_back(end(phase_id{id}, t));
          break;  // often no such phase open
        case 5:
          if (!open.empty()) {  // an outer phase ends first: the inner ones close with it
            records.push_back(end(phase_id{open.front()}, t));
            open.clear();
          }
          break;
        default:
          if (open.size() < 4 && next(2) == 0) {
            records.push_back(begin(phase_id{id}, t));
            open.push_back(id);
          } else if (!open.empty()) {
            records.push_back(end(phase_id{open.back()}, t));
            open.pop_back();
          }
      }
    }
    full_sink fast_sink, general_sink;
    step_builder fast(2, 0), general(2, 0);
    general.general_path_only(true);
    for (const record& r : records) {
      fast.consume(r, fast_sink);
      general.consume(r, general_sink);
    }
    REQUIRE(fast_sink.steps.size() == general_sink.steps.size());
    for (std::size_t i = 0; i < fast_sink.steps.size(); ++i) {
      INFO("stream " << stream << ", step " << i);
      REQUIRE(same(fast_sink.steps[i], general_sink.steps[i]));
      REQUIRE(fast_sink.spans[i] == general_sink.spans[i]);
    }
    REQUIRE(fast_sink.unscoped == general_sink.unscoped);
    REQUIRE(fast_sink.set_aside == general_sink.set_aside);
    REQUIRE(fast.unbalanced() == general.unbalanced());
    fast_steps += fast_sink.steps.size();
  }
  CHECK(fast_steps > 1000);  // the streams did make steps, with phases ending inside them
}
