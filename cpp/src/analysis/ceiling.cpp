#include "analysis/ceiling.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "analysis/kernel_table.hpp"

namespace steptrace::detail {
namespace {

// The gain's words name fp32 work moved to half precision when it makes this share of the gain or more.
constexpr double half_words_share = 0.1;

// Where fp32 matrix work moves: bf16's units, else fp16's (V100, T4: no bf16 or TF32 units).
double half_peak(const device_peak& d) { return d.bf16 > 0 ? d.bf16 : d.fp16; }
// A dtype holding this share of the FLOPs names them ("bf16"); MFU still weighs each at its own peak.
constexpr double single_dtype_share = 0.95;

bool matrix_kind(std::string_view kind) { return kind == "gemm" || kind == "convolution" || kind == "attention"; }

// The peak an op's FLOPs run at: its dtype's; an fp32 convolution's is TF32's (cuDNN's default),
// and an fp32 matmul's too once it runs faster than fp32's units can (TF32 allowed).
double own_peak(const device_peak& d, std::string_view kind, dtype_class t, double tflops) {
  if (t == dtype_class::fp32 && matrix_kind(kind) && (kind == "convolution" || tflops > d.fp32)) {
    return peak_tflops(d, dtype_class::tf32);
  }
  return peak_tflops(d, t);
}

}  // namespace

void ceiling_table::add(std::string_view op, const char* kind, dtype_class dtype, double flops, double bytes,
                        std::uint64_t ns) {
  auto it = rows_.find({std::string(op), dtype});
  if (it == rows_.end()) {
    if (rows_.size() >= max_ops) {
      it = rows_.try_emplace({"(other ops)", dtype_class::unknown}).first;
    } else {
      it = rows_.try_emplace({std::string(op), dtype}).first;
    }
    if (it->second.calls == 0) it->second.kind = kind;
  }
  entry& e = it->second;
  ++e.calls;
  e.ns += ns;
  e.flops += flops;
  e.bytes += bytes;
}

void ceiling_table::merge(const ceiling_table& other) {
  for (const auto& [key, o] : other.rows_) {
    entry& e = rows_[key];
    if (e.calls == 0) e.kind = o.kind;
    e.calls += o.calls;
    e.ns += o.ns;
    e.flops += o.flops;
    e.bytes += o.bytes;
  }
  kernel_ns_ += other.kernel_ns_;
}

ceiling_stats ceiling_table::stats(std::uint64_t steps, double step_ms, std::string_view gpu, double busy_share) const {
  ceiling_stats out;
  out.gpu = std::string(gpu);
  out.flops_from = "shapes";
  const device_peak* dev = find_device(gpu);
  if (dev) {
    out.device = dev->name;
    out.half_dtype = dev->bf16 > 0 ? "bf16" : dev->fp16 > 0 ? "fp16" : "";
  }
  if (steps == 0 || step_ms <= 0) return out;
  const double n = static_cast<double>(steps);
  double flops = 0, seconds_at_peak = 0, costed_ns = 0, saved_ms = 0, saved_in_half_ms = 0;
  std::map<dtype_class, double> flops_by_dtype;
  for (const auto& [key, e] : rows_) {
    ceiling_row r;
    r.op = key.first;
    r.kind = e.kind;
    r.dtype = dtype_name(key.second);
    r.calls_per_step = static_cast<double>(e.calls) / n;
    r.ms_per_step = static_cast<double>(e.ns) / 1e6 / n;
    r.gflop_per_step = e.flops / 1e9 / n;
    r.mb_per_step = e.bytes / 1e6 / n;
    r.tflops = e.ns > 0 ? e.flops / static_cast<double>(e.ns) / 1e3 : 0;
    r.gb_per_s = e.ns > 0 ? e.bytes / static_cast<double>(e.ns) : 0;
    flops += e.flops;
    costed_ns += static_cast<double>(e.ns);
    if (e.flops > 0) flops_by_dtype[key.second] += e.flops;
    if (dev) {
      const double peak = own_peak(*dev, r.kind, key.second, r.tflops);
      const double bw = dev->memory_gb_s;
      if (e.flops > 0 && peak > 0) seconds_at_peak += e.flops / (peak * 1e12);
      const double intensity = e.bytes > 0 ? e.flops / e.bytes : INFINITY;
      const bool compute = peak > 0 && e.flops > 0 && intensity >= peak * 1e12 / (bw * 1e9);
      if (peak > 0 || e.bytes > 0) {
        r.bound = compute ? "compute" : "memory";
        r.roof_share = compute ? r.tflops / peak : r.gb_per_s / bw;
      }
      // The gain: this op at ceiling_target_share of its roof, fp32 matrix work in bf16.
      const double half = half_peak(*dev);
      const bool to_half = key.second == dtype_class::fp32 && matrix_kind(r.kind) && half > 0;
      const double target_peak = to_half ? half : peak;
      double roof_s = e.bytes > 0 ? e.bytes / (bw * 1e9) : 0;
      if (e.flops > 0 && target_peak > 0) roof_s = std::max(roof_s, e.flops / (target_peak * 1e12));
      if (roof_s > 0 && (target_peak > 0 || e.flops == 0)) {
        const double saved = static_cast<double>(e.ns) / 1e6 - 1e3 * roof_s / ceiling_stats::ceiling_target_share;
        if (saved > 0) {
          saved_ms += saved;
          if (to_half) saved_in_half_ms += saved;
          r.gain_ms_per_step = saved / n;
          r.to_half = to_half;
        }
      }
    }
    out.ops.push_back(std::move(r));
  }
  std::sort(out.ops.begin(), out.ops.end(), [](const ceiling_row& a, const ceiling_row& b) {
    return a.ms_per_step != b.ms_per_step ? a.ms_per_step > b.ms_per_step : a.gflop_per_step > b.gflop_per_step;
  });
  if (out.ops.size() > ceiling_stats::max_rows) out.ops.resize(ceiling_stats::max_rows);
  out.gflop_per_step = flops / 1e9 / n;
  out.tflops = out.gflop_per_step / step_ms;  // GFLOP per ms is TFLOP/s
  out.costed_share = kernel_ns_ > 0 ? std::min(1.0, costed_ns / static_cast<double>(kernel_ns_)) : 0;
  // The FLOPs' dtype: one that holds nearly all of them (single_dtype_share), else "mixed".
  dtype_class only = dtype_class::unknown;
  double most = 0;
  for (const auto& [d, f] : flops_by_dtype) {
    if (f > most) most = f, only = d;
  }
  const bool mixed = flops > 0 && most < single_dtype_share * flops;
  out.peak_dtype = only == dtype_class::unknown ? "" : mixed ? "mixed" : dtype_name(only);
  if (dev) {
    out.mfu = seconds_at_peak * 1e3 / n / step_ms;
    out.peak_tflops = mixed || only == dtype_class::unknown ? 0 : peak_tflops(*dev, only);
    out.gain = std::min(saved_ms / n / step_ms, busy_share);
    if (out.gain > 0) {
      out.gain_assumption = fmt::format("each op reaching {:.0f}% of its roofline on the {}",
                                        100 * ceiling_stats::ceiling_target_share, dev->name);
      if (saved_in_half_ms >= half_words_share * saved_ms) {  // said where it is a real part of the gain
        out.gain_assumption +=
            fmt::format(", fp32 matmuls, convolutions and attention in {} ({:g} against {:g} TFLOP/s)", out.half_dtype,
                        half_peak(*dev), dev->fp32);
      }
    }
  }
  refuse_impossible(out);
  return out;
}

void refuse_impossible(ceiling_stats& c) {
  const auto past = std::find_if(c.ops.begin(), c.ops.end(), [](const ceiling_row& r) {
    return !(r.tflops <= ceiling_stats::max_tflops) || !(r.gb_per_s <= ceiling_stats::max_gb_per_s);
  });
  const char* cause = c.flops_from == "shapes"            ? "a shape recorded wrong, or crafted"
                      : c.flops_from == "FlopCounterMode" ? "FlopCounterMode's count"
                                                          : "flops_per_step is wrong";
  if (past != c.ops.end()) {
    c.impossible = fmt::format("`{}` would run at {:.3g} TFLOP/s and {:.3g} GB/s, which no device does ({})",
                               clip_name(past->op), past->tflops, past->gb_per_s, cause);
  } else if (!(c.tflops <= ceiling_stats::max_tflops)) {
    c.impossible = fmt::format("{:.3g} GFLOP a step would run at {:.3g} TFLOP/s, which no device does ({})",
                               c.gflop_per_step, c.tflops, cause);
  } else if (!(c.mfu <= 1)) {
    c.impossible = fmt::format("{:.3g} GFLOP a step would run at {:.3g}% of the {}'s peak, more than it can ({})",
                               c.gflop_per_step, 100 * c.mfu, c.device, cause);
  } else {
    return;
  }
  c.mfu = c.tflops = c.gain = c.gflop_per_step = 0;  // the figures are in the words, as the cause's
  c.gain_assumption.clear();
  for (ceiling_row& r : c.ops) {
    if (!(r.tflops <= ceiling_stats::max_tflops) || !(r.gb_per_s <= ceiling_stats::max_gb_per_s)) {
      r.tflops = r.gb_per_s = r.roof_share = r.gain_ms_per_step = r.gflop_per_step = r.mb_per_step = 0;
      r.bound.clear();
    }
  }
}

ceiling_stats told_ceiling(double flops_per_step, dtype_class dtype, std::string flops_from, double step_ms,
                           std::string_view gpu) {
  ceiling_stats out;
  out.gpu = std::string(gpu);
  out.flops_from = std::move(flops_from);
  out.gflop_per_step = flops_per_step / 1e9;
  out.peak_dtype = dtype_name(dtype);
  if (step_ms > 0) out.tflops = out.gflop_per_step / step_ms;
  if (const device_peak* dev = find_device(gpu)) {
    out.device = dev->name;
    out.peak_tflops = peak_tflops(*dev, dtype);
    if (out.peak_tflops > 0) out.mfu = out.tflops / out.peak_tflops;
  }
  refuse_impossible(out);
  return out;
}

}  // namespace steptrace::detail
