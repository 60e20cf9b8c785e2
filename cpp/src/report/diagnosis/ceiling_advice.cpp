// COMPUTE-BOUND's ceiling (steptrace/ceiling.hpp): the MFU in the evidence, and the model fix that
// names the op with the most to gain and how, with the ceiling's gain (docs/diagnosis.md, "The
// ceiling").
#include <fmt/format.h>

#include <algorithm>

#include "analysis/kernel_table.hpp"
#include "report/diagnosis/diagnosis.hpp"
#include "report/diagnosis/gains.hpp"

namespace steptrace::detail {
namespace {

// How the op with the most to gain gets there, by what holds it below its roof.
std::string fix_for(const ceiling_stats& c, const ceiling_row& r) {
  const std::string op = fmt::format("`{}`", clip_name(r.op));
  if (r.to_half && c.half_dtype == "fp16") {  // no bf16 or TF32 units (V100, T4)
    return fmt::format(
        "move fp32 matmuls and convolutions to fp16 (torch.autocast(\"cuda\", dtype=torch.float16) "
        "with a GradScaler): {} runs fp32 at {:.1f} TFLOP/s, {:.0f}% of its roof, and the {} has "
        "fp16 tensor cores only",
        op, r.tflops, 100 * r.roof_share, c.device);
  }
  if (r.to_half) {
    return fmt::format(
        "move fp32 matmuls, convolutions and attention to bf16 (torch.autocast(\"cuda\", "
        "dtype=torch.bfloat16)), or at least TF32 (torch.backends.cuda.matmul.allow_tf32 = True): {} "
        "runs fp32 at {:.1f} TFLOP/s, {:.0f}% of its roof",
        op, r.tflops, 100 * r.roof_share);
  }
  if (r.kind == "attention") {
    return fmt::format(
        "{} reaches {:.0f}% of its {} roof on the {}: a fused attention backend (flash or "
        "memory-efficient: torch.nn.attention.sdpa_kernel), bf16 inputs, head dimensions a multiple "
        "of 64",
        op, 100 * r.roof_share, r.bound, c.device);
  }
  if (r.bound == "memory" && (r.kind == "gemm" || r.kind == "convolution")) {
    return fmt::format(
        "{} is too small to use the {}'s compute: {:.0f} GB/s, {:.0f}% of its bandwidth; batch the "
        "small matmuls (a larger batch, torch.bmm over a loop), or fuse them with torch.compile",
        op, c.device, r.gb_per_s, 100 * r.roof_share);
  }
  if (r.bound == "memory") {
    return fmt::format(
        "fuse the memory-bound ops (torch.compile; fused norms, activations and optimizers): {} "
        "moves {:.0f} GB/s, {:.0f}% of the {}'s bandwidth, one read and one write a fused chain needs",
        op, r.gb_per_s, 100 * r.roof_share, c.device);
  }
  return fmt::format(
      "{} reaches {:.0f}% of the {}'s {} peak ({:.1f} TFLOP/s): larger, better-shaped matmuls "
      "(dimensions multiples of 64, a larger batch), torch.compile(mode=\"max-autotune\")",
      op, 100 * r.roof_share, c.device, r.dtype, r.tflops);
}

}  // namespace

void ceiling_advice(const summary& s, const diagnosis_thresholds& t, diagnosis& d) {
  if (d.label != "COMPUTE-BOUND" || !s.ceiling) return;
  const ceiling_stats& c = *s.ceiling;
  if (c.mfu > 0) {
    d.evidence += fmt::format(" MFU is {:.1f}% on the {} ({:.1f} TFLOP/s{}).", 100 * c.mfu, c.device, c.tflops,
                              c.costed_share > 0 && c.costed_share < 0.95 ? ", a floor: some ops are not costed" : "");
  }
  if (c.gain < t.ceiling_min_gain || c.ops.empty()) return;
  const auto best = std::max_element(c.ops.begin(), c.ops.end(), [](const ceiling_row& a, const ceiling_row& b) {
    return a.gain_ms_per_step < b.gain_ms_per_step;
  });
  if (best->gain_ms_per_step <= 0) return;
  const std::string fix = fix_for(c, *best) + "; the bound assumes " + c.gain_assumption + gain_words(c.gain);
  // In place of the general model advice, where the label gave it.
  const auto general = std::find_if(d.advice.begin(), d.advice.end(), [](const std::string& a) {
    return a.find("speed up the model") != std::string::npos;
  });
  if (general != d.advice.end()) {
    *general = fix;
  } else {
    d.advice.insert(d.advice.begin() + std::min<std::size_t>(1, d.advice.size()), fix);
  }
  d.gains.emplace_back("ceiling", c.gain);
  std::stable_sort(d.gains.begin(), d.gains.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
}

}  // namespace steptrace::detail
