// steptrace/ranks.hpp — many processes of one job (the ranks of torch.distributed, MPI ...).
//
//   tracer.set_rank({rank, world_size, local_rank, host, started_at});  // each summary says who
//   ... each rank sends its summary (json()) and its recent collective waits to rank 0 ...
//   steptrace::summary all = steptrace::combine_ranks(reports, world_size, 30);  // on rank 0
//   std::cerr << all.table();   // rank 0's own breakdown, then one row per rank and STRAGGLER
//
// The Python package does all of this by itself with torch.distributed (cpp/src/report/README.md,
// "Many ranks"). combine_ranks lives in steptrace/summary.hpp beside the summary it returns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace steptrace {

// The most ranks a job may claim (a file, a gather): 2^20. A file that claims more is refused,
// so that what a file says cannot size what steptrace allocates.
inline constexpr std::uint32_t max_world_size = 1u << 20;
// Of a job's missing ranks, how many are listed by number (all are counted).
inline constexpr std::size_t missing_listed = 1000;

// Which process of the job a summary is from.
struct rank_info {
  std::uint32_t rank = 0;
  std::uint32_t world_size = 1;
  std::int64_t local_rank = -1;  // on its host; -1: not known
  std::string host;
  std::string started_at;  // when the process started, ISO 8601 UTC ("" if not known)
};

// One rank's row in a combined summary: per-step means in ms, each built-in phase with the
// custom phases that count toward it (the diagnosis's grouping).
struct rank_row {
  rank_info who;
  std::uint64_t steps = 0;
  double step_mean_ms = 0, step_p50_ms = 0, step_p95_ms = 0;
  double input_ms = 0, h2d_ms = 0, compute_ms = 0, wait_ms = 0, other_ms = 0;
  // From traces: per step, the NCCL kernels' time no other kernel hid (rank_report::device_wait_ms).
  // Device time, so a column of its own: it overlaps the host phases and is never added to them.
  double device_wait_ms = 0;
  std::optional<double> device_busy_share;  // with a device view
  std::string label;                        // that rank's own diagnosis
  // The gain from fixing that rank's own first cause (its diagnosis's largest), of its step time;
  // empty cause when it names none.
  std::string gain_cause;
  double gain = 0;
  // Of ranks_view::steps_compared, the steps this rank was the slowest in (it waited least).
  std::uint64_t slowest_steps = 0;
  // Read from a trace (its clock, microseconds): where its first counted step began, and where its
  // first collective kernel (or gloo range) in it started. Empty otherwise.
  std::optional<double> step_begin_us, first_collective_us;
};

// One collective call of one rank (cpp/src/report/README.md, "Arrival at the collectives"): with NCCL
// its kernel on the device, with gloo the host's range; times on the rank's own clock.
struct collective_call {
  std::string group;      // its process group ("0", a stream's name when the trace names none)
  std::string kind;       // "all-reduce", "all-gather", ...; "" when not told
  std::uint64_t seq = 0;  // the group's call number: the trace's, or the call's place in the trace
  double start_us = 0, end_us = 0;
  std::string before;  // the phase the rank ran just before it reached the call ("": not known)
};

// The ranks' arrival at the collectives they share: each matched call aligned on its end (the
// ranks leave a collective together), so a rank arrives `end - start` before the end, and the one
// that arrived last is what the others waited for.
struct arrival_rank {
  std::uint32_t rank = 0;
  std::uint64_t last = 0;  // collectives it arrived last at
  double late_ms = 0;      // its median lateness at those: last arrival minus the others' median
  std::string before;      // the phase it ran before those arrivals, most often
  // Its lateness at those, summed, and at the one where it was latest (with that call's number):
  // lateness one call holds is a one-off, not a rank the others wait for each step.
  double total_late_ms = 0, worst_late_ms = 0;
  std::uint64_t worst_seq = 0;
};
// A collective's time on one rank, in two parts (cpp/src/report/README.md, "Arrival at the
// collectives"): from its own arrival to the last rank's, it waits; from the last arrival to the
// end, the data moves, a time every rank pays alike. Per matched call, a mean.
struct collective_split {
  std::uint32_t rank = 0;
  double wait_ms = 0;  // waiting for the last rank to arrive
};
struct collective_arrival {
  std::string group, kind;
  std::uint64_t seq = 0;
  std::uint32_t last_rank = 0;
  double late_ms = 0;      // the last arrival after the median of the others'
  std::string before;      // the last rank's phase before it
  double transfer_ms = 0;  // from the last arrival to the end
};
struct arrival_view {
  std::uint64_t compared = 0;                   // collectives matched on every rank with calls
  std::string matched_by;                       // "sequence" (the traces' numbers), "end" (calls that end together)
  std::vector<arrival_rank> ranks;              // by rank: every rank that arrived last at least once
  std::vector<collective_arrival> collectives;  // the matched calls, in order: the first max_arrival_rows
  // The split, per matched call: every rank's wait for the last, and the transfer after it.
  std::vector<collective_split> split;  // by rank: every rank matched
  double transfer_ms = 0;
  double calls_per_step = 0;  // the ranks' median collective calls a step, for the split a step (0: not known)
};
inline constexpr std::size_t max_arrival_rows = 512;

