// A step's device view covers its own streams, on the fakes (fake_gpu.hpp): two threads whose
// steps overlap each see their own stream's kernels; a stream on another device is not mixed with
// the first; a step that named no stream sees every stream; the device as a whole is kept apart.
#include <atomic>
#include <catch2/catch.hpp>
#include <thread>

#include "fake_gpu.hpp"
#include "helpers.hpp"
#include "record/clock.hpp"
#include "steptrace/steptrace.hpp"

using namespace steptrace;
using steptrace::testing::fake_gpu;
using steptrace::testing::host_now_ns;
using steptrace::testing::kernel_record;
using steptrace::testing::sync_record;

namespace {

// All `n` threads wait here until every one has arrived.
class rendezvous {
 public:
  explicit rendezvous(int n) : n_(n) {}
  void arrive() {
    const int round = round_.load();
    if (arrived_.fetch_add(1) + 1 == n_) {
      arrived_.store(0);
      round_.fetch_add(1);
    }
    while (round_.load() == round) std::this_thread::yield();
  }

 private:
  const int n_;
  std::atomic<int> arrived_{0}, round_{0};
};

}  // namespace

TEST_CASE("two threads' overlapping steps each see only their own stream", "[gpu][streams]") {
  fake_gpu gpu;
  tracer t(steptrace::testing::quiet());
  { scoped_step warm(t); }  // starts the backend on the fakes before the timed steps
  rendezvous meet(2);
  std::uint64_t after[2] = {}, before[2] = {};
  auto worker = [&](int i) {
    gpu.set_current_context(true);
    scoped_step step(t);
    scoped_phase p(t, builtin::compute, gpu.stream(1 + i));
    meet.arrive();
    after[i] = host_now_ns();                                      // both threads are inside their steps from here...
    steptrace::testing::spin_for(std::chrono::microseconds(300));  // (the overlap then lasts at least this)
    meet.arrive();
    before[i] = host_now_ns();  // ...to here
    meet.arrive();
  };
  std::thread a(worker, 0), b(worker, 1);
  a.join();
  b.join();
  // Both kernels lie where both steps are open: a view by time alone gives each step both.
  const std::uint64_t from = std::max(after[0], after[1]), to = std::min(before[0], before[1]);
  REQUIRE(to > from);
  const std::uint64_t q = (to - from) / 4;
  REQUIRE(q > 0);
  gpu.emit({kernel_record(from, from + q, fake_gpu::stream_id(gpu.stream(1))),
            kernel_record(from + q, from + 3 * q, fake_gpu::stream_id(gpu.stream(2)))});
  const summary s = t.summary();
  REQUIRE(s.gpu.has_value());
  CHECK(s.gpu->steps_viewed == 3);  // the first step named no stream
  CHECK(s.gpu->steps_all_streams == 1);
  CHECK(s.gpu->kernels_per_step == Approx(2.0 / 3));                 // one each for the two threads' steps
  CHECK(s.gpu->busy_ms.total == Approx(3 * q * 1e-6).margin(1e-9));  // q on one stream, 2q on the other
  CHECK(s.gpu->device_busy_share > s.gpu->busy_share);               // each step's device ran the other's kernel too
}

TEST_CASE("a stream on another device is not mixed with the first device's streams", "[gpu][streams]") {
  fake_gpu gpu;
  gpu.set_current_context(true);  // device 0's
  tracer t(steptrace::testing::quiet());
  std::uint64_t b = 0, e = 0;
  {
    scoped_step step(t);
    scoped_phase p(t, builtin::compute, gpu.stream(1, /*device=*/1));
    b = host_now_ns();
    steptrace::testing::spin_for(std::chrono::microseconds(500));
    e = host_now_ns();
  }
  const std::uint64_t q = (e - b) / 8;
  // The same CUPTI stream id on both devices: ids are unique within a context only.
  const std::uint32_t id = fake_gpu::stream_id(gpu.stream(1, 1));
  REQUIRE(id == fake_gpu::stream_id(gpu.stream(1, 0)));
  gpu.emit({kernel_record(b + q, b + 2 * q, id, /*device=*/1), kernel_record(b + 3 * q, b + 6 * q, id, /*device=*/0),
            sync_record(b + 6 * q, b + 7 * q, /*device=*/1), sync_record(b + 7 * q, b + 8 * q, /*device=*/0)});
  const summary s = t.summary();
  REQUIRE(s.gpu.has_value());
  CHECK(s.gpu->kernels_per_step == 1);
  CHECK(s.gpu->syncs_per_step == 1);  // device 1's context synchronise only
  CHECK(s.gpu->busy_ms.total == Approx(q * 1e-6).margin(1e-9));
  CHECK(s.gpu->device_busy_share == Approx(s.gpu->busy_share).epsilon(1e-9));  // device 0 is not its device
  CHECK(s.gpu->steps_all_streams == 0);
}

TEST_CASE("a step that names no stream sees every stream, and says so", "[gpu][streams]") {
  fake_gpu gpu;
  gpu.set_current_context(true);
  tracer t(steptrace::testing::quiet());
  std::uint64_t b = 0, e = 0;
  {
    scoped_step step(t);
    scoped_phase p(t, builtin::compute);
    b = host_now_ns();
    steptrace::testing::spin_for(std::chrono::microseconds(500));
    e = host_now_ns();
  }
  const std::uint64_t q = (e - b) / 4;
  gpu.emit({kernel_record(b, b + q, 11, 0), kernel_record(b + 2 * q, b + 3 * q, 12, 1)});
  const summary s = t.summary();
  REQUIRE(s.gpu.has_value());
  CHECK(s.gpu->kernels_per_step == 2);
  CHECK(s.gpu->busy_ms.total == Approx(2 * q * 1e-6).margin(1e-9));
  CHECK(s.gpu->steps_all_streams == 1);
  CHECK(s.table().find("device") != std::string::npos);
}

TEST_CASE("a thread maps each stream once, and the default stream in its current context", "[gpu][streams]") {
  fake_gpu gpu;
  gpu.set_current_context(true);
  tracer t(steptrace::testing::quiet());
  std::uint64_t b = 0, e = 0;
  for (int i = 0; i < 20; ++i) {
    scoped_step step(t, nullptr);  // the step itself on the legacy default stream
    scoped_phase p(t, builtin::compute, gpu.stream(3));
    b = host_now_ns();
    steptrace::testing::spin_for(std::chrono::microseconds(200));
    e = host_now_ns();
  }
  CHECK(gpu.stream_lookups() == 2);  // stream 3 and the default stream, each once
  const std::uint64_t q = (e - b) / 4;
  gpu.emit({kernel_record(b, b + q, fake_gpu::stream_id(nullptr)), kernel_record(b + q, b + 2 * q, 99)});
  const summary s = t.summary();
  REQUIRE(s.gpu.has_value());
  CHECK(s.gpu->kernels_per_step == Approx(1.0 / 20));  // the default stream's kernel, in the last step; not stream 99's
}
