#include "profiler/trace_steps.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <stdexcept>
#include <utility>

#include "base/utf8.hpp"
#include "profiler/trace_names.hpp"

namespace steptrace::detail {
namespace {

using thread_key = std::pair<std::uint32_t, std::uint32_t>;  // (pid, tid)

bool is_host_op(const trace_event& e) { return e.cat == event_cat::op || e.cat == event_cat::user_annotation; }
bool is_host(const trace_event& e) { return is_host_op(e) || e.cat == event_cat::runtime; }
bool is_device(const trace_event& e) {
  return e.cat == event_cat::kernel || e.cat == event_cat::memcpy || e.cat == event_cat::memset;
}

// The thread with the most events that `pick` takes (the first such thread on a tie), and those
// events as steps: in time order, one nested in or overlapping an earlier one dropped.
template <class Pick>
bool steps_of(const trace_events& t, Pick&& pick, step_choice& out) {
  std::map<thread_key, std::uint64_t> counts;
  for (const trace_event& e : t.events) {
    if (!e.tid_negative && pick(e)) ++counts[{e.pid, e.tid}];
  }
  if (counts.empty()) return false;
  auto best = counts.begin();
  for (auto it = counts.begin(); it != counts.end(); ++it) {
    if (it->second > best->second) best = it;
  }
  out.pid = best->first.first;
  out.tid = best->first.second;
  std::vector<step_interval> found;
  for (const trace_event& e : t.events) {
    if (e.pid == out.pid && e.tid == out.tid && !e.tid_negative && pick(e)) found.push_back({e.ts, e.ts + e.dur});
  }
  std::stable_sort(found.begin(), found.end(),
                   [](const step_interval& a, const step_interval& b) { return a.begin < b.begin; });
  for (const step_interval& s : found) {
    if (out.steps.empty() || s.begin >= out.steps.back().end) {
      out.steps.push_back(s);
    } else {
      ++out.dropped;  // counted, and said in the summary's errors and backend reason
    }
  }
  return true;
}

// The first host event of the thread (pid, tid).
std::uint64_t thread_begin(const trace_events& t, std::uint32_t pid, std::uint32_t tid) {
  std::uint64_t begin = UINT64_MAX;
  for (const trace_event& e : t.events) {
    if (e.pid == pid && e.tid == tid && !e.tid_negative && is_host(e)) begin = std::min(begin, e.ts);
  }
  return begin;
}

// The trace's end after `begin`: its last host event of `pid` or device event, `begin` at least.
std::uint64_t trace_end(const trace_events& t, std::uint32_t pid, std::uint64_t begin) {
  std::uint64_t end = begin;
  for (const trace_event& e : t.events) {
    if ((is_device(e) || (e.pid == pid && is_host(e))) && e.ts + e.dur > begin) end = std::max(end, e.ts + e.dur);
  }
  return end;
}

// Whether the thread runs a host op that begins at or after `at`.
bool op_after(const trace_events& t, std::uint32_t pid, std::uint32_t tid, std::uint64_t at) {
  for (const trace_event& e : t.events) {
    if (e.pid == pid && e.tid == tid && !e.tid_negative && is_host_op(e) && e.ts >= at) return true;
  }
  return false;
}

}  // namespace

std::vector<std::uint8_t> warmup_names(const trace_events& t) {
  std::vector<std::uint8_t> out(t.names.size(), 0);
  for (std::size_t i = 0; i < t.names.size(); ++i) out[i] = names_warmup(t.names[i]) ? 1 : 0;
  return out;
}

namespace {

// The ranges of the thread (pid, tid) that name warm-up, outermost only (trace_steps.hpp).
std::vector<step_interval> warmup_ranges(const trace_events& t, std::uint32_t pid, std::uint32_t tid,
                                         std::string* first_name = nullptr) {
  const std::vector<std::uint8_t> warm = warmup_names(t);
  std::vector<std::pair<step_interval, std::uint32_t>> found;
  for (const trace_event& e : t.events) {
    if (e.pid == pid && e.tid == tid && is_host_op(e) && warm[e.name]) found.push_back({{e.ts, e.ts + e.dur}, e.name});
  }
  std::sort(found.begin(), found.end(), [](const auto& x, const auto& y) {
    return x.first.begin != y.first.begin ? x.first.begin < y.first.begin : x.first.end > y.first.end;
  });
  std::vector<step_interval> out;
  for (const auto& [r, name] : found) {
    if (!out.empty() && r.begin < out.back().end) continue;  // nested in or overlapping one kept
    if (out.empty() && first_name != nullptr) *first_name = std::string(t.names[name]);
    out.push_back(r);
  }
  return out;
}

// The leading steps that ranges the main thread names warm-up cover at least half of
// (trace_steps.hpp); the last step always counts.
void leading_warmup(const trace_events& t, step_choice& out) {
  std::string name;
  const std::vector<step_interval> warm = warmup_ranges(t, out.pid, out.tid, &name);
  std::size_t w = 0;
  std::uint32_t held = 0;
  for (const step_interval& s : out.steps) {
    while (w < warm.size() && warm[w].end <= s.begin) ++w;
    std::uint64_t covered = 0;  // the ranges are apart and in order: those from w on that reach into s
    for (std::size_t k = w; k < warm.size() && warm[k].begin < s.end; ++k) {
      covered += std::min(warm[k].end, s.end) - std::max(warm[k].begin, s.begin);
    }
    if (!warmup_holds(covered, s) || s.end == s.begin || held + 1 >= out.steps.size()) break;
    ++held;
  }
  if (held == 0) return;
  out.warmup.name = std::move(name);
  out.warmup.steps = held;
}

// No steps: the main thread is the host thread with the most ops; the window runs from its first
// host event to the last host or device event of the trace.
void whole_trace(const trace_events& t, const std::string& file, step_choice& out) {
  if (!steps_of(
          t, [](const trace_event& e) { return e.cat == event_cat::op; }, out) &&
      !steps_of(
          t, [](const trace_event& e) { return is_host(e); }, out)) {
    throw std::invalid_argument(file + ": no host events: the trace holds no ops, ranges or runtime calls to read");
  }
  std::uint64_t begin = thread_begin(t, out.pid, out.tid);
  const std::uint64_t end = trace_end(t, out.pid, begin);
  std::string name;
  const std::vector<step_interval> warm = warmup_ranges(t, out.pid, out.tid, &name);
  if (!warm.empty() && op_after(t, out.pid, out.tid, warm.back().end)) {
    begin = warm.back().end;
    out.warmup.name = std::move(name);
    out.warmup.ranges = warm.size();
    for (const step_interval& r : warm) out.warmup.ns += r.end - r.begin;
  }
  out.steps.assign(1, {begin, end});
  out.dropped = 0;  // the ops only chose the main thread: no step range was left out
}

// Iterations from one fetch's start to the next's, the last to `last_end`; with optimizer steps,
// one holding none left out; none of no length (fetches stamped at one instant).
std::vector<step_interval> by_fetches(const step_choice& fetches, std::uint64_t last_end,
                                      const std::vector<step_interval>& optimizer) {
  const std::vector<step_interval>& marks = fetches.steps;
  std::vector<step_interval> out;
  for (std::size_t k = 0; k < marks.size(); ++k) {
    const std::uint64_t end = k + 1 < marks.size() ? marks[k + 1].begin : std::max(last_end, marks[k].begin);
    // the optimizer steps are in time order: the first beginning at or after this fetch
    const auto step = std::lower_bound(optimizer.begin(), optimizer.end(), marks[k].begin,
                                       [](const step_interval& s, std::uint64_t t) { return s.begin < t; });
    const bool holds_step = step != optimizer.end() && step->begin < end;
    if (end > marks[k].begin && (optimizer.empty() || holds_step)) out.push_back({marks[k].begin, end});
  }
  return out;
}

// Iterations each ending where an optimizer step ends; the first from the thread's first fetch
// before it, else from the thread's first host event.
std::vector<step_interval> by_optimizer(const trace_events& t, const step_choice& optimizer,
                                        const std::vector<step_interval>& fetches) {
  std::uint64_t begin = thread_begin(t, optimizer.pid, optimizer.tid);
  if (!fetches.empty() && fetches.front().begin < optimizer.steps.front().end) begin = fetches.front().begin;
  std::vector<step_interval> out;
  for (const step_interval& s : optimizer.steps) {
    if (s.end > begin) out.push_back({begin, s.end});
    begin = s.end;
  }
  return out;
}

// A training loop's iterations (trace_steps.hpp); false when the trace shows none.
bool loop_iterations(const trace_events& t, step_choice& out) {
  constexpr std::size_t min_marks = 3;
  const auto name_of = [&t](const trace_event& e) { return std::string_view(t.names[e.name]); };
  step_choice fetches, optimizer;
  const bool fetched = steps_of(
      t, [&](const trace_event& e) { return is_host_op(e) && is_input_op(name_of(e)); }, fetches);
  const bool stepped = steps_of(
      t, [&](const trace_event& e) { return is_host_op(e) && is_optimizer_step(name_of(e)); }, optimizer);
  std::uint64_t last_end = fetched ? trace_end(t, fetches.pid, fetches.steps.back().begin) : 0;
  if (fetched && !op_after(t, fetches.pid, fetches.tid, fetches.steps.back().end)) {
    last_end = fetches.steps.back().begin;  // the loop's closing fetch (its StopIteration): in no iteration
    fetches.steps.pop_back();
  }
  const bool same_thread = fetched && stepped && fetches.pid == optimizer.pid && fetches.tid == optimizer.tid;
  const std::vector<step_interval> none;
  std::vector<step_interval> iterations;
  if (fetched && fetches.steps.size() >= min_marks &&
      (!same_thread || optimizer.steps.size() + 1 >= fetches.steps.size())) {
    iterations = by_fetches(fetches, last_end, same_thread ? optimizer.steps : none);
    out.pid = fetches.pid;
    out.tid = fetches.tid;
    out.loop.marked_by = "fetch";
  } else if (stepped && optimizer.steps.size() >= min_marks) {
    iterations = by_optimizer(t, optimizer, same_thread ? fetches.steps : none);
    out.pid = optimizer.pid;
    out.tid = optimizer.tid;
    out.loop.marked_by = "optimizer";
  }
  if (iterations.size() < 2) return false;
  std::vector<std::uint64_t> others;
  for (std::size_t k = 1; k < iterations.size(); ++k) others.push_back(iterations[k].end - iterations[k].begin);
  std::sort(others.begin(), others.end());
  out.loop.first_ns = iterations.front().end - iterations.front().begin;
  out.loop.others_median_ns = others[others.size() / 2];  // the upper median: a short closing iteration moves it least
  out.loop.first_is_start = iterations.size() >= min_marks && out.loop.others_median_ns > 0 &&
                            out.loop.first_ns >= 2 * out.loop.others_median_ns;
  out.steps = std::move(iterations);
  return true;
}

// Leaves out the steps inside which nothing starts: no host event of the process but the step
// ranges themselves, and no device activity.
void drop_stubs(const trace_events& t, step_choice& out) {
  std::vector<bool> holds(out.steps.size(), false);
  for (const trace_event& e : t.events) {
    const bool host = e.pid == out.pid && is_host(e) && !is_profiler_step(t.names[e.name]);
    if (!host && !is_device(e)) continue;
    auto it = std::upper_bound(out.steps.begin(), out.steps.end(), e.ts,
                               [](std::uint64_t ts, const step_interval& s) { return ts < s.begin; });
    if (it == out.steps.begin()) continue;
    --it;
    if (e.ts < it->end) holds[static_cast<std::size_t>(it - out.steps.begin())] = true;
  }
  std::vector<step_interval> kept;
  for (std::size_t i = 0; i < out.steps.size(); ++i) {
    if (holds[i]) kept.push_back(out.steps[i]);
  }
  out.stubs = out.steps.size() - kept.size();
  out.steps = std::move(kept);
}

}  // namespace

static step_choice choose_steps_unchecked(const trace_events& t, const std::string& file, const std::string& step_name);

// No step outlasts the trace by more than an hour: its other events' span and an hour bound a
// step's length (a 31-year ProfilerStep is no step's time, and the file is refused by name). Not
// the profiler's session (Kineto's `Trace` event): a last step only the profiler's stop closed
// runs past it (HTA's triton_example: a 13.3 s step in a 0.36 s session), and reads.
static void check_step_spans(const trace_events& t, const std::string& file, const step_choice& out) {
  constexpr std::uint64_t slack = 3'600'000'000'000ULL;  // an hour, ns
  std::uint64_t begin = UINT64_MAX, end = 0;
  for (const trace_event& e : t.events) {
    if (is_profiler_step(t.names[e.name]) || t.names[e.name] == own_step_name) continue;
    begin = std::min(begin, e.ts);
    end = std::max(end, e.ts + e.dur);
  }
  if (end == 0) return;
  const std::uint64_t span = end - begin;
  for (std::size_t i = 0; i < out.steps.size(); ++i) {
    const std::uint64_t length = out.steps[i].end - out.steps[i].begin;
    if (length > span + slack) {
      throw std::invalid_argument(fmt::format(
          "{}: step {} lasts {:.6g} s, longer than the trace's other events ({:.6g} s) and an hour: not a step's time",
          file, i, length / 1e9, span / 1e9));
    }
  }
}

step_choice choose_steps(const trace_events& t, const std::string& file, const std::string& step_name) {
  step_choice out = choose_steps_unchecked(t, file, step_name);
  check_step_spans(t, file, out);
  return out;
}

static step_choice choose_steps_unchecked(const trace_events& t, const std::string& file,
                                          const std::string& step_name) {
  step_choice out;
  const auto name_is = [&t](const trace_event& e, std::string_view n) { return t.names[e.name] == n; };
  if (!step_name.empty()) {  // the user's explicit choice comes before any the trace suggests
    out.source = step_source::named_range;
    if (steps_of(
            t, [&](const trace_event& e) { return is_host(e) && name_is(e, step_name); }, out))
      return out;
    throw std::invalid_argument(file + ": no step: the trace has no host range named \"" +
                                escaped_utf8(step_name).substr(0, 80) + "\"");
  }
  out.source = step_source::own_annotations;
  if (steps_of(
          t, [&](const trace_event& e) { return e.cat == event_cat::user_annotation && name_is(e, own_step_name); },
          out)) {
    return out;
  }
  out.source = step_source::profiler_steps;
  if (steps_of(
          t, [&](const trace_event& e) { return is_host_op(e) && is_profiler_step(t.names[e.name]); }, out)) {
    drop_stubs(t, out);
    leading_warmup(t, out);
    return out;
  }
  out.source = step_source::loop_iterations;
  if (loop_iterations(t, out)) {
    leading_warmup(t, out);
    return out;
  }
  out = step_choice{};
  out.source = step_source::whole_trace;
  whole_trace(t, file, out);
  return out;
}

bool steps_ran_before(const trace_events& t, std::uint32_t pid, std::uint32_t tid) {
  std::uint64_t first = UINT64_MAX, number = 0;
  for (const trace_event& e : t.events) {
    if (e.pid != pid || e.tid != tid || e.cat == event_cat::runtime || !is_profiler_step(t.names[e.name]) ||
        e.ts >= first) {
      continue;
    }
    first = e.ts;
    number = 0;
    for (const char c : t.names[e.name].substr(std::string_view("ProfilerStep#").size())) {
      if (c < '0' || c > '9') break;
      number = number * 10 + static_cast<std::uint64_t>(c - '0');
    }
  }
  return first != UINT64_MAX && number > 0;
}

}  // namespace steptrace::detail
