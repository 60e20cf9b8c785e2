#include "analysis/kernel_table.hpp"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "record/collective_kernels.hpp"

namespace steptrace::detail {
namespace {

bool has(std::string_view name, std::string_view part) { return name.find(part) != std::string_view::npos; }

// The kinds after "collective" (is_collective_kernel, first), first match wins: a flash-attention
// kernel is attention though it runs MMAs, a cuDNN implicit-GEMM convolution is a convolution.
struct kind_rule {
  const char* kind;
  std::initializer_list<std::string_view> parts;
};
const kind_rule kernel_kinds[] = {
    {"attention", {"flash", "fmha", "attention", "Attention", "_attn", "sdpa", "mha_"}},
    {"convolution", {"conv", "Conv", "cudnn::detail::", "dgrad", "wgrad", "winograd", "implicit_gemm"}},
    {"gemm", {"gemm", "Gemm", "GEMM", "gemv",  "cutlass", "cublas", "xmma",   "wgmma", "matmul",  "_mma",
              "hmma", "h884", "s884", "h1688", "s1688",   "h16816", "s16816", "i8816", "Kernel2", "Cijk_"}},
    {"reduction",
     {"reduce", "Reduce", "softmax", "Softmax", "norm", "Norm", "bn_fw", "bn_bw", "cub::", "scan", "argmax", "topk"}},
    {"elementwise",
     {"elementwise", "Elementwise", "vectorized", "unrolled", "pointwise", "triton_poi", "fill", "copy_kernel", "index",
      "Index", "cat_", "CatArray", "where", "cast"}},
};

// A table's entries, most time first (then by name: the order never depends on the hash).
template <class Entry>
std::vector<std::pair<const std::string*, const Entry*>> by_time(const std::unordered_map<std::string, Entry>& table) {
  std::vector<std::pair<const std::string*, const Entry*>> out;
  for (const auto& [name, e] : table) out.emplace_back(&name, &e);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.second->ns != b.second->ns ? a.second->ns > b.second->ns : *a.first < *b.first;
  });
  return out;
}

}  // namespace

std::string_view kernel_kind(std::string_view name) {
  if (is_collective_kernel(name)) return "collective";
  for (const kind_rule& rule : kernel_kinds) {
    for (std::string_view part : rule.parts) {
      if (has(name, part)) return rule.kind;
    }
  }
  return "other";
}

bool on_tensor_cores(std::string_view name) {
  for (std::string_view part : {"tensorop", "xmma", "wgmma", "hmma", "imma", "_mma", "h884", "s884", "h1688", "s1688",
                                "h16816", "s16816", "i8816", "tf32", "bf16_", "_bf16", "fp16_s"}) {
    if (has(name, part)) return true;
  }
  return false;
}

bool off_tensor_cores(std::string_view name) {
  for (std::string_view part : {"sgemm", "dgemm", "scudnn", "engine<float", "gemv"}) {
    if (has(name, part)) return true;
  }
  return false;
}

std::string short_kernel_name(std::string_view name, std::size_t width) {
  std::string out;
  int angle = 0;
  std::size_t angle_text = 0;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (c == '(' && angle == 0) {
      if (name.compare(i, 21, "(anonymous namespace)") == 0) {
        i += 20;
        if (name.compare(i + 1, 2, "::") == 0) i += 2;
        continue;
      }
      if (!out.empty()) break;  // the parameters; a name that opens with '(' is no C++ signature
    }
    if (c == '<') ++angle;
    if (angle > 0 && ++angle_text > width) {
      if (c == '>' && --angle == 0) out += "…>";
      continue;
    }
    if (c == '>') --angle;
    out += c;
  }
  if (out.rfind("void ", 0) == 0) out.erase(0, 5);
  return out;
}

std::string clip_name(std::string_view name, std::size_t width) {
  if (name.size() <= width) return std::string(name);
  std::size_t cut = width;
  while (cut > 0 && (static_cast<unsigned char>(name[cut]) & 0xC0) == 0x80) --cut;  // a continuation byte
  return std::string(name.substr(0, cut)) + "…";
}

std::size_t kernel_table::duration_bucket(std::uint64_t ns) noexcept {
  if (ns <= 1) return 0;
  const double b = std::log2(static_cast<double>(ns)) * 8;
  return std::min(duration_buckets - 1, static_cast<std::size_t>(b));
}

