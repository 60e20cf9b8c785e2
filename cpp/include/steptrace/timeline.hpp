// steptrace/timeline.hpp — what a summary keeps of single steps: the flight recorder's raw
// intervals, the step series over the whole run, and the host's resident memory.
//
//   steptrace::summary s = tracer.summary();
//   for (const auto& st : s.timeline.steps)          // recent and slowest steps, per thread
//     if (st.slowest) std::cout << "step " << st.index << ": " << st.step_ms << " ms\n";
//   write_file("trace.json", s.trace());             // open in Perfetto UI or chrome://tracing
//
// Times in the timeline are milliseconds from the run's first instant (the first step or
// set-aside span, warm-up included). Bounded whatever the run's length: per thread, the most
// recent `timeline_recent` steps and the `timeline_slowest` slowest counted ones, each with at
// most 256 phase calls and 256 device records (and up to 64 collective kernels past them).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace steptrace {

// A phase call, or a set-aside span, in the timeline.
struct timeline_span {
  std::string name;
  double begin_ms = 0, end_ms = 0;
  std::uint32_t depth = 0;  // 0: opened with no phase open around it
};

// What the device did during a kept step (a GPU backend with CUPTI only), on the step's streams.
struct timeline_device {
  std::string kind;                                   // kernel, copy HtoD, copy DtoH, copy DtoD, copy, memset, sync
  std::uint32_t device = 0, context = 0, stream = 0;  // CUPTI's ids; stream UINT32_MAX: none (a sync)
  double begin_ms = 0, end_ms = 0;
  std::uint64_t bytes = 0;
  bool collective = false;  // a kernel of a collective (NCCL): its end is shared by the ranks in it
  std::string name;         // a kernel's name, where CUPTI gave one ("" otherwise)
};

struct timeline_step {
  std::uint32_t thread = 0;  // steptrace's number for the thread (0 is the first that recorded)
  std::uint64_t index = 0;   // the thread's steps before this one, warm-up and failed ones included
  double begin_ms = 0, end_ms = 0;
  double step_ms = 0;    // its length: the window less the time set aside inside it
  bool recent = false;   // among the thread's most recent steps
  bool slowest = false;  // among the thread's slowest counted steps
  bool warmup = false, failed = false;
  std::vector<timeline_span> phases;     // by start; a call still open at the step's end ends there
  std::uint32_t phases_dropped = 0;      // phase calls left out: past 256, the first 192 and the last 64 are kept
  std::vector<timeline_span> set_aside;  // set-aside spans inside its window
  bool device_known = false;             // its device records were read (else `device` is empty)
  std::vector<timeline_device> device;   // by start
  std::uint32_t device_dropped = 0;
};

struct timeline_set_aside {
  std::uint32_t thread = 0;
  timeline_span span;
};

struct timeline_view {
  std::uint32_t recent_per_thread = 0, slowest_per_thread = 0;  // the options it was kept with
  std::vector<timeline_step> steps;                             // by thread, then start
  std::vector<timeline_set_aside> set_aside;                    // the most recent set-aside spans of each thread
  std::uint64_t bytes = 0;                                      // what the recorder held when the summary was taken
};

// The whole run in at most 240 points, each the mean of `steps_per_point` consecutive counted
// steps (in the order the collector saw them end): for a chart of the phases over the run.
struct series_point {
  std::uint64_t first_step = 0, steps = 0;
  double step_ms = 0;            // mean
  std::vector<double> phase_ms;  // mean exclusive time, one per step_series::phases
  double rss_mb = -1;            // the process's resident memory at the point's last step; -1: unknown
  double set_aside_ms = 0;       // in all, time set aside (exclude) since the previous point's last step
};
struct step_series {
  std::uint64_t steps_per_point = 1;
  std::vector<std::string> phases;
  std::vector<series_point> points;
};

// The process's resident memory (RSS) sampled at step ends, at most every 50 ms.
struct host_memory_stats {
  double first_mb = 0, last_mb = 0, peak_mb = 0;  // MiB: first and last sample, and the highest
  std::uint64_t samples = 0;
};

}  // namespace steptrace
