// device_sample on the fake CUPTI (fake_gpu.hpp): which windows record (sample_plan), CUPTI's kinds
// off between them with steptrace's callbacks and clock kept, and every step that a window left out
// could touch counted apart, never viewed with idle time it did not have. The windows are told by
// the test (sample_device_at), so nothing here waits for a wall-clock window.
#include <catch2/catch.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "fake_gpu.hpp"
#include "gpu/backend.hpp"
#include "gpu/sample_plan.hpp"
#include "gpu/testing.hpp"
#include "helpers.hpp"
#include "steptrace/steptrace.hpp"

using namespace steptrace;
using steptrace::testing::fake_gpu;
using steptrace::testing::host_now_ns;
using steptrace::testing::kernel_record;
using steptrace::testing::one_step;

namespace {

// A kernel over the middle half of a step's window, as CUPTI gives it for a step it recorded.
void emit_kernel(fake_gpu& gpu, std::pair<std::uint64_t, std::uint64_t> step) {
  const std::uint64_t quarter = (step.second - step.first) / 4;
  gpu.emit({kernel_record(step.first + quarter, step.second - quarter)});
}

// The same, for a step the test knows CUPTI's kinds are on for (no collector switches them here).
void kernel_in(fake_gpu& gpu, std::pair<std::uint64_t, std::uint64_t> step) {
  REQUIRE(gpu.kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  emit_kernel(gpu, step);
}

}  // namespace

TEST_CASE("sample_plan: one window in N, every window until a whole one is recorded", "[gpu][sample]") {
  detail::sample_plan plan;
  // slot 31 is the first pass, part way in: recorded, and so is 32, the first whole one
  CHECK(plan.record(31, 3));
  CHECK(plan.record(31, 3));
  CHECK(plan.record(32, 3));
  CHECK_FALSE(plan.record(34, 3));  // 32 was whole; 34 % 3 != 0 (a window passed unseen is no matter)
  CHECK_FALSE(plan.record(35, 3));
  CHECK(plan.record(36, 3));
  CHECK_FALSE(plan.record(37, 3));
  CHECK(plan.record(37, 1));  // sampling turned off mid-window: recording from now
  CHECK(plan.record(38, 1));
  CHECK_FALSE(plan.record(39, 10));  // on again: a whole window was recorded long since
  CHECK(plan.record(40, 10));
  CHECK_FALSE(plan.record(41, 10));

  detail::sample_plan short_run;  // a run shorter than N windows still records whole windows
  CHECK(short_run.record(7, 100));
  CHECK(short_run.record(8, 100));
  CHECK_FALSE(short_run.record(9, 100));
}

TEST_CASE("device_sample: windows left out have CUPTI's kinds off and their steps counted apart, said in every output",
          "[gpu][sample]") {
  fake_gpu gpu;
  detail::sample_slots_for_testing();
  config cfg = steptrace::testing::quiet();
  cfg.device_sample = 3;
  tracer t(cfg);
  one_step(t);  // the backend starts: CUPTI on, steptrace's clock registered
  const int registrations = gpu.timestamp_registrations();
  auto recorded = [&](std::int64_t slot) {  // a window CUPTI records: a step with its kernel
    detail::sample_device_at(slot, host_now_ns());
    const auto step = one_step(t);
    kernel_in(gpu, step);
  };
  recorded(30);                                 // the first pass, part way into slot 30
  detail::sample_device_at(31, host_now_ns());  // 30 was partial: 31 is recorded too, whole
  const auto last_recorded = one_step(t);
  const std::uint64_t quarter = (last_recorded.second - last_recorded.first) / 4;
  gpu.emit({kernel_record(last_recorded.first + quarter, last_recorded.second - quarter)}, /*complete=*/false);
  detail::sample_device_at(32, host_now_ns());  // 32 % 3 != 0: left out
  CHECK_FALSE(gpu.kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  gpu.finish_work();  // the kernel launched before the pause ends now: its buffer is steptrace's to flush
  CHECK(gpu.steptrace_has_callbacks());  // kinds off; the callbacks and clock stay steptrace's
  one_step(t);                           // nothing recorded: CUPTI's kinds are off
  one_step(t);
  detail::sample_device_at(33, host_now_ns());  // recorded again
  CHECK(gpu.kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  CHECK(gpu.timestamp_registrations() == registrations);  // never registered again (pytorch #192021)
  // Work launched while nothing was recorded may still run: the step right after the resume has
  // none of the records of what ran in it, so it is counted apart until the first kernel launched
  // after the resume starts, which is in the next step.
  one_step(t);
  const auto first_after = one_step(t);
  kernel_in(gpu, first_after);
  recorded(33);
  recorded(33);
  // A second later the device ran something in no step: the steps' records have settled, and the
  // timeline reads them (a step's are read a second after the newest record passes its end).
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  const std::uint64_t now = host_now_ns();  // one reading: two in one call are read in either order
  gpu.emit({kernel_record(now - 1000, now)});
  const summary s = t.summary();
  REQUIRE(s.gpu);
  CHECK(s.gpu->sample_every == 3);
  CHECK(s.gpu->steps_viewed == 5);       // the start's step (no kernel), 30, 31 and the two after the first kernel
  CHECK(s.gpu->steps_sampled_out == 4);  // the two left out, the one after the resume, the one its first kernel is in
  CHECK(s.gpu->steps_without_records == 0);
  CHECK(s.gpu->kernels_per_step * 5 == Approx(4));  // the four kernels of the viewed steps, none lost or doubled
  CHECK_THAT(s.table(), Catch::Matchers::Contains("device_sample=3: CUPTI recorded one window in 3; the device "
                                                  "figures are over the 5 of 9 steps"));
  CHECK_THAT(s.diag.evidence, Catch::Matchers::Contains("(device_sample=3: 5 of 9 steps)"));
  // The timeline draws no GPU (nor GPU idle) for a step that ran while nothing was recorded.
  std::set<std::uint64_t> known, idle_in;
  for (const timeline_step& k : s.timeline.steps) {
    if (k.device_known) known.insert(k.index);
  }
  const nlohmann::json trace = nlohmann::json::parse(s.trace());
  for (const auto& e : trace["traceEvents"]) {
    if (e.value("cat", "") == "idle") idle_in.insert(e["args"]["step"].get<std::uint64_t>());
  }
  CHECK(known == std::set<std::uint64_t>{0, 1, 2, 7, 8});  // the viewed steps, as the device view counts them
  CHECK(idle_in == known);  // the GPU's idle time drawn in those alone, never in a step nothing recorded
  const summary back = summary::from_json(s.json());
  REQUIRE(back.gpu);
  CHECK(back.gpu->sample_every == 3);
  CHECK(back.gpu->steps_sampled_out == 4);
}

TEST_CASE(
    "device_sample: a profiler that takes CUPTI during a window left out gets none of steptrace's buffers; "
    "the next recorded window takes CUPTI back whole",
    "[gpu][sample][handover]") {
  fake_gpu gpu;
  detail::sample_slots_for_testing();
  config cfg = steptrace::testing::quiet();
  cfg.device_sample = 2;
  tracer t(cfg);
  one_step(t);
  detail::sample_device_at(10, host_now_ns());
  detail::sample_device_at(11, host_now_ns());
  const auto before = one_step(t);
  gpu.emit({kernel_record(before.first + 1000, before.second - 1000)}, /*complete=*/false);  // still running
  detail::sample_device_at(13, host_now_ns());  // left out; a buffer of steptrace's is still with CUPTI
  REQUIRE_FALSE(gpu.kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  detail::yield_cupti("torch.profiler");
  CHECK(gpu.buffers_held() == 0);  // flushed before the profiler's callbacks were registered
  gpu.other_tool_starts();
  gpu.other_tool_stops();
  detail::reclaim_cupti();  // during the window left out: CUPTI stays off until the next recorded one
  CHECK_FALSE(gpu.kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  CHECK(gpu.other_tool_records() == 0);
  detail::sample_device_at(14, host_now_ns());  // recorded: steptrace's callbacks and clock again
  CHECK(gpu.kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  CHECK(gpu.steptrace_has_callbacks());
  CHECK(gpu.steptrace_clock());
  one_step(t);
  const auto step = one_step(t);
  kernel_in(gpu, step);
  one_step(t);
  const summary s = t.summary();
  REQUIRE(s.gpu);
  CHECK(s.gpu->steps_without_records + s.gpu->steps_sampled_out == 2);  // the step after the resume, its first kernel's
  CHECK(s.gpu->steps_viewed == 3);
}

TEST_CASE("device_sample on the wall clock: 1 s windows, one in 2 recorded, on and off again and again",
          "[gpu][sample]") {
  // The collectors' own ticks (not the test's), over real windows: CUPTI's kinds follow the plan,
  // and the test emits a kernel in a step only when CUPTI records, as CUPTI does.
  fake_gpu gpu;
  config cfg = steptrace::testing::quiet();
  cfg.device_sample = 2;
  cfg.live = 1;
  cfg.warmup_steps = 1;  // the step that starts the backend, with CUPTI not yet on
  tracer t(cfg);
  one_step(t);
  std::uint64_t kernels = 0, switches = 0, steps = 0;
  bool was_on = gpu.kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(6500);
  while (std::chrono::steady_clock::now() < until) {  // 2 ms steps: over 3,000 of them
    const bool on = gpu.kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    switches += on != was_on;
    was_on = on;
    const auto step = one_step(t);
    if (on && gpu.kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)) {  // on for the whole step
      // emitted as recorded even if the collector switched the kinds off since the check above
      emit_kernel(gpu, step);
      ++kernels;
    }
    if (++steps % 16 == 0) gpu.periodic_flush();  // CUPTI's own thread hands buffers back, on or off
  }
  t.configure(steptrace::testing::quiet());  // device_sample back to 1: recording from now
  const summary s = t.summary();
  REQUIRE(s.gpu);
  // 6.5 s: the partial first window and the first whole one recorded, then one in two: off and on
  // at least twice each (a plan that stopped ticking after its first resume switched twice). A busy
  // machine may stretch a step across a switch: such a step has no kernel and is counted apart.
  INFO("switches " << switches << ", kernels " << kernels << ", steps viewed " << s.gpu->steps_viewed
                   << " and left out " << s.gpu->steps_sampled_out << " of " << s.steps);
  CHECK(switches >= 4);
  CHECK(s.gpu->steps_sampled_out > 0);
  CHECK(s.gpu->sample_every == 2);  // set back to 1, the figures still say how they were sampled
  CHECK_THAT(s.table(), Catch::Matchers::Contains("device_sample=2: CUPTI recorded one window in 2"));
  CHECK(s.gpu->steps_viewed > 0);
  CHECK(s.gpu->steps_viewed + s.gpu->steps_sampled_out == s.steps);
  // every viewed step is one CUPTI recorded whole: its one kernel, never a left-out step's idle
  CHECK(s.gpu->kernels_per_step == Approx(1.0).epsilon(0.02));
  CHECK(s.gpu->steps_viewed <= kernels);
  for (int i = 0; i < 100 && !gpu.kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the collector's next pass
  }
  CHECK(gpu.kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
}
