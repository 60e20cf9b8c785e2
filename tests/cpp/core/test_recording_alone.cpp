// Recording as an object of its own (core/recording): a recorder driven through a
// recording_context the test writes, with no tracer, no live view, no capture and no GPU. Its
// records go in through the same inline calls a tracer makes; what comes out is checked in the
// sinks the context adds.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>

#include "analysis/aggregate.hpp"
#include "analysis/step_fan_out.hpp"
#include "core/recording/recorder.hpp"
#include "steptrace/phase.hpp"

using namespace steptrace;
using namespace steptrace::detail;

namespace {

// A tracer as recording sees it: options, one aggregate as the run's figures and the only sink;
// it counts the collector's passes.
struct fake_tracer final : recording_context {
  fake_tracer() {
    host_clock::init();
    cfg.warmup_steps = 0;
  }
  config cfg;
  aggregate run;
  std::mutex mutex;
  int passes = 0;  // under `mutex`
  const config& options() const override { return cfg; }
  bool forked() const override { return false; }
  aggregate& totals() override { return run; }
  void add_sinks(step_fan_out& out) override { out.add(run); }
  bool spans_wanted() const override { return false; }
  void on_device(device_join&, std::uint64_t) override {}
  void each_pass(std::unique_lock<std::mutex>&) override { ++passes; }
};

// `n` steps of one `input` phase each, as tracer::open_step and end_step push them.
void record_steps(recorder& rec, thread_state& s, int n) {
  for (int i = 0; i < n; ++i) {
    push(rec, s, record_kind::step_begin, 0);
    ask_drain_if_half_full(rec, s);
    push(rec, s, record_kind::phase_begin, builtin::input.value);
    push(rec, s, record_kind::phase_end, builtin::input.value);
    push(rec, s, record_kind::step_end, 0);
  }
}

std::uint64_t steps_in(fake_tracer& t) {
  std::lock_guard<std::mutex> lock(t.mutex);
  return t.run.steps();
}

}  // namespace

TEST_CASE("a thread's steps reach the context's sinks when its ring is drained", "[recording_alone]") {
  fake_tracer t;
  recorder rec(t.mutex, t);
  thread_state* s = rec.attach();
  REQUIRE(s != nullptr);
  record_steps(rec, *s, 7);
  {
    std::lock_guard<std::mutex> lock(t.mutex);
    rec.drain_all();
    CHECK(rec.steps_ended() == 7);
    CHECK(t.run.steps() == 7);
    summary out;
    t.run.fill(out, host_clock::ns_per_tick());
    const phase_stats* in = nullptr;
    for (const auto& p : out.phases) in = p.name == "input" ? &p : in;
    REQUIRE(in != nullptr);
    CHECK(in->calls == 7);
    CHECK(rec.open_steps() == 0);
  }
  rec.stop();
}

TEST_CASE("a full ring is drained by its own thread, and no step is lost", "[recording_alone]") {
  fake_tracer t;
  t.cfg.ring_records = 64;  // 16 steps of 4 records fill it
  recorder rec(t.mutex, t);
  rec.stop();  // no collector: only the recording thread drains
  thread_state* s = rec.attach();
  record_steps(rec, *s, 100);
  CHECK(rec.producer_drains.load() > 0);
  {
    std::lock_guard<std::mutex> lock(t.mutex);
    rec.drain_all();
    CHECK(rec.steps_ended() == 100);
    CHECK(t.run.steps() == 100);
  }
}

TEST_CASE("the collector drains without being asked and gives the tracer its pass", "[recording_alone]") {
  fake_tracer t;
  recorder rec(t.mutex, t);
  thread_state* s = rec.attach();  // starts the collector
  record_steps(rec, *s, 5);
  // The first poll is at most 50 ms away; 10 s is a bound for a loaded machine, not a time.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (steps_in(t) < 5 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  CHECK(steps_in(t) == 5);
  {
    std::lock_guard<std::mutex> lock(t.mutex);
    CHECK(t.passes >= 1);
  }
  rec.stop();  // joins: a second stop, and the destructor, have nothing left to do
  rec.stop();
}

TEST_CASE("a thread that exits inside a step is counted open, and its memory serves a new thread",
          "[recording_alone]") {
  fake_tracer t;
  recorder rec(t.mutex, t);
  rec.stop();
  thread_state* s = rec.attach();
  record_steps(rec, *s, 2);
  push(rec, *s, record_kind::step_begin, 0);
  const std::uint32_t first_number = s->builder.thread();
  rec.detach(*s);
  {
    std::lock_guard<std::mutex> lock(t.mutex);
    CHECK(rec.steps_ended() == 2);
    CHECK(rec.open_steps() == 1);
    CHECK(rec.live_builders().empty());
  }
  thread_state* again = rec.attach();
  CHECK(again == s);                               // the memory, reused
  CHECK(again->builder.thread() != first_number);  // a new thread, numbered anew
  {
    std::lock_guard<std::mutex> lock(t.mutex);
    CHECK(rec.live_builders().size() == 1);
    rec.restart();  // tracer::reset: the count of steps left open starts afresh
    CHECK(rec.open_steps() == 0);
  }
}

TEST_CASE("a request's block in a thread's ring becomes a step of the request builder", "[recording_alone]") {
  fake_tracer t;
  recorder rec(t.mutex, t);
  rec.stop();
  thread_state* s = rec.attach();
  record_steps(rec, *s, 1);  // the thread's own step around the block
  const std::uint64_t now = host_clock::now();
  const record block[] = {{now, 4, record_kind::request_block},
                          {now, 0, record_kind::step_begin},
                          {now + 10, builtin::input.value, record_kind::phase_begin},
                          {now + 20, builtin::input.value, record_kind::phase_end},
                          {now + 30, 0, record_kind::step_end}};
  for (const record& r : block) REQUIRE(s->records.try_push(r.ticks, r.id, r.kind));
  record_steps(rec, *s, 1);
  std::lock_guard<std::mutex> lock(t.mutex);
  rec.drain_all();
  REQUIRE(rec.reqs.requests != nullptr);
  CHECK(rec.reqs.requests->thread() != s->builder.thread());  // numbered as one more thread
  CHECK(rec.steps_ended() == 3);
  CHECK(t.run.steps() == 3);
  summary out;
  t.run.fill(out, host_clock::ns_per_tick());
  CHECK(out.requests == 1);
}
