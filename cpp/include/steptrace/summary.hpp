// steptrace/summary.hpp — the end-of-run summary: numbers, table and JSON.
//
//   steptrace::summary s = steptrace::default_tracer().summary();
//   std::cerr << s.table();                        // the breakdown table with the diagnosis
//   if (const auto* in = s.phase("input")) use(in->ms.p99, in->share);
//   write_file("run.json", s.json());              // schema "steptrace.summary/1"
//
// Times are milliseconds. Per-phase statistics are over all counted steps: a step in which a
// phase did not run counts as 0 ms for it. Shares are fractions of the summed step time and,
// with `other` (time inside steps but outside any phase), add up to 1.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "steptrace/ceiling.hpp"
#include "steptrace/diagnosis.hpp"
#include "steptrace/export.hpp"
#include "steptrace/hang.hpp"
#include "steptrace/output.hpp"
#include "steptrace/ranks.hpp"
#include "steptrace/timeline.hpp"

namespace steptrace {

struct stat_ms {
  double total = 0, mean = 0, p50 = 0, p95 = 0, p99 = 0, max = 0;
};

struct phase_stats {
  std::string name;
  stat_ms ms;        // per-step time spent in this phase itself (innermost-scope rule)
  double share = 0;  // exclusive, of the summed step time
  std::uint64_t calls = 0;
  // Phases given a CUDA stream: device time per call, from CUDA events (from the begin event
  // to the end event on that stream). Empty otherwise.
  std::optional<stat_ms> device_ms;
  std::uint64_t device_calls = 0;
  // The phase tree: the phase this one was opened inside (empty at the top), and the per-step
  // time of this phase together with every phase opened inside it.
  std::string parent;
  stat_ms inclusive_ms;
};

// A phase that ran while its thread had no step open: kept apart from the step statistics.
struct unscoped_phase {
  std::string name;
  double total_ms = 0, max_ms = 0;
  std::uint64_t calls = 0;
};

// Time set aside under a name (tracer::begin_exclude, steptrace.exclude): in no step.
struct set_aside_stats {
  std::string name;
  std::uint64_t calls = 0;
  double total_ms = 0, mean_ms = 0, max_ms = 0;
  double run_share = 0;  // of run_ms
};

// One cycle of a torch.profiler run read as one (read_profiler_cycles): a file of a repeating
// schedule's tensorboard_trace_handler folder, read alone.
struct cycle_row {
  std::string file;
  std::uint64_t steps = 0, warmup_steps = 0;
  double step_mean_ms = 0, step_p50_ms = 0;
  std::string label;  // "" with no steps
};

struct backend_info {
  bool cuda = false;
  bool cupti = false;
  std::string reason;      // why the device view is (or is not) available, in plain words
  std::string host_clock;  // "tsc" (invariant TSC) or "clock_monotonic"
};

struct copy_stats {
  std::uint64_t count = 0;  // copies in counted steps
  double bytes_per_step = 0;
  double ms_per_step = 0;          // device time spent copying
  double gb_per_s = 0;             // bytes / copy time
  double pageable_share = 0;       // of the bytes, the share whose host side was pageable memory
  double exposed_ms_per_step = 0;  // H2D only: copy time no kernel overlapped (the GPU computed nothing)
};

// The device view, present when a GPU backend measured the steps.
// Device memory allocated and released through CUDA (cudaMalloc/cudaFree and the stream-ordered
// pools; for PyTorch, the caching allocator's segments, i.e. reserved memory) during the steps, on
// their devices, from CUPTI's memory records.
struct device_memory_stats {
  double allocations_per_step = 0;
  double allocated_mb_per_step = 0, freed_mb_per_step = 0;
  double net_mb = 0;  // allocated minus freed over the steps viewed: growth
  // Per step: the most it held above what it held at its start.
  double step_peak_mb_p50 = 0, step_peak_mb_p95 = 0, step_peak_mb_max = 0;
};

// Collective kernels (NCCL's and other libraries': docs/diagnosis.md, "Collective kernels"),
// counted apart.
struct nccl_stats {
  double kernels_per_step = 0;
  double ms_per_step = 0;          // their device time
  double exposed_ms_per_step = 0;  // of it, the time no other kernel overlapped
  // Live windows: the window's last collective kernels (up to recent_collectives), each stream's
  // numbered in order, for the ranks' arrival at them (a live rank row carries them).
  std::vector<collective_call> recent;
  static constexpr std::size_t recent_collectives = 8;
};

// What the device's time went to, by kernel, by the op that launched it and by kind (gemm,
// convolution, attention, elementwise, reduction, copy, memset, collective, other), over the
// counted steps. Kernels past the distinct-name bound are folded into one row, "(other kernels)".
struct kernel_row {
  std::string name;  // as the trace names it (the table shortens it, the JSON keeps it whole)
  std::string kind;
  double calls_per_step = 0, ms_per_step = 0;
  double busy_share = 0;     // of the device records' summed time (kernels, copies, memsets)
  double median_us = 0;      // a call's median duration, within 9%
  bool tensor_core = false;  // its name says it runs on tensor cores
};
// A kernel's name as the table shows it: no return type, no parameters, no anonymous
// namespaces, long template arguments cut.
STEPTRACE_API std::string short_kernel_name(const std::string& name);

// A kernel this short or shorter runs for less than its launch costs the host (an eager op's
// dispatch and launch): LAUNCH-BOUND's measure, and the kernel table's short kernels.
inline constexpr double short_kernel_us = 20.0;
struct op_row {  // the innermost host op around each launch (aten::conv2d, a record_function range)
  std::string name;
  double kernels_per_step = 0, ms_per_step = 0, busy_share = 0;
  double short_kernels_per_step = 0;          // of its kernels, those of at most short_kernel_us
  double collective_ms_per_step = 0;          // of its time, collective kernels' (NCCL and others)
  double collective_exposed_ms_per_step = 0;  // of that, no other kernel beside it (traces only)
};
struct kind_row {
  std::string kind;
  double ms_per_step = 0, busy_share = 0;
};
struct kernel_stats {
  std::vector<kernel_row> kernels;  // most time first: the first max_rows
  std::vector<op_row> ops;          // most time first: the first max_rows, then up to short_op_rows
                                    // more launching the most short kernels
  std::vector<kind_row> kinds;      // most time first
  double ms_per_step = 0;           // every record's time (not their union: overlapping records add)
  // Of the GEMM and convolution time whose kernel names tell (gemm_named_share of it), the share
  // on tensor cores.
  double gemm_tensor_core_share = 0, gemm_named_share = 0;
  std::uint64_t names = 0;         // distinct kernel names kept (at most 4096)
  std::uint64_t calls_folded = 0;  // kernel calls whose name came past that bound: "(other kernels)"
  static constexpr std::size_t max_rows = 50, short_op_rows = 5;
};

struct gpu_stats {
  // A step's own streams are those its phases (or the step) were given; a step given none is
  // viewed on every stream of every device (steps_all_streams of them).
  stat_ms busy_ms;               // per step: union of kernel, memcpy and memset intervals on its own streams
  stat_ms idle_ms;               // per step: the rest of the step
  double busy_share = 0;         // busy time on the steps' own streams / summed step time
  double device_busy_share = 0;  // busy time of their devices, every stream / summed step time
  // Where the host was while the device sat idle: (phase, share of all idle time), largest first.
  std::vector<std::pair<std::string, double>> idle_by_phase;
  copy_stats h2d, d2h;
  double syncs_per_step = 0;
  double sync_ms_per_step = 0;  // host time blocked in synchronisation calls
  double kernels_per_step = 0;
  // Of them, those graphs' replays ran (cudaGraphLaunch: one launch call for all of a graph's
  // kernels), and the replays a step.
  double graph_kernels_per_step = 0, graph_replays_per_step = 0;
  double kernel_median_us = 0;       // by count: half the kernels are shorter
  double kernel_time_median_us = 0;  // by time: half the kernel time is in kernels shorter than this
  nccl_stats nccl;
  device_memory_stats memory;
  std::uint64_t incomplete_records = 0;  // flushed before the device finished them: not used
  std::uint64_t dropped_records = 0;     // lost to the buffer cap
  // Steps the figures above are over, and counted steps left out of them because another tool
  // (torch.profiler, Nsight) held CUPTI during them.
  std::uint64_t steps_viewed = 0;
  std::uint64_t steps_without_records = 0;
  // device_sample: CUPTI recorded one window in `sample_every` (1: every window), so the figures
  // above are over the steps of the recorded windows; `steps_sampled_out` ran in the others (CUDA
  // events still timed their phases given a stream).
  std::uint32_t sample_every = 1;
  std::uint64_t steps_sampled_out = 0;
  std::uint64_t steps_all_streams = 0;  // viewed steps that named no stream
  // Kernels by name, the op around each launch (live: the phase) and kind: from traces, and live
  // from CUPTI records (cpp/src/analysis/README.md, "Kernels and ops").
  std::optional<kernel_stats> kernels;
};

struct error_counts {
  std::uint64_t nested_steps = 0;            // step opened on a thread that already had one open
  std::uint64_t unbalanced_phases = 0;       // phase ended that was not the innermost open one
  std::uint64_t requests_abandoned = 0;      // request handles destroyed without end()
  std::uint64_t request_phases_dropped = 0;  // phase calls past a request handle's capacity
  std::uint64_t phase_names_folded = 0;      // distinct names past the registry's bound: "(other names)"
  std::uint64_t windows_dropped = 0;         // live windows a listener fell too far behind to get
  std::uint64_t window_calls_failed = 0;     // live windows a listener's call failed on
};

// Steps that served a batch of requests (tracer::set_batch_size, request::set_batch_size).
struct batch_stats {
  std::uint64_t batches = 0;                         // counted batches
  double size_mean = 0, size_p50 = 0, size_max = 0;  // requests per batch
  stat_ms ms;                                        // per batch
  std::vector<phase_stats> phases;                   // per batch, as a step's phases
  double busy_share = 0;                             // time inside batches / first batch start to last batch end
};

// One capture on trouble (capture.hpp): the steps it kept, why, and what they say alone.
struct capture_record {
  std::string reason;                           // the trigger's words
  std::uint64_t first_step = 0, last_step = 0;  // the thread's step indices (warm-up and failed ones included)
  std::uint64_t steps = 0;                      // steps captured (fewer than asked when the run ended first)
  std::uint32_t rank = 0;
  std::string label, evidence, advice;  // the diagnosis of those steps alone; advice: the first fix
  std::string path;                     // the trace written
  double cost_s = 0;                    // the capture's own time (torch.profiler's, or writing it)
  std::string tool;                     // "torch.profiler" or "steptrace" (the flight recorder's records)
  // A retroactive capture: steps kept from before the trigger (capture_back), `indices` of them
  // (oldest first; not always in a row: a window's slowest), `tripped` the one that tripped it (the
  // slowest; the last for a signal, a file or capture()).
  bool retroactive = false;
  std::vector<std::uint64_t> indices;
  std::uint64_t tripped = 0;
};

class STEPTRACE_API summary {
 public:
  std::uint64_t steps = 0;         // counted steps (completed, past warm-up)
  std::uint64_t warmup_steps = 0;  // recorded but kept out of the statistics
  std::uint64_t failed_steps = 0;  // ended by an exception; kept out of the statistics
  std::uint64_t threads = 0;       // threads that completed at least one step
  // Read from a trace that has no steps: its one "step" is a window of the trace (the whole
  // trace), and every output calls it a window.
  bool windows = false;
  double wall_ms = 0;  // first counted step start to last counted step end
  stat_ms step_ms;
  // Steps given a CUDA stream: device time per step, from CUDA events (from the event at its
  // start to the one at its end, on that stream). Empty otherwise.
  std::optional<stat_ms> step_device_ms;
  std::uint64_t step_device_steps = 0;
  std::vector<phase_stats> phases;  // built-ins first, then custom phases, `other` last
  // Of the counted steps, those that were requests (request.hpp): a server's run.
  std::uint64_t requests = 0;
  std::optional<batch_stats> batches;  // empty when no step was a batch
  std::vector<unscoped_phase> unscoped_phases;
  std::vector<set_aside_stats> set_aside;  // largest first
  // From the first instant of a step or set-aside span to the last one (warm-up steps included):
  // what set-aside shares are of.
  double run_ms = 0;
  std::optional<gpu_stats> gpu;  // empty without a GPU backend
  // FLOPs, MFU and each costed op's place on the roofline: from a trace that recorded shapes, or a
  // live run told its FLOPs a step; empty otherwise.
  std::optional<ceiling_stats> ceiling;
  diagnosis diag;
  backend_info backend;
  error_counts errors;
  // What the tracer was told about the setup (tracer::set_fact), e.g. dataloader.num_workers,
  // plus host.cpus; the advice uses them.
  std::vector<std::pair<std::string, std::string>> facts;
  // Which rank of a multi-process job this is (tracer::set_rank); empty in a lone process.
  std::optional<rank_info> rank;
  // In a summary combined on rank 0 (combine_ranks): every rank's row, the missing ranks and
  // the straggler. The rest of the summary is rank 0's own.
  std::optional<ranks_view> ranks;
  // Read from one process's profiler cycles (read_profiler_cycles): the rest of the summary is of
  // every cycle's steps together; these are the cycles read alone, in time order.
  std::vector<cycle_row> cycles;
  // The flight recorder: raw intervals of each thread's recent and slowest steps (empty in a
  // window). The whole run as a series for charts, and the host's resident memory at step ends.
  timeline_view timeline;
  step_series series;
  std::optional<host_memory_stats> host_memory;
  // A live window of a rank: its node's reading (ranks.hpp), sent with its row.
  std::optional<node_health> node;
  // Rank 0 of a job with live rank windows: how often each rank was a window's straggler.
  std::optional<live_ranks_view> live_ranks;
  // The steps open now and the last collectives (hang.hpp): in live windows and metrics(), when a
  // step is open.
  std::optional<hang_view> hang;
  // Captures on trouble: the run's so far; in a live window, those that ended since the last.
  std::vector<capture_record> captures;
  // Its collective calls (ranks.hpp), for a job's arrival at them: read from a trace (combine_ranks
  // is given them in each rank_report); in a live window, its waits at DDP's all-reduce, which
  // live_row sends before the device's (gpu->nccl.recent). Not in the JSON.
  std::vector<collective_call> collective_calls;
  bool collective_calls_numbered = false;

