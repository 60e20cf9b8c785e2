// The device's time by kernel, op and kind (gpu_stats::kernels): its JSON, its lines in the
// table's device block, and the full table (summary::kernels_table, `steptrace show --kernels`).
#include <fmt/format.h>

#include <stdexcept>

#include "analysis/kernel_table.hpp"
#include "base/utf8.hpp"
#include "report/json/json_fields.hpp"
#include "report/report.hpp"

namespace steptrace {
namespace detail {
namespace {

constexpr std::size_t shown_in_table = 5;  // the device block's top kernels and ops

std::string percent(double share) { return fmt::format("{:.1f}%", 100 * share); }

// "; 62% of GEMM and convolution time on tensor cores (of the 80% whose kernel names tell)"
std::string tensor_core_words(const kernel_stats& k) {
  return fmt::format("; {} of GEMM and convolution time on tensor cores{}", percent(k.gemm_tensor_core_share),
                     k.gemm_named_share < 0.995
                         ? fmt::format(" (of the {} whose kernel names tell)", percent(k.gemm_named_share))
                         : std::string());
}

bool has_matrix_time(const kernel_stats& k) {
  for (const kind_row& r : k.kinds) {
    if ((r.kind == "gemm" || r.kind == "convolution") && r.ms_per_step > 0) return true;
  }
  return false;
}

template <class Rows, class Read>
void rows_from(const json_doc& j, const char* key, Rows& out, Read&& read) {
  const json_doc& rows = j.at(key);
  if (!rows.is_array() || rows.size() > kernel_stats::max_rows) {
    throw std::invalid_argument(
        fmt::format("\"kernels.{}\" is not a list of at most {} rows", key, kernel_stats::max_rows));
  }
  for (const json_doc& r : rows) out.push_back(read(r));
}

}  // namespace

json_doc kernels_json(const kernel_stats& k) {
  json_doc kernels = json_doc::array(), ops = json_doc::array(), kinds = json_doc::array();
  for (const kernel_row& r : k.kernels) {
    kernels.push_back({{"name", r.name},
                       {"kind", r.kind},
                       {"calls_per_step", r.calls_per_step},
                       {"ms_per_step", r.ms_per_step},
                       {"busy_share", r.busy_share},
                       {"median_us", r.median_us},
                       {"tensor_core", r.tensor_core}});
  }
  for (const op_row& r : k.ops) {
    ops.push_back({{"name", r.name},
                   {"kernels_per_step", r.kernels_per_step},
                   {"ms_per_step", r.ms_per_step},
                   {"busy_share", r.busy_share},
                   {"short_kernels_per_step", r.short_kernels_per_step},
                   {"collective_ms_per_step", r.collective_ms_per_step},
                   {"collective_exposed_ms_per_step", r.collective_exposed_ms_per_step}});
  }
  for (const kind_row& r : k.kinds)
    kinds.push_back({{"kind", r.kind}, {"ms_per_step", r.ms_per_step}, {"busy_share", r.busy_share}});
  return {{"ms_per_step", k.ms_per_step},
          {"gemm_tensor_core_share", k.gemm_tensor_core_share},
          {"gemm_named_share", k.gemm_named_share},
          {"names", k.names},
          {"calls_folded", k.calls_folded},
          {"kernels", kernels},
          {"ops", ops},
          {"kinds", kinds}};
}

kernel_stats kernels_from(const json_doc& j) {
  kernel_stats k;
  k.ms_per_step = number_at(j, "ms_per_step");
  k.gemm_tensor_core_share = number_at(j, "gemm_tensor_core_share");
  k.gemm_named_share = number_at(j, "gemm_named_share");
  k.names = count_at(j, "names");
  k.calls_folded = count_at(j, "calls_folded");
  rows_from(j, "kernels", k.kernels, [](const json_doc& r) {
    return kernel_row{r.at("name").get<std::string>(), r.at("kind").get<std::string>(), number_at(r, "calls_per_step"),
                      number_at(r, "ms_per_step"),     number_at(r, "busy_share"),      number_at(r, "median_us"),
                      r.at("tensor_core").get<bool>()};
  });
  rows_from(j, "ops", k.ops, [](const json_doc& r) {
    // short_kernels_per_step and the collective times came later: a summary written before them reads 0.
    auto later = [&r](const char* key) { return r.contains(key) ? number_at(r, key) : 0; };
    return op_row{r.at("name").get<std::string>(),
                  number_at(r, "kernels_per_step"),
                  number_at(r, "ms_per_step"),
                  number_at(r, "busy_share"),
                  later("short_kernels_per_step"),
                  later("collective_ms_per_step"),
                  later("collective_exposed_ms_per_step")};
  });
  rows_from(j, "kinds", k.kinds, [](const json_doc& r) {
    return kind_row{r.at("kind").get<std::string>(), number_at(r, "ms_per_step"), number_at(r, "busy_share")};
  });
  return k;
}

void kernel_lines(const kernel_stats& k, const std::function<void(std::string)>& line) {
  line(fmt::format(
      "{:<11}by kernel, per step, of {} ms of kernels, copies and memsets (`steptrace show --kernels`: all):", "",
      format_ms(k.ms_per_step)));
  for (std::size_t i = 0; i < k.kernels.size() && i < shown_in_table; ++i) {
    const kernel_row& r = k.kernels[i];
    line(fmt::format("{:<11}{:>6}  {:>9} ms  {:>7.1f} calls  {:<12}{}{}", "", percent(r.busy_share),
                     format_ms(r.ms_per_step), r.calls_per_step, r.kind, r.tensor_core ? "TC  " : "    ",
                     short_kernel_name(r.name)));
  }
  std::string ops, kinds;
  for (std::size_t i = 0; i < k.ops.size() && i < shown_in_table; ++i) {
    ops += fmt::format("{}{} {}", i ? ", " : "", clip_name(k.ops[i].name), percent(k.ops[i].busy_share));
  }
  for (const kind_row& r : k.kinds) {
    if (r.busy_share < 0.005) break;
    kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", r.kind, percent(r.busy_share));
  }
  line(fmt::format("{:<11}by op: {}", "", ops));
  line(fmt::format("{:<11}by kind: {}{}", "", kinds, k.gemm_named_share > 0 ? tensor_core_words(k) : std::string()));
}

}  // namespace detail

std::string short_kernel_name(const std::string& name) { return detail::short_kernel_name(name); }

std::string summary::kernels_table() const {
  if (!gpu || !gpu->kernels) return "no kernel figures: the summary holds no device view from a trace\n";
  const kernel_stats& k = *gpu->kernels;
  fmt::memory_buffer out;
  auto line = [&](const std::string& text) {
    fmt::format_to(std::back_inserter(out), "{}\n", detail::escaped_controls(text));  // as the table's lines
  };
  line(fmt::format("device time per step: {} ms of kernels, copies and memsets over {} steps; {} kernel names{}",
                   format_ms(k.ms_per_step), steps, k.names,
                   k.calls_folded
                       ? fmt::format(" ({} calls past the name bound in \"(other kernels)\")", k.calls_folded)
                       : std::string()));
  line("");
  line(fmt::format("{:>7}{:>11}{:>10}{:>12}  {:<12}{:<4}{}", "share", "ms/step", "calls", "median us", "kind", "TC",
                   "kernel"));
  for (const kernel_row& r : k.kernels) {
    line(fmt::format("{:>7}{:>11}{:>10.1f}{:>12.1f}  {:<12}{:<4}{}", detail::percent(r.busy_share),
                     format_ms(r.ms_per_step), r.calls_per_step, r.median_us, r.kind, r.tensor_core ? "yes" : "",
                     detail::short_kernel_name(r.name, 100)));
  }
  line("");
  line(fmt::format("{:>7}{:>11}{:>10}  {}", "share", "ms/step", "kernels", "op (innermost around the launch)"));
  for (const op_row& r : k.ops) {
    line(fmt::format("{:>7}{:>11}{:>10.1f}  {}", detail::percent(r.busy_share), format_ms(r.ms_per_step),
                     r.kernels_per_step, r.name));
  }
  line("");
  line(fmt::format("{:>7}{:>11}  {}", "share", "ms/step", "kind"));
  for (const kind_row& r : k.kinds) {
    line(fmt::format("{:>7}{:>11}  {}", detail::percent(r.busy_share), format_ms(r.ms_per_step), r.kind));
  }
  if (detail::has_matrix_time(k)) {
    line("");
    line(k.gemm_named_share > 0 ? "by kernel name" + detail::tensor_core_words(k)
                                : "no GEMM or convolution kernel name says whether it runs on tensor cores");
  }
  if (ceiling) return fmt::to_string(out) + detail::ceiling_table_text(*ceiling);
  return fmt::to_string(out);
}

}  // namespace steptrace
