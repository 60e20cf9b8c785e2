// CUDA event timing of phases given a stream, on the fake driver (fake_gpu.hpp): slot reuse,
// pending / done / failed pairs, a pool that was full at a phase's begin, graph capture, and a
// thread with no CUDA context of its own. Each fake event is recorded 0.5 ms after the one
// before, so a phase with nothing inside lasts exactly 0.5 ms of fake device time.
#include <algorithm>
#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "fake_gpu.hpp"
#include "gpu/event_timer.hpp"
#include "helpers.hpp"
#include "steptrace/steptrace.hpp"

using namespace steptrace;
using steptrace::detail::event_pool;
using steptrace::testing::fake_gpu;

namespace {

std::uint64_t device_calls(const summary& s, const char* phase) {
  const phase_stats* p = s.phase(phase);
  return p ? p->device_calls : 0;
}

// n steps of one `compute` phase on `stream`, letting the collector free slots as it goes.
void timed_steps(tracer& t, void* stream, int n) {
  for (int i = 0; i < n; ++i) {
    scoped_step step(t);
    scoped_phase p(t, builtin::compute, stream);
    if (i % 200 == 199) (void)t.summary();  // harvests: at most 400 slots in flight
  }
}

}  // namespace

TEST_CASE("pending pairs wait, done pairs are timed, failed pairs free their slots", "[gpu][events]") {
  fake_gpu gpu(false);
  gpu.set_current_context(true);
  tracer t(steptrace::testing::quiet());
  void* stream = gpu.stream(1);
  gpu.hold_events(true);
  timed_steps(t, stream, 10);
  summary s = t.summary();
  CHECK(device_calls(s, "compute") == 0);  // the device has not reached them
  gpu.release_events();
  s = t.summary();
  CHECK(device_calls(s, "compute") == 10);
  REQUIRE(s.phase("compute")->device_ms.has_value());
  CHECK(s.phase("compute")->device_ms->p50 == Approx(0.5).epsilon(0.02));
  gpu.hold_events(false);
  gpu.fail_events(true);
  timed_steps(t, stream, 600);  // more than the pool holds: failed pairs must give slots back
  gpu.fail_events(false);
  timed_steps(t, stream, 20);
  s = t.summary();
  CHECK(device_calls(s, "compute") == 30);
}

TEST_CASE("a phase that began with the pool full does not cost a slot forever", "[gpu][events]") {
  fake_gpu gpu(false);
  gpu.set_current_context(true);
  tracer t(steptrace::testing::quiet());
  void* stream = gpu.stream(1);
  gpu.hold_events(true);
  constexpr int filling = event_pool::size / 2;
  {  // every slot busy: a pair per phase
    scoped_step step(t);
    for (int i = 0; i < filling; ++i) scoped_phase p(t, builtin::compute, stream);
  }
  {
    scoped_step step(t);
    scoped_phase p(t, builtin::h2d, stream);  // begins with no slot
    gpu.release_events();
    gpu.hold_events(false);
    (void)t.summary();  // every slot free again before the phase ends
  }
  timed_steps(t, stream, 2000);  // wraps the pool many times
  const summary s = t.summary();
  CHECK(device_calls(s, "h2d") == 0);
  CHECK(device_calls(s, "compute") == filling + 2000);
}

TEST_CASE("a stream being captured into a CUDA graph gets no events, and queries never break a capture",
          "[gpu][events]") {
  fake_gpu gpu(false);
  gpu.set_current_context(true);
  tracer t(steptrace::testing::quiet());
  void* captured = gpu.stream(1);
  void* other = gpu.stream(2);
  gpu.hold_events(true);
  timed_steps(t, other, 5);  // pending: the queries below happen during the capture
  gpu.begin_capture(captured);
  timed_steps(t, captured, 5);
  gpu.release_events();
  gpu.hold_events(false);
  const summary during = t.summary();  // queries from this thread and the collector
  gpu.end_capture(captured);
  CHECK(gpu.events_recorded_on(captured) == 0);
  CHECK_FALSE(gpu.capture_invalidated());
  CHECK(device_calls(during, "compute") == 5);
  CHECK(gpu.this_thread_capture_mode_is_global());  // put back after each query
  timed_steps(t, captured, 5);                      // captured no more: timed again
  CHECK(device_calls(t.summary(), "compute") == 10);
}

