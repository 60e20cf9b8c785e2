// Internal (not public API): how much CPU this process and its child processes (DataLoader
// workers) used and wanted, from the scheduler's own per-thread accounting.
//
// Each thread's /proc/<pid>/task/<tid>/schedstat gives the time it ran and the time it was
// runnable but waited for a core. Their sum over a span, divided by the span, is the number of
// cores the process tree asked for: at or above the core count, the CPU is saturated, whoever
// else is running (other load makes our threads wait, which counts as demand too).
#pragma once

#include <cstdint>
#include <unordered_map>

namespace steptrace::detail {

unsigned usable_cpus() noexcept;  // cores this process may run on (its affinity)

struct cpu_totals {
  std::uint64_t run_ns = 0;   // this process's threads on a core (all of them: getrusage)
  std::uint64_t wait_ns = 0;  // its threads runnable, waiting for a core (those sampled alive)
  std::uint64_t children_run_ns = 0, children_wait_ns = 0;  // child processes' threads, likewise
  std::uint64_t wall_ns = 0;                                // the span these cover
};

class cpu_load {
 public:
  // Starts the span now: what threads did before is not counted.
  void restart() noexcept;
  // Reads every thread of the process tree and adds what each did since it was last read (a
  // thread that exits keeps what was seen of it; this process's CPU time counts exited threads
  // whole). A few tens of microseconds; never on the hot path. Where /proc has no schedstat,
  // only this process's CPU time is known.
  void sample() noexcept;
  const cpu_totals& totals() const noexcept { return totals_; }
  bool started() const noexcept { return started_; }

 private:
  struct seen {
    std::uint64_t run, wait, generation;
  };
  std::unordered_map<std::uint64_t, seen> threads_;  // by tid: threads alive at the last read
  cpu_totals totals_;
  std::uint64_t started_ns_ = 0, generation_ = 0, process_cpu_ = 0;
  bool started_ = false, baseline_ = false;
  void read_all();
  void read_process(int pid, bool child, int depth);
};

}  // namespace steptrace::detail
