// Live rank windows' rows (summary.hpp: live_row, window_straggler, straggler_pattern): one line
// of text a rank sends rank 0 each window, read back far faster than JSON at 1,024 ranks, and the
// STRAGGLER rule on them. See cpp/src/report/README.md, "Live rank windows".
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "report/diagnosis/hang_wavefront.hpp"
#include "report/diagnosis/straggler.hpp"
#include "report/json/json_fields.hpp"
#include "report/report.hpp"
#include "steptrace/summary.hpp"

namespace steptrace {
using detail::find_straggler;

namespace {

constexpr const char* live_groups[] = {"input", "h2d", "compute", "wait", "other"};  // a named phase's group, by index
constexpr std::size_t live_named_phases = 8;  // the most a row carries: its largest
constexpr std::size_t live_name_bytes = 64;   // a longer name is cut (and a cut name matches only itself)
constexpr std::size_t live_arrivals = nccl_stats::recent_collectives;  // the most collective calls a row carries
constexpr std::size_t live_marks = 4;  // the most groups' last collective a row carries (" c")
// Past these a row's figure is one no run or device gives (a crafted or broken row): refused.
constexpr double max_row_ms = 1e9;      // 11.6 days: longer than any window, step or open hang
constexpr double max_row_calls = 1e6;   // collective calls a step
constexpr double max_row_count = 1e12;  // errors, context switches a second
constexpr double max_clock_mhz = 1e5;
constexpr double max_power_w = 1e5;
constexpr double max_temperature_c = 1000;

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

// A row's last collective calls (" a"): their group, the first's number, the calls a step, each
// call's wait before its end (us) and the phase before the last: a DDP job's waits at its
// all-reduce (collective_calls), else the device's collective kernels (gpu->nccl.recent), the
// last of one group with consecutive numbers.
std::string arrival_section(const summary& window) {
  const std::vector<collective_call>& calls =
      !window.collective_calls.empty() || !window.gpu ? window.collective_calls : window.gpu->nccl.recent;
  if (calls.empty()) return {};
  const std::string& group = calls.back().group;
  std::vector<const collective_call*> run;  // the last calls of its group, numbered one after another
  for (auto it = calls.rbegin(); it != calls.rend() && run.size() < live_arrivals; ++it) {
    if (it->group != group) continue;
    if (!run.empty() && it->seq + 1 != run.back()->seq) break;
    run.push_back(&*it);
  }
  std::reverse(run.begin(), run.end());
  const double per_step = window.gpu && window.collective_calls.empty() ? window.gpu->nccl.kernels_per_step : 1.0;
  std::string out = fmt::format(" a {} {} {:.3g} ", row_word(group.empty() ? "-" : group), run.front()->seq,
                                std::isfinite(per_step) && per_step > 0 ? per_step : 1.0);
  for (std::size_t i = 0; i < run.size(); ++i) {
    const double wait = run[i]->end_us - run[i]->start_us;
    out += fmt::format("{}{:.0f}", i ? "," : "", std::isfinite(wait) && wait > 0 ? wait : 0.0);
  }
  return out + " b" + row_word(run.back()->before);
}

// A row's " a" section: the calls, numbered from `first`, each aligned on its own end.
struct row_arrivals {
  std::string group, before;
  std::uint64_t first = 0;
  double per_step = 1;
  std::vector<double> waits_us;
};

}  // namespace

std::string live_row(const summary& window) {
  if (!window.rank) throw std::invalid_argument("live_row: the window has no rank (tracer::set_rank)");
  const rank_row r = detail::row_of({window, {}, 0, 0, {}, false});
  std::string out = fmt::format("r2 {} {} {} {:.9g} {:.9g} {:.9g} {:.9g} {:.9g} {:.9g} {:.9g} {:.9g} {:.9g}",
                                r.who.rank, r.who.world_size, r.steps, r.step_mean_ms, r.step_p50_ms, r.step_p95_ms,
                                r.input_ms, r.h2d_ms, r.compute_ms, r.wait_ms, r.other_ms, r.device_wait_ms);
  // the named phases, for the straggler's `within` (straggler.hpp): the largest, in each group
  std::vector<named_ms> named;
  for (std::size_t g = 0; g < std::size(live_groups); ++g) {
    for (const auto& [name, ms] : detail::named_inside(window, live_groups[g])) {
      if (std::isfinite(ms) && ms > 0) named.push_back({g, ms, std::string(name)});
    }
  }
  std::sort(named.begin(), named.end(),
            [](const named_ms& a, const named_ms& b) { return a.ms != b.ms ? a.ms > b.ms : a.name < b.name; });
  if (named.size() > live_named_phases) named.resize(live_named_phases);
  for (const named_ms& n : named) out += fmt::format(" {} {:.9g} {}", n.group, n.ms, row_word(n.name));
  out += arrival_section(window);
  if (const std::optional<hang_view>& h = window.hang;
      h && h->longest()) {  // the step open now: the job's view of a hang
    const open_step_now& open = *h->longest();
    const std::string phase = h->phase();
    out += fmt::format(" h {} {} {} {:.6g} {} {}", ::getpid(),
                       row_word(window.rank->host.empty() ? "-" : window.rank->host), open.step,
                       std::max(0.0, open.open_s * 1e3), h->suspected ? 1 : 0, phase.empty() ? "-" : row_word(phase));
    for (std::size_t i = 0; i < h->collectives.size() && i < live_marks; ++i) {
      const collective_mark& m = h->collectives[i];
      out += fmt::format(" c {} {} {} {:.6g} {:.6g}", row_word(m.group.empty() ? "-" : m.group),
                         row_word(m.kind.empty() ? "-" : m.kind), m.seq, std::max(0.0, m.entered_s * 1e3),
                         m.left_s < 0 ? -1.0 : m.left_s * 1e3);
    }
  }
  if (const std::optional<node_health>& n = window.node) {
    out += fmt::format(" n {} {:.5g} {:.5g} {:.5g} {:.4g} {:x} {:.6g} {:.6g} {:.3g} {:.5g} {:.3g}", n->gpu ? 1 : 0,
                       n->sm_clock_mhz, n->mem_clock_mhz, n->power_w, n->temperature_c, n->throttle, n->ecc_errors,
                       n->xid_errors, n->steal_share, n->involuntary_per_s, n->others_cpu_share);
  }
  return out;
}

namespace {

// A row as live_row wrote it: its version ("r1" before named phases, "r2"), 3 counts and 9
// finite, non-negative numbers; then, in "r2", triples of group, ms and name.
rank_row live_row_from(const std::string& text, std::vector<named_ms>& named, std::optional<row_arrivals>& arrivals,
                       std::optional<node_health>& node, detail::row_hang* hang = nullptr) {
  detail::row_hang ignored;
  detail::row_hang& open = hang != nullptr ? *hang : ignored;
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
  // A time no run can have (a row covers one window; a step open for 11 days is past any watch):
  // refused with the row, never judged or printed as a measurement.
  auto number = [&](double most = max_row_ms) {
    char* end = nullptr;
    const double v = std::strtod(at, &end);
    if (end == at || !std::isfinite(v) || v < 0)
      throw std::invalid_argument("a time that is not a finite, non-negative number");
    if (v > most) throw std::invalid_argument(fmt::format("a figure no run can have ({:.3g})", v));
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
  auto section = [&]() { return at[0] == ' ' && std::isalpha(static_cast<unsigned char>(at[1])) && at[2] == ' '; };
  while (with_named && *at == ' ' && !section() && named.size() < live_named_phases) {
    const std::uint64_t group = count();
    if (group >= std::size(live_groups)) throw std::invalid_argument("a named phase in no group");
    const double ms = number();
    if (*at != ' ') throw std::invalid_argument("a named phase without its name");
    const char* word = ++at;
    while (*at != '\0' && *at != ' ') ++at;
    if (at == word) throw std::invalid_argument("a named phase without its name");
    named.push_back({static_cast<std::size_t>(group), ms, from_row_word(std::string_view(word, at - word))});
  }
  auto word = [&]() {
    if (*at != ' ') throw std::invalid_argument("a section cut short");
    const char* from = ++at;
    while (*at != '\0' && *at != ' ') ++at;
    return std::string_view(from, static_cast<std::size_t>(at - from));
  };
  auto signed_number = [&](double most) {  // a reading: -1 when not read; above `most` no device gives it
    char* end = nullptr;
    const double v = std::strtod(at, &end);
    if (end == at || !std::isfinite(v) || v < -1) throw std::invalid_argument("a reading that is not a number");
    if (v > most || (v < 0 && v != -1))
      throw std::invalid_argument(fmt::format("a reading no device gives ({:.3g})", v));
    at = end;
    return v;
  };
  while (with_named && section()) {
    const char kind = at[1];
    at += 2;
    if (kind == 'a' && !arrivals) {
      row_arrivals& a = arrivals.emplace();
      const std::string_view group = word();
      a.group = group == "-" ? "" : from_row_word(group);
      a.first = count();
      a.per_step = number(max_row_calls);
      const std::string_view waits = word();
      for (std::size_t from = 0; from <= waits.size();) {
        const std::size_t comma = std::min(waits.find(',', from), waits.size());
        const std::string one(waits.substr(from, comma - from));
        char* end = nullptr;
        const double v = std::strtod(one.c_str(), &end);
        if (one.empty() || *end != '\0' || !std::isfinite(v) || v < 0 || v > 1e3 * max_row_ms ||
            a.waits_us.size() == live_arrivals) {
          throw std::invalid_argument("a collective's wait that is not one");
        }
        a.waits_us.push_back(v);
        from = comma + 1;
      }
      const std::string_view before = word();
      if (before.empty() || before[0] != 'b') throw std::invalid_argument("collective calls without the phase before");
      a.before = from_row_word(before.substr(1));
    } else if (kind == 'h' && !open.open) {
      open.open = true;
      open.pid = count();
      const std::string_view host = word();
      open.host = host == "-" ? "" : from_row_word(host);
      open.step = count();
      open.open_s = number() / 1e3;
      open.suspected = count() == 1;
      const std::string_view phase = word();
      open.phase = phase == "-" ? "" : from_row_word(phase);
    } else if (kind == 'c' && open.open && open.marks.size() < live_marks) {
      collective_mark& m = open.marks.emplace_back();
      const std::string_view group = word(), what = word();
      m.group = group == "-" ? "" : from_row_word(group);
      m.kind = what == "-" ? "" : from_row_word(what);
      m.seq = count();
      m.entered_s = number() / 1e3;
      m.left_s = signed_number(max_row_ms);
      if (m.left_s >= 0) m.left_s /= 1e3;
    } else if (kind == 'n' && !node) {
      node_health& n = node.emplace();
      n.gpu = count() == 1;
      n.sm_clock_mhz = signed_number(max_clock_mhz);
      n.mem_clock_mhz = signed_number(max_clock_mhz);
      n.power_w = signed_number(max_power_w);
      n.temperature_c = signed_number(max_temperature_c);
      const std::string_view bits = word();
      char* end = nullptr;
      const std::string hex(bits);
      n.throttle = std::strtoull(hex.c_str(), &end, 16);
      if (hex.empty() || *end != '\0') throw std::invalid_argument("clock-event reasons that are not hex");
      n.ecc_errors = signed_number(max_row_count);
      n.xid_errors = signed_number(max_row_count);
      n.steal_share = signed_number(1);  // shares of the CPU time: at most all of it
      n.involuntary_per_s = signed_number(max_row_count);
      n.others_cpu_share = signed_number(1);
    } else {
      throw std::invalid_argument("a section a row does not have");
    }
  }
  if (*at != '\0') throw std::invalid_argument("more than a row");
  open.rank = r.who.rank;
  open.steps = r.steps;
  return r;
}

}  // namespace

std::optional<straggler_info> window_straggler(const std::vector<std::string>& rows) {
  ranks_view view;
  std::vector<std::vector<named_ms>> named(rows.size());
  std::vector<std::optional<row_arrivals>> arrivals(rows.size());
  std::vector<std::optional<node_health>> nodes(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    try {
      view.rows.push_back(live_row_from(rows[i], named[i], arrivals[i], nodes[i]));
    } catch (const std::exception& e) {
      throw std::invalid_argument("window_straggler: a row that is not one (" + detail::cut_reason(e.what()) + ")");
    }
  }
  view.straggler = find_straggler(view);
  // the rows' arrival at their last collectives: each call aligned on its own end
  std::vector<detail::rank_calls> calls;
  std::vector<double> per_step;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (!arrivals[i] || view.rows[i].steps == 0) continue;
    detail::rank_calls& c = calls.emplace_back();
    c.rank = view.rows[i].who.rank;
    c.numbered = true;
    for (std::size_t k = 0; k < arrivals[i]->waits_us.size(); ++k) {
      c.calls.push_back(
          {arrivals[i]->group, "", arrivals[i]->first + k, -arrivals[i]->waits_us[k], 0.0, arrivals[i]->before});
    }
    per_step.push_back(arrivals[i]->per_step);
  }
  if (calls.size() >= 2) detail::apply_arrivals(view, calls, detail::median(per_step));
  std::optional<straggler_info> s = view.straggler;
  if (s) {  // its node, against the other ranks'
    std::optional<node_health> own;
    std::vector<node_health> others;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (!nodes[i]) continue;
      if (view.rows[i].who.rank == s->rank) {
        own = nodes[i];
      } else {
        others.push_back(*nodes[i]);
      }
    }
    if (own) s->node = detail::node_departures(*own, others);
  }
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
  if (s->arrivals_compared > 0 && s->before.empty()) s->before = s->within.empty() ? s->phase : s->within;
  return s;
}

