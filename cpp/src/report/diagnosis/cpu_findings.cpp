// The CPU figures' finding under any label (report/diagnosis/diagnosis.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "report/diagnosis/diagnosis.hpp"
#include "report/diagnosis/gains.hpp"
#include "report/diagnosis/summary_facts.hpp"

namespace steptrace::detail {

namespace {

// The process's own intra-op threads against the cores it gets (the fact torch.num_threads): a
// hypothesis, and its fix in words when it holds.
std::string own_threads_words(const summary& s, double busy, double waiting, diagnosis& d) {
  const auto threads = fact_int(s, "torch.num_threads");
  if (!threads) return "";
  const long gets = std::max(1L, static_cast<long>(std::floor(busy + 0.25)));
  hypothesis h{"fewer intra-op threads", "compute", *threads > gets,
               fmt::format("torch runs {} intra-op thread{} and this process gets {:.1f} cores", *threads,
                           *threads == 1 ? "" : "s", busy),
               0};
  // What the waits cost the work those threads do: `compute`'s share, in the proportion of the
  // time the process waited for a core to the time it wanted one.
  if (h.holds) h.gain = group_share(s, "compute") * waiting / (busy + waiting);
  d.hypotheses.push_back(h);
  if (!h.holds) return "";
  return fmt::format(
      "run fewer threads of its own first: torch.set_num_threads({}) (or OMP_NUM_THREADS={}); {} intra-op threads "
      "get {:.1f} cores here, and each parallel op waits for the one left without a core{}",
      gets, gets, *threads, busy, gain_words(h.gain));
}

}  // namespace

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
  std::vector<std::string> first = {
      fmt::format("free the cores first: other processes on this host, or more threads than cores "
                  "({}) share them; every {} waits for a core until then",
                  !python_program(s) ? (server ? "worker pools, OMP_NUM_THREADS" : "thread pools, OMP_NUM_THREADS")
                  : server           ? "torch.set_num_threads, OMP_NUM_THREADS, worker pools"
                                     : "torch.set_num_threads, OMP_NUM_THREADS, DataLoader workers",
                  server ? "request" : "step")};
  // The process's own threads outnumber the cores it gets: fewer of them is the fix in its own
  // hands, said before freeing the cores, which the user often cannot do.
  if (const std::string own = own_threads_words(s, *busy, *waiting, d); !own.empty()) {
    first.insert(first.begin(), own);
  }
  d.advice.insert(d.advice.begin(), first.begin(), first.end());
}

}  // namespace steptrace::detail
