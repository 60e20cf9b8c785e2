// steptrace/hang.hpp — a hang named while it hangs: where each thread is stuck, and the
// collective the others wait at.
//
//   const std::uint64_t seq = steptrace::collective_entered("0", "all_reduce");  // before the call
//   comm.all_reduce(buffer);
//   steptrace::collective_left("0", seq);                                        // after it returns
//
// Each tracer watches its own steps (the `hang_after` option): a step open longer than that is a
// suspected hang, and the tracer writes a report once (stderr, `jsonl_path`, a file in
// `capture_dir`) without touching the stuck thread. Every live window and metrics() carry the open
// step (summary::hang); a job's ranks send it in their rows and `window_hang` names the wavefront.
// See cpp/src/report/README.md, "Hangs".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "steptrace/export.hpp"

namespace steptrace {

// A phase open now on a thread, outermost first.
struct open_phase_now {
  std::string phase;
  double open_s = 0;
};

// A thread's step open now (or the fetch in progress that will begin it: an `input` before its step).
struct open_step_now {
  std::uint32_t thread = 0;
  std::uint64_t step = 0;  // the thread's step index (warm-up and failed ones included)
  double open_s = 0;
  std::vector<open_phase_now> phases;
};

// The last collective call of one process group (collective_entered/left), as seen now.
struct collective_mark {
  std::string group, kind;
  std::uint64_t seq = 0;  // the group's calls before it, on this process
  double entered_s = 0;   // seconds ago
  double left_s = -1;     // seconds ago; -1: not left (the call has not returned)
};

// What a tracer has open now: in every live window, metrics() and the hang report.
struct hang_view {
  bool suspected = false;                    // the longest-open step has been open hang_after_s or more
  double hang_after_s = 0;                   // the threshold now (the option's, or its automatic value)
  std::vector<open_step_now> threads;        // every thread with a step open, longest open first
  std::vector<collective_mark> collectives;  // the last call of each group, latest entered first
  std::vector<double> last_steps_ms;         // the latest counted steps before it (oldest first)
  std::string report;                        // the report file written for this hang ("" none yet)
  const open_step_now* longest() const noexcept { return threads.empty() ? nullptr : &threads.front(); }
  std::string phase() const;  // the longest-open step's innermost open phase ("" none)
};

// Process-wide marks of the collectives in flight: the calls of each group are numbered from 0 in
// the order this process made them, as every rank of the group makes them. Cheap (a short lock,
// no allocation once a group is known); at most 16 groups (later groups are not marked).
STEPTRACE_API std::uint64_t collective_entered(std::string_view group, std::string_view kind) noexcept;
STEPTRACE_API void collective_left(std::string_view group, std::uint64_t seq) noexcept;
STEPTRACE_API std::vector<collective_mark> last_collectives();

// Python's stacks in a hang report: a function called on the watchdog's thread that writes every
// thread's stack to `fd`, without taking the interpreter's lock (the stuck thread may hold it).
// The bindings give one; a C++ program has none, and its report says so.
using stack_writer = void (*)(int fd);
STEPTRACE_API void set_stack_writer(stack_writer writer) noexcept;

// The job's view of a hang, from the ranks' live rows (live_row): which collective the ranks wait
// at, who never entered it and where each of those is, who is gone.
struct hang_rank {
  std::uint32_t rank = 0;
  std::uint64_t step = 0;   // its open step
  std::string phase;        // its innermost open phase ("" none open)
  double open_s = 0;        // its step open so long
  std::string group, kind;  // its last collective
  std::uint64_t seq = 0;
  bool in_collective = false;  // it entered that call and has not left it
  bool has_collective = false;
  bool exited = false;  // gone: its process is known to have exited (else it is silent)
};
struct job_hang {
  bool hang = false;        // a rank's step open past its hang_after, and no rank moved
  std::string group, kind;  // the collective the wavefront stopped at
  std::uint64_t seq = 0;
  std::vector<hang_rank> culprits;    // never entered it (or gone), first in every listing
  std::vector<hang_rank> waiting;     // entered it (or past it) and stuck
  std::vector<hang_rank> mismatched;  // at the same number in another kind of collective
  std::vector<hang_rank> gone;        // exited or silent: their last row's phase
  std::string words;                  // the verdict, and what to read first
};
// rows: the latest row of each rank that sent one; gone: ranks with no current row, each with its
// last row ("" if none) and whether its process is known to have exited (else it is silent).
struct gone_rank {
  std::uint32_t rank = 0;
  std::string last_row;
  bool exited = false;
};
STEPTRACE_API job_hang window_hang(const std::vector<std::string>& rows, const std::vector<gone_rank>& gone = {});

}  // namespace steptrace
