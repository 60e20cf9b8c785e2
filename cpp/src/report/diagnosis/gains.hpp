// Internal (not public API): the gain of each fix. Every cause the diagnosis names carries the
// most removing it could save, an upper bound, as a fraction of step time:
// - with a device view, the GPU idle time that fell while the host was in that cause (the device
//   work stays, so the step cannot shrink by more than the idle time the cause made);
// - host-only, the cause's share of step time;
// - time set aside (validation, checkpoints): its share of run time;
// - STRAGGLER (report/ranks.cpp): the straggler's excess over the median rank, of step time.
// COMPUTE-BOUND names no host gain. See cpp/src/report/diagnosis/README.md, "Definitions".
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "steptrace/summary.hpp"

namespace steptrace::detail {

// A finding the diagnosis says under its label ("also: ..."), with its cause and gain.
struct finding {
  std::string cause, text;
  double gain;
  bool of_run;  // a share of run time (time set aside), not of step time
};

// Puts the gains where the user reads them: the label's causes (`compute_idle`: BALANCED names
// `compute`, the GPU idling mostly there) and each finding's, in d.gains largest first; "(up to N%
// shorter steps)" on the label's first advice and on each finding, appended to d.advice; a
// finding whose gain beats the label's own, in run terms, goes first. A label that names no
// cause (COMPUTE-BOUND: the model) keeps its advice first.
// `first_gain`: the label's advice was chosen from checked hypotheses (d.hypotheses): its causes
// are those that hold, and the first line's gain is the first fix's.
void add_gains(const summary& s, const std::vector<finding>& found, bool compute_idle, diagnosis& d,
               std::optional<double> first_gain = std::nullopt);

// The most removing host phase group `cause` (input, h2d, wait, other, compute) could save, of
// step time; `comm`: the collectives' time no compute hides.
double host_gain(const summary& s, std::string_view cause);

struct diagnosis_thresholds;

// Each cause's share of step time as the rules weigh it (with a device view: the GPU time it
// cost), which is also its gain:
//   input, h2d   GPU idle while the host was in them (host only: their shares); h2d also the
//                H2D copy time no kernel overlaps (the device copies and computes nothing)
//   wait         GPU idle while the host blocked (syncs, blocking copies), CPU collectives left
//                out; in a live run also time outside every phase (`other`: untraced, may be a
//                wait); host only: the same as shares
//   host         (a trace, with a device view) GPU idle while the host ran Python outside every
//                op: `other` in a trace is never waiting
//   comm         collective kernels' time no other kernel overlaps, plus GPU idle (host only: the
//                time) while the host blocked in a CPU collective
//   launch       GPU idle while the host was in `compute`, when its kernels are short
//                (short_kernels)
//   other        GPU idle (host only: the share) outside every phase, for the "also" line
struct cause_shares {
  double input = 0, h2d = 0, wait = 0, host = 0, comm = 0, launch = 0, other = 0;
};
cause_shares cause_shares_of(const summary& s, const diagnosis_thresholds& t);

// Kernels too short for the host to keep the GPU fed, with a host that spends at most
// launch_host_us in `compute` per kernel it launches: half the kernel time in kernels of at most
// launch_kernel_us; or, with the GPU busy under device_busy_share, half the kernels (by count)
// no longer than launch_kernel_us or than the host's own time per kernel (launch overhead
// exceeds their run time).
bool short_kernels(const summary& s, const diagnosis_thresholds& t);
// The host's time in `compute` per launch it makes, in us (0 without kernels).
double host_us_per_kernel(const summary& s);
// The host's launch calls a step, a graph's replay counted once however many kernels it runs:
// a trace's own count of its launch calls (trace.launches_per_step), else the kernels a step
// less those replays ran, plus the replays (gpu_stats::graph_*).
double host_launches_per_step(const summary& s);

// Read from a torch.profiler trace by its ops: `other` is the host outside every op, not untraced
// time (a trace of steptrace's own annotations keeps the live meaning: outside every phase).
inline bool from_trace(const summary& s) {
  const std::string* steps = s.fact("trace.steps_from");
  return s.backend.host_clock == "trace" && (steps == nullptr || *steps != "annotations");
}

// " (up to 34% shorter steps)", or "... shorter run" for time set aside.
std::string gain_words(double gain, bool of_run = false);

}  // namespace steptrace::detail
