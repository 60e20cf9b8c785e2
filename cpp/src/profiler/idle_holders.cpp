#include "profiler/idle_holders.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "base/utf8.hpp"
#include "profiler/trace_names.hpp"
#include "steptrace/summary.hpp"

namespace steptrace::detail {
namespace {

// The step holding `at` (steps in time order, disjoint), or npos.
std::size_t step_of(const std::vector<step_interval>& steps, std::uint64_t at) {
  const auto it = std::lower_bound(steps.begin(), steps.end(), at,
                                   [](const step_interval& s, std::uint64_t t) { return s.end <= t; });
  return it == steps.end() || at < it->begin ? static_cast<std::size_t>(-1)
                                             : static_cast<std::size_t>(it - steps.begin());
}

// [lo, hi) less the time set aside in it: its length, and the GPU's idle time in what is left.
struct counted {
  std::uint64_t ns = 0, idle_ns = 0;
};
counted counted_within(const trace_device& device, const std::vector<step_interval>& set_aside, std::uint64_t lo,
                       std::uint64_t hi) {
  counted c;
  if (hi <= lo) return c;
  c.ns = hi - lo;
  c.idle_ns = c.ns - std::min(c.ns, busy_within(device, lo, hi));
  auto it = std::lower_bound(set_aside.begin(), set_aside.end(), lo,
                             [](const step_interval& x, std::uint64_t t) { return x.end <= t; });
  for (; it != set_aside.end() && it->begin < hi; ++it) {
    const std::uint64_t a = std::max(it->begin, lo), b = std::min(it->end, hi);
    const std::uint64_t idle = (b - a) - std::min(b - a, busy_within(device, a, b));
    c.ns -= std::min(c.ns, b - a);
    c.idle_ns -= std::min(c.idle_ns, idle);
  }
  return c;
}

// Adds the node's counted time within its step, and the GPU's idle time then, to `h`.
void tally(const trace_device& device, const std::vector<step_interval>& set_aside, const step_interval& s,
           std::uint64_t begin, std::uint64_t end, idle_holder& h) {
  const counted c = counted_within(device, set_aside, std::max(begin, s.begin), std::min(end, s.end));
  if (c.ns == 0) return;
  h.host_ns += c.ns;
  h.idle_ns += c.idle_ns;
  ++h.calls;
}

// Blocking calls of every thread of the process; `skip(i)`: set aside.
template <class Skip>
void tally_calls(const trace_events& t, const forest& f, Skip&& skip, const trace_device& device,
                 const std::vector<step_interval>& set_aside, const std::vector<step_interval>& steps,
                 std::vector<step_holders>& out) {
  for (std::uint32_t i = 0; i < f.size(); ++i) {
    const trace_event& e = f.event(i);
    if (e.cat != event_cat::runtime || skip(i) || !is_blocking_runtime_call(t.names[e.name])) continue;
    const std::size_t k = step_of(steps, f.begin(i));
    if (k < steps.size()) tally(device, set_aside, steps[k], f.begin(i), f.end[i], out[k].calls[e.name]);
  }
}

std::string ms_text(std::uint64_t ns) { return format_ms(static_cast<double>(ns) / 1e6); }

}  // namespace

idle_holders read_idle_holders(const trace_events& t, const forest& main,
                               const std::vector<std::uint8_t>& main_one_time, const std::vector<forest>& others,
                               std::uint32_t one_time_kind, const trace_device& device, std::uint32_t pid,
                               const std::vector<step_interval>& steps) {
  idle_holders out;
  out.steps.resize(steps.size());
  if (!device.present || steps.empty()) return out;
  // Parents come before their children: one pass marks what is set aside and what sits in an op.
  std::vector<std::uint8_t> set_aside(main.size(), 0), in_op(main.size(), 0);
  std::vector<step_interval>& spans = out.set_aside;  // every thread's one-time work: in no step
  for (std::uint32_t i = 0; i < main.size(); ++i) {
    const std::uint32_t p = main.parent[i];
    set_aside[i] = (i < main_one_time.size() && main_one_time[i]) || (p != forest::npos && set_aside[p]);
    if (set_aside[i] && (p == forest::npos || !set_aside[p])) spans.push_back({main.begin(i), main.end[i]});
  }
  for (const forest& f : others) {
    for (std::uint32_t i = 0; i < f.size(); ++i) {
      const std::uint32_t p = f.parent[i];
      if (f.kind[i] == one_time_kind && (p == forest::npos || f.kind[p] != one_time_kind))
        spans.push_back({f.begin(i), f.end[i]});
    }
  }
  merge_intervals(spans);
  for (std::uint32_t i = 0; i < main.size(); ++i) {
    const std::uint32_t p = main.parent[i];
    in_op[i] = p != forest::npos && (in_op[p] || main.event(p).cat == event_cat::op);
    if (set_aside[i] || in_op[i] || main.event(i).cat != event_cat::op) continue;
    const std::size_t k = step_of(steps, main.begin(i));
    if (k < steps.size())
      tally(device, spans, steps[k], main.begin(i), main.end[i], out.steps[k].ops[main.event(i).name]);
  }
  tally_calls(
      t, main, [&](std::uint32_t i) { return set_aside[i] != 0; }, device, spans, steps, out.steps);
  for (const forest& f : others) {
    tally_calls(
        t, f, [&](std::uint32_t i) { return f.kind[i] == one_time_kind; }, device, spans, steps, out.steps);
  }
  // Launches: a graph's replay is one call, however many kernels it runs.
  for (const trace_event& e : t.events) {
    if (e.pid != pid || e.cat != event_cat::runtime) continue;
    const std::string_view n = t.names[e.name];
    if (!is_device_work_call(n) || is_copy_call(n)) continue;
    const std::size_t k = step_of(steps, e.ts);
    if (k >= steps.size()) continue;
    ++out.steps[k].launches;
    out.steps[k].graph_replays += is_graph_launch(n) ? 1 : 0;
  }
  return out;
}

void idle_holder_facts(const trace_events& t, const idle_holders& holders, const std::vector<step_interval>& steps,
                       const trace_device& device, std::size_t from,
                       std::vector<std::pair<std::string, std::string>>& facts) {
  const std::vector<step_holders>& by_step = holders.steps;
  if (!device.present || from >= by_step.size()) return;
  std::unordered_map<std::uint32_t, idle_holder> ops, calls;
  std::uint64_t step_ns = 0, idle_ns = 0, replays = 0, launches = 0;
  for (std::size_t k = from; k < by_step.size(); ++k) {
    const counted c = counted_within(device, holders.set_aside, steps[k].begin, steps[k].end);
    step_ns += c.ns;
    idle_ns += c.idle_ns;
    auto add = [](std::unordered_map<std::uint32_t, idle_holder>& to,
                  const std::unordered_map<std::uint32_t, idle_holder>& from_) {
      for (const auto& [name, h] : from_) {
        idle_holder& x = to[name];
        x.idle_ns += h.idle_ns;
        x.host_ns += h.host_ns;
        x.calls += h.calls;
      }
    };
    add(ops, by_step[k].ops);
    add(calls, by_step[k].calls);
    replays += by_step[k].graph_replays;
    launches += by_step[k].launches;
  }
  const double n = static_cast<double>(by_step.size() - from);
  if (step_ns == 0) return;
  auto share = [&](std::uint64_t ns, std::uint64_t of) {
    return fmt::format("{:.4f}", static_cast<double>(ns) / static_cast<double>(of));
  };
  auto most_idle = [](const std::unordered_map<std::uint32_t, idle_holder>& m) {
    std::vector<std::pair<std::uint32_t, idle_holder>> v(m.begin(), m.end());
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
      return a.second.idle_ns != b.second.idle_ns ? a.second.idle_ns > b.second.idle_ns : a.first < b.first;
    });
    return v;
  };
  if (const auto v = most_idle(calls); !v.empty() && v.front().second.idle_ns > 0) {
    idle_holder all;
    std::string said;
    for (std::size_t i = 0; i < v.size(); ++i) {
      all.idle_ns += v[i].second.idle_ns;
      all.host_ns += v[i].second.host_ns;
      all.calls += v[i].second.calls;
      if (i < 3) {
        said += fmt::format("{}`{}` ({} call{}, {} ms)", i ? ", " : "", escaped_utf8(t.names[v[i].first]),
                            v[i].second.calls, v[i].second.calls == 1 ? "" : "s", ms_text(v[i].second.host_ns));
      }
    }
    facts.emplace_back("trace.blocking_calls", said);
    facts.emplace_back("trace.blocking_call", escaped_utf8(t.names[v.front().first]));
    facts.emplace_back("trace.blocking_idle_share", share(all.idle_ns, step_ns));
    facts.emplace_back("trace.blocking_ms_per_step", fmt::format("{:.3f}", static_cast<double>(all.host_ns) / 1e6 / n));
    facts.emplace_back("trace.blocking_calls_per_step", fmt::format("{:.1f}", static_cast<double>(all.calls) / n));
  }
  if (const auto v = most_idle(ops); !v.empty() && v.front().second.idle_ns > 0 && idle_ns > 0) {
    const idle_holder& h = v.front().second;
    facts.emplace_back("trace.idle_op", escaped_utf8(t.names[v.front().first]));
    facts.emplace_back("trace.idle_op_share", share(h.idle_ns, idle_ns));
    facts.emplace_back("trace.idle_op_step_share", share(h.idle_ns, step_ns));
    facts.emplace_back("trace.idle_op_calls_per_step", fmt::format("{:.1f}", static_cast<double>(h.calls) / n));
    facts.emplace_back("trace.idle_op_ms_per_step", fmt::format("{:.3f}", static_cast<double>(h.host_ns) / 1e6 / n));
  }
  if (replays > 0) {  // the kernels the replays ran are in the device view (gpu_stats::graph_*)
    facts.emplace_back("trace.launches_per_step", fmt::format("{:.1f}", static_cast<double>(launches) / n));
  }
}

}  // namespace steptrace::detail
