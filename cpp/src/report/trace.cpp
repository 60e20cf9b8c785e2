// summary::trace(): the timeline as Chrome trace event JSON (cpp/src/analysis/README.md, "Timeline"), and
// the events of one rank's steps that the job's timeline (job_timeline.cpp) writes per rank.
//
// One process for the host (a track per thread: steps enclosing their phases; set-aside spans on
// a track of their own beside it, since a set-aside span may cut across a phase) and one for the
// device (a track per stream, syncs on their own track, and per thread a track of the idle gaps
// inside its steps, each cut along the host phase that was innermost meanwhile). Times in µs.
#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "report/trace_events.hpp"

namespace steptrace {
namespace {

using detail::json_doc;

constexpr std::uint32_t aside_track = 1'000'000;  // + thread: its set-aside spans
constexpr std::uint32_t idle_track = 2'000'000;   // + thread: idle gaps in its steps
constexpr std::uint32_t sync_track = 3'000'000;   // + context: syncs

json_doc slice(const std::string& name, const char* cat, double begin_ms, double end_ms, std::uint32_t pid,
               std::uint32_t tid) {
  return json_doc{{"name", name},
                  {"cat", cat},
                  {"ph", "X"},
                  {"ts", begin_ms * 1000.0},
                  {"dur", std::max(0.0, end_ms - begin_ms) * 1000.0},
                  {"pid", pid},
                  {"tid", tid}};
}

json_doc meta(const char* what, std::uint32_t pid, std::uint32_t tid, const std::string& name) {
  return json_doc{{"name", what}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}};
}

json_doc sort_meta(std::uint32_t pid, std::uint32_t tid, std::uint32_t sort) {
  return json_doc{
      {"name", "thread_sort_index"}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"sort_index", sort}}}};
}

struct interval {
  double begin, end;
};

// A stretch of a step's window and the innermost host phase over it ("other": none).
struct segment {
  double begin, end;
  const std::string* phase;
};

// The step's window cut where its innermost host phase changes: the deepest span covering each
// instant (the later listed among equally deep ones). One sweep over the spans' ends, so a step
// with 100,000 spans costs O(n log n), not O(n^2).
std::vector<segment> phase_segments(const timeline_step& s) {
  static const std::string other = "other";
  struct edge {
    double at;
    bool opens;
    std::size_t span;
  };
  std::vector<edge> edges;
  edges.reserve(2 * s.phases.size());
  for (std::size_t i = 0; i < s.phases.size(); ++i) {
    if (s.phases[i].end_ms <= s.phases[i].begin_ms) continue;
    edges.push_back({s.phases[i].begin_ms, true, i});
    edges.push_back({s.phases[i].end_ms, false, i});
  }
  std::sort(edges.begin(), edges.end(), [](const edge& x, const edge& y) { return x.at < y.at; });
  std::set<std::pair<std::uint32_t, std::size_t>> open;  // (depth, span): the innermost is the last
  const auto innermost = [&] { return open.empty() ? &other : &s.phases[open.rbegin()->second].name; };
  std::vector<segment> out;
  const auto emit = [&](double from, double to) {
    from = std::max(from, s.begin_ms);
    to = std::min(to, s.end_ms);
    if (to <= from) return;
    const std::string* phase = innermost();
    if (!out.empty() && out.back().end == from && *out.back().phase == *phase) {
      out.back().end = to;
    } else {
      out.push_back({from, to, phase});
    }
  };
  double at = s.begin_ms;
  for (std::size_t i = 0; i < edges.size();) {
    const double t = edges[i].at;
    emit(at, t);
    at = std::max(at, t);
    for (; i < edges.size() && edges[i].at == t; ++i) {
      const std::pair<std::uint32_t, std::size_t> key{s.phases[edges[i].span].depth, edges[i].span};
      if (edges[i].opens) {
        open.insert(key);
      } else {
        open.erase(key);
      }
    }
  }
  emit(at, s.end_ms);
  return out;
}

