// Internal (not public API): the diagnosis rules. Every threshold lives here and nowhere else.
//
// With a device view (live, or read from a torch.profiler trace) the label says where the GPU's
// time went. Each host cause is weighed by the GPU idle time that fell while the host was in it
// (a custom phase counts toward the built-in it sits in), as a share of step time: its gain
// (report/diagnosis/gains.hpp), the most removing it could save. The label follows the gains:
// (each share is a cause_shares field, report/diagnosis/gains.hpp)
//   INPUT-BOUND    GPU idle during `input` >= device_cause_share
//   H2D-BOUND      GPU idle during `h2d`, plus H2D copy time no kernel overlaps, >= device_cause_share
//   WAIT-HEAVY     GPU idle while the host blocked (`wait` less CPU collectives; in a live run
//                  also `other`) >= device_cause_share
//   HOST-BOUND     (a trace) GPU idle while the host ran Python outside every op (`other`)
//                  >= device_cause_share; its advice reads the shape (trace.host_gap_* facts)
//   COMM-BOUND     collective kernels' time no other kernel overlaps, plus GPU idle in CPU collectives,
//                  >= device_cause_share
//   LAUNCH-BOUND   GPU idle during `compute` >= device_cause_share with short_kernels
//   (several fire: the largest wins; ties go in the order above)
//   COMPUTE-BOUND  none of those, and the GPU busy >= device_busy_share, whatever the host did
//                  meanwhile, blocking syncs included: the host was waiting on the GPU
//   LAUNCH-BOUND   none of those, the GPU idle mostly while the host was in `compute`, and
//                  short_kernels
//   BALANCED       none of the above (GPU idle mostly in `compute`: the host side of it)
// Host-view rules (no device view), on shares of summed step time:
//   INPUT-BOUND    input >= input_share
//   H2D-BOUND      h2d >= h2d_share
//   WAIT-HEAVY     wait + other >= wait_share (blocked in syncs, or untraced; a trace's
//                  `other` and CPU collectives left out)
//   COMM-BOUND     the CPU collectives' (`collective`) share >= wait_share
//   (several fire: the one with the largest share wins; ties go in the order above)
//   COMPUTE-BOUND  none of those, and compute >= compute_share; with a device view, only if
//                  the device is also busy >= device_busy_share of the step
//   LAUNCH-BOUND   (device view) compute >= compute_share, the device busy < device_busy_share,
//                  and the median kernel <= launch_kernel_us: many tiny kernels
//   BALANCED       none of the above
// With a device view, the evidence also says how idle the GPU was and during which host phase.
// A device view of steps that did no GPU work at all (ran_no_gpu_work: a CPU loop on a GPU
// machine) counts as none: the host rules decide, and the evidence says why.
//
// Many ranks (combine_ranks, report/ranks.cpp), on per-step means of each rank:
//   STRAGGLER      the rank that waits least at the collectives (the built-in `wait`) waits at
//                  least straggler_gap_share of the median step time, and straggler_gap_ms,
//                  less than the median of the other ranks: they wait for it. Its phase is the
//                  one (input, h2d, compute, other) in which it exceeds the median of the other
//                  ranks most. It replaces rank 0's own label in the combined summary.
// INPUT-BOUND's advice reads the loader's settings and, when the process tree's CPU demand
// reaches cpu_demand_share of the cores, says the CPU is saturated instead of adding workers;
// when the workers use less than idle_worker_cores each, they wait on I/O and more are advised,
// beyond the core count. Under any label, a process that waits for a core cpu_wait_share of the
// time it runs (and cpu_wait_min_cores at least) hears first that the host is oversubscribed.
// Without a GPU (no CUDA, no device view) the advice names no device. Causes below their
// label's threshold that still hold a real share (secondary_*) are said under the label. Each
// cause named carries its gain (diagnosis::gains, and "up to N% shorter steps" on its advice);
// the advice with the largest gain comes first (in run terms, against time set aside).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "report/diagnosis/summary_facts.hpp"
#include "steptrace/summary.hpp"

