#include "profiler/trace_steps.hpp"

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
  std::stable_sort(found.begin(), found.end(), [](const step_interval& a, const step_interval& b) { return a.begin < b.begin; });
  for (const step_interval& s : found) {
    if (out.steps.empty() || s.begin >= out.steps.back().end) {
      out.steps.push_back(s);
    } else {
      ++out.dropped;  // counted, and said in the summary's errors and backend reason
    }
  }
  return true;
}

// No steps: the main thread is the host thread with the most ops; the window runs from its first
// host event to the last host or device event of the trace.
void whole_trace(const trace_events& t, const std::string& file, step_choice& out) {
  if (!steps_of(t, [](const trace_event& e) { return e.cat == event_cat::op; }, out) &&
      !steps_of(t, [](const trace_event& e) { return is_host(e); }, out)) {
    throw std::invalid_argument(file + ": no host events: the trace holds no ops, ranges or runtime calls to read");
  }
  std::uint64_t begin = UINT64_MAX, end = 0;
  for (const trace_event& e : t.events) {
    if (e.pid == out.pid && e.tid == out.tid && is_host(e)) begin = std::min(begin, e.ts);
  }
  for (const trace_event& e : t.events) {
    if ((is_device(e) || (e.pid == out.pid && is_host(e))) && e.ts + e.dur > begin) end = std::max(end, e.ts + e.dur);
  }
  out.steps.assign(1, {begin, std::max(begin, end)});
  out.dropped = 0;  // the ops only chose the main thread: no step range was left out
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

step_choice choose_steps(const trace_events& t, const std::string& file, const std::string& step_name) {
  step_choice out;
  const auto name_is = [&t](const trace_event& e, std::string_view n) { return t.names[e.name] == n; };
  if (!step_name.empty()) {  // the user's explicit choice comes before any the trace suggests
    out.source = step_source::named_range;
    if (steps_of(t, [&](const trace_event& e) { return is_host(e) && name_is(e, step_name); }, out)) return out;
    throw std::invalid_argument(file + ": no step: the trace has no host range named \"" +
                                escaped_utf8(step_name).substr(0, 80) + "\"");
  }
  out.source = step_source::own_annotations;
  if (steps_of(t, [&](const trace_event& e) { return e.cat == event_cat::user_annotation && name_is(e, own_step_name); }, out)) {
    return out;
  }
  out.source = step_source::profiler_steps;
  if (steps_of(t, [&](const trace_event& e) { return is_host_op(e) && is_profiler_step(t.names[e.name]); }, out)) {
    drop_stubs(t, out);
    return out;
  }
  out.source = step_source::whole_trace;
  whole_trace(t, file, out);
  return out;
}

}  // namespace steptrace::detail
