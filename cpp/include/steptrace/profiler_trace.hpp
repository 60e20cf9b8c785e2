// steptrace/profiler_trace.hpp — a torch.profiler (Kineto) trace read as a steptrace summary.
//
//   steptrace::summary s = steptrace::read_profiler_trace("worker0.pt.trace.json.gz");
//   std::cout << s.table();          // the same table, JSON, diagnosis and timeline as a live run
//
// The trace's host ops and runtime calls become the steps and phases a live run records, its
// kernels, copies and memsets the device records, and the one analysis runs on them: each
// ProfilerStep#N is a step (the first, whose device work began before the trace, is warm-up).
// Plain or gzip-compressed JSON, read in chunks: a trace of any size is never held whole.
#pragma once

#include <string>

#include "steptrace/export.hpp"
#include "steptrace/summary.hpp"

namespace steptrace {

// Throws std::invalid_argument, naming the file and the problem, for a file that cannot be
// read, is not JSON or not a Chrome trace, is cut short, or holds no steps.
STEPTRACE_API summary read_profiler_trace(const std::string& path);

}  // namespace steptrace
