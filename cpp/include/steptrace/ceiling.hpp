// steptrace/ceiling.hpp — how far the busy device is from its peak: FLOPs, MFU, each op's place on
// the roofline, and what reaching it would save.
//
//   if (const auto& c = tracer.summary().ceiling; c && c->mfu > 0)
//     std::cerr << "MFU " << 100 * c->mfu << "% of " << c->device << "\n";  // "MFU 41% of H100 SXM"
//
// The formulas, the peaks table's sources and the bound's assumptions: docs/diagnosis.md.
#pragma once

#include <string>
#include <vector>

namespace steptrace {

// The ceiling (docs/diagnosis.md, "The ceiling"): what the ops achieved against the device's peak,
// from a trace's recorded shapes (record_shapes) or `flops` args, or live from flops_per_step.
struct ceiling_row {            // one op by name and dtype, over the counted steps
  std::string op, kind, dtype;  // kind: gemm, convolution, attention, elementwise, normalisation
  double calls_per_step = 0;
  double ms_per_step = 0;  // its kernels' device time (a trace without a device: the op's host time)
  double gflop_per_step = 0, mb_per_step = 0;  // FLOPs and bytes it must move (MB: 10^6 bytes)
  double tflops = 0, gb_per_s = 0;             // achieved, over that time
  // On the device's roofline: "compute" or "memory" by arithmetic intensity against the device's
  // ridge for the dtype, and the share of that roof reached (peak FLOP/s or bandwidth); "" and 0
  // for a device the peaks table lacks.
  std::string bound;
  double roof_share = 0;
  // The step time saved if it reached ceiling_target_share of its roof (fp32 matrix work in half
  // precision: half_dtype), and whether that counts moving it there.
  double gain_ms_per_step = 0;
  bool to_half = false;
};
struct ceiling_stats {
  std::string gpu;         // as the trace or CUDA names it; "" unknown
  std::string device;      // its row in the peaks table ("H100 SXM"); "" when the table lacks it
  std::string flops_from;  // "shapes", "flops_per_step", "FlopCounterMode"
  double gflop_per_step = 0;
  double tflops = 0;  // model FLOP/s: the FLOPs over the mean step time
  // Model FLOPs utilisation: each FLOP at the peak of its dtype, over the step time; 0 when the
  // device is unknown. peak_dtype: the dtype of the FLOPs ("mixed" when several), peak_tflops its
  // peak (0 when mixed).
  double mfu = 0;
  std::string peak_dtype;
  double peak_tflops = 0;
  double costed_share = 0;  // of the kernels' time, that of the ops costed (rows)
  // The bound: the share of step time saved if each op below its roofline reached
  // ceiling_target_share of it (fp32 matmuls, convolutions and attention in bf16), and the
  // assumption in words; 0 and "" without a known device.
  double gain = 0;
  std::string gain_assumption;
  std::string half_dtype;        // the device's half precision for fp32 matrix work: "bf16", or "fp16" (V100, T4)
  std::vector<ceiling_row> ops;  // most time first, at most max_rows
  // Why these FLOPs are none a device can run (MFU over 100%, a rate past max_tflops): then mfu,
  // tflops, gflop_per_step and gain are 0 (an impossible op's figures too) and no figure of them
  // is printed as a measurement; "" when they can be.
  std::string impossible;
  static constexpr std::size_t max_rows = 20;
  static constexpr double max_tflops = 1e5;    // 100 PFLOP/s: past every device's peak at any dtype
  static constexpr double max_gb_per_s = 1e5;  // 100 TB/s: past every device's memory
  static constexpr double ceiling_target_share = 0.6;
};

}  // namespace steptrace
