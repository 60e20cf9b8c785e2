// The ceiling in words: the table's `ceiling` lines and `steptrace show --kernels`'s roofline
// rows (steptrace/ceiling.hpp; docs/diagnosis.md, "The ceiling").
#include <fmt/format.h>

#include <cstdlib>

#include "analysis/kernel_table.hpp"
#include "base/utf8.hpp"
#include "report/diagnosis/gains.hpp"
#include "report/report.hpp"

namespace steptrace::detail {
namespace {

constexpr std::size_t shown_in_table = 3;  // the table's top ops; --kernels shows them all

// "MFU 41.2% on the H100 SXM (bf16 peak 989.5 TFLOP/s)", or why there is none.
std::string mfu_words(const ceiling_stats& c) {
  if (!c.impossible.empty()) return "no MFU: the FLOPs are impossible: " + c.impossible;
  if (c.device.empty()) {
    return c.gpu.empty() ? "no MFU: no device named"
                         : fmt::format("no MFU: steptrace's peaks table lacks the {}", c.gpu);
  }
  if (c.mfu <= 0) return fmt::format("no MFU: no FLOPs at a dtype with a peak on the {}", c.device);
  return fmt::format("MFU {:.1f}% on the {} ({})", 100 * c.mfu, c.device,
                     c.peak_tflops > 0 ? fmt::format("{} peak {:g} TFLOP/s", c.peak_dtype, c.peak_tflops)
                                       : std::string("mixed dtypes, each at its own peak"));
}

// "; the ops costed hold 79% of kernel time (the rest has no recorded shapes: MFU is a floor)"
std::string costed_words(const ceiling_stats& c) {
  if (c.costed_share <= 0) return {};
  return fmt::format("; the ops costed hold {:.0f}% of kernel time{}", 100 * c.costed_share,
                     c.costed_share >= 0.95 ? ""
                     : c.mfu > 0            ? " (the rest is not costed: MFU is a floor)"
                                            : " (the rest is not costed)");
}

const char* from_words(const ceiling_stats& c) {
  return c.flops_from == "shapes"            ? "from recorded shapes"
         : c.flops_from == "FlopCounterMode" ? "counted once by FlopCounterMode"
                                             : "as told (flops_per_step)";
}

// "6.01 TFLOP", "812 GFLOP", "3.2 MFLOP"
std::string flop_words(double gflop) {
  if (gflop >= 1000) return fmt::format("{:.3g} TFLOP", gflop / 1000);
  if (gflop >= 1) return fmt::format("{:.3g} GFLOP", gflop);
  return fmt::format("{:.3g} MFLOP", gflop * 1000);
}

// "the bound: up to 7.5% shorter steps, with each op reaching 60% of its roofline on the H100 SXM"
std::string bound_words(const ceiling_stats& c) {
  std::string words = gain_words(c.gain);  // " (up to 7.5% shorter steps)"
  words = words.substr(2, words.size() - 3);
  return fmt::format("the bound: {}, with {}", words, c.gain_assumption);
}

std::string op_words(const ceiling_row& r) {
  std::string rate = r.gflop_per_step > 0 && r.bound != "memory" ? fmt::format("{:.1f} TFLOP/s", r.tflops)
                                                                 : fmt::format("{:.0f} GB/s", r.gb_per_s);
  std::string roof = r.bound.empty() ? "" : fmt::format(", {:.0f}% of its {} roof", 100 * r.roof_share, r.bound);
  return fmt::format("{} {} ms a step, {}{}", r.dtype, format_ms(r.ms_per_step), rate, roof);
}

// A figure that fits its column less the space before it, else in three significant figures.
std::string column(const std::string& figure, std::size_t width) {
  if (figure.size() < width) return figure;
  const double v = std::strtod(figure.c_str(), nullptr);
  return fmt::format("{:.3g}", v);
}

// "12.3 TFLOP/s, 812 GFLOP a step", or none of it when the FLOPs are impossible (mfu_words says why).
std::string rate_words(const ceiling_stats& c) {
  return c.impossible.empty() ? fmt::format("{:.1f} TFLOP/s, {} a step", c.tflops, flop_words(c.gflop_per_step))
                              : std::string("the FLOPs");
}

}  // namespace

void ceiling_lines(const ceiling_stats& c, const std::function<void(std::string)>& line) {
  line(fmt::format("{:<11}{}: {} {}{}", "ceiling", mfu_words(c), rate_words(c), from_words(c), costed_words(c)));
  for (std::size_t i = 0; i < c.ops.size() && i < shown_in_table; ++i) {
    line(fmt::format("{:<11}{}: {}", "", clip_name(c.ops[i].op), op_words(c.ops[i])));
  }
  if (c.gain > 0) {
    line(fmt::format("{:<11}{}", "", bound_words(c)));
  }
}

std::string ceiling_table_text(const ceiling_stats& c) {
  fmt::memory_buffer out;
  auto line = [&](const std::string& text) { fmt::format_to(std::back_inserter(out), "{}\n", escaped_controls(text)); };
  line("");
  line(fmt::format("the ceiling: {}; {} {}", mfu_words(c), rate_words(c), from_words(c)));
  line(fmt::format("{:>11}{:>10}{:>12}{:>10}{:>12}{:>10}  {:<8}{:<6}{:<14}{}", "ms/step", "calls", "GFLOP/step",
                   "TFLOP/s", "MB/step", "GB/s", "bound", "roof", "kind", "op (dtype)"));
  for (const ceiling_row& r : c.ops) {
    // each figure in its column whatever its size (a crafted trace's 1e40 would run two together)
    line(fmt::format("{:>11}{:>10}{:>12.3g}{:>10}{:>12.3g}{:>10}  {:<8}{:<6}{:<14}{} ({})",
                     column(format_ms(r.ms_per_step), 11), column(fmt::format("{:.1f}", r.calls_per_step), 10),
                     r.gflop_per_step, column(fmt::format("{:.1f}", r.tflops), 10), r.mb_per_step,
                     column(fmt::format("{:.0f}", r.gb_per_s), 10), r.bound,
                     r.bound.empty() ? "" : fmt::format("{:.0f}%", 100 * r.roof_share), r.kind, clip_name(r.op, 60),
                     r.dtype));
  }
  if (c.gain > 0) line(bound_words(c));
  return fmt::to_string(out);
}

}  // namespace steptrace::detail