job_hang window_hang(const std::vector<std::string>& rows, const std::vector<gone_rank>& gone) {
  auto read = [](const std::string& row, detail::row_hang& into) {
    std::vector<named_ms> named;
    std::optional<row_arrivals> arrivals;
    std::optional<node_health> node;
    try {
      live_row_from(row, named, arrivals, node, &into);
    } catch (const std::exception& e) {
      throw std::invalid_argument("window_hang: a row that is not one (" + detail::cut_reason(e.what()) + ")");
    }
  };
  std::vector<detail::row_hang> live(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) read(rows[i], live[i]);
  std::vector<std::pair<detail::row_hang, bool>> last;
  for (const gone_rank& g : gone) {
    detail::row_hang& r = last.emplace_back(detail::row_hang{}, g.exited).first;
    if (!g.last_row.empty()) read(g.last_row, r);
    r.rank = g.rank;
  }
  return detail::wavefront(live, last);
}

std::string straggler_within_words(const straggler_info& s) { return detail::within_words(s); }

std::string straggler_pattern(const rank_window_count& c, std::uint64_t windows) {
  if (c.windows <= 1) return "one-off";
  const std::uint64_t since = windows > c.first_window ? windows - c.first_window : 1;  // windows since it first was
  return c.windows >= 3 && 2 * c.windows >= since ? "chronic" : "intermittent";
}

}  // namespace steptrace
