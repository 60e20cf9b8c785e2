// Internal (not public API): a rank's node, read once a live window while a job runs
// (cpp/src/report/README.md, "Node health"): its GPU through NVML and its host from /proc, put
// together as the node_health a rank's row carries. Never on the hot path; NVML's absence is said
// once.
#pragma once

#include <cstdint>
#include <mutex>

#include "gpu/nvml.hpp"
#include "record/host_health.hpp"
#include "steptrace/ranks.hpp"

namespace steptrace::detail {

class node_reader {
 public:
  // `device`: the CUDA ordinal this rank uses (its local rank); `gpu`: the process has one.
  // Thread-safe: the run's last window (at exit) may be made while a periodic one is.
  node_health read(std::int64_t device, bool gpu);

 private:
  std::mutex mutex_;
  nvml_reader nvml_;
  host_health_reader host_;
  bool said_ = false;
};

}  // namespace steptrace::detail
