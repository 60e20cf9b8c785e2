// CPU use and demand of the process tree, against each thread's own CPU clock as the truth.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <ctime>
#include <thread>

#include "record/cpu_load.hpp"

using steptrace::detail::cpu_load;

namespace {

double thread_cpu_ms() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

// Spins until this thread has had `ms` of CPU (however long a busy machine makes that take).
double spin_cpu(double ms) {
  const double start = thread_cpu_ms();
  while (thread_cpu_ms() - start < ms) {
  }
  return thread_cpu_ms() - start;
}

}  // namespace

TEST_CASE("a thread's CPU time is counted, also when it exits before the next sample", "[cpu]") {
  cpu_load load;
  load.restart();
  double truth = 0;
  std::thread([&] { truth = spin_cpu(120); }).join();  // born and gone between two samples
  std::thread sleeper([] { std::this_thread::sleep_for(std::chrono::milliseconds(100)); });
  sleeper.join();
  load.sample();
  const double counted_ms = load.totals().run_ns / 1e6;
  CHECK(counted_ms >= truth * 0.95);
  CHECK(counted_ms <= truth + 60);  // plus what this thread itself ran meanwhile, which is little
  CHECK(load.totals().wall_ns >= 100'000'000);
}

TEST_CASE("a child process's CPU time is counted apart, as the workers'", "[cpu]") {
  cpu_load load;
  load.restart();
  int pipe_fds[2];
  REQUIRE(pipe(pipe_fds) == 0);
  const pid_t pid = fork();
  if (pid == 0) {
    const double spun = spin_cpu(150);
    (void)!write(pipe_fds[1], &spun, sizeof spun);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // alive while the parent samples
    _exit(0);
  }
  double truth = 0;
  REQUIRE(read(pipe_fds[0], &truth, sizeof truth) == sizeof truth);
  load.sample();
  waitpid(pid, nullptr, 0);
  CHECK(load.totals().children_run_ns / 1e6 >= truth * 0.95);
  CHECK(load.totals().run_ns / 1e6 < truth);  // the parent mostly waited on the pipe
  close(pipe_fds[0]);
  close(pipe_fds[1]);
}

TEST_CASE("what threads did before the span started is not counted", "[cpu]") {
  double before = 0;
  std::thread spinner;
  cpu_load load;
  std::atomic<int> stage{0};
  spinner = std::thread([&] {
    before = spin_cpu(100);
    stage = 1;
    while (stage.load() != 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  while (stage.load() != 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  load.restart();
  load.sample();
  stage = 2;
  spinner.join();
  CHECK(load.totals().run_ns / 1e6 < before / 2);
}
