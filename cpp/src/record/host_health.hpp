// Internal (not public API): what a rank's host says about its speed, read once a window from
// /proc and getrusage (cpp/src/report/README.md, "Node health"): CPU time the hypervisor stole, this
// process's involuntary context switches, and how long its main thread sat runnable with no core.
//
// Usage:
//   host_health_reader host;   // the first read starts the span
//   host_reading r = host.read();   // each figure over the span since the last read; -1: not read
#pragma once

#include <cstdint>

namespace steptrace::detail {

struct host_reading {
  double steal_share = -1;  // of every core's time, stolen
  double involuntary_per_s = -1;
  double main_wait_share = -1;  // of the span, the main thread runnable without a core
};

class host_health_reader {
 public:
  explicit host_health_reader(const char* stat_path = "/proc/stat") noexcept : stat_path_(stat_path) {}
  host_reading read() noexcept;

 private:
  const char* stat_path_;  // every core's ticks (a test's own file)
  bool started_ = false;
  std::uint64_t wall_ns_ = 0, cpu_total_ = 0, cpu_steal_ = 0, involuntary_ = 0, main_wait_ns_ = 0;
};

}  // namespace steptrace::detail
