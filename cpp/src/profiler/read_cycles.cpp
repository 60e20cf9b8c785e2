// One process's torch.profiler cycles (a repeating schedule's tensorboard_trace_handler files) read
// as one run: each file by the trace rules, then every cycle's steps through one analysis
// (cpp/src/profiler/README.md, "Reading torch.profiler traces").
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "base/utf8.hpp"
#include "profiler/bytes/byte_source.hpp"
#include "profiler/trace_summary.hpp"
#include "report/report.hpp"
#include "steptrace/profiler_trace.hpp"

namespace steptrace {
namespace detail {
namespace {

struct cycle {
  std::string name;
  trace_reading reading;
  summary alone;
  std::uint64_t first = 0, last = 0;  // its records' first and last ticks
};

std::string fact_or(const summary& s, const char* key, const char* otherwise) {
  const std::string* v = s.fact(key);
  return v ? *v : otherwise;
}

// Who wrote the cycle: the same pid, host_name and rank in every file of one process.
std::string identity(const summary& s) {
  return fmt::format("pid {} on {}{}", fact_or(s, "trace.pid", "?"), fact_or(s, "trace.host", "an unnamed host"),
                     s.rank ? fmt::format(", rank {}", s.rank->rank) : std::string());
}

void check_one_process(const std::vector<cycle>& cycles) {
  for (std::size_t i = 1; i < cycles.size(); ++i) {
    const cycle &a = cycles[i - 1], &b = cycles[i];
    if (identity(a.alone) != identity(b.alone)) {
      throw std::invalid_argument(fmt::format("{} ({}) and {} ({}) are not cycles of one process", a.name,
                                              identity(a.alone), b.name, identity(b.alone)));
    }
    if (a.last > b.first) {
      throw std::invalid_argument(
          fmt::format("{} and {} are not cycles of one process: their times overlap", a.name, b.name));
    }
  }
}

std::string reason_of(const std::vector<cycle>& cycles, const summary& out) {
  std::uint64_t warm = 0, stubs = 0;
  for (const cycle& c : cycles) {
    warm += c.reading.warmup_steps;
    stubs += c.reading.stub_steps;
  }
  std::string reason =
      fmt::format("read from {} torch.profiler cycles of one process ({}), {} to {}, as one run", cycles.size(),
                  identity(cycles.front().alone), cycles.front().name, cycles.back().name);
  if (warm) {
    reason += fmt::format(
        "; {} cycle{} began while the device still ran work from before it: its first step is "
        "left out as warm-up",
        warm, warm == 1 ? "" : "s");
  }
  if (stubs)
    reason += fmt::format("; {} closing stub step{} (no op, no device work) left out", stubs, stubs == 1 ? "" : "s");
  if (const std::string* gpu = out.fact("gpu.name")) reason += fmt::format("; device: {}", *gpu);
  if (!out.backend.cuda) reason += "; the traces hold no GPU activity: host view only";
  return reason;
}

}  // namespace
}  // namespace detail

summary read_profiler_cycles(const std::vector<std::string>& paths, const trace_options& options) {
  using namespace detail;
  if (paths.empty()) throw std::invalid_argument("read_profiler_cycles: no files given");
  std::vector<cycle> cycles;
  for (const std::string& path : paths) {
    cycle c;
    c.name = escaped_utf8(path);  // what messages call it: a name's bytes outside UTF-8 escaped
    {
      trace_events about;
      c.reading = read_trace_reading(open_trace_file(path, c.name), c.name, options.step, about);
      c.alone = summarise_trace(about, c.reading, c.name);
    }
    if (c.reading.span) {
      c.first = c.reading.span->begin;
      c.last = c.reading.span->end;
    }
    cycles.push_back(std::move(c));
  }
  std::stable_sort(cycles.begin(), cycles.end(), [](const cycle& a, const cycle& b) { return a.first < b.first; });
  check_one_process(cycles);

  std::vector<const trace_reading*> readings;
  for (const cycle& c : cycles) readings.push_back(&c.reading);
  summary out = summarise_readings(readings);
  bool windows = true;
  for (const cycle& c : cycles) {
    out.errors.nested_steps += c.reading.steps_dropped;
    windows = windows && c.reading.source == step_source::whole_trace;
    out.backend.cuda = out.backend.cuda || c.reading.has_device;
    out.cycles.push_back(
        {c.name, c.alone.steps, c.alone.warmup_steps, c.alone.step_ms.mean, c.alone.step_ms.p50, c.alone.diag.label});
  }
  out.windows = windows;
  out.backend.cupti = out.backend.cuda;
  out.backend.host_clock = "trace";
  // The setup facts and the host's shape: the first cycle with steps (one-time costs are the
  // first cycle's: a process starts once).
  const auto facts_from = std::find_if(cycles.begin(), cycles.end(), [](const cycle& c) { return c.alone.steps > 0; });
  out.facts = (facts_from == cycles.end() ? cycles.front() : *facts_from).reading.facts;
  out.facts.emplace_back("trace.steps_from", steps_from(cycles.front().reading.source));
  out.facts.emplace_back("trace.cycles", std::to_string(cycles.size()));
  out.rank = cycles.front().alone.rank;
  out.backend.reason = reason_of(cycles, out);
  complete(out);
  return out;
}

}  // namespace steptrace