namespace steptrace::detail {

struct diagnosis_thresholds {
  // With a device view: a host cause labels the run when the GPU idles this share of step time
  // while the host is in it (its gain), whatever the busy share.
  double device_cause_share = 0.15;
  // Host view:
  double input_share = 0.30;
  double h2d_share = 0.20;
  double wait_share = 0.30;
  double compute_share = 0.60;
  double device_busy_share = 0.60;
  double launch_kernel_us = short_kernel_us;
  // LAUNCH-BOUND also needs a host that spends at most this long in `compute` per kernel it
  // launches: a launch costs the runtime 3-5 us and an eager op some 10-50 us of Python and
  // dispatch; a host slower than this per kernel is doing other CPU work that graphs won't remove.
  double launch_host_us = 200.0;
  // A deciding share within this of its threshold is reported as close (either side).
  double close_margin = 0.02;
  // INPUT-BOUND's advice: the CPU is saturated when the process and its workers ask for this
  // share of the cores or more (running, or runnable and waiting for a core).
  double cpu_demand_share = 0.90;
  // Workers that use less than this many cores each (busy) wait on I/O: INPUT-BOUND's advice
  // then adds workers beyond the core count.
  double idle_worker_cores = 0.25;
  // Any label: the process waited for a core at least this share of the time it ran, and at
  // least cpu_wait_min_cores on average: the host is oversubscribed, said first.
  double cpu_wait_share = 1.0 / 3;
  double cpu_wait_min_cores = 0.20;
  // Secondary findings, said under any other label ("also: ..."): `input` or `other` at these
  // shares of step time (with a device view, GPU idle time during them), and set-aside time at
  // this share of the run.
  double secondary_input_share = 0.15;
  // COMPUTE-BOUND names the ceiling's fix (ceiling_advice.cpp) when reaching the roofline would
  // save at least this share of the step.
  double ceiling_min_gain = 0.02;
  double secondary_other_share = 0.10;
  double secondary_set_aside_share = 0.20;
  // A trace of one step (or window) whose one-time work set aside takes this share of it: what is
  // left is no basis for a cause (cause_words.cpp, start_up_only).
  double start_up_only_share = 0.99;
  // One-time work set aside from this share of a trace: the advice adds to trace the steady state.
  double start_up_mostly_share = 0.50;
  // COMPUTE-BOUND's first place to look: an op holding this share of the GPU's time or more is
  // the step itself (a range around it, a graph replay), and its heaviest kernel is named
  // instead; collective kernels at this share of it are said, with how much compute hid them.
  double whole_step_op_share = 0.80;
  // A trace's blocking runtime calls (cudaFree, cudaHostRegister, ...) or one op holding this
  // share of the GPU's idle time or more is named in the first fix (idle_holder_advice.cpp).
  double holder_idle_share = 0.25;
  // One-off stalls (one_off.cpp): with this many counted steps or more, a phase whose time a few
  // steps hold (half of it or more), that time being this share of all step time or more, is
  // left out of the label and gains, and named apart.
  std::uint64_t one_off_min_steps = 10;
  // A label leading the cause behind it by less than this share of the step is a close call
  // (close_call.cpp): the runner-up, holding close_call_min_share of the step or more, is named
  // with its gain. COMPUTE-BOUND's lead is the GPU's busy share past device_busy_share.
  double close_call_points = 0.10;
  double close_call_min_share = 0.05;
  double one_off_share = 0.10;
  double collective_note_share = 0.20;
  double straggler_gap_share = 0.10;
  double straggler_gap_ms = 0.5;
  // Servers (server_advice.cpp): a request waits for a batch too long from this share of its
  // time in `queue`; the batch worker is saturated from this busy share; a preprocessing phase
  // on the request path is worth moving from this share.
  double queue_share = 0.30;
  double worker_busy_share = 0.70;
  double preprocess_share = 0.25;
  // Fixes as checked hypotheses (hypotheses.hpp). Counted steps holding less than this in all
  // (ms), judge_empty_share of it outside every phase and no device work, are too short to
  // judge: no fix is advised.
  double judge_min_ms = 1.0;
  double judge_empty_share = 0.9;
  // Work one step in N carries is named from this share of step time (periodic.cpp).
  double periodic_share = 0.05;
  // A shared lock (lock_hypothesis.cpp): threads in steps at once on average at least
  // lock_min_threads, using at most lock_serial_cores between them (about one runs at a time)
  // and a thread's worth less than they are, the host's cores not oversubscribed
  // (cpu_wait_share), and no device syncs.
  double lock_min_threads = 1.5;
  double lock_serial_cores = 1.3;
};

// A program the Python package traced (it sets the fact python.version), or a trace read from a
// file (torch.profiler's, a PyTorch program's): its advice may name torch's tools; a C++ program's
// names its own.
inline bool python_program(const summary& s) {
  return s.fact("python.version") != nullptr || s.backend.host_clock == "trace";
}

// Phases the program made and never entered (Python's fact python.phases_never_entered: called
// without `with`): their time is `other`, which is then no cause to save, only untraced.
inline const std::string* phases_never_entered(const summary& s) {
  const std::string* names = s.fact("python.phases_never_entered");
  return names != nullptr && !names->empty() ? names : nullptr;
}

// The framework a loop runs in (the fact `framework`: "transformers", "lightning"; empty for a
// plain loop), and its terms (report/diagnosis/framework_words.cpp): a loader setting as its user
// names it ("num_workers", "dataloader_num_workers"), where it is set ("DataLoader(ARGS)",
// "TrainingArguments(ARGS)"), and what its own time between steps is (empty for a plain loop).
std::string_view framework_of(const summary& s);
std::string loader_setting(const summary& s, std::string_view name);
std::string loader_call(const summary& s, std::string_view args);
std::string between_steps_words(const summary& s);

// What the CPU figures add under any label: an oversubscribed host comes first (cpu_findings.cpp).
void cpu_findings(const summary& s, const diagnosis_thresholds& t, diagnosis& d);

// A run whose steps are mostly requests (request.hpp, or steps in asyncio tasks).
inline bool is_server_run(const summary& s) { return s.requests > 0 && 2 * s.requests >= s.steps; }

// Server wording and findings for a diagnosis of a server run: batching, the queue,
// preprocessing on the request path; no training loop, no DataLoader.
void advise_server(const summary& s, const diagnosis_thresholds& t, diagnosis& d);

inline constexpr diagnosis_thresholds default_thresholds{};

// COMM-BOUND's advice (report/diagnosis/comm_advice.cpp): the kind of collective holding the most
// of the exposed time (all-to-all, all-gather, ...), and the overlap that kind allows first.
std::vector<std::string> comm_advice(const summary& s);
// A trace of a forward pass (the fact trace.training "0": a model's ops and no backward), inference
// or serving: its collectives are told a forward pass's fixes (comm_advice.cpp), never a trainer's.
bool inference_run(const summary& s);
std::vector<std::string> inference_comm_advice(std::string_view type);
// The first fix naming what held the GPU idle in a trace (report/diagnosis/idle_holder_advice.cpp):
// blocking runtime calls holding holder_idle_share of its idle time, under any host-side label;
// else, under BALANCED and LAUNCH-BOUND, the op holding that much (not one around the whole
// step), with what such an op usually means. Each with its own gain.
void idle_holder_advice(const summary& s, const diagnosis_thresholds& t, diagnosis& d);
// " It replays N graphs a step (K kernels) and launches E kernels a step outside them.": a
// trace's graph replays (trace.graph_*), empty without.
std::string graph_replay_words(const summary& s);
void one_time_evidence(const summary& s, diagnosis& d);
// ", starting with `NAME`: the GPU spends N% of its idle time while the host is in it": the phase
// the program opened in `compute` (or outside every built-in) holding a quarter or more of the
// GPU's idle time, for the advice to profile the host side of `compute`; empty when none does.
std::string idle_custom_in_compute(const summary& s);
// One-time work (report/diagnosis/start_up_words.cpp). One-time initialisation set aside, in the
// evidence; a one-step trace that is almost all one-time work (start_up_only_share): the label is BALANCED,
// the evidence says so, and the only advice is to trace the steady state. True when it applied.
bool start_up_only(const summary& s, const diagnosis_thresholds& t, diagnosis& d);
// A trace mostly start-up (start_up_mostly_share set aside): the advice ends with tracing the
// steady state.
void steady_state_advice(const summary& s, const diagnosis_thresholds& t, diagnosis& d);
// A trace's trace.device_unrecorded fact in words: "104 runtime calls that launch kernels or copy
// memory", "`aten::cudnn_convolution`, an op only a GPU runs", or "1313 records of an MTIA
// accelerator".
std::string device_unrecorded_words(const std::string& fact);
// Whether the fact is of an accelerator steptrace does not read (MTIA), not of an unrecorded GPU.
bool device_unread(const std::string& fact);
// A host view of a process that put work on a GPU (trace.device_unrecorded): said in the
// evidence, and the advice to record the GPU's activity, first where the label needs the GPU's
// side to be right (COMPUTE-BOUND, WAIT-HEAVY, no rule), last otherwise.
void device_unrecorded_advice(const summary& s, diagnosis& d);
// COMPUTE-BOUND's first target with kernel figures: the op holding the most device time (not a
// catch-all row, not mostly collectives; its heaviest kernel when the op is the whole step), the
// largest kind other than collectives, collectives' share and how much compute hid them, and GEMM
// time off the tensor cores; empty without them.
std::string compute_target(const summary& s, const diagnosis_thresholds& t = default_thresholds);

// COMPUTE-BOUND with a ceiling (report/diagnosis/ceiling_advice.cpp): MFU in the evidence, and in
// place of the general model advice the fix for the op with the most to gain, with the gain
// `ceiling`.
void ceiling_advice(const summary& s, const diagnosis_thresholds& t, diagnosis& d);

// A live window whose kernel drifted (the fact gpu.kernel_drift, report/diagnosis/drift_advice.cpp):
// an "also:" line naming it, its time a call then and now, and the likely causes.
void drift_advice(const summary& s, diagnosis& d);

diagnosis diagnose(const summary& s, const diagnosis_thresholds& t = default_thresholds);

// COMPUTE-BOUND's advice (report/diagnosis/compute_advice.cpp), after `keeps_up` ("the pipeline
// keeps up; " or "").
std::vector<std::string> compute_advice(const summary& s, const diagnosis_thresholds& t, const std::string& keeps_up);

// A cause the rules weighed, by its label, with its share of the step (its gain).
struct ranked_cause {
  std::string_view label;
  double share = 0;
};
struct finding;
// A label leading `runner` by less than close_call_points of the step: d.runner_up and the
// evidence say so, and an "also:" finding names the runner-up with its gain (unless one for its
// cause is in `found` already).
void close_call(const summary& s, const diagnosis_thresholds& t, double lead, const ranked_cause& runner,
                std::vector<finding>& found, diagnosis& d);

// A phase's time a few steps hold: its excess over the typical step, summed (ms).
struct one_off {
  std::string phase;
  double excess_ms = 0, max_ms = 0, p50_ms = 0;
};
struct typical_reading {
  summary typical;  // the summary less the one-offs' excess (shares, step time, the GPU's idle)
  std::vector<one_off> found;
};
// The typical step when one-off stalls hold most of a phase's time (report/diagnosis/one_off.cpp);
// empty when none do.
std::optional<typical_reading> typical_step(const summary& s, const diagnosis_thresholds& t);
// The stalls named in the evidence, and capture on trouble advised for the next one.
void one_off_words(const summary& s, const std::vector<one_off>& found, diagnosis& d);

// CUPTI viewed the steps and they did nothing on a GPU: no kernel, copy, memset, sync or
// allocation. Its zeros are no evidence of idle time (the table says so in one line instead).
bool ran_no_gpu_work(const gpu_stats& g);

// Whether the process and its workers ask for cpu_demand_share of the cores or more.
bool cpu_saturated(const summary& s, const diagnosis_thresholds& t);
// INPUT-BOUND's advice, specific where the tracer knows the DataLoader's settings
// (report/diagnosis/input_advice.cpp).
std::vector<std::string> input_advice(const summary& s, const diagnosis_thresholds& t);

// H2D-BOUND's advice: pin pageable copies; copies already pinned go on a side stream or shrink,
// whichever the device's time says gives more (report/diagnosis/copy_advice.cpp).
std::vector<std::string> copy_advice(const summary& s);

// The DataLoader worker count the INPUT-BOUND advice suggests on a machine with `cpus` usable
// cores: half of them, at least 2 and at most 8, never above the core count ("start near 4").
long suggested_workers(long cpus);

}  // namespace steptrace::detail
