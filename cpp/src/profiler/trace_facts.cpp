#include "profiler/trace_facts.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "base/utf8.hpp"
#include "profiler/trace_names.hpp"
#include "profiler/trace_steps.hpp"
#include "steptrace/summary.hpp"

namespace steptrace::detail {
namespace {

bool blocks_idle(const trace_events& t, const trace_device& device, const trace_event& e) {
  const std::string_view n = t.names[e.name];
  if (e.cat != event_cat::runtime || e.dur < one_time_min_ns || is_sync(n) || is_copy_call(n)) return false;
  if (e.correlation != 0 && device.copy_by_correlation.count(e.correlation) != 0) return false;
  return 2 * busy_within(device, e.ts, e.ts + e.dur) < e.dur;
}

// The first step (in time order) that ends after `at`, or steps.end().
std::vector<step_interval>::const_iterator step_after(const std::vector<step_interval>& steps, std::uint64_t at) {
  return std::lower_bound(steps.begin(), steps.end(), at,
                          [](const step_interval& s, std::uint64_t t) { return s.end <= t; });
}

// Marks node i and counts it found, unless it or a node above it is marked already.
bool mark(const trace_events& t, const forest& main, std::uint32_t i, std::vector<std::uint8_t>& marks,
          one_time_found& out) {
  for (std::uint32_t p = i; p != forest::npos; p = main.parent[p]) {
    if (marks[p] != 0) return false;
  }
  marks[i] = 1;
  out.found.emplace_back(main.event(i).dur, t.names[main.event(i).name]);
  return true;
}

// Graph capture: between a stream's BeginCapture and EndCapture its launches record a graph and
// run nothing on the device, so the device's idle time there is no cause. Per step, the innermost
// node of `main` holding every capture of the step (vLLM's `capture_32_FULL`, torch.compile's
// `CUDAGraphNode.record`), unless it is a step range or holds the step whole; none when every
// step (of two or more) captures: then capture is the step's own work. Adds to `marks` and `out`
// (its `captures`: the captures set aside).
void mark_captures(const trace_events& t, const forest& main, const std::vector<step_interval>& steps,
                   const start_up_names& names, std::vector<std::uint8_t>& marks, one_time_found& out) {
  struct span {
    std::uint32_t first = forest::npos;  // the step's first BeginCapture
    std::uint64_t begin = 0, end = 0, count = 0;
  };
  std::vector<span> by_step(steps.size());
  for (std::uint32_t i = 0; i < main.size(); ++i) {
    const trace_event& e = main.event(i);
    if (e.cat != event_cat::runtime ||
        (names.of[e.name] & (start_up_names::capture_begin | start_up_names::capture_end)) == 0) {
      continue;
    }
    const bool opens = (names.of[e.name] & start_up_names::capture_begin) != 0;
    const auto step = step_after(steps, main.begin(i));
    if (step == steps.end() || main.begin(i) < step->begin) continue;  // in no step
    span& c = by_step[static_cast<std::size_t>(step - steps.begin())];
    if (opens) {
      if (c.first == forest::npos) {
        c.first = i;
        c.begin = main.begin(i);
      }
      ++c.count;
    }
    c.end = std::max(c.end, main.end[i]);
  }
  const auto capturing = static_cast<std::size_t>(
      std::count_if(by_step.begin(), by_step.end(), [](const span& c) { return c.count != 0; }));
  if (capturing == 0 || (steps.size() >= 2 && capturing == steps.size())) return;
  for (std::size_t k = 0; k < steps.size(); ++k) {
    const span& c = by_step[k];
    if (c.count == 0) continue;
    std::uint32_t holder = forest::npos;
    for (std::uint32_t p = main.parent[c.first]; p != forest::npos; p = main.parent[p]) {
      if (main.begin(p) <= c.begin && main.end[p] >= c.end) {
        holder = p;
        break;
      }
    }
    if (holder == forest::npos || is_profiler_step(t.names[main.event(holder).name])) continue;
    if (main.begin(holder) <= steps[k].begin && main.end[holder] >= steps[k].end) continue;  // the step itself
    if (mark(t, main, holder, marks, out)) out.captures += c.count;
  }
}

// First calls far longer than the later ones (first_call_ratio): a JIT's or a compiler's first
// run, not the steady state. Ops and ranges of `main` in the steps; with a device, only a first
// call in which the device ran traced work less than half the time (a prefill before decode
// steps keeps the GPU busy); without one, only in a trace that holds a JIT's run (names_jit_run).
void mark_first_calls(const trace_events& t, const forest& main, const trace_device& device,
                      const std::vector<step_interval>& steps, const start_up_names& names,
                      std::vector<std::uint8_t>& marks, one_time_found& out) {
  if (!device.present && !names.jit) return;
  struct call {
    std::uint32_t node;
    std::size_t step;
  };
  std::unordered_map<std::uint32_t, std::vector<call>> calls;  // by name, in time order
  for (std::uint32_t i = 0; i < main.size(); ++i) {
    const trace_event& e = main.event(i);
    if (e.cat != event_cat::op && e.cat != event_cat::user_annotation) continue;
    const std::string_view n = t.names[e.name];
    if (is_copy_op(n) || is_item_op(n) || is_input_op(n)) continue;  // waits, on the device or a loader
    const auto step = step_after(steps, main.begin(i));
    if (step == steps.end() || main.begin(i) < step->begin) continue;  // in no step
    calls[e.name].push_back({i, static_cast<std::size_t>(step - steps.begin())});
  }
  // A first call that waited on the device (a copy or sync inside it) waited, it did not compile.
  auto waited_half = [&](std::uint32_t i, std::uint64_t dur) {
    std::uint64_t waited = 0;
    main.walk(
        i,
        [&](std::uint32_t k) {
          const trace_event& c = main.event(k);
          if (c.cat != event_cat::runtime) return true;
          const std::string_view n = t.names[c.name];
          if (is_sync(n) || is_copy_call(n)) waited += main.end[k] - main.begin(k);
          return false;
        },
        [](std::uint32_t) {});
    return 2 * waited >= dur;
  };
  std::vector<std::uint32_t> first;
  for (auto& [name, nodes] : calls) {
    if (nodes.size() < first_call_min_calls) continue;
    // The calls of the first step the name runs in are first calls when the name runs in later
    // steps too: one per shape (cuDNN's or MIOpen's search for each new convolution), weighed
    // against the later steps' median. Within one step only the first call is.
    const std::size_t first_step = nodes.front().step;
    const bool later_steps = nodes.back().step != first_step;
    std::vector<std::uint64_t> later;
    for (std::size_t k = 1; k < nodes.size(); ++k) {
      if (!later_steps || nodes[k].step != first_step)
        later.push_back(main.end[nodes[k].node] - main.begin(nodes[k].node));
    }
    if (later.empty()) continue;
    std::nth_element(later.begin(), later.begin() + static_cast<std::ptrdiff_t>(later.size() / 2), later.end());
    const std::uint64_t median = later[later.size() / 2];
    for (const call& c : nodes) {
      if (c.step != first_step || (!later_steps && c.node != nodes.front().node)) break;
      const std::uint32_t i = c.node;
      const std::uint64_t dur = main.end[i] - main.begin(i);
      if (dur < first_call_ratio * median || dur < median + first_call_min_ns) continue;
      if (device.present && 2 * busy_within(device, main.begin(i), main.end[i]) >= dur) continue;
      if (waited_half(i, dur)) continue;
      first.push_back(i);
    }
  }
  std::sort(first.begin(), first.end());  // parents before their children: the outermost is set aside
  for (const std::uint32_t i : first) mark(t, main, i, marks, out);
}

}  // namespace

void setup_facts(const trace_events& t, std::uint32_t pid, const std::vector<device_record>& device,
                 std::vector<std::pair<std::string, std::string>>& facts) {
  // Training or a forward pass: autograd's backward ran in this process (its engine's functions, or
  // an op of a backward graph); a forward pass only where the model's own ops ran (matrix
  // products, convolutions, attention) with no backward. Read by name once per name, not per event.
  std::vector<std::uint8_t> kind(t.names.size(), 0);  // 1: backward, 2: a model's forward op
  for (std::size_t i = 0; i < t.names.size(); ++i) {
    const std::string_view n = t.names[i];
    if (n.find("autograd::engine::evaluate_function") != std::string_view::npos ||
        n.find("Backward") != std::string_view::npos) {
      kind[i] = 1;
    } else if (starts_with(n, "aten::mm") || starts_with(n, "aten::addmm") || starts_with(n, "aten::bmm") ||
               starts_with(n, "aten::linear") || starts_with(n, "aten::matmul") ||
               n.find("convolution") != std::string_view::npos || n.find("attention") != std::string_view::npos) {
      kind[i] = 2;
    }
  }
  std::uint64_t forward_ops = 0;
  bool backward = false;
  for (const trace_event& e : t.events) {
    if (e.pid != pid || !(e.cat == event_cat::op || e.cat == event_cat::user_annotation)) continue;
    backward = backward || kind[e.name] == 1;
    forward_ops += kind[e.name] == 2 ? 1 : 0;
  }
  if (backward) {
    facts.emplace_back("trace.training", "1");
  } else if (forward_ops >= 10) {
    facts.emplace_back("trace.training", "0");
  }
  bool single = false, multi = false, hip = false;
  for (const trace_event& e : t.events) {
    if (e.pid != pid) continue;
    const std::string_view n = t.names[e.name];
    hip = hip || (e.cat == event_cat::runtime && starts_with(n, "hip"));
    if (!(e.cat == event_cat::op || e.cat == event_cat::user_annotation) || !is_input_op(n)) continue;
    single = single || n.find("_SingleProcessDataLoaderIter") != std::string_view::npos;
    multi = multi || n.find("_MultiProcessingDataLoaderIter") != std::string_view::npos;
  }
  if (single && !multi) facts.emplace_back("dataloader.num_workers", "0");
  if (multi && !single) facts.emplace_back("dataloader.multiprocessing", "1");
  if (hip) facts.emplace_back("gpu.amd", "1");  // HIP graphs, not CUDA graphs
  const auto kernel = std::find_if(device.begin(), device.end(),
                                   [](const device_record& r) { return r.kind == device_activity::kernel; });
  if (kernel != device.end()) {
    // Its device's name; a trace listing one kind of device names it for any device id (a process
    // listing only the device it saw as 0 while its kernels ran on device 2).
    std::string name = kernel->device < t.gpu_names.size() ? t.gpu_names[kernel->device] : "";
    std::vector<std::string> listed;
    for (const std::string& n : t.gpu_names) {
      if (!n.empty() && std::find(listed.begin(), listed.end(), n) == listed.end()) listed.push_back(n);
    }
    if (name.empty() && listed.size() == 1) name = listed.front();
    if (!name.empty()) facts.emplace_back("gpu.name", name);
  }
  if (pid < t.ids.size()) facts.emplace_back("trace.pid", escaped_utf8(t.ids[pid]));
  if (!t.host.empty()) facts.emplace_back("trace.host", escaped_utf8(t.host));
  const bool activity = std::any_of(device.begin(), device.end(), [](const device_record& r) {
    return r.kind == device_activity::kernel || r.kind == device_activity::memcpy || r.kind == device_activity::memset;
  });
  if (!activity) device_unrecorded_fact(t, pid, facts);  // syncs are read from the host's calls
}

void device_unrecorded_fact(const trace_events& t, std::uint32_t pid,
                            std::vector<std::pair<std::string, std::string>>& facts) {
  std::uint64_t calls = 0;
  std::string_view op;
  for (const trace_event& e : t.events) {
    if (e.pid != pid) continue;
    const std::string_view n = t.names[e.name];
    if (e.cat == event_cat::runtime && is_device_work_call(n)) ++calls;
    if ((e.cat == event_cat::op || e.cat == event_cat::user_annotation) && op.empty() && is_gpu_op(n)) op = n;
  }
  if (t.mtia_records > 0) {  // an accelerator steptrace does not read: its own words, not a GPU's
    facts.emplace_back("trace.device_unrecorded", fmt::format("{} mtia", t.mtia_records));
  } else if (calls > 0) {
    facts.emplace_back("trace.device_unrecorded", fmt::format("{} calls", calls));
  } else if (!op.empty()) {
    facts.emplace_back("trace.device_unrecorded", "op " + escaped_utf8(op));
  }
}

start_up_names start_up_names_of(const trace_events& t) {
  start_up_names out;
  out.of = warmup_names(t);  // 1 where the name says warm-up
  for (std::size_t i = 0; i < t.names.size(); ++i) {
    if (is_capture_begin(t.names[i])) out.of[i] |= start_up_names::capture_begin;
    if (is_capture_end(t.names[i])) out.of[i] |= start_up_names::capture_end;
    if (names_compile_work(t.names[i])) out.of[i] |= start_up_names::compile;
    out.jit = out.jit || names_jit_run(t.names[i]);
  }
  return out;
}

std::vector<std::uint8_t> one_time_costs(const trace_events& t, const forest& main, const trace_device& device,
                                         const std::vector<step_interval>& steps, const start_up_names& names,
                                         bool main_thread, one_time_found& out) {
  std::vector<std::uint8_t> marks(main.size(), 0);
  if (steps.empty()) return marks;
  mark_captures(t, main, steps, names, marks, out);
  const step_interval first = steps.front();
  const std::uint64_t steps_end = steps.back().end;
  // Warm-up by the program's own words: a range it names warm-up, in a step it covers less than
  // half of (one covering more makes its step a warm-up step: trace_steps.hpp).
  for (std::uint32_t i = 0; i < main.size(); ++i) {
    const trace_event& e = main.event(i);
    if ((e.cat != event_cat::op && e.cat != event_cat::user_annotation) ||
        (names.of[e.name] & start_up_names::warmup) == 0) {
      continue;
    }
    const auto step = step_after(steps, main.begin(i));
    if (step == steps.end() || main.end[i] <= step->begin) continue;  // in no step
    const std::uint64_t covered = std::min(main.end[i], step->end) - std::max(main.begin(i), step->begin);
    if (warmup_holds(covered, *step)) continue;  // the step is the warm-up, not a part of it
    mark(t, main, i, marks, out);
  }
  // Compile and autotuning ranges by their names, and first calls far longer than the later ones.
  for (std::uint32_t i = 0; i < main.size(); ++i) {
    const trace_event& e = main.event(i);
    if ((e.cat != event_cat::op && e.cat != event_cat::user_annotation) ||
        (names.of[e.name] & start_up_names::compile) == 0) {
      continue;
    }
    const auto step = step_after(steps, main.begin(i));
    if (step != steps.end() && main.end[i] > step->begin) mark(t, main, i, marks, out);
  }
  if (main_thread) mark_first_calls(t, main, device, steps, names, marks, out);
  std::unordered_set<std::string_view> later;  // names that block so in a later step
  for (std::uint32_t i = 0; i < main.size(); ++i) {
    if (main.begin(i) >= first.end && main.begin(i) < steps_end && blocks_idle(t, device, main.event(i))) {
      later.insert(t.names[main.event(i).name]);
    }
  }
  for (std::uint32_t i = 0; i < main.size(); ++i) {
    const trace_event& e = main.event(i);
    const std::string_view n = t.names[e.name];
    if (std::min(main.end[i], first.end) <= std::max(main.begin(i), first.begin)) continue;  // not in the first step
    if (!blocks_idle(t, device, e) || later.count(n) != 0) continue;
    mark(t, main, i, marks, out);
  }
  return marks;
}

std::string one_time_said(std::vector<std::pair<std::uint64_t, std::string_view>> found) {
  std::stable_sort(found.begin(), found.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
  std::string said;
  for (std::size_t k = 0; k < found.size() && k < 3; ++k) {
    said += fmt::format("{}{} {}", k ? ", " : "", escaped_utf8(found[k].second),  // a program's range names
                        format_ms(static_cast<double>(found[k].first) / 1e6));
  }
  if (found.size() > 3) said += fmt::format(" and {} more", found.size() - 3);
  return said;
}

void host_gap_facts(const std::vector<host_gaps>& steps, const std::vector<device_record>& device,
                    std::vector<std::pair<std::string, std::string>>& facts) {
  const host_gaps* longest = nullptr;
  std::uint64_t count = 0;
  for (const host_gaps& g : steps) {
    count += g.count;
    if (longest == nullptr || g.longest > longest->longest) longest = &g;
  }
  if (longest == nullptr || longest->longest == 0) return;
  const auto first_work = std::find_if(device.begin(), device.end(), [&](const device_record& r) {
    return r.kind != device_activity::sync && r.kind != device_activity::untraced && r.start >= longest->step_begin;
  });
  const bool before = first_work == device.end() || first_work->start >= longest->longest_begin + longest->longest;
  auto ms = [](std::uint64_t ns) { return fmt::format("{:.3f}", static_cast<double>(ns) / 1e6); };
  facts.emplace_back("trace.host_gap_longest_ms", ms(longest->longest));
  facts.emplace_back("trace.host_gap_longest_at_ms", ms(longest->longest_begin - longest->step_begin));
  facts.emplace_back("trace.host_gap_before_device", before ? "1" : "0");
  facts.emplace_back("trace.host_gaps_per_step",
                     fmt::format("{:.1f}", static_cast<double>(count) / static_cast<double>(steps.size())));
}

void start_facts(const trace_events& t, std::uint32_t pid, const std::vector<device_record>& device,
                 step_interval first, std::vector<std::pair<std::string, std::string>>& facts) {
  auto us = [](std::uint64_t ns) { return fmt::format("{}.{:03}", ns / 1000, ns % 1000); };
  facts.emplace_back("trace.step_begin_us", us(first.begin));
  std::uint64_t collective = UINT64_MAX;
  for (const device_record& r : device) {
    if (r.nccl && r.start >= first.begin && r.start < first.end) {
      collective = r.start;
      break;
    }
  }
  for (const trace_event& e : t.events) {
    if (e.pid == pid && e.ts >= first.begin && e.ts < first.end && e.ts < collective &&
        is_cpu_collective(t.names[e.name])) {
      collective = e.ts;
    }
  }
  if (collective != UINT64_MAX) facts.emplace_back("trace.first_collective_us", us(collective));
}

}  // namespace steptrace::detail
