// The CPU figures' finding under any label (report/diagnosis/diagnosis.hpp).
#include <fmt/format.h>

#include <string>

#include "report/diagnosis/diagnosis.hpp"

namespace steptrace::detail {

// What the CPU figures add under any label: a process that waits for a core as long as it runs
// is slowed by the host (other processes, or more threads than cores), whatever the label says;
// that comes first, since no model change helps until it is fixed.
void cpu_findings(const summary& s, const diagnosis_thresholds& t, diagnosis& d) {
  const auto busy = fact_double(s, "cpu.cores_busy"), waiting = fact_double(s, "cpu.cores_waiting");
  if (!busy || !waiting || *busy <= 0 || *waiting < t.cpu_wait_min_cores || *waiting < t.cpu_wait_share * *busy) return;
  const bool server = is_server_run(s);
  if (!server && d.label == "INPUT-BOUND" && cpu_saturated(s, t)) return;  // its advice says so, with the workers
  const std::string* cpus = s.fact("host.cpus");
  d.evidence += fmt::format(
      " This process waited for a core {:.0f}% as long as it ran ({:.1f} cores busy, {:.1f} more waiting, of {} "
      "cores): the host is oversubscribed.",
      100 * *waiting / *busy, *busy, *waiting, cpus ? *cpus : "?");
  d.advice.insert(
      d.advice.begin(),
      fmt::format("free the cores first: other processes on this host, or more threads than cores "
                  "({}) share them; every {} waits for a core until then",
                  !python_program(s) ? (server ? "worker pools, OMP_NUM_THREADS" : "thread pools, OMP_NUM_THREADS")
                  : server           ? "torch.set_num_threads, OMP_NUM_THREADS, worker pools"
                                     : "torch.set_num_threads, OMP_NUM_THREADS, DataLoader workers",
                  server ? "request" : "step"));
}

}  // namespace steptrace::detail
