// The summary JSON's `timeline`, `series` and `host_memory` sections (cpp/src/report/json/README.md,
// "The summary JSON").
#include <stdexcept>
#include <string>

#include "analysis/step_series.hpp"
#include "report/json/json_fields.hpp"

namespace steptrace::detail {
namespace {

json_doc span_json(const timeline_span& s) {
  return json_doc{{"name", s.name}, {"begin_ms", s.begin_ms}, {"end_ms", s.end_ms}, {"depth", s.depth}};
}

timeline_span span_from(const json_doc& j) {
  timeline_span s{j.at("name").get<std::string>(), signed_at(j, "begin_ms"), signed_at(j, "end_ms"),
                  static_cast<std::uint32_t>(count_at(j, "depth"))};
  if (s.end_ms < s.begin_ms) throw std::invalid_argument("a span of \"" + s.name + "\" ends before it begins");
  return s;
}

std::uint32_t id_at(const json_doc& j, const char* key) {
  if (j.at(key).is_null()) return UINT32_MAX;
  const std::uint64_t v = count_at(j, key);
  if (v > UINT32_MAX) throw std::invalid_argument(std::string("\"") + key + "\" is out of range");
  return static_cast<std::uint32_t>(v);
}

}  // namespace

json_doc timeline_json(const timeline_view& t) {
  json_doc steps = json_doc::array();
  for (const timeline_step& s : t.steps) {
    json_doc phases = json_doc::array(), aside = json_doc::array(), device = json_doc::array();
    for (const timeline_span& p : s.phases) phases.push_back(span_json(p));
    for (const timeline_span& a : s.set_aside) aside.push_back(span_json(a));
    for (const timeline_device& d : s.device) {
      device.push_back({{"kind", d.kind},
                        {"device", d.device},
                        {"context", d.context},
                        {"stream", d.stream == UINT32_MAX ? json_doc(nullptr) : json_doc(d.stream)},
                        {"begin_ms", d.begin_ms},
                        {"end_ms", d.end_ms},
                        {"bytes", d.bytes},
                        {"collective", d.collective}});
      if (!d.name.empty()) device.back()["name"] = d.name;
    }
    steps.push_back({{"thread", s.thread},
                     {"index", s.index},
                     {"begin_ms", s.begin_ms},
                     {"end_ms", s.end_ms},
                     {"step_ms", s.step_ms},
                     {"recent", s.recent},
                     {"slowest", s.slowest},
                     {"warmup", s.warmup},
                     {"failed", s.failed},
                     {"phases", phases},
                     {"phases_dropped", s.phases_dropped},
                     {"set_aside", aside},
                     {"device", s.device_known ? device : json_doc(nullptr)},
                     {"device_dropped", s.device_dropped}});
  }
  json_doc aside = json_doc::array();
  for (const timeline_set_aside& a : t.set_aside) {
    json_doc j = span_json(a.span);
    j["thread"] = a.thread;
    aside.push_back(j);
  }
  return json_doc{{"recent_per_thread", t.recent_per_thread},
                  {"slowest_per_thread", t.slowest_per_thread},
                  {"bytes", t.bytes},
                  {"steps", steps},
                  {"set_aside", aside}};
}

timeline_view timeline_from(const json_doc& j) {
  timeline_view t;
  t.recent_per_thread = id_at(j, "recent_per_thread");
  t.slowest_per_thread = id_at(j, "slowest_per_thread");
  t.bytes = count_at(j, "bytes");
  for (const json_doc& s : j.at("steps")) {
    timeline_step& st = t.steps.emplace_back();
    st.thread = id_at(s, "thread");
    st.index = count_at(s, "index");
    st.begin_ms = signed_at(s, "begin_ms");
    st.end_ms = signed_at(s, "end_ms");
    st.step_ms = number_at(s, "step_ms");
    st.recent = s.at("recent").get<bool>();
    st.slowest = s.at("slowest").get<bool>();
    st.warmup = s.at("warmup").get<bool>();
    st.failed = s.at("failed").get<bool>();
    if (st.end_ms < st.begin_ms)
      throw std::invalid_argument("timeline step " + std::to_string(st.index) + " ends before it begins");
    for (const json_doc& p : s.at("phases")) st.phases.push_back(span_from(p));
    st.phases_dropped = id_at(s, "phases_dropped");
    for (const json_doc& a : s.at("set_aside")) st.set_aside.push_back(span_from(a));
    st.device_known = !s.at("device").is_null();
    if (st.device_known) {
      for (const json_doc& d : s.at("device")) {
        st.device.push_back({d.at("kind").get<std::string>(), id_at(d, "device"), id_at(d, "context"),
                             id_at(d, "stream"), signed_at(d, "begin_ms"), signed_at(d, "end_ms"), count_at(d, "bytes"),
                             d.value("collective", false), d.value("name", std::string())});
      }
    }
    st.device_dropped = id_at(s, "device_dropped");
  }
  for (const json_doc& a : j.at("set_aside")) t.set_aside.push_back({id_at(a, "thread"), span_from(a)});
  return t;
}

json_doc series_json(const step_series& s) {
  json_doc points = json_doc::array();
  for (const series_point& p : s.points) {
    points.push_back({{"first_step", p.first_step},
                      {"steps", p.steps},
                      {"step_ms", p.step_ms},
                      {"phase_ms", p.phase_ms},
                      {"rss_mb", p.rss_mb < 0 ? json_doc(nullptr) : json_doc(p.rss_mb)},
                      {"set_aside_ms", p.set_aside_ms}});
  }
  return json_doc{{"steps_per_point", s.steps_per_point}, {"phases", s.phases}, {"points", points}};
}

step_series series_from(const json_doc& j) {
  step_series s;
  s.steps_per_point = count_at(j, "steps_per_point");
  s.phases = j.at("phases").get<std::vector<std::string>>();
  for (const json_doc& p : j.at("points")) {
    series_point& o = s.points.emplace_back();
    o.first_step = count_at(p, "first_step");
    o.steps = count_at(p, "steps");
    o.step_ms = number_at(p, "step_ms");
    o.phase_ms = p.at("phase_ms").get<std::vector<double>>();
    if (s.points.size() > step_series_builder::max_points) {
      throw std::invalid_argument("a series of more than " + std::to_string(step_series_builder::max_points) +
                                  " points, more than steptrace writes");
    }
    if (o.phase_ms.size() != s.phases.size()) {
      throw std::invalid_argument("a series point has " + std::to_string(o.phase_ms.size()) + " phase times for " +
                                  std::to_string(s.phases.size()) + " phases");
    }
    o.rss_mb = p.at("rss_mb").is_null() ? -1.0 : number_at(p, "rss_mb");
    o.set_aside_ms = p.contains("set_aside_ms") ? number_at(p, "set_aside_ms") : 0.0;  // absent in older files
  }
  return s;
}

json_doc host_memory_json(const host_memory_stats& m) {
  return json_doc{{"first_mb", m.first_mb},
                  {"last_mb", m.last_mb},
                  {"peak_mb", m.peak_mb},
                  {"growth_mb", m.last_mb - m.first_mb},
                  {"samples", m.samples}};
}

host_memory_stats host_memory_from(const json_doc& j) {
  return host_memory_stats{number_at(j, "first_mb"), number_at(j, "last_mb"), number_at(j, "peak_mb"),
                           count_at(j, "samples")};
}

}  // namespace steptrace::detail