  const phase_stats* phase(std::string_view name) const noexcept;
  // Every kernel, op and kind row of gpu->kernels as a table (`steptrace show --kernels`); one
  // line saying why when there are none.
  std::string kernels_table() const;
  const std::string* fact(std::string_view key) const noexcept;
  // Where this rank writes a file named by a path option (json_path, trace_path, html_path):
  // `{rank}` becomes its rank (0 in a lone process); empty when it writes none (in a job, only
  // rank 0 writes a path without `{rank}`).
  std::string path_for(std::string_view path) const;
  std::string table() const;
  std::string json() const;
  // The timeline as Chrome trace event JSON (Perfetto UI, chrome://tracing): a track per thread
  // with its steps and phases, a track per stream with device activity and idle gaps.
  std::string trace() const;
  // A copy cut to what a report draws, whatever the summary read: of the timeline, the `steps`
  // slowest kept steps, each with at most 256 phase spans and 256 device records (the rest
  // counted as dropped), and no set-aside list; the series and every figure unchanged.
  summary drawn(std::size_t steps = 8) const;
  // The figures in the Prometheus text exposition format (0.0.4), names under `prefix`.
  std::string prometheus(std::string_view prefix = "steptrace") const;
  // Reads what json() wrote. Throws std::invalid_argument on anything else.
  static summary from_json(std::string_view text);
};

// One live window as a listener gets it (tracer::next_window).
struct live_window {
  summary figures;         // the window's statistics, as the live line and the JSONL show them
  std::uint64_t step = 0;  // steps ended so far, of every kind: the loop's step count
  double at_s = 0;         // seconds since the first live window began
  // Windows end at the wall clock's multiples of the period (system_clock / period): the slot this
  // one covers, the same on every process of a job for the same instants (the first window, and
  // the run's last, cover part of theirs).
  std::int64_t slot = 0;
};

// format_ms, printable_text, write_file and append_line: steptrace/output.hpp.

// What one rank sends to rank 0: its summary, and the time it waited at each of its last
// collectives (oldest first), with how many it has waited at in all.
struct rank_report {
  summary s;
  std::vector<double> recent_wait_ms;
  std::uint64_t collectives = 0;
  // Per step, the time the rank waited for the others on the device rather than on the host:
  // from a trace, its NCCL kernels' time that no other kernel hid (a fast rank's all-reduce runs
  // long waiting for the slow rank's data). Its row's own column; with the host `wait`, what the
  // straggler rule counts as the rank's wait at the collectives.
  double device_wait_ms = 0;
  // Its collective calls (ranks.hpp), when it knows them: from a trace, every collective kernel
  // (NCCL) or host range (gloo); from a live gather, its last waits at DDP's all-reduce. With two
  // ranks or more carrying them, the job's straggler is read from their arrival (arrival_view).
  std::vector<collective_call> calls;
  bool calls_numbered = false;  // their seq are the trace's sequence numbers (else their order)
};

// What a rank sends to rank 0, and what rank 0 accepts: the figures the job's table reads (counts,
// step times, each built-in phase with the custom phases inside it folded in, device busy share,
// label, rank; from a trace, where its first step and first collective began; the 8 custom
// phases with the most time of their own, and those around them (16 in all at most), with their
// own time a step and no share, so that STRAGGLER can name the one a slow rank spends its time
// in), nothing else: under 12 KB whatever the phases, the timeline or the run's length.
// Throws std::invalid_argument naming the fault when `s` has no rank or its figures do not hold
// together (shares outside 0..1, or not summing to 1; times not finite).
STEPTRACE_API summary rank_digest(const summary& s);

// Rank 0's view of the job: its own summary (the report of the lowest rank given) with a row
// per rank, the ranks of `world_size` that sent nothing, and STRAGGLER when one rank holds the
// others back (the diagnosis then names it; otherwise rank 0's own diagnosis stands).
// `timeout_s`: how long rank 0 waited, for the missing ranks' line; `from_files`: the reports were
// read from the ranks' files (then a missing rank is one with no file); `refused`: ranks whose
// summary arrived but was refused, with why (named as refused, never as missing). A rank with no steps is a row
// of its own (never the worst or the median); when it is the lowest given, the evidence says
// the job's figures are in the rows. Throws std::invalid_argument when no report has rank info,
// or two have the same rank.
STEPTRACE_API summary combine_ranks(const std::vector<rank_report>& reports, std::uint32_t world_size, double timeout_s,
                                    bool from_files = false,
                                    const std::vector<std::pair<std::uint32_t, std::string>>& refused = {});

// Live rank windows (ranks.hpp). A rank's row of one live window, one line of text: "r2", its
// rank, world size, steps, step mean/p50/p95 and each built-in phase's ms a step with the phases
// inside it, and its device wait (about 100 bytes), then its 8 largest named phases (group, ms,
// name; about 470 bytes in all), then its last collective calls of one group (" a", their waits
// before each call's end, about 60 bytes: collective_calls, else gpu->nccl.recent) and its node
// (" n", about 50 bytes: node): what it sends rank 0 each window, read back by window_straggler
// far faster than JSON at 1,024 ranks. Throws std::invalid_argument when the window has no rank.
STEPTRACE_API std::string live_row(const summary& window);
// Rank 0: the straggler among the rows of one window (the STRAGGLER rule of combine_ranks, on the
// window's figures and the rows' arrival at their last collectives, `within` from the rows' named
// phases, `node` from their nodes' readings), or none. Rows written as "r1" (no
// named phases) are read too. Throws std::invalid_argument naming a row that is not one.
STEPTRACE_API std::optional<straggler_info> window_straggler(const std::vector<std::string>& rows);
// STRAGGLER's words for s.within, as the exit's diagnosis says them: ", 9.5 ms of it in `decode`",
// or " (`decode` alone: 12.0 ms more)" when the rest of its phase was faster; empty without one.
STEPTRACE_API std::string straggler_within_words(const straggler_info& s);
// "chronic" (the straggler in at least 3 windows and in half of those since it first was),
// "one-off" (once), or "intermittent".
STEPTRACE_API std::string straggler_pattern(const rank_window_count& c, std::uint64_t windows);

}  // namespace steptrace
