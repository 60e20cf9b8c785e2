#include "profiler/op_cost.hpp"

#include <algorithm>
#include <cstdlib>

namespace steptrace::detail {
namespace {

// What an op's name says about how to cost it; its inputs' positions where they differ by op.
enum class rule : std::uint8_t {
  mm,
  addmm,
  bmm,
  baddbmm,
  matmul,
  linear,
  scaled_mm,
  mv,
  conv,           // conv1d/2d/3d, convolution, _convolution, conv_transpose*, backend convolutions
  conv_backward,  // convolution_backward
  attention,      // q, k, v: by layout
  attention_backward,
  binary,       // add, sub, mul, div: FLOPs = output elements (as torch counts them), bytes too
  elementwise,  // unary and the rest: bytes only
  copy,         // copy_(self, src): src read, self written
  norm,
};

struct conv_args {  // positions in the op's inputs (npos: not there)
  int stride, padding, dilation, transposed, groups;
  bool transposed_always;
};
constexpr int npos = -1;

struct named_rule {
  std::string_view name;
  rule r;
  conv_args conv{npos, npos, npos, npos, npos, false};
  // attention: the position of q (k and v follow), and whether the layout is [B, S, H, D];
  // conv_backward: the position of grad_output (the forward's input is the other of 0 and 1)
  int q = 0;
  bool seq_first = false;
};

// clang-format off
const named_rule rules[] = {
    {"aten::mm", rule::mm}, {"aten::addmm", rule::addmm}, {"aten::bmm", rule::bmm},
    {"aten::baddbmm", rule::baddbmm}, {"aten::matmul", rule::matmul}, {"aten::linear", rule::linear},
    {"aten::_scaled_mm", rule::scaled_mm}, {"aten::mv", rule::mv},
    // (input, weight, bias, stride, padding, dilation, groups)
    {"aten::conv1d", rule::conv, {3, 4, 5, npos, 6, false}},
    {"aten::conv2d", rule::conv, {3, 4, 5, npos, 6, false}},
    {"aten::conv3d", rule::conv, {3, 4, 5, npos, 6, false}},
    // (input, weight, bias, stride, padding, dilation, transposed, output_padding, groups, ...)
    {"aten::convolution", rule::conv, {3, 4, 5, 6, 8, false}},
    {"aten::_convolution", rule::conv, {3, 4, 5, 6, 8, false}},
    // (input, weight, bias, stride, padding, output_padding, groups, dilation)
    {"aten::conv_transpose1d", rule::conv, {3, 4, 7, npos, 6, true}},
    {"aten::conv_transpose2d", rule::conv, {3, 4, 7, npos, 6, true}},
    {"aten::conv_transpose3d", rule::conv, {3, 4, 7, npos, 6, true}},
    // (self, weight, padding, stride, dilation, groups, ...)
    {"aten::cudnn_convolution", rule::conv, {3, 2, 4, npos, 5, false}},
    // (self, weight, bias, padding, stride, dilation, groups, ...)
    {"aten::miopen_convolution", rule::conv, {4, 3, 5, npos, 6, false}},
    {"aten::mkldnn_convolution", rule::conv, {4, 3, 5, npos, 6, false}},
    // (grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed, output_padding, groups, output_mask)
    {"aten::convolution_backward", rule::conv_backward, {4, 5, 6, 7, 9, false}, 0},
    // (self, grad_output, weight, padding, stride, dilation, groups, benchmark, deterministic, allow_tf32, output_mask)
    {"aten::cudnn_convolution_backward", rule::conv_backward, {npos, npos, npos, npos, 6, false}, 1},
    {"aten::miopen_convolution_backward", rule::conv_backward, {npos, npos, npos, npos, 6, false}, 1},
    {"aten::scaled_dot_product_attention", rule::attention},
    {"aten::_scaled_dot_product_flash_attention", rule::attention},
    {"aten::_scaled_dot_product_efficient_attention", rule::attention},
    {"aten::_scaled_dot_product_cudnn_attention", rule::attention},
    {"aten::_scaled_dot_product_flash_attention_for_cpu", rule::attention},
    {"aten::_flash_attention_forward", rule::attention, {}, 0, true},
    {"aten::_efficient_attention_forward", rule::attention, {}, 0, true},
    // (grad_out, query, key, value, ...)
    {"aten::_scaled_dot_product_flash_attention_backward", rule::attention_backward, {}, 1},
    {"aten::_scaled_dot_product_efficient_attention_backward", rule::attention_backward, {}, 1},
    {"aten::_scaled_dot_product_cudnn_attention_backward", rule::attention_backward, {}, 1},
    {"aten::_scaled_dot_product_flash_attention_for_cpu_backward", rule::attention_backward, {}, 1},
    {"aten::_flash_attention_backward", rule::attention_backward, {}, 1, true},
    {"aten::_efficient_attention_backward", rule::attention_backward, {}, 1, true},
    {"aten::add", rule::binary}, {"aten::add_", rule::binary}, {"aten::sub", rule::binary},
    {"aten::sub_", rule::binary}, {"aten::mul", rule::binary}, {"aten::mul_", rule::binary},
    {"aten::div", rule::binary}, {"aten::div_", rule::binary},
    {"aten::relu", rule::elementwise}, {"aten::relu_", rule::elementwise}, {"aten::gelu", rule::elementwise},
    {"aten::silu", rule::elementwise}, {"aten::silu_", rule::elementwise}, {"aten::sigmoid", rule::elementwise},
    {"aten::tanh", rule::elementwise}, {"aten::exp", rule::elementwise}, {"aten::pow", rule::elementwise},
    {"aten::rsqrt", rule::elementwise}, {"aten::neg", rule::elementwise}, {"aten::where", rule::elementwise},
    {"aten::threshold_backward", rule::elementwise}, {"aten::gelu_backward", rule::elementwise},
    {"aten::silu_backward", rule::elementwise}, {"aten::sigmoid_backward", rule::elementwise},
    {"aten::tanh_backward", rule::elementwise}, {"aten::dropout", rule::elementwise},
    {"aten::native_dropout", rule::elementwise}, {"aten::copy_", rule::copy},
    {"aten::layer_norm", rule::norm}, {"aten::native_layer_norm", rule::norm},
    {"aten::native_layer_norm_backward", rule::norm}, {"aten::rms_norm", rule::norm},
    {"aten::_fused_rms_norm", rule::norm}, {"aten::batch_norm", rule::norm},
    {"aten::native_batch_norm", rule::norm}, {"aten::cudnn_batch_norm", rule::norm},
    {"aten::native_batch_norm_backward", rule::norm}, {"aten::cudnn_batch_norm_backward", rule::norm},
    {"aten::group_norm", rule::norm}, {"aten::native_group_norm", rule::norm},
    {"aten::softmax", rule::norm}, {"aten::_softmax", rule::norm}, {"aten::log_softmax", rule::norm},
    {"aten::_log_softmax", rule::norm}, {"aten::_softmax_backward_data", rule::norm},
    {"aten::_log_softmax_backward_data", rule::norm},
};
// clang-format on

const named_rule* rule_of(std::string_view name) {
  for (const named_rule& r : rules) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

double elements(const std::vector<std::int64_t>& shape) {
  double n = 1;
  for (std::int64_t d : shape) n *= static_cast<double>(d);
  return n;
}

double element_bytes(dtype_class d) {
  switch (d) {
    case dtype_class::fp64:
      return 8;
    case dtype_class::fp32:
    case dtype_class::tf32:
      return 4;
    case dtype_class::bf16:
    case dtype_class::fp16:
      return 2;
    case dtype_class::fp8:
    case dtype_class::int8:
      return 1;
    case dtype_class::unknown:
      break;
  }
  return 0;
}

// A recorded list of integers: "[2, 2]", "[1]", "3"; false for anything else ("same", "").
bool int_list(const std::string& text, std::vector<std::int64_t>& out) {
  out.clear();
  const char* p = text.c_str();
  while (*p == '[' || *p == ' ') ++p;
  while (*p != '\0' && *p != ']') {
    char* end = nullptr;
    const long long v = std::strtoll(p, &end, 10);
    if (end == p) return false;
    out.push_back(v);
    p = end;
    while (*p == ',' || *p == ' ') ++p;
  }
  return !out.empty();
}

class costing {
 public:
  explicit costing(const op_inputs& in) : in_(in) {}

  bool tensor(std::size_t i, std::size_t rank_at_least = 1) const {
    return i < in_.count && !in_.tensor_list[i] && in_.dims[i].size() >= rank_at_least &&
           std::all_of(in_.dims[i].begin(), in_.dims[i].end(), [](std::int64_t d) { return d >= 0; });
  }
  const std::vector<std::int64_t>& dims(std::size_t i) const { return in_.dims[i]; }
  dtype_class type(std::size_t i) const { return i < in_.types.size() ? dtype_of(in_.types[i]) : dtype_class::unknown; }
  const std::string* concrete(int i) const {
    return i >= 0 && static_cast<std::size_t>(i) < in_.concrete.size() ? &in_.concrete[static_cast<std::size_t>(i)]
                                                                       : nullptr;
  }
  // Bytes of the tensors read: every tensor input, in its own dtype.
  double input_bytes() const {
    double b = 0;
    for (std::size_t i = 0; i < in_.count; ++i) {
      if (tensor(i, 0) && !in_.dims[i].empty()) b += elements(in_.dims[i]) * element_bytes(type(i));
    }
    return b;
  }
  // The largest tensor input: an elementwise op's output is its size (broadcasting aside).
  std::size_t largest() const {
    std::size_t best = 0;
    double n = -1;
    for (std::size_t i = 0; i < in_.count; ++i) {
      if (tensor(i) && elements(in_.dims[i]) > n) n = elements(in_.dims[i]), best = i;
    }
    return best;
  }

 private:
  const op_inputs& in_;
};

// 2*m*k*n for [..., m, k] x [..., k, n] with broadcast batch dims; false when they do not fit.
bool matmul_cost(const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b, double& flops,
                 double& out_elems) {
  if (a.empty() || b.empty()) return false;
  const double k = static_cast<double>(a.back());
  const std::int64_t kb = b.size() == 1 ? b[0] : b[b.size() - 2];
  if (a.back() != kb) return false;
  const double m = a.size() >= 2 ? static_cast<double>(a[a.size() - 2]) : 1;
  const double n = b.size() >= 2 ? static_cast<double>(b.back()) : 1;
  // Batch: the leading dims broadcast against each other.
  const std::size_t ba = a.size() >= 2 ? a.size() - 2 : 0, bb = b.size() >= 2 ? b.size() - 2 : 0;
  double batch = 1;
  for (std::size_t i = 0; i < std::max(ba, bb); ++i) {
    const std::int64_t x = i < ba ? a[ba - 1 - i] : 1, y = i < bb ? b[bb - 1 - i] : 1;
    if (x != y && x != 1 && y != 1) return false;
    batch *= static_cast<double>(std::max(x, y));
  }
  // matmul folds a's leading dims into m when b is a matrix: the same count.
  flops = 2 * batch * m * k * n;
  out_elems = batch * m * n;
  return true;
}

// 2 * batch * prod(weight) * prod(spatial): the output's spatial extent for a convolution, the
// input's for a transposed one (whose weight is [C_in, C_out/groups, k...]).
bool conv_cost(const costing& c, const named_rule& r, std::size_t x, std::size_t w, double& flops, double& out_elems) {
  if (!c.tensor(x, 3) || !c.tensor(w, 3) || c.dims(x).size() != c.dims(w).size()) return false;
  const auto& in = c.dims(x);
  const auto& weight = c.dims(w);
  const std::size_t spatial = in.size() - 2;
  bool transposed = r.conv.transposed_always;
  if (const std::string* t = c.concrete(r.conv.transposed); t && !t->empty()) transposed = *t == "True" || *t == "1";
  double groups = 1;
  if (const std::string* g = c.concrete(r.conv.groups); g && !g->empty()) groups = std::max(1.0, std::atof(g->c_str()));
  double positions = 1;
  double out_channels = transposed ? static_cast<double>(weight[1]) * groups : static_cast<double>(weight[0]);
  if (transposed) {
    for (std::size_t i = 0; i < spatial; ++i) positions *= static_cast<double>(in[2 + i]);
  } else {
    const std::string* s = c.concrete(r.conv.stride);
    const std::string* p = c.concrete(r.conv.padding);
    const std::string* d = c.concrete(r.conv.dilation);
    std::vector<std::int64_t> stride, pad, dil;
    if (s == nullptr || p == nullptr || !int_list(*s, stride)) return false;  // strides not recorded
    const bool same = *p == "same", valid = *p == "valid";
    if (!same && !valid && !int_list(*p, pad)) return false;
    if (d == nullptr || !int_list(*d, dil)) dil.assign(spatial, 1);
    auto at = [](const std::vector<std::int64_t>& v, std::size_t i, std::int64_t none) {
      return v.empty() ? none : v.size() == 1 ? v[0] : i < v.size() ? v[i] : none;
    };
    for (std::size_t i = 0; i < spatial; ++i) {
      const std::int64_t size = in[2 + i], k = weight[2 + i], st = std::max<std::int64_t>(1, at(stride, i, 1));
      std::int64_t o = 0;
      if (same) {
        o = size;
      } else {
        const std::int64_t pd = valid ? 0 : at(pad, i, 0), dl = at(dil, i, 1);
        o = (size + 2 * pd - dl * (k - 1) - 1) / st + 1;
      }
      if (o <= 0) return false;
      positions *= static_cast<double>(o);
    }
  }
  flops = 2 * static_cast<double>(in[0]) * elements(weight) * positions;
  out_elems = static_cast<double>(in[0]) * out_channels * (transposed ? 0 : positions);
  return true;
}

}  // namespace

const char* op_kind_name(op_kind k) {
  switch (k) {
    case op_kind::gemm:
      return "gemm";
    case op_kind::conv:
      return "convolution";
    case op_kind::attention:
      return "attention";
    case op_kind::elementwise:
      return "elementwise";
    case op_kind::norm:
      return "normalisation";
    case op_kind::none:
      break;
  }
  return "";
}

dtype_class dtype_of(std::string_view t) {
  if (t == "float") return dtype_class::fp32;
  if (t == "c10::BFloat16") return dtype_class::bf16;
  if (t == "c10::Half") return dtype_class::fp16;
  if (t == "double") return dtype_class::fp64;
  if (t.substr(0, 14) == "c10::Float8_e4" || t.substr(0, 14) == "c10::Float8_e5") return dtype_class::fp8;
  if (t == "signed char" || t == "unsigned char") return dtype_class::int8;
  return dtype_class::unknown;
}

bool costed_op_name(std::string_view name) { return rule_of(name) != nullptr; }

op_cost cost_of(std::string_view name, const op_inputs& in) {
  op_cost out;
  const named_rule* r = rule_of(name);
  if (r == nullptr) return out;
  const costing c(in);
  double flops = 0, out_elems = 0;
  std::size_t first = 0;  // the input whose dtype is the op's
  switch (r->r) {
    case rule::mm:
    case rule::bmm:
    case rule::matmul:
    case rule::scaled_mm:
    case rule::mv:
      if (!c.tensor(0) || !c.tensor(1) || !matmul_cost(c.dims(0), c.dims(1), flops, out_elems)) return out;
      if ((r->r == rule::mm || r->r == rule::scaled_mm) && (c.dims(0).size() != 2 || c.dims(1).size() != 2)) return out;
      if (r->r == rule::bmm && (c.dims(0).size() != 3 || c.dims(1).size() != 3)) return out;
      out.kind = op_kind::gemm;
      break;
    case rule::addmm:
    case rule::baddbmm:
      if (!c.tensor(1) || !c.tensor(2) || !matmul_cost(c.dims(1), c.dims(2), flops, out_elems)) return out;
      out.kind = op_kind::gemm;
      first = 1;
      break;
    case rule::linear: {  // input [..., in], weight [out, in]
      if (!c.tensor(0) || !c.tensor(1, 2) || c.dims(1).size() != 2 || c.dims(0).back() != c.dims(1)[1]) return out;
      const double rows = elements(c.dims(0)) / static_cast<double>(std::max<std::int64_t>(1, c.dims(0).back()));
      flops = 2 * rows * static_cast<double>(c.dims(1)[1]) * static_cast<double>(c.dims(1)[0]);
      out_elems = rows * static_cast<double>(c.dims(1)[0]);
      out.kind = op_kind::gemm;
      break;
    }
    case rule::conv:
      if (!conv_cost(c, *r, 0, 1, flops, out_elems)) return out;
      out.kind = op_kind::conv;
      break;
    case rule::conv_backward: {  // as the forward, once for each gradient asked (output_mask)
      const std::size_t g = static_cast<std::size_t>(r->q), x = 1 - g;
      if (!c.tensor(g, 3) || !c.tensor(x, 3) || !c.tensor(2, 3)) return out;
      bool transposed = false;
      if (const std::string* t = c.concrete(r->conv.transposed); t && !t->empty()) transposed = *t == "True";
      // The forward's positions: its output's (the gradient's), or a transposed one's input's.
      const auto& at = c.dims(transposed ? x : g);
      const double spatial = elements(at) / static_cast<double>(std::max<std::int64_t>(1, at[0] * at[1]));
      const double once = 2 * static_cast<double>(c.dims(x)[0]) * elements(c.dims(2)) * spatial;
      int grads = 2;  // input and weight, unless output_mask ("[True, True, False]") says otherwise
      if (const std::string* m = c.concrete(10); m && m->find_first_of("TF") != std::string::npos) {
        grads = 0;
        std::size_t pos = 0;
        for (int i = 0; i < 2 && pos != std::string::npos; ++i) {
          pos = m->find_first_of("TF", pos);
          if (pos == std::string::npos) break;
          grads += (*m)[pos] == 'T' ? 1 : 0;
          pos = m->find(',', pos);
        }
      }
      flops = once * grads;
      out_elems = elements(c.dims(x)) + elements(c.dims(2));
      out.kind = op_kind::conv;
      first = x;
      break;
    }
    case rule::attention:
    case rule::attention_backward: {
      const std::size_t q = static_cast<std::size_t>(r->q);
      if (!c.tensor(q, 3) || !c.tensor(q + 1, 3) || !c.tensor(q + 2, 3)) return out;
      const auto &qd = c.dims(q), &kd = c.dims(q + 1), &vd = c.dims(q + 2);
      if (qd.size() != kd.size() || qd.size() != vd.size()) return out;
      double heads = 1, sq = 0, sk = 0;
      const double d = static_cast<double>(qd.back()), dv = static_cast<double>(vd.back());
      if (r->seq_first) {  // [B, S, H, D]
        if (qd.size() != 4) return out;
        heads = static_cast<double>(qd[0] * qd[2]);
        sq = static_cast<double>(qd[1]);
        sk = static_cast<double>(kd[1]);
      } else {  // [..., S, D]: the leading dims are batch and heads
        for (std::size_t i = 0; i + 2 < qd.size(); ++i) heads *= static_cast<double>(qd[i]);
        sq = static_cast<double>(qd[qd.size() - 2]);
        sk = static_cast<double>(kd[kd.size() - 2]);
      }
      // Q K^T and P V: 2 * heads * sq * sk * (d + dv); the backward's four products are twice that.
      flops = 2 * heads * sq * sk * (d + dv) * (r->r == rule::attention_backward ? 2 : 1);
      out_elems = elements(qd) / d * dv;
      out.kind = op_kind::attention;
      first = q;
      break;
    }
    case rule::binary:
    case rule::elementwise:
    case rule::norm: {
      first = c.largest();
      if (!c.tensor(first)) return out;
      out_elems = elements(c.dims(first));
      if (r->r == rule::binary) flops = out_elems;  // one operation an element, as torch counts them
      out.kind = r->r == rule::norm ? op_kind::norm : op_kind::elementwise;
      break;
    }
    case rule::copy:
      if (!c.tensor(0) || !c.tensor(1)) return out;
      out.kind = op_kind::elementwise;
      out_elems = elements(c.dims(0));
      out.bytes = elements(c.dims(1)) * element_bytes(c.type(1)) + out_elems * element_bytes(c.type(0));
      out.dtype = c.type(0);
      out.flops = 0;
      if (out.bytes <= 0) out.kind = op_kind::none;
      return out;
  }
  out.dtype = c.type(first);
  out.flops = in.flops_arg >= 0 ? in.flops_arg : flops;
  const double eb = element_bytes(out.dtype);
  // In-place ops write what they read: their output is their first input, counted once read.
  const bool in_place = !name.empty() && name.back() == '_';
  out.bytes = eb > 0 ? c.input_bytes() + (in_place ? 0 : out_elems * eb) : 0;
  if (out.flops <= 0 && out.bytes <= 0) out.kind = op_kind::none;  // nothing known to cost
  return out;
}

}  // namespace steptrace::detail
