// summary::table(): the end-of-run breakdown a person reads.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <iterator>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/utf8.hpp"
#include "report/diagnosis/diagnosis.hpp"
#include "report/report.hpp"
#include "report/table_text.hpp"

namespace steptrace {
namespace {

using detail::device_lines;
using detail::table_text;

std::string ms(double v) { return format_ms(v); }

std::string bar(double share) {
  static const char* const eighths[] = {"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"};
  const int width = static_cast<int>(std::lround(std::clamp(share, 0.0, 1.0) * 20 * 8));
  std::string out;
  for (int i = 0; i < width / 8; ++i) out += "█";
  return out + eighths[width % 8];
}

// Rows in tree order: each phase followed by the phases opened inside it, indented (at most 12
// levels: deeper ones line up at the twelfth); the order among siblings is the summary's
// (built-ins, then custom phases by time, `other` last). Linear, and iterative: a summary read
// from a file may chain its phases 20,000 deep.
std::vector<std::pair<const phase_stats*, int>> tree_order(const std::vector<phase_stats>& phases) {
  constexpr int deepest_indent = 12;
  const std::size_t n = phases.size();
  std::unordered_map<std::string_view, std::size_t> first_named;
  first_named.reserve(n);
  for (std::size_t i = 0; i < n; ++i) first_named.emplace(phases[i].name, i);
  std::vector<std::vector<std::size_t>> children(n);
  std::vector<std::size_t> roots;
  for (std::size_t i = 0; i < n; ++i) {
    const auto parent = phases[i].parent.empty() ? first_named.end() : first_named.find(phases[i].parent);
    if (parent == first_named.end()) {
      roots.push_back(i);
    } else {
      children[parent->second].push_back(i);
    }
  }
  std::vector<std::pair<const phase_stats*, int>> rows;
  std::vector<bool> placed(n, false);
  std::vector<std::pair<std::size_t, int>> stack;
  const auto visit = [&](std::size_t root) {
    stack.assign(1, {root, 0});
    while (!stack.empty()) {
      const auto [i, depth] = stack.back();
      stack.pop_back();
      if (placed[i]) continue;
      placed[i] = true;
      rows.emplace_back(&phases[i], std::min(depth, deepest_indent));
      for (auto c = children[i].rbegin(); c != children[i].rend(); ++c) {
        if (!placed[*c]) stack.emplace_back(*c, depth + 1);
      }
    }
  };
  for (std::size_t i : roots) visit(i);
  for (std::size_t i = 0; i < n; ++i) {
    if (!placed[i]) visit(i);  // a cycle of parents (a name seen under several): shown from there
  }
  return rows;
}

// Characters shown: UTF-8 sequences, each one column (names are made printable when recorded).
std::size_t text_width(const std::string& text) {
  std::size_t n = 0;
  for (unsigned char c : text) n += (c & 0xC0) != 0x80 ? 1 : 0;
  return n;
}

// At most `columns` characters of `text`; "~" marks a cut.
std::string cut_columns(const std::string& text, std::size_t columns) {
  if (text_width(text) <= columns) return text;
  std::size_t shown = 0, at = 0;
  for (; at < text.size(); ++at) {
    if ((static_cast<unsigned char>(text[at]) & 0xC0) != 0x80 && ++shown == columns) break;
  }
  return text.substr(0, at) + "~";
}

// The slowest counted step the flight recorder kept, or nullptr.
const timeline_step* slowest_kept(const timeline_view& t) {
  const timeline_step* worst = nullptr;
  for (const timeline_step& s : t.steps) {
    if (s.slowest && (worst == nullptr || s.step_ms > worst->step_ms)) worst = &s;
  }
  return worst;
}

// The header: the rank, the counts, the step's quantiles.
void header_lines(const summary& s, table_text& line) {
  line("── steptrace summary ──────────────────────────────────────────────────────────");
  if (s.rank) {
    line("rank {} of {} on {}{}{}", s.rank->rank, s.rank->world_size, s.rank->host.empty() ? "?" : s.rank->host,
         s.rank->local_rank >= 0 ? fmt::format(" (local rank {})", s.rank->local_rank) : std::string(),
         s.rank->started_at.empty() ? std::string() : ", started " + s.rank->started_at);
  }
}

// The phase rows, as a tree, and each parent's inclusive time.
void phase_lines(const summary& s, table_text& line) {
  if (s.steps == 0) {
    line("no steps counted ({} warm-up, {} failed): nothing to break down.", s.warmup_steps, s.failed_steps);
  } else {
    if (s.requests == s.steps) {  // a server's requests, which cross threads: no thread count
      line("{} requests ({} warm-up and {} failed not counted){}, {} s of wall time", s.steps, s.warmup_steps,
           s.failed_steps, s.batches ? fmt::format(" served in {} batches", s.batches->batches) : std::string(),
           ms(s.wall_ms / 1000));
    } else if (s.windows) {  // a trace without steps: its window, diagnosed as a step
      line("{} window{} of a trace without steps (the whole trace), {} s: figures are of the window, not of a step",
           s.steps, s.steps == 1 ? "" : "s", ms(s.wall_ms / 1000));
    } else {
      line("{} steps ({} warm-up and {} failed not counted) on {} thread{}, {} s of wall time", s.steps, s.warmup_steps,
           s.failed_steps, s.threads, s.threads == 1 ? "" : "s", ms(s.wall_ms / 1000));
    }
    line("{}     mean {} ms   p50 {}   p95 {}   p99 {}   max {}", s.windows ? "window" : "step  ", ms(s.step_ms.mean),
         ms(s.step_ms.p50), ms(s.step_ms.p95), ms(s.step_ms.p99), ms(s.step_ms.max));
    line("");
    // The name column fits the longest name (record_function names from a trace run long), up to
    // a bound past which a name is cut, so the figures stay in their columns.
    constexpr std::size_t narrowest = 14, widest = 40;
    const auto rows = tree_order(s.phases);
    std::size_t width = narrowest;
    for (const auto& [p, depth] : rows) width = std::max(width, std::min(widest, 2 * depth + text_width(p->name) + 2));
    line("{:<{}}{:>9}{:>10}{:>10}{:>10}{:>10}{:>10}{:>8}", "phase", width, "all calls", "mean ms", "p50", "p95", "p99",
         "max", "share");
    double total = 0;
    std::vector<const phase_stats*> parents;
    for (const auto& [p, depth] : rows) {
      total += p->share;
      const std::string calls = p->name == "other" ? "-" : std::to_string(p->calls);
      const std::string name = cut_columns(std::string(2 * depth, ' ') + p->name, width - 2);
      // ` {:>9}`: a figure wider than its column (12 digits) still keeps a space before it
      line("{}{:>9} {:>9} {:>9} {:>9} {:>9} {:>9}{:>7.1f}%  {}", name + std::string(width - text_width(name), ' '),
           calls, ms(p->ms.mean), ms(p->ms.p50), ms(p->ms.p95), ms(p->ms.p99), ms(p->ms.max), 100 * p->share,
           bar(p->share));
      if (p->inclusive_ms.total > p->ms.total) parents.push_back(p);
    }
    line("{:>{}.1f}%", 100 * total, width + 66);
    for (const phase_stats* p : parents) {
      line("{:<11}`{}` with the phases inside it: mean {} ms, p95 {}, {:.1f}% of step time", "tree", p->name,
           ms(p->inclusive_ms.mean), ms(p->inclusive_ms.p95),
           s.step_ms.total > 0 ? 100 * p->inclusive_ms.total / s.step_ms.total : 0.0);
    }
  }
}

// The ceiling's lines (ceiling_lines.cpp).
void ceiling_block(const summary& s, table_text& line) {
  if (s.ceiling && s.steps > 0) detail::ceiling_lines(*s.ceiling, line.sink());
}

// What CUDA events timed: each step, and each phase given a stream.
void event_lines(const summary& s, table_text& line) {
  if (s.step_device_ms) {
    line("{:<11}each step on its stream (CUDA events): {} ms a step, p95 {}, max {} ({} steps)", "device",
         ms(s.step_device_ms->mean), ms(s.step_device_ms->p95), ms(s.step_device_ms->max), s.step_device_steps);
  }
  for (const phase_stats& p : s.phases) {
    if (!p.device_ms) continue;
    line("{:<11}`{}` on its stream (CUDA events): {} ms a call, p95 {}, max {} ({} calls)", "device", p.name,
         ms(p.device_ms->mean), ms(p.device_ms->p95), ms(p.device_ms->max), p.device_calls);
  }
}

// PyTorch's allocator and the host's resident memory.
void memory_lines(const summary& s, table_text& line) {
  if (const std::string* now = s.fact("gpu.allocator.allocated_mb"); now != nullptr) {
    auto said = [&](const char* key) {
      const std::string* v = s.fact(key);
      return v ? *v : std::string("?");
    };
    line(
        "{:<11}{} (PyTorch's allocator, at the summary): {} MB allocated, peak {} MB; {} MB reserved, peak {} MB "
        "(peaks since the program started or last reset them)",
        "memory", said("gpu.allocator.device"), *now, said("gpu.allocator.peak_allocated_mb"),
        said("gpu.allocator.reserved_mb"), said("gpu.allocator.peak_reserved_mb"));
  }
  if (s.host_memory && s.steps > 0) {
    line("{:<11}host resident memory at step ends: peak {:.1f} MiB, {:+.1f} MiB over the run ({:.1f} to {:.1f})",
         "memory", s.host_memory->peak_mb, s.host_memory->last_mb - s.host_memory->first_mb, s.host_memory->first_mb,
         s.host_memory->last_mb);
  }
}

// The step the timeline kept slowest, or the window it kept.
void timeline_line(const summary& s, table_text& line) {
  if (s.windows && !s.timeline.steps.empty()) {
    line("{:<11}the window is kept with its phases ({} ms): `steptrace trace` draws it", "timeline",
         ms(s.timeline.steps.front().step_ms));
  } else if (const timeline_step* worst = slowest_kept(s.timeline); worst != nullptr && s.steps > 0) {
    line("{:<11}slowest step: {} of thread {}, {} ms ({:.1f}x the p50), kept with its phases; {} steps kept in all",
         "timeline", worst->index, worst->thread, ms(worst->step_ms),
         s.step_ms.p50 > 0 ? worst->step_ms / s.step_ms.p50 : 0.0, s.timeline.steps.size());
  }
}

// Time set aside, in no step.
void set_aside_lines(const summary& s, table_text& line) {
  if (!s.set_aside.empty()) {
    line("");
    line("set aside (in no step; shares are of the run's {} s):", ms(s.run_ms / 1000));
    for (const set_aside_stats& a : s.set_aside) {
      line("  {:<14} {} call{}, {} ms each, {} ms in all, {:.1f}% of the run", a.name, a.calls, a.calls == 1 ? "" : "s",
           ms(a.mean_ms), ms(a.total_ms), 100 * a.run_share);
    }
  }
}

// Phases outside any step.
void unscoped_lines(const summary& s, table_text& line) {
  if (!s.unscoped_phases.empty()) {
    line("");
    line("outside any step (not in the figures above):");
    for (const unscoped_phase& u : s.unscoped_phases) {
      line("  {:<14} {} call{}, {} ms in all, longest {} ms", u.name, u.calls, u.calls == 1 ? "" : "s", ms(u.total_ms),
           ms(u.max_ms));
    }
  }
}

// Misuse and what was dropped: nested steps, abandoned requests, folded names, lost windows.
void misuse_lines(const summary& s, table_text& line) {
  if (s.errors.nested_steps || s.errors.unbalanced_phases) {
    line("");
    line("misuse: {} nested step{} ignored, {} unbalanced phase end{}", s.errors.nested_steps,
         s.errors.nested_steps == 1 ? "" : "s", s.errors.unbalanced_phases, s.errors.unbalanced_phases == 1 ? "" : "s");
  }
  if (s.errors.requests_abandoned || s.errors.request_phases_dropped) {
    line("");
    line("requests: {} abandoned (handle destroyed without end), {} phase call{} past a handle's capacity dropped",
         s.errors.requests_abandoned, s.errors.request_phases_dropped, s.errors.request_phases_dropped == 1 ? "" : "s");
  }
  if (s.errors.phase_names_folded) {
    line("");
    line("names: {} phase name{} past the 4096-name limit share the row \"(other names)\"", s.errors.phase_names_folded,
         s.errors.phase_names_folded == 1 ? "" : "s");
  }
  if (s.errors.windows_dropped || s.errors.window_calls_failed) {
    line("");
    line("live windows: {} dropped (the listener fell behind), {} its call failed on", s.errors.windows_dropped,
         s.errors.window_calls_failed);
  }
}

// The process's CPU use.
void cpu_line(const summary& s, table_text& line) {
  if (const std::string* busy = s.fact("cpu.cores_busy"); busy != nullptr && s.steps > 0) {
    const std::string* cpus = s.fact("host.cpus");
    auto value = [&](const char* key) { return detail::fact_double(s, key).value_or(0.0); };
    line("");
    line(
        "{:<11}this process {:.1f} cores busy, {:.1f} more waiting for one; its workers {:.1f} busy, {:.1f} "
        "waiting (of {} cores)",
        "cpu", value("cpu.cores_busy"), value("cpu.cores_waiting"), value("cpu.workers_cores_busy"),
        value("cpu.workers_cores_waiting"), cpus ? *cpus : "?");
  }
}

// A job's ranks, its live rank windows, a profiler run's cycles (rank_table.cpp, cycles.cpp).
void job_lines(const summary& s, table_text& line) {
  if (s.ranks) detail::rank_lines(*s.ranks, line.sink());
  if (s.live_ranks) detail::live_rank_lines(*s.live_ranks, line.sink());
  if (!s.cycles.empty()) detail::cycle_lines(s.cycles, line.sink());
}

// What each capture read, and where its trace is.
void capture_lines(const summary& s, table_text& line) {
  if (!s.captures.empty()) {  // what each capture read, and where its trace is
    line("");
    for (std::size_t i = 0; i < s.captures.size(); ++i) {
      const capture_record& c = s.captures[i];
      const std::string which = c.retroactive ? fmt::format("kept steps {}-{} ({}, step {} tripped it)", c.first_step,
                                                            c.last_step, c.steps, c.tripped)
                                              : fmt::format("steps {}-{}", c.first_step, c.last_step);
      line("{:<11}{} ({}): {}", i == 0 ? "captures" : "", which, c.reason, c.label.empty() ? "no steps read" : c.label);
      line("{:<11}{}", "", c.path);
    }
  }
}

// The diagnosis: the label, its evidence, the fixes by gain, the backend.
void diagnosis_lines(const summary& s, table_text& line) {
  line("");
  line("{:<11}{}{}", "diagnosis", s.diag.label.empty() ? "-" : s.diag.label,
       s.diag.runner_up.empty() ? "" : fmt::format(" (a close call: {} next)", s.diag.runner_up));
  line("{:<11}{}", "", s.diag.evidence);
  for (std::size_t i = 0; i < s.diag.advice.size(); ++i) {
    line("{:<11}{}", i == 0 ? "try first" : "then", s.diag.advice[i]);
  }
  line("{:<11}{}", "device", s.backend.reason);
}

}  // namespace

std::string summary::table() const {
  table_text line;
  for (auto block :
       {header_lines, phase_lines, device_lines, ceiling_block, event_lines, memory_lines, timeline_line,
        set_aside_lines, unscoped_lines, misuse_lines, cpu_line, job_lines, capture_lines, diagnosis_lines}) {
    block(*this, line);
  }
  return line.text();
}

}  // namespace steptrace
