// The per-thread ring: order, wrap-around, and what a full ring refuses.
#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

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
