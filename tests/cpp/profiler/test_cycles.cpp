// One process's profiler cycles (a repeating schedule's tensorboard_trace_handler files) read as one
// run: hand-made cycles against hand-worked truth; other processes' files refused.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "steptrace/profiler_trace.hpp"
#include "steptrace/summary.hpp"
#include "trace_files.hpp"

using namespace steptrace;
using namespace steptrace::testing;

namespace {

// A cycle of `steps` steps of `step_us` each from `at` us: an op and a kernel in each. With
// `late`, the first step's first kernel starts 2 ms after its launch, no traced work between: the
// device still ran the steps before the cycle (warm-up by evidence).
trace_text cycle_at(double at, int steps, double step_us, bool late, int pid = 100) {
  trace_text t;
  for (int i = 0; i < steps; ++i) {
    const double b = at + i * step_us;
    const int c = static_cast<int>(at) + i + 1;
    t.add("user_annotation", "ProfilerStep#" + std::to_string(i), 1, b, step_us, "{}", pid);
    t.add("cpu_op", "aten::mm", 1, b + 10, step_us / 2, "{}", pid);
    t.add("cuda_runtime", "cudaLaunchKernel", 1, b + 20, 5, corr(c), pid);
    t.add("kernel", "gemm", 7, b + (late && i == 0 ? 2020 : 40), step_us / 4, device_args(c), 0);
  }
  return t;
}

std::string with_host(const trace_text& t, const std::string& host, const std::string& extra = "") {
  return "{\"host_name\": \"" + host + "\", " + extra + t.json().substr(1);
}

}  // namespace

TEST_CASE("a process's profiler cycles read as one run, each cycle alone beside it", "[profiler]") {
  // three cycles, 1 s apart: 2 steps of 1 ms, 3 steps of 3 ms (its first is warm-up: 2 of 3 ms
  // count), 1 step of 4 ms and the closing stub
  temp_file a(with_host(cycle_at(0, 2, 1000, false), "node7"));
  trace_text second = cycle_at(1'000'000, 3, 3000, true);
  temp_file b(with_host(second, "node7"));
  trace_text third = cycle_at(2'000'000, 1, 4000, false);
  third.add("user_annotation", "ProfilerStep#9", 1, 2'004'000, 37);
  temp_file c(with_host(third, "node7"));

  const summary one = read_profiler_cycles({c.path, a.path, b.path});  // any order: read in time order
  CHECK(one.steps == 2 + 2 + 1);
  CHECK(one.warmup_steps == 1);
  CHECK(one.step_ms.mean == Approx((2 * 1.0 + 2 * 3.0 + 4.0) / 5).margin(1e-9));
  CHECK(one.step_ms.max == Approx(4.0).margin(1e-9));
  CHECK(one.threads == 1);
  CHECK_FALSE(one.rank);
  REQUIRE(one.gpu);
  CHECK(one.gpu->kernels_per_step == Approx(1.0));
  REQUIRE(one.cycles.size() == 3);
  CHECK(one.cycles[0].file == a.path);
  CHECK(one.cycles[1].steps == 2);
  CHECK(one.cycles[1].warmup_steps == 1);
  CHECK(one.cycles[1].step_mean_ms == Approx(3.0).margin(1e-9));
  CHECK(one.cycles[2].steps == 1);
  CHECK(*one.fact("trace.cycles") == "3");
  CHECK_THAT(one.backend.reason,
             Catch::Matchers::Contains("3 torch.profiler cycles of one process (pid 100 on node7)"));
  CHECK_THAT(one.backend.reason, Catch::Matchers::Contains("1 closing stub step"));
  CHECK_THAT(one.table(), Catch::Matchers::Contains("cycles     3 torch.profiler cycles of one process"));
  // step numbers go on from cycle to cycle: the timeline keeps every step, each once
  CHECK(one.timeline.steps.size() == 6);

  const summary back = summary::from_json(one.json());
  REQUIRE(back.cycles.size() == 3);
  CHECK(back.cycles[1].warmup_steps == 1);
  CHECK(back.cycles[2].label == one.cycles[2].label);
  CHECK(back.table() == one.table());
}

TEST_CASE("files of other processes, or whose times overlap, are no one process's cycles", "[profiler]") {
  temp_file a(with_host(cycle_at(0, 2, 1000, false), "node7"));
  temp_file other_pid(with_host(cycle_at(1'000'000, 2, 1000, false, 200), "node7"));
  temp_file other_host(with_host(cycle_at(1'000'000, 2, 1000, false), "node8"));
  temp_file other_rank(with_host(cycle_at(1'000'000, 2, 1000, false), "node7",
                                 "\"distributedInfo\": {\"rank\": 1, \"world_size\": 2}, "));
  temp_file same_time(with_host(cycle_at(500, 2, 1000, false), "node7"));
  auto refused = [&](const std::string& other) {
    try {
      read_profiler_cycles({a.path, other});
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("(read)");
  };
  CHECK_THAT(refused(other_pid.path), Catch::Matchers::Contains("(pid 200 on node7) are not cycles of one process"));
  CHECK_THAT(refused(other_host.path), Catch::Matchers::Contains("(pid 100 on node8) are not cycles of one process"));
  CHECK_THAT(refused(other_rank.path), Catch::Matchers::Contains("rank 1) are not cycles of one process"));
  CHECK_THAT(refused(same_time.path), Catch::Matchers::Contains("are not cycles of one process: their times overlap"));
  CHECK_THROWS_AS(read_profiler_cycles({}), std::invalid_argument);
}
