// Internal (not public API): the ceiling's figures (steptrace/ceiling.hpp) from the ops' costs and
// times: FLOPs and bytes added up by op and dtype in bounded memory, then MFU, each op's place on
// the device's roofline and the gain of reaching it (docs/diagnosis.md, "The ceiling").
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "analysis/device_peaks.hpp"
#include "steptrace/ceiling.hpp"

namespace steptrace::detail {

class ceiling_table {
 public:
  static constexpr std::size_t max_ops = 4096;  // past it, "(other ops)"
  // One call of a costed op: its FLOPs and bytes (profiler/op_cost.hpp) and its kernels' time.
  void add(std::string_view op, const char* kind, dtype_class dtype, double flops, double bytes, std::uint64_t ns);
  // Every kernel's time in the counted steps, costed or not: what costed_share is of.
  void add_kernel_time(std::uint64_t ns) { kernel_ns_ += ns; }
  void merge(const ceiling_table& other);
  bool empty() const noexcept { return rows_.empty(); }
  // Per-step figures over `steps` counted steps of `step_ms` mean on the device `gpu` names;
  // `busy_share`: the device's busy share of the step, which bounds the gain.
  ceiling_stats stats(std::uint64_t steps, double step_ms, std::string_view gpu, double busy_share) const;

 private:
  struct entry {
    const char* kind = "";
    std::uint64_t calls = 0, ns = 0;
    double flops = 0, bytes = 0;
  };
  std::map<std::pair<std::string, dtype_class>, entry> rows_;
  std::uint64_t kernel_ns_ = 0;
};

// A live run's ceiling from its FLOPs a step, told (flops_per_step) or counted once
// (FlopCounterMode): model FLOP/s, and MFU against the device's peak for `dtype`.
ceiling_stats told_ceiling(double flops_per_step, dtype_class dtype, std::string flops_from, double step_ms,
                           std::string_view gpu);

// FLOPs or rates no device runs (MFU over 100%, a rate past max_tflops or max_gb_per_s) said in
// `impossible` with their cause; their MFU, rates and gain then 0, printed as no measurement.
// stats() and told_ceiling() apply it; so does a summary read back.
void refuse_impossible(ceiling_stats& c);

}  // namespace steptrace::detail