// One reading of a rank's node, once a window (cpp/src/report/README.md, "Node health"): its GPU
// through NVML (loaded at run time; absent, `gpu` is false) and its host from /proc. A field not
// read is negative.
struct node_health {
  bool gpu = false;
  double sm_clock_mhz = -1, mem_clock_mhz = -1, power_w = -1, temperature_c = -1;
  std::uint64_t throttle = 0;     // NVML's clock-event reasons (bits), of those that slow the GPU
  double ecc_errors = -1;         // uncorrected ECC errors since the driver loaded
  double xid_errors = -1;         // XID errors NVML reported since steptrace started
  double steal_share = -1;        // of the window's CPU time, what the hypervisor gave others
  double involuntary_per_s = -1;  // this process's involuntary context switches a second
  double others_cpu_share = -1;   // of the window, the share its main thread was runnable but waited
                                  // for a core (other processes' CPU on its cores)
};

// The rank the others wait for (see STRAGGLER in the diagnosis).
struct straggler_info {
  std::uint32_t rank = 0;
  std::string phase;          // where it exceeds the median of the other ranks most
  double excess_ms = 0;       // per step, in that phase, over the median of the others
  double own_wait_ms = 0;     // its own wait per step
  double others_wait_ms = 0;  // the median of the other ranks' wait per step
  // From traces: how much later than the median of the others its first step began, when it also
  // started its first collective last and that delay is more than its phase excess (0: not late).
  double late_ms = 0;
  // Of the other ranks, the one whose own work a step (step less its wait) is the median: the
  // rank to hold the straggler's figures against (a capture of both, for `compare`).
  std::uint32_t median_rank = 0;
  // The named phase inside `phase` that holds half of excess_ms or more, the most specific one,
  // and its own excess per step over the median of the others: from the ranks' summaries, and in
  // live windows from the 8 largest named phases each row carries. Empty when none does.
  std::string within;
  double within_ms = 0;
  // From its arrival at the collectives (arrival_view), when the ranks carried their calls: of
  // `compared` collectives it arrived last at `last`, by a median `arrival_late_ms`, after `before`.
  std::uint64_t arrivals_last = 0, arrivals_compared = 0;
  double arrival_late_ms = 0;
  std::string before;
  // Its node's readings that depart from the median rank's ("SM clock 1,410 MHz against 1,980
  // median, thermal slowdown"), when the ranks sent them; empty when none departs.
  std::string node;
};

struct ranks_view {
  std::uint32_t world_size = 0;
  std::vector<rank_row> rows;          // the ranks gathered, by rank
  std::vector<std::uint32_t> missing;  // ranks whose summary did not arrive: the first missing_listed
  std::uint32_t missing_count = 0;     // all of them
  // Ranks whose summary arrived but was refused (its figures did not hold together), with why.
  std::vector<std::pair<std::uint32_t, std::string>> refused;
  double timeout_s = 0;     // how long rank 0 waited for them
  bool from_files = false;  // read from the ranks' files (traces, summaries), not gathered live
  // The last steps whose collective waits every rank kept (the same steps on each: the k-th
  // all-reduce of one rank is the k-th of every rank); 0 when a rank kept none.
  std::uint64_t steps_compared = 0;
  // The worst rank against the median one, by time a step outside `wait` (its own work).
  std::uint32_t worst_rank = 0;
  double worst_ms = 0, median_ms = 0;
  std::optional<straggler_info> straggler;
  std::optional<arrival_view> arrivals;  // when two ranks or more carried their collective calls
  // The rank that waited least, when its arrival at the collectives says the others do not wait
  // for it (it is on time, or late at one call only), in words; then there is no straggler.
  std::string straggler_refuted;
};

// Live rank windows (the Python package under torch.distributed with the live view on): each
// window every rank sends its row (live_row_json) through the job's store, and rank 0 names the
// window's straggler among the rows that are new (window_straggler, the STRAGGLER rule) and keeps
// the count here (tracer::note_rank_window).
struct rank_window_count {
  std::uint32_t rank = 0;
  std::uint64_t windows = 0;                        // windows it was the straggler in
  std::uint64_t first_window = 0, last_window = 0;  // the first and the last of those (from 0)
  std::string phase;                                // the phase it was named by most often
  std::string node;  // the latest window's words on its node (straggler_info::node), when any departed
};
struct live_ranks_view {
  std::uint64_t windows = 0;               // windows judged
  std::optional<std::uint32_t> straggler;  // the latest window's
  // The latest window's: ranks with no new row for one window (late) or for missing_windows in a
  // row (missing, a rank that died or hangs); neither is waited for.
  std::vector<std::uint32_t> late, missing;
  std::vector<rank_window_count> counts;  // by rank: each rank named at least once
};
// A window is judged only when every rank's row holds this many counted steps: in a shorter one
// (the partial first window, start-up) one rank's noise reads as a straggler. Not judged, it is said.
inline constexpr std::uint64_t min_window_steps = 5;
inline constexpr std::uint32_t missing_windows = 3;

}  // namespace steptrace