void kernel_table::duration_counts::add(std::size_t bucket, std::uint64_t calls) {
  const auto b = static_cast<std::uint32_t>(bucket);
  if (counts_.empty()) {
    first_ = b;
  } else if (b < first_) {  // widen downwards
    counts_.insert(counts_.begin(), first_ - b, 0);
    first_ = b;
  }
  if (b - first_ >= counts_.size()) counts_.resize(b - first_ + 1, 0);
  counts_[b - first_] += calls;
}

void kernel_table::duration_counts::merge(const duration_counts& other) {
  for (std::size_t i = 0; i < other.counts_.size(); ++i) {
    if (other.counts_[i] != 0) add(other.first_ + i, other.counts_[i]);
  }
}

std::size_t kernel_table::duration_counts::median_bucket(std::uint64_t calls) const {
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < counts_.size(); ++i) {
    seen += counts_[i];
    if (2 * seen >= calls) return first_ + i;
  }
  return counts_.empty() ? 0 : first_ + counts_.size() - 1;
}

kernel_table::kernel_entry& kernel_table::entry_for(std::string_view name, std::size_t calls) {
  std::string key(name);
  if (auto it = kernels_.find(key); it != kernels_.end()) return it->second;
  if (kernels_.size() >= max_names) {  // past the bound: one row, counted (it may take one slot more)
    calls_folded_ += calls;
    return kernels_[folded_kernels];
  }
  kernel_entry& e = kernels_[std::move(key)];
  e.kind = kernel_kind(name);
  e.tensor = on_tensor_cores(name);
  e.off = off_tensor_cores(name);
  return e;
}

kernel_table::op_entry& kernel_table::entry_for_op(std::string_view op) {
  const std::string name = op.empty() ? std::string("(no op)") : std::string(op);
  auto it = ops_.find(name);
  if (it == ops_.end())
    it = ops_.size() < max_ops ? ops_.emplace(name, op_entry{}).first : ops_.emplace(folded_ops, op_entry{}).first;
  return it->second;
}

void kernel_table::add_kernel(std::string_view name, std::string_view op, std::uint64_t ns, std::uint64_t exposed_ns) {
  add_kernels(name, op, &ns, 1);
  if (exposed_ns != 0) entry_for_op(op).collective_exposed_ns += exposed_ns;
}

void kernel_table::add_kernels(std::string_view name, std::string_view op, const std::uint64_t* durations,
                               std::size_t n) {
  if (n == 0) return;
  kernel_entry& e = entry_for(name, n);
  std::uint64_t ns = 0, short_calls = 0;
  for (std::size_t i = 0; i < n; ++i) {
    ns += durations[i];
    e.durations.add(duration_bucket(durations[i]), 1);
    short_calls += static_cast<double>(durations[i]) <= short_kernel_us * 1e3 ? 1 : 0;
  }
  e.calls += n;
  e.ns += ns;
  op_entry& o = entry_for_op(op);
  o.kernels += n;
  o.ns += ns;
  o.short_kernels += short_calls;
  const bool folded = e.kind.empty();  // the folded row's kind and tensor cores are each call's
  const std::string_view kind = folded ? kernel_kind(name) : e.kind;
  kinds_[std::string(kind)] += ns;
  if (kind == "collective") o.collective_ns += ns;
  if (kind == "gemm" || kind == "convolution") {
    matrix_ns_ += ns;
    if (folded ? on_tensor_cores(name) : e.tensor) {
      tensor_ns_ += ns;
    } else if (folded ? off_tensor_cores(name) : e.off) {
      off_ns_ += ns;
    }
  }
  total_ns_ += ns;
}

void kernel_table::add_transfer(bool memset, std::uint64_t ns) {
  kinds_[memset ? "memset" : "copy"] += ns;
  total_ns_ += ns;
}

