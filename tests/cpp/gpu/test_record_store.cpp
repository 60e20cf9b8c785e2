// The record store: readers' cursors, loss accounting at the cap, CUPTI's buffer pool.
#include <catch2/catch.hpp>

#include "gpu/record_store.hpp"

using namespace steptrace::detail;

namespace {

std::vector<device_record> records(std::uint64_t first, std::uint64_t n) {
  std::vector<device_record> out(n);
  for (std::uint64_t i = 0; i < n; ++i) out[i].start = first + i, out[i].end = first + i + 1;
  return out;
}

}  // namespace

TEST_CASE("a reader sees each record once, in arrival order, from where it started", "[gpu][store]") {
  record_store store(4, 100);
  store.add(records(0, 10), 0, 0);
  std::uint64_t late = store.end();  // a tracer made now: none of the 10 is its business
  std::uint64_t early = 0, lost = 0;
  store.add(records(10, 5), 0, 0);
  std::vector<device_record> out;
  store.read(late, out, lost);
  REQUIRE(out.size() == 5);
  CHECK(out.front().start == 10);
  CHECK(lost == 0);
  out.clear();
  store.read(late, out, lost);
  CHECK(out.empty());
  store.read(early, out, lost);
  CHECK(out.size() == 15);
  CHECK(lost == 0);
}

TEST_CASE("records let go at the cap are lost only to readers that had not read them", "[gpu][store]") {
  record_store store(4, 100);
  std::uint64_t reader = store.end(), idle = store.end(), lost_reader = 0, lost_idle = 0;
  std::vector<device_record> out;
  store.add(records(0, 80), 0, 0);
  store.read(reader, out, lost_reader);
  store.add(records(80, 50), 0, 0);  // 130 > 100: the 30 oldest go
  out.clear();
  store.read(reader, out, lost_reader);
  CHECK(out.size() == 50);
  CHECK(lost_reader == 0);  // it had read all 80
  out.clear();
  store.read(idle, out, lost_idle);
  CHECK(out.size() == 100);
  CHECK(lost_idle == 30);
  // A reader started later never counts records that went before it started.
  store.add(records(130, 200), 0, 0);
  std::uint64_t fresh = store.end(), lost_fresh = 0;
  store.add(records(330, 10), 0, 0);
  out.clear();
  store.read(fresh, out, lost_fresh);
  CHECK(out.size() == 10);
  CHECK(lost_fresh == 0);
}

TEST_CASE("CUPTI gets at most the cap of buffers, and given-back buffers are reused", "[gpu][store]") {
  record_store store(3, 100);
  std::uint8_t* a = store.take_buffer();
  std::uint8_t* b = store.take_buffer();
  std::uint8_t* c = store.take_buffer();
  REQUIRE((a && b && c));
  CHECK(store.take_buffer() == nullptr);  // at the cap: CUPTI drops and counts
  CHECK(store.buffers_out() == 3);
  store.give_back(b);
  CHECK(store.take_buffer() == b);
  for (int i = 0; i < 1000; ++i) store.give_back(store.take_buffer());
  CHECK(store.buffers_made() == 3);
  CHECK(store.buffers_out() == 3);
}

TEST_CASE("counts of unfinished and dropped records add up", "[gpu][store]") {
  record_store store;
  store.add({}, 2, 5);
  store.add(records(0, 1), 1, 0);
  CHECK(store.counts().incomplete == 3);
  CHECK(store.counts().dropped == 5);
}
