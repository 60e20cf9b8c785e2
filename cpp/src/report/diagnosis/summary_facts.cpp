// What a summary says, read for the rules: the built-in group of each phase and its share, and
// the facts (loader settings, CPU figures) as numbers. See cpp/src/report/diagnosis/README.md, "Definitions".
#include "report/diagnosis/summary_facts.hpp"

#include <cstdlib>
#include <unordered_map>
#include <vector>

namespace steptrace::detail {

bool is_builtin(std::string_view name) {
  return name == "input" || name == "h2d" || name == "compute" || name == "wait" || name == "other";
}

// The built-in phase each phase counts toward (index-aligned with s.phases): itself if built-in,
// else the nearest built-in it was opened inside; empty for a custom phase outside every
// built-in. One pass over the parent links: linear in the phases whatever the depth of a chain
// (a summary read from a file may hold a chain 20,000 deep, or a cycle).
std::vector<std::string_view> builtin_groups(const summary& s) {
  const std::size_t n = s.phases.size();
  std::unordered_map<std::string_view, std::size_t> index;
  index.reserve(n);
  for (std::size_t i = 0; i < n; ++i) index.emplace(s.phases[i].name, i);
  std::vector<std::string_view> group(n);
  std::vector<char> state(n, 0);  // 0: not seen; 1: on the walk now; 2: group known
  std::vector<std::size_t> walk;
  for (std::size_t i = 0; i < n; ++i) {
    std::string_view found;
    walk.clear();
    for (std::size_t at = i;;) {
      const phase_stats& p = s.phases[at];
      if (state[at] == 2) {
        found = group[at];
        break;
      }
      if (state[at] == 1) break;  // a cycle of parents: no built-in
      state[at] = 1;
      walk.push_back(at);
      if (is_builtin(p.name)) {
        found = p.name;
        break;
      }
      if (p.name == queue_phase) {  // a request waiting for the next stage
        found = "wait";
        break;
      }
      const auto parent = p.parent.empty() ? index.end() : index.find(p.parent);
      if (parent == index.end()) break;
      at = parent->second;
    }
    for (std::size_t at : walk) {
      group[at] = found;
      state[at] = 2;
    }
  }
  return group;
}

idle_groups idle_by_group(const summary& s) {
  idle_groups g;
  if (!s.gpu || s.gpu->steps_viewed == 0) return g;
  const double idle = 1 - s.gpu->busy_share;
  const std::vector<std::string_view> groups = builtin_groups(s);
  std::unordered_map<std::string_view, std::string_view> group_of;
  for (std::size_t i = 0; i < groups.size(); ++i) group_of.emplace(s.phases[i].name, groups[i]);
  for (const auto& [name, share] : s.gpu->idle_by_phase) {
    const auto known = group_of.find(name);
    const std::string_view group = known == group_of.end() ? std::string_view(name) : known->second;
    const double x = idle * share;
    if (name == collective_phase) g.collective += x;
    if (group == "input") {
      g.input += x;
    } else if (group == "h2d") {
      g.h2d += x;
    } else if (group == "wait") {
      g.wait += x;
    } else if (group == "other") {
      g.other += x;
    } else {
      g.compute += x;  // compute, and custom phases outside every built-in
    }
  }
  return g;
}

double mean_of(const summary& s, std::string_view name) { return group_share(s, name) * s.step_ms.mean; }

std::optional<long> fact_int(const summary& s, std::string_view key) {
  const std::string* v = s.fact(key);
  if (v == nullptr || v->empty()) return std::nullopt;
  char* end = nullptr;
  const long n = std::strtol(v->c_str(), &end, 10);
  return *end == '\0' ? std::optional<long>(n) : std::nullopt;
}

// Cores the process and its workers asked for over the run: running plus waiting for a core.
std::optional<double> cpu_demand(const summary& s) {
  double sum = 0;
  for (const char* key :
       {"cpu.cores_busy", "cpu.cores_waiting", "cpu.workers_cores_busy", "cpu.workers_cores_waiting"}) {
    const auto v = fact_double(s, key);
    if (!v) return std::nullopt;
    sum += *v;
  }
  return sum;
}

std::optional<bool> fact_bool(const summary& s, std::string_view key) {
  const std::string* v = s.fact(key);
  if (v == nullptr) return std::nullopt;
  if (*v == "1" || *v == "true" || *v == "True") return true;
  if (*v == "0" || *v == "false" || *v == "False") return false;
  return std::nullopt;
}

// The phase's own share plus that of every custom phase that counts toward it, so adding
// detail (`decode` inside `input`) never changes the label.
double group_share(const summary& s, std::string_view name) {
  const std::vector<std::string_view> groups = builtin_groups(s);
  double share = 0;
  for (std::size_t i = 0; i < groups.size(); ++i) {
    if (groups[i] == name) share += s.phases[i].share;
  }
  return share;
}

std::optional<double> fact_double(const summary& s, std::string_view key) {
  const std::string* v = s.fact(key);
  if (v == nullptr || v->empty()) return std::nullopt;
  char* end = nullptr;
  const double x = std::strtod(v->c_str(), &end);
  return *end == '\0' ? std::optional<double>(x) : std::nullopt;
}

}  // namespace steptrace::detail
