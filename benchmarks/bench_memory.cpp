// Resident memory stays flat however long the run: 1,000,000 steps (two phases each), resident
// set size read after warm-up and at the end.
//   bench_memory [steps]
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <steptrace/steptrace.hpp>

namespace {

long resident_kib() {
  long pages_total = 0, pages_resident = 0;
  std::ifstream("/proc/self/statm") >> pages_total >> pages_resident;
  return pages_resident * (sysconf(_SC_PAGESIZE) / 1024);
}

}  // namespace

int main(int argc, char** argv) {
  const long steps = argc > 1 ? std::atol(argv[1]) : 1'000'000;
  const long warmup = 20'000;
  steptrace::config cfg;
  cfg.print_at_exit = steptrace::exit_print::never;
  steptrace::tracer t(cfg);
  const steptrace::phase_id load = steptrace::register_phase("load"), run = steptrace::register_phase("run");

  long after_warmup = 0;
  for (long i = 0; i < steps; ++i) {
    if (i == warmup) {
      (void)t.summary();  // allocate what the first summary allocates
      after_warmup = resident_kib();
    }
    steptrace::scoped_step step(t);
    { steptrace::scoped_phase p(t, load); }
    { steptrace::scoped_phase p(t, run); }
  }
  const steptrace::summary s = t.summary();
  const long growth = resident_kib() - after_warmup;
  std::printf("steptrace memory, %ld steps: resident %ld KiB after %ld warm-up steps, %ld KiB at the end\n",
              s.steps + 5, after_warmup, warmup, after_warmup + growth);
  std::printf("  growth after warm-up: %ld KiB (target < 1024 KiB): %s\n", growth, growth < 1024 ? "met" : "MISSED");
  return s.steps + s.warmup_steps == static_cast<std::uint64_t>(steps) ? 0 : 1;
}