void kernel_table::merge(const kernel_table& other) {
  for (const auto& [name, e] : other.kernels_) {
    const bool kept = kernels_.count(name) != 0 || kernels_.size() < max_names;
    kernel_entry& mine = kept ? kernels_[name] : kernels_[folded_kernels];
    if (!kept) calls_folded_ += e.calls;
    if (kept && name != folded_kernels) {
      mine.kind = e.kind;
      mine.tensor = e.tensor;
      mine.off = e.off;
    }
    mine.calls += e.calls;
    mine.ns += e.ns;
    mine.durations.merge(e.durations);
  }
  for (const auto& [name, e] : other.ops_) {
    op_entry& mine = ops_.count(name) != 0 || ops_.size() < max_ops ? ops_[name] : ops_[folded_ops];
    mine.kernels += e.kernels;
    mine.ns += e.ns;
    mine.short_kernels += e.short_kernels;
    mine.collective_ns += e.collective_ns;
    mine.collective_exposed_ns += e.collective_exposed_ns;
  }
  for (const auto& [kind, ns] : other.kinds_) kinds_[kind] += ns;
  total_ns_ += other.total_ns_;
  tensor_ns_ += other.tensor_ns_;
  off_ns_ += other.off_ns_;
  matrix_ns_ += other.matrix_ns_;
  calls_folded_ += other.calls_folded_;
}

kernel_stats kernel_table::stats(std::uint64_t steps) const {
  kernel_stats out;
  if (steps == 0 || total_ns_ == 0) return out;
  const double per_step = 1e-6 / static_cast<double>(steps), total = static_cast<double>(total_ns_);
  out.ms_per_step = total * per_step;
  const std::uint64_t named = tensor_ns_ + off_ns_;
  out.gemm_tensor_core_share = named ? static_cast<double>(tensor_ns_) / static_cast<double>(named) : 0.0;
  out.gemm_named_share = matrix_ns_ ? static_cast<double>(named) / static_cast<double>(matrix_ns_) : 0.0;
  out.names = kernels_.size() - kernels_.count(folded_kernels);
  out.calls_folded = calls_folded_;
  for (const auto& [name, e] : by_time(kernels_)) {
    if (out.kernels.size() == kernel_stats::max_rows) break;
    kernel_row row;
    row.name = *name;
    row.kind = *name == folded_kernels ? "other" : std::string(kernel_kind(*name));
    row.calls_per_step = static_cast<double>(e->calls) / static_cast<double>(steps);
    row.ms_per_step = static_cast<double>(e->ns) * per_step;
    row.busy_share = static_cast<double>(e->ns) / total;
    row.tensor_core = *name != folded_kernels && on_tensor_cores(*name);
    if (e->calls != 0) {  // the median call's bucket, at its geometric middle
      const auto middle = static_cast<double>(e->durations.median_bucket(e->calls));
      row.median_us = std::exp2((middle + 0.5) / 8) / 1e3;
    }
    out.kernels.push_back(std::move(row));
  }
  // The ops with the most time, and past them the few launching the most short kernels (little
  // time, many launches: LAUNCH-BOUND names them).
  auto op_out = [&](const std::string& name, const op_entry& e) {
    out.ops.push_back(
        {name, static_cast<double>(e.kernels) / static_cast<double>(steps), static_cast<double>(e.ns) * per_step,
         static_cast<double>(e.ns) / total, static_cast<double>(e.short_kernels) / static_cast<double>(steps),
         static_cast<double>(e.collective_ns) * per_step, static_cast<double>(e.collective_exposed_ns) * per_step});
  };
  const auto ops = by_time(ops_);
  for (std::size_t i = 0; i < ops.size() && i < kernel_stats::max_rows; ++i) op_out(*ops[i].first, *ops[i].second);
  if (ops.size() > kernel_stats::max_rows) {
    auto rest = std::vector(ops.begin() + kernel_stats::max_rows, ops.end());
    const std::size_t n = std::min<std::size_t>(kernel_stats::short_op_rows, rest.size());
    std::partial_sort(
        rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(n), rest.end(), [](const auto& a, const auto& b) {
          return a.second->short_kernels != b.second->short_kernels ? a.second->short_kernels > b.second->short_kernels
                                                                    : *a.first < *b.first;
        });
    for (std::size_t i = 0; i < n && rest[i].second->short_kernels > 0; ++i) op_out(*rest[i].first, *rest[i].second);
  }
  for (const auto& [kind, ns] : kinds_)
    out.kinds.push_back({kind, static_cast<double>(ns) * per_step, static_cast<double>(ns) / total});
  std::sort(out.kinds.begin(), out.kinds.end(), [](const kind_row& a, const kind_row& b) {
    return a.ms_per_step != b.ms_per_step ? a.ms_per_step > b.ms_per_step : a.kind < b.kind;
  });
  return out;
}

}  // namespace steptrace::detail
