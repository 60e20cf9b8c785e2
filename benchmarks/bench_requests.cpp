// A request's phase boundary against a thread phase's, side by side in one run (interleaved
// repeats, best of each), on 1 thread and on 8: the same phases, each around ~0.3 us of work,
// 8 phases per step, in thread steps and in requests (each request begun and ended on the
// thread). Target: a request's phase <= 1.3x a thread phase's. Then resident memory over 10 M
// requests (flat: records live in the handle, the collector builds steps as they come).
//   bench_requests [steps_per_repeat]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <steptrace/steptrace.hpp>
#include <thread>
#include <vector>

namespace {

volatile std::uint64_t sink;
int work_rounds = 100;  // 100: ~0.1 us of work a phase; 0: phases back to back

__attribute__((noinline)) std::uint64_t work(std::uint64_t x) {
  for (int i = 0; i < work_rounds; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
  return x;
}

constexpr int phases_per_step = 8;

// ns per phase (begin + end + work), `threads` threads each running `steps` steps of `kind`.
template <class Step>
double ns_per_phase(int threads, long steps, Step&& step) {
  std::vector<std::thread> pool;
  const auto start = std::chrono::steady_clock::now();
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      std::uint64_t x = 1;
      for (long i = 0; i < steps; ++i) x = step(x);
      sink = x;
    });
  }
  for (auto& th : pool) th.join();
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() /
         (static_cast<double>(steps) * phases_per_step);
}

double resident_mb() {
  std::ifstream in("/proc/self/statm");
  long pages = 0, resident = 0;
  in >> pages >> resident;
  return static_cast<double>(resident) * 4096 / (1024.0 * 1024.0);
}

}  // namespace

int main(int argc, char** argv) {
  const long steps = argc > 1 ? std::atol(argv[1]) : 200'000;
  steptrace::config cfg;
  cfg.print_at_exit = steptrace::exit_print::never;
  cfg.warmup_steps = 0;
  steptrace::tracer tracer(cfg);
  const steptrace::phase_id id = steptrace::register_phase("bench");

  const auto bare = [&](std::uint64_t x) {
    for (int p = 0; p < phases_per_step; ++p) x = work(x);
    return x;
  };
  const auto thread_step = [&](std::uint64_t x) {
    steptrace::scoped_step s(tracer);
    for (int p = 0; p < phases_per_step; ++p) {
      steptrace::scoped_phase ph(tracer, id);
      x = work(x);
    }
    return x;
  };
  const auto request_step = [&](std::uint64_t x) {
    steptrace::request r(tracer);
    for (int p = 0; p < phases_per_step; ++p) {
      steptrace::request_phase ph(r, id);
      x = work(x);
    }
    r.end();
    return x;
  };
  std::printf("steptrace requests, %ld steps of %d phases per thread per repeat, best of 5, clock: %s\n", steps,
              phases_per_step, steptrace::host_clock_name());
  for (int rounds : {100, 0}) {
    work_rounds = rounds;
    std::printf(rounds ? "  with ~0.1 us of work a phase:\n" : "  back to back (no work: the recording alone):\n");
    for (int threads : {1, 8}) {
      double b = 1e9, th = 1e9, rq = 1e9;
      for (int repeat = 0; repeat < 5; ++repeat) {
        b = std::min(b, ns_per_phase(threads, steps, bare));
        th = std::min(th, ns_per_phase(threads, steps, thread_step));
        rq = std::min(rq, ns_per_phase(threads, steps, request_step));
      }
      const double thread_cost = th - b, request_cost = rq - b;
      std::printf(
          "    %d thread%s: work %.1f ns a phase; thread phase +%.2f ns, request phase +%.2f ns (step or request "
          "share included): %.2fx (target <= 1.3x): %s\n",
          threads, threads == 1 ? " " : "s", b, thread_cost, request_cost, request_cost / thread_cost,
          request_cost <= 1.3 * thread_cost ? "met" : "MISSED");
    }
  }
  const double before = resident_mb();
  std::uint64_t x = 1;
  std::printf("  10 M requests: resident %.1f MB before", before);
  for (long i = 1; i <= 10'000'000; ++i) {
    steptrace::request r(tracer);
    r.begin_phase(id);
    x = x * 3 + 1;
    r.end_phase(id);
    r.end();
    if (i == 1'000'000 || i == 5'000'000 || i == 10'000'000)
      std::printf(", %.1f MB after %ld M", resident_mb(), i / 1'000'000);
  }
  sink = x;
  const steptrace::summary s = tracer.summary();
  std::printf(" (%llu steps counted in all)\n", static_cast<unsigned long long>(s.steps));
  return 0;
}