// The part of `segments` within [begin, end), appended to `out` (joined where the phase goes on).
void cut_along(const std::vector<segment>& segments, double begin, double end,
               std::vector<std::pair<interval, std::string>>& out) {
  auto it = std::upper_bound(segments.begin(), segments.end(), begin,
                             [](double t, const segment& g) { return t < g.end; });  // the first ending after begin
  for (; it != segments.end() && it->begin < end; ++it) {
    const double a = std::max(begin, it->begin), b = std::min(end, it->end);
    if (b <= a) continue;
    if (!out.empty() && out.back().second == *it->phase && out.back().first.end == a) {
      out.back().first.end = b;
    } else {
      out.push_back({{a, b}, *it->phase});
    }
  }
}

}  // namespace

namespace detail {

void add_trace_events(const rank_tracks& tracks, const std::vector<const timeline_step*>& steps,
                      const std::vector<timeline_set_aside>& set_aside, json_doc& events) {
  const std::uint32_t host_pid = 1 + 2 * tracks.rank, device_pid = 2 + 2 * tracks.rank;
  const double shift = tracks.shift_ms;
  events.push_back(meta("process_name", host_pid, 0, "steptrace " + tracks.who + "host"));
  events.push_back(meta("process_name", device_pid, 0, "steptrace " + tracks.who + "GPU"));
  events.push_back(json_doc{{"name", "process_sort_index"},
                            {"ph", "M"},
                            {"pid", host_pid},
                            {"tid", 0},
                            {"args", {{"sort_index", host_pid}}}});
  events.push_back(json_doc{{"name", "process_sort_index"},
                            {"ph", "M"},
                            {"pid", device_pid},
                            {"tid", 0},
                            {"args", {{"sort_index", device_pid}}}});
  const auto at = [&](double host_ms) { return host_ms + shift; };

  std::set<std::uint32_t> threads, contexts;  // tracks to name (sets: a file may hold 100,000)
  std::set<std::pair<std::uint32_t, std::uint32_t>> streams;
  auto note = [](auto& set, auto x) { set.insert(x); };
  for (const timeline_step* sp : steps) {
    const timeline_step& s = *sp;
    note(threads, s.thread);
    std::string name = "step " + std::to_string(s.index);
    if (s.slowest) name += " (slowest)";
    if (s.warmup) name += " (warm-up)";
    if (s.failed) name += " (failed)";
    json_doc step = slice(name, s.slowest ? "step,slowest" : "step", at(s.begin_ms), at(s.end_ms), host_pid, s.thread);
    step["args"] = {{"step_ms", s.step_ms}, {"index", s.index},   {"slowest", s.slowest},
                    {"recent", s.recent},   {"warmup", s.warmup}, {"failed", s.failed}};
    if (s.phases_dropped) step["args"]["phases_dropped"] = s.phases_dropped;
    events.push_back(step);
    for (const timeline_span& p : s.phases) {
      events.push_back(slice(p.name, "phase", at(p.begin_ms), at(p.end_ms), host_pid, s.thread));
    }
    for (const timeline_span& a : s.set_aside) {
      events.push_back(
          slice("set aside: " + a.name, "set aside", at(a.begin_ms), at(a.end_ms), host_pid, aside_track + s.thread));
    }
    if (!s.device_known) continue;
    std::vector<interval> busy;
    for (const timeline_device& d : s.device) {
      json_doc e;
      if (d.stream == UINT32_MAX) {
        note(contexts, d.context);
        e = slice(d.kind, "sync", at(d.begin_ms), at(d.end_ms), device_pid, sync_track + d.context);
      } else {
        note(streams, std::make_pair(d.context, d.stream));
        e = slice(d.name.empty() ? d.kind : d.name, d.collective ? "device,collective" : "device", at(d.begin_ms),
                  at(d.end_ms), device_pid, d.context * 65536u + d.stream);
        if (d.kind != "sync") busy.push_back({std::max(d.begin_ms, s.begin_ms), std::min(d.end_ms, s.end_ms)});
      }
      if (d.bytes) e["args"] = {{"bytes", d.bytes}};
      events.push_back(e);
    }
    // Idle: the step's window less the union of what its streams did, cut along host phases.
    std::sort(busy.begin(), busy.end(), [](const interval& a, const interval& b) { return a.begin < b.begin; });
    double from = s.begin_ms;
    std::vector<interval> idle;
    for (const interval& b : busy) {
      if (b.end <= b.begin) continue;
      if (b.begin > from) idle.push_back({from, b.begin});
      from = std::max(from, b.end);
    }
    if (s.end_ms > from) idle.push_back({from, s.end_ms});
    std::vector<std::pair<interval, std::string>> cut;
    const std::vector<segment> segments = phase_segments(s);
    for (const interval& g : idle) cut_along(segments, g.begin, g.end, cut);
    for (const auto& [g, phase] : cut) {
      json_doc e = slice("GPU idle: " + phase, "idle", at(g.begin), at(g.end), device_pid, idle_track + s.thread);
      e["args"] = {{"host_phase", phase}, {"step", s.index}, {"thread", s.thread}};
      events.push_back(e);
    }
  }
  std::map<std::uint32_t, std::vector<std::pair<double, double>>> step_windows;  // by thread, by start
  for (const timeline_step* s : steps) step_windows[s->thread].emplace_back(s->begin_ms, s->end_ms);
  for (auto& [thread, windows] : step_windows) std::sort(windows.begin(), windows.end());
  const auto in_a_step = [&](const timeline_set_aside& a) {  // already drawn with its step
    const auto found = step_windows.find(a.thread);
    if (found == step_windows.end()) return false;
    const auto& windows = found->second;
    // Steps on a thread do not overlap: only the last one starting at or before it can hold it.
    auto it = std::upper_bound(windows.begin(), windows.end(), std::make_pair(a.span.begin_ms, HUGE_VAL));
    return it != windows.begin() && a.span.end_ms <= std::prev(it)->second;
  };
  for (const timeline_set_aside& a : set_aside) {
    note(threads, a.thread);
    if (!in_a_step(a)) {
      events.push_back(slice("set aside: " + a.span.name, "set aside", at(a.span.begin_ms), at(a.span.end_ms), host_pid,
                             aside_track + a.thread));
    }
  }
  for (std::uint32_t t : threads) {
    events.push_back(meta("thread_name", host_pid, t, "thread " + std::to_string(t)));
    events.push_back(sort_meta(host_pid, t, 2 * t));
    events.push_back(meta("thread_name", host_pid, aside_track + t, "thread " + std::to_string(t) + " set aside"));
    events.push_back(sort_meta(host_pid, aside_track + t, 2 * t + 1));
    events.push_back(
        meta("thread_name", device_pid, idle_track + t, "GPU idle in thread " + std::to_string(t) + "'s steps"));
  }
  for (const auto& [context, stream] : streams) {
    events.push_back(meta("thread_name", device_pid, context * 65536u + stream,
                          "context " + std::to_string(context) + " stream " + std::to_string(stream)));
  }
  for (std::uint32_t c : contexts) {
    events.push_back(meta("thread_name", device_pid, sync_track + c, "context " + std::to_string(c) + " syncs"));
  }
}

}  // namespace detail

std::string summary::trace() const {
  detail::rank_tracks tracks;
  tracks.rank = rank ? rank->rank : 0;
  tracks.who = rank ? "rank " + std::to_string(tracks.rank) + " " : "";
  std::vector<const timeline_step*> all;
  all.reserve(timeline.steps.size());
  for (const timeline_step& s : timeline.steps) all.push_back(&s);
  json_doc events = json_doc::array();
  detail::add_trace_events(tracks, all, timeline.set_aside, events);
  json_doc doc = {{"traceEvents", events},
                  {"displayTimeUnit", "ms"},
                  {"otherData",
                   {{"producer", "steptrace"},
                    {"label", diag.label},
                    {"steps", steps},
                    {"step_p50_ms", step_ms.p50},
                    {"times", "microseconds from the run's first instant"}}}};
  return doc.dump(-1, ' ', false, json_doc::error_handler_t::replace);
}

}  // namespace steptrace
