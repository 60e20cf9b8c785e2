// Live rank windows' rows (summary.hpp: live_row, window_straggler, straggler_pattern): one line
// of text a rank sends rank 0 each window, read back far faster than JSON at 1,024 ranks, and the
// STRAGGLER rule on them. See docs/architecture.md, "Live rank windows".
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iterator>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "report/json/json_fields.hpp"
#include "report/report.hpp"
#include "report/diagnosis/straggler.hpp"
#include "steptrace/summary.hpp"

namespace steptrace {
using detail::find_straggler;

namespace {

constexpr const char* live_groups[] = {"input", "h2d", "compute", "wait", "other"};  // a named phase's group, by index
constexpr std::size_t live_named_phases = 8;  // the most a row carries: its largest
constexpr std::size_t live_name_bytes = 64;   // a longer name is cut (and a cut name matches only itself)

// A phase name as one word of a row: bytes outside printable ASCII, and '%', as %XX.
std::string row_word(std::string_view name) {
  std::string out;
  for (const char c : name.substr(0, live_name_bytes)) {
    const auto b = static_cast<unsigned char>(c);
    if (b > 0x20 && b < 0x7f && b != '%') {
      out += c;
    } else {
      out += fmt::format("%{:02X}", b);
    }
  }
  return out;
}

std::string from_row_word(std::string_view word) {
  std::string out;
  for (std::size_t i = 0; i < word.size(); ++i) {
    if (word[i] != '%') {
      out += word[i];
      continue;
    }
    if (i + 2 >= word.size() || !std::isxdigit(static_cast<unsigned char>(word[i + 1])) ||
        !std::isxdigit(static_cast<unsigned char>(word[i + 2]))) {
      throw std::invalid_argument("a phase name with a bad %-escape");
    }
    out += static_cast<char>(std::stoi(std::string(word.substr(i + 1, 2)), nullptr, 16));
    i += 2;
  }
  return out;
}

// A row's named phases: (group index, ms a step with the phases inside it, name).
struct named_ms {
  std::size_t group;
  double ms;
  std::string name;
};

}  // namespace

std::string live_row(const summary& window) {
  if (!window.rank) throw std::invalid_argument("live_row: the window has no rank (tracer::set_rank)");
  const rank_row r = detail::row_of({window, {}, 0, 0});
  std::string out = fmt::format("r2 {} {} {} {:.9g} {:.9g} {:.9g} {:.9g} {:.9g} {:.9g} {:.9g} {:.9g} {:.9g}", r.who.rank,
                                r.who.world_size, r.steps, r.step_mean_ms, r.step_p50_ms, r.step_p95_ms, r.input_ms,
                                r.h2d_ms, r.compute_ms, r.wait_ms, r.other_ms, r.device_wait_ms);
  // the named phases, for the straggler's `within` (straggler.hpp): the largest, in each group
  std::vector<named_ms> named;
  for (std::size_t g = 0; g < std::size(live_groups); ++g) {
    for (const auto& [name, ms] : detail::named_inside(window, live_groups[g])) {
      if (std::isfinite(ms) && ms > 0) named.push_back({g, ms, std::string(name)});
    }
  }
  std::sort(named.begin(), named.end(), [](const named_ms& a, const named_ms& b) {
    return a.ms != b.ms ? a.ms > b.ms : a.name < b.name;
  });
  if (named.size() > live_named_phases) named.resize(live_named_phases);
  for (const named_ms& n : named) out += fmt::format(" {} {:.9g} {}", n.group, n.ms, row_word(n.name));
  return out;
}

namespace {

// A row as live_row wrote it: its version ("r1" before named phases, "r2"), 3 counts and 9
// finite, non-negative numbers; then, in "r2", triples of group, ms and name.
rank_row live_row_from(const std::string& text, std::vector<named_ms>& named) {
  const char* at = text.c_str();
  const bool with_named = text.compare(0, 3, "r2 ") == 0;
  if (!with_named && text.compare(0, 3, "r1 ") != 0) throw std::invalid_argument("not a live row (r2 ...)");
  at += 3;
  auto count = [&]() {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(at, &end, 10);
    if (end == at || v > max_world_size * 1000ULL * 1000ULL) throw std::invalid_argument("a count that is not one");
    at = end;
    return static_cast<std::uint64_t>(v);
  };
  auto number = [&]() {
    char* end = nullptr;
    const double v = std::strtod(at, &end);
    if (end == at || !std::isfinite(v) || v < 0) throw std::invalid_argument("a time that is not a finite, non-negative number");
    at = end;
    return v;
  };
  rank_row r;
  r.who.rank = static_cast<std::uint32_t>(count());
  r.who.world_size = static_cast<std::uint32_t>(count());
  if (r.who.world_size == 0 || r.who.world_size > max_world_size || r.who.rank >= r.who.world_size) {
    throw std::invalid_argument("a rank outside its world");
  }
  r.steps = count();
  for (double* v : {&r.step_mean_ms, &r.step_p50_ms, &r.step_p95_ms, &r.input_ms, &r.h2d_ms, &r.compute_ms, &r.wait_ms,
                    &r.other_ms, &r.device_wait_ms}) {
    *v = number();
  }
  while (with_named && *at == ' ' && named.size() < live_named_phases) {
    const std::uint64_t group = count();
    if (group >= std::size(live_groups)) throw std::invalid_argument("a named phase in no group");
    const double ms = number();
    if (*at != ' ') throw std::invalid_argument("a named phase without its name");
    const char* word = ++at;
    while (*at != '\0' && *at != ' ') ++at;
    if (at == word) throw std::invalid_argument("a named phase without its name");
    named.push_back({static_cast<std::size_t>(group), ms, from_row_word(std::string_view(word, at - word))});
  }
  if (*at != '\0') throw std::invalid_argument("more than a row");
  return r;
}

}  // namespace

std::optional<straggler_info> window_straggler(const std::vector<std::string>& rows) {
  ranks_view view;
  std::vector<std::vector<named_ms>> named(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    try {
      view.rows.push_back(live_row_from(rows[i], named[i]));
    } catch (const std::exception& e) {
      throw std::invalid_argument("window_straggler: a row that is not one (" + detail::cut_reason(e.what()) + ")");
    }
  }
  std::optional<straggler_info> s = find_straggler(view);
  if (!s || s->late_ms > 0) return s;
  // its `within`, as the exit's (straggler.hpp), from the named phases the rows carry
  std::unordered_map<std::string_view, double> own;
  std::vector<std::unordered_map<std::string_view, double>> others;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (view.rows[i].steps == 0) continue;
    auto& into = view.rows[i].who.rank == s->rank ? own : others.emplace_back();
    for (const named_ms& n : named[i]) {
      if (live_groups[n.group] == s->phase) into.emplace(n.name, n.ms);
    }
  }
  detail::choose_within(*s, own, others);
  return s;
}

std::string straggler_within_words(const straggler_info& s) { return detail::within_words(s); }

std::string straggler_pattern(const rank_window_count& c, std::uint64_t windows) {
  if (c.windows <= 1) return "one-off";
  const std::uint64_t since = windows > c.first_window ? windows - c.first_window : 1;  // windows since it first was
  return c.windows >= 3 && 2 * c.windows >= since ? "chronic" : "intermittent";
}

}  // namespace steptrace
