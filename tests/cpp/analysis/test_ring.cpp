// The per-thread ring: order, wrap-around, and what a full ring refuses; when its consumer polls,
// and when its producer asks for a drain.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <vector>

#include "core/recording/poll_interval.hpp"
#include "core/tracer_impl.hpp"
#include "steptrace/detail/ring.hpp"

using namespace steptrace::detail;

namespace {

std::vector<std::uint64_t> drain_ticks(ring& r, int& runs) {
  std::vector<std::uint64_t> out;
  runs = 0;
  r.drain([&](const record* first, const record* last) {
    ++runs;
    for (; first != last; ++first) out.push_back(first->ticks);
  });
  return out;
}

}  // namespace

TEST_CASE("the ring hands records back oldest first, in two runs where it wraps", "[record]") {
  ring r(64);
  std::uint64_t next = 0, expected = 0;
  int runs = 0;
  for (int round = 0; round < 10; ++round) {  // 10 x 50 records: the write position wraps often
    for (int i = 0; i < 50; ++i) REQUIRE(r.try_push(next++, 7, record_kind::phase_begin));
    const auto got = drain_ticks(r, runs);
    REQUIRE(got.size() == 50);
    for (std::uint64_t t : got) CHECK(t == expected++);
    CHECK(runs == ((round * 50) % 64 + 50 > 64 ? 2 : 1));
  }
}

TEST_CASE("a full ring refuses a record until it is drained", "[record]") {
  ring r(64);
  for (std::uint64_t i = 0; i < 64; ++i) REQUIRE(r.try_push(i, 0, record_kind::step_begin));
  CHECK_FALSE(r.try_push(64, 0, record_kind::step_begin));
  int runs = 0;
  CHECK(drain_ticks(r, runs).size() == 64);
  CHECK(r.try_push(64, 0, record_kind::step_begin));
  const auto got = drain_ticks(r, runs);
  REQUIRE(got.size() == 1);
  CHECK(got[0] == 64);
}

TEST_CASE("a run of records goes in whole, across the wrap, or not at all", "[record]") {
  ring r(64);
  std::vector<record> rest;
  for (std::uint64_t i = 1; i <= 20; ++i) rest.push_back({i, 0, record_kind::phase_begin});
  const record first{0, 20, record_kind::request_block};
  for (int i = 0; i < 50; ++i) REQUIRE(r.try_push(1000, 0, record_kind::step_begin));
  CHECK_FALSE(r.try_push_run(first, rest.data(), 20));  // 21 do not fit beside 50: none written
  int runs = 0;
  CHECK(drain_ticks(r, runs).size() == 50);
  REQUIRE(r.try_push_run(first, rest.data(), 20));  // from slot 50: wraps after 14
  const auto got = drain_ticks(r, runs);
  CHECK(runs == 2);
  REQUIRE(got.size() == 21);
  for (std::uint64_t i = 0; i < got.size(); ++i) CHECK(got[i] == i);
  for (int i = 0; i < 43; ++i) REQUIRE(r.try_push(1000, 0, record_kind::step_begin));
  CHECK(r.try_push_run(first, rest.data(), 20));  // exactly full: 43 + 21 = 64
  CHECK_FALSE(r.try_push(1000, 0, record_kind::step_begin));
}

// The collector's poll rule (core/recording/poll_interval.hpp), without a clock.
TEST_CASE("the collector polls when the fullest ring would be half full", "[ring]") {
  using std::chrono::microseconds;
  using p = steptrace::detail::poll_interval;
  // A ring found an eighth full after 1 ms would be half full after 4 ms: the interval doubles
  // toward it, one poll at a time.
  CHECK(p::next(microseconds(1000), microseconds(1000), 0.125, 0, false) == microseconds(2000));
  CHECK(p::next(microseconds(2000), microseconds(2000), 0.25, 0, false) == microseconds(4000));
  CHECK(p::next(microseconds(4000), microseconds(4000), 0.5, 0, false) == microseconds(4000));  // on the aim: kept
  // Found full after 2 ms: half of that at once.
  CHECK(p::next(microseconds(2000), microseconds(2000), 1.0, 0, false) == microseconds(1000));
  // The late poll of a busy machine: the rate, not the interval asked for, sets the next one.
  CHECK(p::next(microseconds(1000), microseconds(3000), 0.75, 0, false) == microseconds(2000));
  // An event pool aims at a quarter: the fuller of the two aims wins.
  CHECK(p::next(microseconds(4000), microseconds(4000), 0.125, 0.5, false) == microseconds(2000));
  // Nothing came: the interval doubles, up to 50 ms.
  CHECK(p::next(microseconds(1000), microseconds(1000), 0, 0, false) == microseconds(2000));
  CHECK(p::next(microseconds(40000), microseconds(40000), 0, 0, false) == p::slowest);
  // Records faster than any poll can keep up with, or a thread that outran the polls: the fastest.
  CHECK(p::next(microseconds(1000), microseconds(100), 1.0, 0, false) == p::fastest);
  CHECK(p::next(microseconds(8000), microseconds(8000), 0, 0, true) == p::fastest);
}

TEST_CASE("a ring says when more than half of it waits to be drained", "[ring]") {
  ring r(64);
  for (int i = 0; i < 32; ++i) REQUIRE(r.try_push(i, 0, record_kind::phase_begin));
  CHECK(!r.half_full());  // exactly half
  REQUIRE(r.try_push(32, 0, record_kind::phase_begin));
  CHECK(r.half_full());
  int runs = 0;
  drain_ticks(r, runs);
  CHECK(!r.half_full());  // the consumer's position read afresh
  for (int i = 0; i < 40; ++i) REQUIRE(r.try_push(100 + i, 0, record_kind::phase_begin));
  CHECK(r.half_full());
}

TEST_CASE("a step that begins with its ring half full asks the collector once", "[ring]") {
  using namespace steptrace;
  config c;
  c.ring_records = 64;
  detail::tracer_impl impl(c);
  detail::thread_state s(c.ring_records, 0, 0);
  for (int i = 0; i < 33; ++i) REQUIRE(s.records.try_push(i, 0, record_kind::phase_begin));
  detail::ask_drain_if_half_full(impl.rec, s);
  CHECK(s.drain_asked.exchange(false));  // the collector takes the ask as it polls
  detail::ask_drain_if_half_full(impl.rec, s);
  CHECK(!s.drain_asked.load());  // still half full, asked already: no second wake-up
  int runs = 0;
  drain_ticks(s.records, runs);
  detail::ask_drain_if_half_full(impl.rec, s);  // under half: the next half asks again
  for (int i = 0; i < 40; ++i) REQUIRE(s.records.try_push(i, 0, record_kind::phase_begin));
  detail::ask_drain_if_half_full(impl.rec, s);
  CHECK(s.drain_asked.load());
}
