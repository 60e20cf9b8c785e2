// A shared lock or resource: threads that run steps at once but use about one core between them
// (one runs at a time, the others block on it), on a host with cores to spare and no device syncs, are blocked on each
// other, whatever the phase they block in is called (report/diagnosis/hypotheses.hpp).
#include <fmt/format.h>

#include <algorithm>

#include "report/diagnosis/hypotheses.hpp"
#include "report/diagnosis/summary_facts.hpp"

namespace steptrace::detail {

shared_lock shared_lock_of(const summary& s, const diagnosis_thresholds& t) {
  shared_lock out;
  out.h.fix = "a shared lock";
  const auto busy = fact_double(s, "cpu.cores_busy"), waiting = fact_double(s, "cpu.cores_waiting");
  const double in_steps = s.wall_ms > 0 ? s.step_ms.total / s.wall_ms : 0.0;
  out.threads_in_steps = in_steps;
  out.cores_busy = busy.value_or(0);
  const bool device_syncs = s.gpu && s.gpu->steps_viewed > 0 && s.gpu->syncs_per_step > 0;
  if (s.threads < 2 || in_steps < t.lock_min_threads || !busy) {
    out.h.premise = fmt::format("needs several threads in steps at once; {:.1f} on average{}", in_steps,
                                busy ? "" : ", and the CPU figures, which this run lacks");
    return out;
  }
  if (*busy > t.lock_serial_cores || in_steps - *busy < 1.0) {
    out.h.premise = fmt::format(
        "{:.1f} threads in steps at once use {:.1f} cores: more than one runs at a time, so nothing serialises them",
        in_steps, *busy);
    return out;
  }
  if (waiting && *waiting >= t.cpu_wait_share * *busy) {
    out.h.premise = "the threads wait for cores (the host is oversubscribed), which explains the low CPU use";
    return out;
  }
  if (device_syncs) {
    out.h.premise = "the steps synchronise with the device, which explains the blocking";
    return out;
  }
  // The phase the blocked time is in: the largest, the built-in `compute` only when nothing else
  // holds a fifth of the step (work that runs is what `compute` usually means).
  const phase_stats* where = nullptr;
  for (const phase_stats& p : s.phases) {
    const bool running = p.name == "compute" || p.name == "input" || p.name == "h2d";
    if (!running && p.share >= 0.2 && (where == nullptr || p.share > where->share)) where = &p;
  }
  if (where == nullptr) {
    out.h.premise = "no phase but the built-in ones holds a fifth of each step to block in";
    return out;
  }
  out.phase = where->name;
  out.h.cause = where->name;
  out.h.holds = true;
  out.h.gain = where->share;
  out.h.premise = fmt::format(
      "{:.1f} threads run steps at once but use {:.1f} cores between them, on a host with cores to spare and no "
      "device syncs: about one runs at a time, {:.1f} threads' worth of their time is blocked, and `{}` holds "
      "{:.0f}% of each step",
      in_steps, *busy, in_steps - *busy, where->name, 100 * where->share);
  return out;
}

}  // namespace steptrace::detail
