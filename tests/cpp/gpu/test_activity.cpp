// CUPTI activity collection on the fake CUPTI (fake_gpu.hpp): records reach the step they ran
// in, unfinished work is read once finished rather than lost to a flush, counts are per tracer,
// and a CUPTI held by another tool leaves steptrace host-and-events only, saying so.
#include <catch2/catch.hpp>
#include <chrono>
#include <optional>
#include <thread>

#include "fake_gpu.hpp"
#include "gpu/activity.hpp"
#include "gpu/backend.hpp"
#include "helpers.hpp"
#include "record/clock.hpp"
#include "steptrace/steptrace.hpp"

using namespace steptrace;
using steptrace::testing::fake_gpu;
using steptrace::testing::host_now_ns;
using steptrace::testing::kernel_record;
using steptrace::testing::memory_record;
using steptrace::testing::one_step;

namespace {

// A 0.1 ms kernel in the middle of `window` (host clock, ns), in a CUPTI buffer of its own.
void kernel_in(fake_gpu& gpu, std::pair<std::uint64_t, std::uint64_t> window, bool complete = true) {
  const std::uint64_t mid = window.first + (window.second - window.first) / 2;
  gpu.emit({kernel_record(mid, mid + 100'000)}, complete);
}

}  // namespace

TEST_CASE("kernels reach the step they ran in", "[gpu][activity]") {
  fake_gpu gpu;
  tracer t(steptrace::testing::quiet());
  auto [b, e] = one_step(t);
  REQUIRE(t.summary().backend.cupti);
  // Three kernels well inside the step, on the host clock (as CUPTI stamps them for steptrace).
  const std::uint64_t mid = b + (e - b) / 2;
  gpu.emit({kernel_record(mid - 300'000, mid - 200'000), kernel_record(mid, mid + 100'000),
            kernel_record(mid + 150'000, mid + 250'000)});
  const summary s = t.summary();
  REQUIRE(s.gpu.has_value());
  CHECK(s.gpu->kernels_per_step == 3);
  CHECK(s.gpu->busy_ms.mean == Approx(0.3).margin(1e-6));
  CHECK(s.gpu->incomplete_records == 0);
}

TEST_CASE("device memory allocated in a step is the step's, with its peak; the next step frees it", "[gpu][activity]") {
  fake_gpu gpu;
  tracer t(steptrace::testing::quiet());
  const std::uint64_t b1 = one_step(t).first, b2 = one_step(t).first;  // the steps' starts
  constexpr std::uint64_t mb = 1'000'000;
  gpu.emit({memory_record(b1 + 10, 30 * mb, false), memory_record(b1 + 20, 20 * mb, false),
            memory_record(b1 + 30, 20 * mb, true), memory_record(b2 + 10, 30 * mb, true),
            memory_record(b2 + 20, 4 * mb, false)});
  const summary s = t.summary();
  REQUIRE(s.gpu.has_value());
  CHECK(s.gpu->memory.allocations_per_step == 1.5);
  CHECK(s.gpu->memory.net_mb == Approx(4));
  CHECK(s.gpu->memory.step_peak_mb_max == Approx(50).epsilon(0.01));  // the first step held 50 MB more at most
  CHECK_THAT(s.table(), Catch::Contains("memory: CUDA allocated"));
}

TEST_CASE("work still running at summary() is read once it finishes, not lost as incomplete", "[gpu][activity]") {
  fake_gpu gpu;
  tracer t(steptrace::testing::quiet());
  kernel_in(gpu, one_step(t), /*complete=*/false);
  summary s = t.summary();
  REQUIRE(s.gpu.has_value());
  CHECK(s.gpu->kernels_per_step == 0);  // not finished: not yet known
  CHECK(s.gpu->incomplete_records == 0);
  CHECK(gpu.buffers_held() == 1);  // still with CUPTI
  gpu.finish_work();
  s = t.summary();
  CHECK(s.gpu->kernels_per_step == 1);
  CHECK(s.gpu->busy_ms.mean == Approx(0.1).margin(1e-6));
  CHECK(s.gpu->incomplete_records == 0);
}

// A step whose phase ran on `stream` (CUDA events on it) while the device still works on it: the
// events stay pending, and its kernel's record sits in a buffer CUPTI cannot hand back yet.
void step_still_running(fake_gpu& gpu, tracer& t, void* stream) {
  gpu.hold_events(true);
  std::pair<std::uint64_t, std::uint64_t> window;
  {
    scoped_step step(t);
    scoped_phase p(t, builtin::compute, stream);
    window.first = host_now_ns();
    steptrace::testing::spin_for(std::chrono::microseconds(2000));
    window.second = host_now_ns();
  }
  gpu.hold_events(false);
  const std::uint64_t mid = window.first + (window.second - window.first) / 2;
  gpu.emit({kernel_record(mid, mid + 100'000, fake_gpu::stream_id(stream))}, /*complete=*/false);
}

TEST_CASE("a summary waits for the steps' work still running on the device, and reads its records", "[gpu][activity]") {
  // The demo's pinned-copy loop on an H200 never waits for its GPU: its summary, asked as the loop
  // ended, read "busy 0.0%", none of the steps' kernels and copies handed back yet.
  fake_gpu gpu;
  gpu.set_current_context(true);
  tracer t(steptrace::testing::quiet());
  void* const stream = gpu.stream(1);
  step_still_running(gpu, t, stream);
  // The device finishes 200 ms after the loop (records done, then events): long beside any
  // preemption between the loop's end and the summary's first look at the device.
  std::chrono::steady_clock::time_point finished;
  std::thread device([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    finished = std::chrono::steady_clock::now();
    gpu.finish_work();
    gpu.release_events();
  });
  const auto asked = std::chrono::steady_clock::now();
  const summary s = t.summary();
  device.join();
  const double truth_ms = std::chrono::duration<double, std::milli>(finished - asked).count();
  REQUIRE(s.gpu.has_value());
  CHECK(s.gpu->kernels_per_step == 1);
  CHECK(s.gpu->busy_ms.mean == Approx(0.1).margin(1e-6));
  CHECK(s.fact("gpu.phases_running_at_summary") == nullptr);
  // How far behind the host the device was, said beside the figures: from the summary's start to
  // the device's finish (polled every millisecond), not the wait's limit of a second.
  const std::string* behind = s.fact("gpu.behind_at_summary_ms");
  REQUIRE(behind != nullptr);
  CHECK(std::stod(*behind) > 0);
  CHECK(std::stod(*behind) <= truth_ms + 100);
  CHECK_THAT(s.table(), Catch::Matchers::Contains("the GPU still ran the steps' work for " + *behind + " ms after"));
  // A device that had kept up: no such fact.
  CHECK(t.summary().fact("gpu.behind_at_summary_ms") == nullptr);
}

TEST_CASE("a summary waits only for work closed before it was asked, not for a server's next", "[gpu][activity]") {
  fake_gpu gpu;
  gpu.set_current_context(true);
  tracer t(steptrace::testing::quiet());
  void* const stream = gpu.stream(1);
  step_still_running(gpu, t, stream);
  std::thread server([&] {
    gpu.set_current_context(true);
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    gpu.finish_work();
    gpu.release_events();   // the first step's work is done...
    gpu.hold_events(true);  // ...and the next steps' never is, while the summary reads
    for (int i = 0; i < 20; ++i) {
      scoped_step step(t);
      scoped_phase p(t, builtin::compute, stream);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  const summary s = t.summary();
  server.join();
  CHECK(s.fact("gpu.phases_running_at_summary") == nullptr);  // it did not wait for them
  gpu.hold_events(false);
  gpu.release_events();
}

TEST_CASE("a summary waits a second at most for the device, then says how much was still running", "[gpu][activity]") {
  fake_gpu gpu;
  gpu.set_current_context(true);
  tracer t(steptrace::testing::quiet());
  step_still_running(gpu, t, gpu.stream(1));  // and the device never finishes
  const auto asked = std::chrono::steady_clock::now();
  const summary s = t.summary();
  const auto waited = std::chrono::steady_clock::now() - asked;
  CHECK(waited >= std::chrono::milliseconds(900));  // it did wait...
  CHECK(waited < std::chrono::seconds(30));         // ...and came back (a bound no busy machine reaches)
  REQUIRE(s.gpu.has_value());
  CHECK(s.gpu->kernels_per_step == 0);  // not known yet, and said so
  const std::string* running = s.fact("gpu.phases_running_at_summary");
  REQUIRE(running != nullptr);
  CHECK(*running == "1");
  gpu.finish_work();
  gpu.release_events();
  CHECK(t.summary().gpu->kernels_per_step == 1);  // a later summary reads them
}

TEST_CASE("a forced flush (at exit) hands back unfinished records, counted as incomplete", "[gpu][activity]") {
  fake_gpu gpu;
  tracer t(steptrace::testing::quiet());
  one_step(t);
  const detail::device_counts before = detail::device_record_counts();
  gpu.emit({kernel_record(1, 2), kernel_record(3, 4)}, /*complete=*/false);
  detail::flush_activity(detail::activity_flush::forced);
  CHECK(gpu.buffers_held() == 0);
  CHECK(detail::device_record_counts().incomplete - before.incomplete == 2);
}

TEST_CASE("a tracer made late, or reset, reports no records dropped that it never had", "[gpu][activity]") {
  fake_gpu gpu;
  tracer early(steptrace::testing::quiet());
  one_step(early);
  // More records than the store keeps, before the second tracer exists.
  std::vector<steptrace::testing::fake_record> batch(4096, kernel_record(10, 20));
  std::uint64_t cursor = detail::device_records_end(), lost = 0;
  std::vector<detail::device_record> sink;
  for (int i = 0; i < 140; ++i) {  // 573,440 records
    gpu.emit(batch);
    sink.clear();
    detail::read_device_records(cursor, sink, lost, detail::device_flush::completed);
  }
  tracer late(steptrace::testing::quiet());
  one_step(late);
  summary s = late.summary();
  REQUIRE(s.gpu.has_value());
  CHECK(s.gpu->dropped_records == 0);
  gpu.dropped = 7;  // CUPTI reports 7 records dropped with the next buffer
  gpu.emit({kernel_record(10, 20)});
  s = late.summary();
  CHECK(s.gpu->dropped_records == 7);
  late.reset();
  one_step(late);
  s = late.summary();
  CHECK(s.gpu->dropped_records == 0);
}

TEST_CASE("with CUPTI held by another tool steptrace runs on events and says why", "[gpu][activity]") {
  fake_gpu gpu;
  gpu.refuse_enable(true);
  tracer t(steptrace::testing::quiet());
  one_step(t);
  const summary s = t.summary();
  CHECK(s.backend.cuda);
  CHECK_FALSE(s.backend.cupti);
  CHECK_THAT(s.backend.reason, Catch::Matchers::Contains("held by another tool"));
  CHECK_FALSE(s.gpu.has_value());
}

TEST_CASE("steptrace hands CUPTI to a profiler and takes it back after, in either order", "[gpu][activity]") {
  fake_gpu gpu;
  tracer t(steptrace::testing::quiet());
  SECTION("steptrace first, then a profiler session, then steptrace again") {
    kernel_in(gpu, one_step(t));
    REQUIRE(gpu.steptrace_has_callbacks());
    gpu.emit({kernel_record(1, 2)});  // a buffer still with CUPTI when the profiler arrives
    detail::yield_cupti("torch.profiler");
    CHECK(gpu.buffers_held() == 0);  // all of steptrace's buffers came back before the profiler's callbacks
    CHECK(gpu.kinds_enabled() == 0);
    CHECK_THAT(t.summary().backend.reason, Catch::Matchers::Contains("held by torch.profiler"));
    gpu.other_tool_starts();
    for (int i = 0; i < 3; ++i) kernel_in(gpu, one_step(t));  // the profiler's records, not steptrace's
    gpu.other_tool_stops();
    CHECK(gpu.other_tool_records() == 3);
    detail::reclaim_cupti();
    CHECK(gpu.steptrace_has_callbacks());
    CHECK(gpu.kinds_enabled() == 7);
    for (int i = 0; i < 2; ++i) kernel_in(gpu, one_step(t));
    const summary s = t.summary();
    REQUIRE(s.gpu.has_value());
    CHECK(s.gpu->steps_without_records == 3);
    CHECK(s.gpu->steps_viewed == 3);
    CHECK(s.gpu->kernels_per_step == 1);
    CHECK(s.gpu->busy_ms.mean == Approx(0.1).margin(1e-6));
    CHECK_THAT(s.backend.reason, Catch::Matchers::Contains("CUPTI activity"));
    CHECK_THAT(s.table(), Catch::Matchers::Contains("3 of 6 steps ran while another tool"));
  }
  SECTION("a profiler already running when steptrace starts keeps CUPTI until it stops") {
    gpu.other_tool_starts();
    detail::yield_cupti("torch.profiler");
    kernel_in(gpu, one_step(t));  // starts the backend: it must leave CUPTI alone
    CHECK_FALSE(gpu.steptrace_has_callbacks());
    summary s = t.summary();
    CHECK(s.backend.cupti);
    CHECK_THAT(s.backend.reason, Catch::Matchers::Contains("held by torch.profiler"));
    gpu.other_tool_stops();
    CHECK(gpu.other_tool_records() == 1);
    detail::reclaim_cupti();
    CHECK(gpu.steptrace_has_callbacks());
    kernel_in(gpu, one_step(t));
    s = t.summary();
    REQUIRE(s.gpu.has_value());
    CHECK(s.gpu->steps_without_records == 1);
    CHECK(s.gpu->steps_viewed == 1);
    CHECK(s.gpu->kernels_per_step == 1);
  }
}

TEST_CASE("a live window holds the device view of the steps viewed since the last one", "[gpu][activity][listeners]") {
  fake_gpu gpu;
  config c = steptrace::testing::quiet();
  c.live = 1;
  tracer t(c);
  t.listen_windows();
  std::optional<live_window> latest;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(3500);
  std::vector<steptrace::testing::fake_record> kernels;
  while (std::chrono::steady_clock::now() < until) {
    const auto [b, e] = one_step(t);  // each step: one 0.1 ms kernel in its middle, the truth below
    const std::uint64_t mid = b + (e - b) / 2;
    kernels.push_back(kernel_record(mid, mid + 100'000));
    if (kernels.size() == 50) {  // a buffer of them, handed over as CUPTI's periodic flush does
      gpu.emit(kernels);
      kernels.clear();
      detail::flush_activity(detail::activity_flush::completed);
    }
    if (auto w = t.next_window(0); w && w->figures.gpu) latest = std::move(w);
  }
  REQUIRE(latest);  // a step is viewed about a second after its end: from the second window on
  const gpu_stats& g = *latest->figures.gpu;
  CHECK(g.kernels_per_step == Approx(1));
  CHECK(g.busy_ms.mean == Approx(0.1).margin(1e-6));
  CHECK(g.busy_share > 0);
  CHECK(g.busy_share < 0.1 / 2.0 + 1e-9);  // 0.1 ms busy in steps of at least 2 ms
  // Only the window's own steps: fewer than the run has viewed, never more than it counted.
  const summary whole = t.summary();
  REQUIRE(whole.gpu);
  CHECK(g.steps_viewed > 0);
  CHECK(g.steps_viewed < whole.gpu->steps_viewed);
  CHECK(summary::from_json(latest->figures.json()).gpu->busy_share == Approx(g.busy_share));
}
