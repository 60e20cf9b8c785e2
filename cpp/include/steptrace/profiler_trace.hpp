// steptrace/profiler_trace.hpp — a torch.profiler (Kineto) trace read as a steptrace summary.
//
//   steptrace::summary s = steptrace::read_profiler_trace("worker0.pt.trace.json.gz");
//   std::cout << s.table();          // the same table, JSON, diagnosis and timeline as a live run
//   auto served = steptrace::read_profiler_trace("server.json.gz", {"execute_model"});  // named steps
//
// The trace's host ops and runtime calls become the steps and phases a live run records, its
// kernels, copies and memsets the device records, and the one analysis runs on them. The steps
// are, in order: steptrace's own annotations; the ranges named by `trace_options::step`; the
// ProfilerStep#N ranges; a training loop's iterations, by its DataLoader fetches or optimizer
// steps; else the whole trace as one window (summary::windows). The first step is warm-up only
// when its device was still running work launched before the trace, or a loop's first iteration
// lasted twice the others' median (the program's start-up), and others exist.
// Plain or gzip-compressed JSON, from a file or a pipe, read in chunks: never held whole.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "steptrace/export.hpp"
#include "steptrace/summary.hpp"

namespace steptrace {

struct trace_options {
  // A host range whose occurrences on its busiest thread are the steps ("execute_model", a
  // record_function range, a module's forward); empty: the order above.
  std::string step;
  // What messages and the summary call the file ("": its path), e.g. the pipe a copy was made of.
  std::string name;
  // Facts the file does not hold, known where it is read (a capture read back in the process that
  // made it: host.cpus, the DataLoader's): added where the file has none, before the diagnosis, so
  // its advice is the live run's.
  std::vector<std::pair<std::string, std::string>> facts;
};

// Throws std::invalid_argument, naming the file and the problem, for a file that cannot be
// read, is not JSON or not a Chrome trace, is cut short, holds no host events, holds more than
// 10,000,000 events the reader keeps, inflates past 16 GiB, or lacks the range `options.step` names.
STEPTRACE_API summary read_profiler_trace(const std::string& path, const trace_options& options = {});

// One process's profiler cycles as one run: the files a repeating schedule's
// tensorboard_trace_handler writes, one per cycle. Each cycle keeps its own warm-up by evidence;
// the summary is of every cycle's steps together, and summary::cycles holds each cycle read
// alone, in time order. Throws std::invalid_argument naming the files when they are not one
// process's (another pid, host_name or distributedInfo rank) or their times overlap, and as
// read_profiler_trace does for a file it cannot read.
STEPTRACE_API summary read_profiler_cycles(const std::vector<std::string>& paths, const trace_options& options = {});

// What read_file throws for a file of another kind that steptrace knows and does not read
// (PyTorch's execution trace, which HTA keeps beside the profiler's): a job's folder leaves it out.
struct STEPTRACE_API other_file_kind : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// A saved summary (summary::json()) or a torch.profiler trace, told apart by the document's
// top-level keys ("schema" or "traceEvents", however far in), plain or gzip, from a file or a
// pipe, read once as it comes. A summary is at most 256 MB; a trace's bounds are those of
// read_profiler_trace (10,000,000 events kept, 16 GiB inflated). Throws std::invalid_argument
// naming the file and the problem in either reader's words; `options.step` on a summary is one;
// other_file_kind for an execution trace.
STEPTRACE_API summary read_file(const std::string& path, const trace_options& options = {});

}  // namespace steptrace
