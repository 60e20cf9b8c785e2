// Internal (not public API): the devices whose peaks steptrace knows, for MFU and each op's place
// on its roofline: dense peak FLOP/s per dtype and memory bandwidth, each row with its source
// (docs/diagnosis.md, "The ceiling"). Peaks are the vendors' datasheet figures without sparsity
// (a sheet that gives only the sparse figure is halved).
//
//   const device_peak* p = find_device("NVIDIA H100 80GB HBM3");   // the H100 SXM row
//   double bf16 = p ? peak_tflops(*p, dtype_class::bf16) : 0;      // 989.5
#pragma once

#include <string_view>
#include <vector>

namespace steptrace::detail {

enum class dtype_class : unsigned char { unknown, fp64, fp32, tf32, bf16, fp16, fp8, int8 };
const char* dtype_name(dtype_class d);           // "fp32", "bf16", ...; "?" for unknown
dtype_class dtype_named(std::string_view name);  // the inverse; unknown for anything else

struct device_peak {
  const char* name;  // as steptrace prints it: "H100 SXM"
  // Dense TFLOP/s (0: the device has no such unit); fp32 is what fp32 GEMMs run at (AMD's
  // matrix cores, NVIDIA's CUDA cores).
  double fp32, tf32, bf16, fp16, fp8;
  double memory_gb_s;  // HBM/GDDR bandwidth, GB/s (10^9 bytes)
  const char* source;
};

// Every row, in the order names are matched (the more specific first).
const std::vector<device_peak>& device_peaks();
// The row of a device as CUDA or a trace's deviceProperties names it ("NVIDIA H100 80GB HBM3",
// "AMD Instinct MI300X VF", "Tesla V100-SXM2-32GB"), or nullptr for one the table lacks.
const device_peak* find_device(std::string_view gpu_name);
// The device's dense peak for a dtype, TFLOP/s: a dtype without a unit of its own runs on the next
// wider one (tf32 on fp32's, bf16 on fp16's or fp32's, fp8 on bf16's); 0 for fp64, int8, unknown.
double peak_tflops(const device_peak& d, dtype_class t);

}  // namespace steptrace::detail