TEST_CASE("a thread with no current CUDA context times phases on a stream, and is not given up on", "[gpu][events]") {
  fake_gpu gpu(false);
  tracer t(steptrace::testing::quiet());
  std::thread worker([&] {
    gpu.set_current_context(false);
    timed_steps(t, nullptr, 3);        // the legacy stream: no context to take events from yet
    timed_steps(t, gpu.stream(1), 4);  // the stream's own context
    gpu.set_current_context(true);
    timed_steps(t, nullptr, 2);
  });
  worker.join();
  CHECK(device_calls(t.summary(), "compute") == 6);
}

TEST_CASE("a stream on another GPU is timed with events made in its own context", "[gpu][events]") {
  fake_gpu gpu(false);
  gpu.set_current_context(true);  // device 0's
  tracer t(steptrace::testing::quiet());
  timed_steps(t, gpu.stream(1, /*device=*/1), 5);  // an event of device 0 cannot be recorded there
  timed_steps(t, gpu.stream(1, /*device=*/0), 5);
  timed_steps(t, gpu.stream(2, /*device=*/1), 5);
  const summary s = t.summary();
  CHECK(device_calls(s, "compute") == 15);
  REQUIRE(s.phase("compute")->device_ms.has_value());
  CHECK(s.phase("compute")->device_ms->max == Approx(0.5).epsilon(0.02));  // never a pair across two contexts
}

TEST_CASE("after cudaDeviceReset the dead events are retired and new ones time the phases", "[gpu][events]") {
  fake_gpu gpu(false);
  gpu.set_current_context(true);
  tracer t(steptrace::testing::quiet());
  timed_steps(t, gpu.stream(1), 5);
  CHECK(device_calls(t.summary(), "compute") == 5);
  gpu.device_reset();
  timed_steps(t, gpu.stream(1), 10);  // the first finds its event dead; the rest get a new pool
  const summary s = t.summary();
  CHECK(device_calls(s, "compute") == 5 + 9);
  CHECK(s.phase("compute")->device_ms->max == Approx(0.5).epsilon(0.02));
}

TEST_CASE("a pool half full of pairs not read back asks the collector for a harvest, once", "[gpu][events]") {
  using steptrace::detail::record_stream_event;
  using steptrace::detail::thread_events;
  fake_gpu gpu(false);
  gpu.set_current_context(true);
  tracer t(steptrace::testing::quiet());
  timed_steps(t, nullptr, 1);  // the backend started on the fake driver
  void* stream = gpu.stream(1);
  void* context = steptrace::detail::stream_context(stream);
  thread_events events;  // a recording thread's own, which no collector harvests here
  std::vector<std::uint32_t> ids;
  for (std::uint32_t i = 0; i < event_pool::size / 2; ++i) ids.push_back(record_stream_event(events, stream, context));
  CHECK_FALSE(events.harvest_asked.load());  // half the pool taken, none of it waiting past half
  ids.push_back(record_stream_event(events, stream, context));
  CHECK(events.harvest_asked.load());
  CHECK(events.wake_collector);
  events.wake_collector = false;  // woken
  ids.push_back(record_stream_event(events, stream, context));
  CHECK_FALSE(events.wake_collector);  // asked already: no second wake until a harvest
  events.harvest_asked.store(false);   // the collector's harvest freed the oldest quarter
  for (std::size_t i = 0; i < event_pool::size / 4; ++i) events.release(ids[i]);
  for (std::uint32_t i = 0; i < event_pool::size / 4 - 2; ++i)
    ids.push_back(record_stream_event(events, stream, context));
  CHECK_FALSE(events.harvest_asked.load());  // slot half a pool ahead of each was free
  ids.push_back(record_stream_event(events, stream, context));
  CHECK(events.harvest_asked.load());  // half the pool waits again
  CHECK(std::count(ids.begin(), ids.end(), steptrace::detail::no_event) == 0);
}
