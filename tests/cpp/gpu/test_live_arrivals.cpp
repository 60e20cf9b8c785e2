// NCCL's case, live, on the fake CUPTI (fake_gpu.hpp), one process per rank: every rank's host runs
// the same phases and never blocks at the collective (the stream waits), so its host figures are
// alike; only the collective kernels show who is late. Each rank's kernel for the k-th all-reduce
// is launched inside its `backward` and ends when the last rank's data is in: the late rank's
// kernel starts `late` after the others'. The truth is set by construction (the records' times,
// placed by each rank's own host stamp); the rows go through live_row and window_straggler as
// rank 0 reads them from the store.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "fake_gpu.hpp"
#include "helpers.hpp"
#include "steptrace/steptrace.hpp"

using namespace steptrace;
using steptrace::testing::fake_gpu;
using steptrace::testing::host_now_ns;
using steptrace::testing::launch_record;
using steptrace::testing::named_kernel_record;

namespace {

const char* const all_reduce = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)";
constexpr std::uint32_t world = 4;

// One rank's live row after `steps` steps of `backward` then `optimizer`, each launching its
// all-reduce near the end of `backward`; its kernel waits `wait_ns` for the others, then moves the
// data in 0.3 ms.
std::string rank_row(std::uint32_t rank, int steps, std::uint64_t wait_ns) {
  fake_gpu gpu;
  tracer t(steptrace::testing::quiet());
  t.set_rank({rank, world, rank, "node-" + std::to_string(rank), ""});
  const phase_id backward = register_phase("backward"), optimizer = register_phase("optimizer");
  for (int i = 0; i < steps; ++i) {
    std::uint64_t launch = 0;
    {
      scoped_step step(t);
      {
        scoped_phase p(t, backward);
        steptrace::testing::spin_for(std::chrono::microseconds(450));
        // the launch call begins inside `backward`, well before it ends (a launch read as the
        // phase closed can share its end's nanosecond, which is `other`'s first)
        launch = host_now_ns();
        steptrace::testing::spin_for(std::chrono::microseconds(50));
      }
      scoped_phase p(t, optimizer);
      steptrace::testing::spin_for(std::chrono::microseconds(300));
    }
    const auto corr = static_cast<std::uint32_t>(100 + i);
    const std::uint64_t start = launch + 20'000;
    gpu.emit({launch_record(launch, launch + 5'000, corr),
              named_kernel_record(start, start + wait_ns + 300'000, all_reduce, corr, /*stream=*/11)});
  }
  // The run's summary: its device view is the same aggregate a live window's is (device_join's,
  // since the last window), and a window() has none.
  return live_row(t.summary());
}

// Under a sanitizer the ranks run one after the other in this process instead (fake_gpu starts
// the backend afresh for each): GCC 12's ASan runtime may deadlock a child forked while a parent
// thread allocates (see test_faults.cpp), and TSan stops a child of a threaded parent that starts
// threads (the child's tracer does).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool fork_ranks = false;
#else
constexpr bool fork_ranks = true;
#endif

// Each rank's row, made in a process of its own (the backend is process-wide), through a pipe.
std::vector<std::string> job_rows(int late_rank, std::uint64_t late_ns) {
  std::vector<std::string> rows;
  for (std::uint32_t r = 0; r < world; ++r) {
    // the others wait for the late rank's data; it waits for no one (a little jitter each)
    const std::uint64_t wait = static_cast<int>(r) == late_rank ? 10'000 * r : late_ns + 10'000 * r;
    if (!fork_ranks) {
      rows.push_back(rank_row(r, 12, wait));
      continue;
    }
    std::fflush(nullptr);  // or the child flushes the parent's buffered output a second time
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      close(fds[0]);
      const std::string row = rank_row(r, 12, wait);
      const ssize_t n = write(fds[1], row.data(), row.size());
      _exit(n == static_cast<ssize_t>(row.size()) ? 0 : 1);
    }
    close(fds[1]);
    std::string row;
    char buf[4096];
    for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) row.append(buf, static_cast<std::size_t>(n));
    close(fds[0]);
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
    rows.push_back(row);
  }
  return rows;
}

}  // namespace

TEST_CASE("live rows of ranks whose hosts never block name the rank whose collective kernels start last",
          "[gpu][ranks]") {
  const std::vector<std::string> rows = job_rows(2, 27'000'000);
  for (const std::string& row : rows) {
    INFO(row);
    CHECK(row.find(" a c0 ") != std::string::npos);  // its last collectives: the first stream's
    CHECK(row.size() < 256);
  }
  const std::optional<straggler_info> s = window_straggler(rows);
  REQUIRE(s);
  CHECK(s->rank == 2);
  CHECK(s->arrivals_compared == 8);  // the rows' last 8 all-reduces, matched by their numbers
  CHECK(s->arrivals_last == 8);
  CHECK(s->arrival_late_ms == Approx(27.0).margin(0.1));  // 27 ms, less its 0.02 ms lead on the median
  CHECK(s->before == "backward");
}

TEST_CASE("live rows of a balanced job whose hosts never block name no one", "[gpu][ranks]") {
  const std::vector<std::string> rows = job_rows(-1, 0);
  CHECK_FALSE(window_straggler(rows));
}
