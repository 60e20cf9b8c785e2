// A profiler run's cycles (summary::cycles): their JSON section and their lines in the table.
#include <fmt/format.h>

#include <stdexcept>

#include "report/json/json_fields.hpp"
#include "report/report.hpp"

namespace steptrace::detail {
namespace {

constexpr std::size_t max_cycles_read = 65536;  // a file's section, read back: a bound, not a page

std::string base_name(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

json_doc cycles_json(const std::vector<cycle_row>& cycles) {
  json_doc out = json_doc::array();
  for (const cycle_row& c : cycles) {
    out.push_back({{"file", c.file},
                   {"steps", c.steps},
                   {"warmup_steps", c.warmup_steps},
                   {"step_mean_ms", c.step_mean_ms},
                   {"step_p50_ms", c.step_p50_ms},
                   {"label", c.label.empty() ? json_doc(nullptr) : json_doc(c.label)}});
  }
  return out;
}

std::vector<cycle_row> cycles_from(const json_doc& j) {
  if (!j.is_array()) throw std::invalid_argument("\"cycles\" is not a list");
  if (j.size() > max_cycles_read)
    throw std::invalid_argument(fmt::format("\"cycles\" lists {} cycles, more than {}", j.size(), max_cycles_read));
  std::vector<cycle_row> out;
  for (const json_doc& c : j) {
    cycle_row row;
    row.file = c.at("file").get<std::string>();
    row.steps = count_at(c, "steps");
    row.warmup_steps = count_at(c, "warmup_steps");
    row.step_mean_ms = number_at(c, "step_mean_ms");
    row.step_p50_ms = number_at(c, "step_p50_ms");
    if (!c.at("label").is_null()) row.label = c.at("label").get<std::string>();
    out.push_back(std::move(row));
  }
  return out;
}

void cycle_lines(const std::vector<cycle_row>& cycles, const std::function<void(std::string)>& line) {
  line("");
  line(
      fmt::format("cycles     {} torch.profiler cycles of one process: the figures above are of all their steps; "
                  "each cycle alone:",
                  cycles.size()));
  line(fmt::format("  {:>5}{:>7}{:>9}{:>11}{:>10}  {:<14}{}", "cycle", "steps", "warm-up", "step mean", "step p50",
                   "label", "file"));
  for (std::size_t i = 0; i < cycles.size(); ++i) {
    const cycle_row& c = cycles[i];
    line(fmt::format("  {:>5}{:>7}{:>9}{:>11}{:>10}  {:<14}{}", i + 1, c.steps, c.warmup_steps,
                     c.steps ? format_ms(c.step_mean_ms) : "-", c.steps ? format_ms(c.step_p50_ms) : "-",
                     c.label.empty() ? "-" : c.label, base_name(c.file)));
  }
}

}  // namespace steptrace::detail
