// Hot-path cost in paired rounds (benchmarks/paired.hpp): each variant's thread CPU (what the
// recording thread pays), process CPU (the collector's draining included: each variant's records
// are drained before the next runs) and wall time, rotated within each round; a cost is the
// variant minus the same round's bare work. Targets (the cost issue's):
//   an enabled scoped_phase around ~0.3 us of work, recording thread plus collector (process
//   CPU): <= 0.7x a hand-timed pair of std::chrono::steady_clock::now() around the same work
//   a disabled scoped_phase, back to back: <= 2 ns
// Printed besides: the recording thread's share alone, and both back to back (no work: saturated,
// bound by turning records into steps). The loops run far past one ring's capacity.
//   bench_overhead [phases_per_round] [rounds]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <steptrace/steptrace.hpp>

#include "paired.hpp"

namespace {

volatile std::uint64_t sink;

// A fixed chain of dependent multiply-adds (~0.3 us): work that does not read any clock.
__attribute__((noinline)) std::uint64_t work(std::uint64_t x) {
  for (int i = 0; i < 100; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
  return x;
}

}  // namespace

int main(int argc, char** argv) {
  const long n = argc > 1 ? std::atol(argv[1]) : 400'000;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 15;
  using clock = std::chrono::steady_clock;

  steptrace::config cfg;
  cfg.print_at_exit = steptrace::exit_print::never;
  cfg.warmup_steps = 0;
  steptrace::tracer enabled(cfg);
  cfg.enabled = false;
  steptrace::tracer disabled(cfg);
  const steptrace::phase_id id = steptrace::register_phase("bench");
  steptrace::scoped_step step(enabled);  // phases inside an open step, as in real use

  std::uint64_t x = 1;
  paired::bench b(rounds);
  b.add("work", [&](long k) {
    for (long i = 0; i < k; ++i) x = work(x);
  });
  b.add("steady_clock pair + work", [&](long k) {
    for (long i = 0; i < k; ++i) {
      const auto start = clock::now();
      x = work(x);
      sink = static_cast<std::uint64_t>((clock::now() - start).count());
    }
  });
  b.add("scoped_phase + work", [&](long k) {
    for (long i = 0; i < k; ++i) {
      steptrace::scoped_phase p(enabled, id);
      x = work(x);
    }
  });
  b.add("steady_clock pair, back to back", [&](long k) {
    for (long i = 0; i < k; ++i) {
      const auto start = clock::now();
      sink = static_cast<std::uint64_t>((clock::now() - start).count());
    }
  });
  b.add("scoped_phase, back to back", [&](long k) {
    for (long i = 0; i < k; ++i) steptrace::scoped_phase p(enabled, id);
  });
  b.add("disabled scoped_phase, back to back", [&](long k) {
    for (long i = 0; i < k; ++i) steptrace::scoped_phase p(disabled, id);
  });
  b.run(n, [&] { enabled.open_steps(); });  // drains every record so far: the collector's share is counted
  sink = x;

  std::printf("steptrace hot path, %ld phases a round, clock: %s\n", n, steptrace::host_clock_name());
  b.print_table();
  std::printf("costs above the bare work, ratio of the phase's to the steady_clock pair's, median [middle half]:\n");
  using paired::process;
  using paired::thread;
  paired::print_target("enabled scoped_phase, with work, recording thread + collector",
                       b.ratio_of_costs("scoped_phase + work", "steady_clock pair + work", "work", process), process,
                       0.7);
  const paired::spread own = b.ratio_of_costs("scoped_phase + work", "steady_clock pair + work", "work", thread);
  std::printf("  enabled scoped_phase, with work, recording thread alone: %.2fx [%.2f-%.2f] by thread CPU\n",
              own.median, own.low, own.high);
  for (paired::clock_kind c : {thread, process}) {
    const paired::spread s = b.ratio_of_costs("scoped_phase, back to back", "steady_clock pair, back to back", "", c);
    std::printf("  enabled scoped_phase, back to back: %.2fx [%.2f-%.2f] by %s\n", s.median, s.low, s.high,
                paired::clock_name(c));
  }
  const paired::spread off = b.cost("disabled scoped_phase, back to back", "", thread);
  std::printf("  disabled scoped_phase: %.2f ns [%.2f-%.2f] by thread CPU, target <= 2 ns: %s\n", off.median, off.low,
              off.high, paired::verdict(off, 2.0));
  return 0;
}
