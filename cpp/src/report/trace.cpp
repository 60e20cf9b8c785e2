// summary::trace(): the timeline as Chrome trace event JSON (docs/architecture.md, "Timeline").
//
// One process for the host (a track per thread: steps enclosing their phases; set-aside spans on
// a track of their own beside it, since a set-aside span may cut across a phase) and one for the
// device (a track per stream, syncs on their own track, and per thread a track of the idle gaps
// inside its steps, each cut along the host phase that was innermost meanwhile). Times in µs.
#include <algorithm>
#include <string>
#include <vector>

#include "report/json_fields.hpp"

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
  return json_doc{{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"sort_index", sort}}}};
}

struct interval {
  double begin, end;
};

// The innermost host phase at each instant of [begin, end): the deepest span covering it.
void cut_along_phases(const timeline_step& s, double begin, double end, std::vector<std::pair<interval, std::string>>& out) {
  std::vector<double> cuts{begin, end};
  for (const timeline_span& p : s.phases) {
    if (p.begin_ms > begin && p.begin_ms < end) cuts.push_back(p.begin_ms);
    if (p.end_ms > begin && p.end_ms < end) cuts.push_back(p.end_ms);
  }
  std::sort(cuts.begin(), cuts.end());
  for (std::size_t i = 0; i + 1 < cuts.size(); ++i) {
    const double a = cuts[i], b = cuts[i + 1];
    if (b <= a) continue;
    const double mid = (a + b) / 2;
    const timeline_span* inner = nullptr;
    for (const timeline_span& p : s.phases) {
      if (p.begin_ms <= mid && mid < p.end_ms && (inner == nullptr || p.depth >= inner->depth)) inner = &p;
    }
    const std::string name = inner ? inner->name : "other";
    if (!out.empty() && out.back().second == name && out.back().first.end == a) {
      out.back().first.end = b;
    } else {
      out.push_back({{a, b}, name});
    }
  }
}

}  // namespace

std::string summary::trace() const {
  const std::uint32_t r = rank ? rank->rank : 0;
  const std::uint32_t host_pid = 1 + 2 * r, device_pid = 2 + 2 * r;
  const std::string who = rank ? "rank " + std::to_string(r) + " " : "";
  json_doc events = json_doc::array();
  events.push_back(meta("process_name", host_pid, 0, "steptrace " + who + "host"));
  events.push_back(meta("process_name", device_pid, 0, "steptrace " + who + "GPU"));

  std::vector<std::uint32_t> threads, contexts;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> streams;
  auto note = [](auto& v, auto x) {
    if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
  };
  for (const timeline_step& s : timeline.steps) {
    note(threads, s.thread);
    std::string name = "step " + std::to_string(s.index);
    if (s.slowest) name += " (slowest)";
    if (s.warmup) name += " (warm-up)";
    if (s.failed) name += " (failed)";
    json_doc step = slice(name, s.slowest ? "step,slowest" : "step", s.begin_ms, s.end_ms, host_pid, s.thread);
    step["args"] = {{"step_ms", s.step_ms}, {"index", s.index}, {"slowest", s.slowest}, {"recent", s.recent},
                    {"warmup", s.warmup},   {"failed", s.failed}};
    if (s.phases_dropped) step["args"]["phases_dropped"] = s.phases_dropped;
    events.push_back(step);
    for (const timeline_span& p : s.phases) events.push_back(slice(p.name, "phase", p.begin_ms, p.end_ms, host_pid, s.thread));
    for (const timeline_span& a : s.set_aside) {
      events.push_back(slice("set aside: " + a.name, "set aside", a.begin_ms, a.end_ms, host_pid, aside_track + s.thread));
    }
    if (!s.device_known) continue;
    std::vector<interval> busy;
    for (const timeline_device& d : s.device) {
      json_doc e;
      if (d.stream == UINT32_MAX) {
        note(contexts, d.context);
        e = slice(d.kind, "sync", d.begin_ms, d.end_ms, device_pid, sync_track + d.context);
      } else {
        note(streams, std::make_pair(d.context, d.stream));
        e = slice(d.kind, "device", d.begin_ms, d.end_ms, device_pid, d.context * 65536u + d.stream);
        if (d.kind != "sync") busy.push_back({std::max(d.begin_ms, s.begin_ms), std::min(d.end_ms, s.end_ms)});
      }
      if (d.bytes) e["args"] = {{"bytes", d.bytes}};
      events.push_back(e);
    }
    // Idle: the step's window less the union of what its streams did, cut along host phases.
    std::sort(busy.begin(), busy.end(), [](const interval& a, const interval& b) { return a.begin < b.begin; });
    double at = s.begin_ms;
    std::vector<interval> idle;
    for (const interval& b : busy) {
      if (b.end <= b.begin) continue;
      if (b.begin > at) idle.push_back({at, b.begin});
      at = std::max(at, b.end);
    }
    if (s.end_ms > at) idle.push_back({at, s.end_ms});
    std::vector<std::pair<interval, std::string>> cut;
    for (const interval& g : idle) cut_along_phases(s, g.begin, g.end, cut);
    for (const auto& [g, phase] : cut) {
      json_doc e = slice("GPU idle: " + phase, "idle", g.begin, g.end, device_pid, idle_track + s.thread);
      e["args"] = {{"host_phase", phase}, {"step", s.index}};
      events.push_back(e);
    }
  }
  for (const timeline_set_aside& a : timeline.set_aside) {
    note(threads, a.thread);
    bool in_step = false;  // already drawn with its step
    for (const timeline_step& s : timeline.steps) {
      in_step = in_step || (s.thread == a.thread && a.span.begin_ms >= s.begin_ms && a.span.end_ms <= s.end_ms);
    }
    if (!in_step) {
      events.push_back(slice("set aside: " + a.span.name, "set aside", a.span.begin_ms, a.span.end_ms, host_pid,
                             aside_track + a.thread));
    }
  }
  std::sort(threads.begin(), threads.end());
  for (std::uint32_t t : threads) {
    events.push_back(meta("thread_name", host_pid, t, "thread " + std::to_string(t)));
    events.push_back(sort_meta(host_pid, t, 2 * t));
    events.push_back(meta("thread_name", host_pid, aside_track + t, "thread " + std::to_string(t) + " set aside"));
    events.push_back(sort_meta(host_pid, aside_track + t, 2 * t + 1));
    events.push_back(meta("thread_name", device_pid, idle_track + t, "GPU idle in thread " + std::to_string(t) + "'s steps"));
  }
  for (const auto& [context, stream] : streams) {
    events.push_back(meta("thread_name", device_pid, context * 65536u + stream,
                          "context " + std::to_string(context) + " stream " + std::to_string(stream)));
  }
  for (std::uint32_t c : contexts) {
    events.push_back(meta("thread_name", device_pid, sync_track + c, "context " + std::to_string(c) + " syncs"));
  }
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
