// summary::json() and summary::from_json(): schema "steptrace.summary/1" (cpp/src/report/json/README.md, "The summary
// JSON").
#include <cmath>
#include <stdexcept>

#include "report/json/json_fields.hpp"
#include "report/report.hpp"
#include "steptrace/summary.hpp"

namespace steptrace {
namespace {

constexpr const char* schema_name = "steptrace.summary/1";

using detail::count_at;
using detail::cut_reason;
using detail::gpu_from;
using detail::gpu_json;
using detail::json_doc;
using detail::max_json_depth;
using detail::nests_deeper_than;
using detail::number_at;
using detail::printable;
using detail::rank_from;
using detail::rank_json;
using detail::ranks_from;
using detail::ranks_json;
using detail::shown;
using detail::signed_at;
using detail::stat_from;
using detail::stat_json;

// diagnosis.gains: {cause: fraction of step (or run) time}, largest first.
json_doc gains_json(const std::vector<std::pair<std::string, double>>& gains) {
  json_doc out = json_doc::object();
  for (const auto& [cause, gain] : gains) out[cause] = gain;
  return out;
}

std::vector<std::pair<std::string, double>> gains_from(const json_doc& j) {
  if (!j.is_object()) throw std::invalid_argument("\"gains\" is not an object of causes");
  std::vector<std::pair<std::string, double>> gains;
  for (const auto& [cause, gain] : j.items()) {
    if (!gain.is_number() || !(gain.get<double>() >= 0 && gain.get<double>() <= 1)) {
      throw std::invalid_argument("a gain must be a fraction between 0 and 1, not " + shown(gain));
    }
    gains.emplace_back(cause, gain.get<double>());
  }
  return gains;
}

// diagnosis.hypotheses: each fix checked, in the order weighed; diagnosis.periodic: work one step
// in N carries.
json_doc hypotheses_json(const std::vector<hypothesis>& hs) {
  json_doc out = json_doc::array();
  for (const hypothesis& h : hs) {
    out.push_back({{"fix", h.fix}, {"cause", h.cause}, {"holds", h.holds}, {"premise", h.premise}, {"gain", h.gain}});
  }
  return out;
}

std::vector<hypothesis> hypotheses_from(const json_doc& j) {
  if (!j.is_array()) throw std::invalid_argument("\"hypotheses\" is not an array");
  std::vector<hypothesis> out;
  for (const json_doc& h : j) {
    out.push_back({h.at("fix").get<std::string>(), h.at("cause").get<std::string>(), h.at("holds").get<bool>(),
                   h.at("premise").get<std::string>(), number_at(h, "gain")});
  }
  return out;
}

json_doc periodic_json(const std::vector<periodic_work>& ps) {
  json_doc out = json_doc::array();
  for (const periodic_work& p : ps) {
    out.push_back({{"phase", p.phase}, {"every", p.every}, {"excess_ms", p.excess_ms}, {"share", p.share}});
  }
  return out;
}

std::vector<periodic_work> periodic_from(const json_doc& j) {
  if (!j.is_array()) throw std::invalid_argument("\"periodic\" is not an array");
  std::vector<periodic_work> out;
  for (const json_doc& p : j) {
    out.push_back(
        {p.at("phase").get<std::string>(), count_at(p, "every"), number_at(p, "excess_ms"), number_at(p, "share")});
  }
  return out;
}

json_doc phases_json_of(const std::vector<phase_stats>& phases) {
  json_doc phases_json = json_doc::object();
  for (const phase_stats& p : phases) {
    phases_json[p.name] = {{"total_ms", p.ms.total},
                           {"mean_ms", p.ms.mean},
                           {"p50_ms", p.ms.p50},
                           {"p95_ms", p.ms.p95},
                           {"p99_ms", p.ms.p99},
                           {"max_ms", p.ms.max},
                           {"share", p.share},
                           {"calls", p.calls},
                           {"parent", p.parent.empty() ? json_doc(nullptr) : json_doc(p.parent)},
                           {"inclusive_ms", stat_json(p.inclusive_ms)}};
    if (p.device_ms) {
      phases_json[p.name]["device_ms"] = stat_json(*p.device_ms);  // per call, from CUDA events
      phases_json[p.name]["device_calls"] = p.device_calls;
    }
  }
  return phases_json;
}

std::vector<phase_stats> phases_from(const json_doc& doc) {
  std::vector<phase_stats> out;
  for (const auto& [name, p] : doc.items()) {
    phase_stats row;
    row.name = name;
    row.ms = stat_ms{number_at(p, "total_ms"), number_at(p, "mean_ms"), number_at(p, "p50_ms"),
                     number_at(p, "p95_ms"),   number_at(p, "p99_ms"),  number_at(p, "max_ms")};
    row.share = number_at(p, "share");
    if (p.contains("parent") && !p.at("parent").is_null()) row.parent = p.at("parent").get<std::string>();
    row.inclusive_ms = p.contains("inclusive_ms") ? stat_from(p.at("inclusive_ms")) : row.ms;
    row.calls = count_at(p, "calls");
    if (p.contains("device_ms")) {
      row.device_ms = stat_from(p.at("device_ms"));
      row.device_calls = count_at(p, "device_calls");
    }
    out.push_back(std::move(row));
  }
  return out;
}

json_doc batches_json(const batch_stats& b) {
  return json_doc{{"batches", b.batches},
                  {"size", {{"mean", b.size_mean}, {"p50", b.size_p50}, {"max", b.size_max}}},
                  {"ms", stat_json(b.ms)},
                  {"phases", phases_json_of(b.phases)},
                  {"busy_share", b.busy_share}};
}

batch_stats batches_from(const json_doc& j) {
  batch_stats b;
  b.batches = count_at(j, "batches");
  const json_doc& size = j.at("size");
  b.size_mean = number_at(size, "mean");
  b.size_p50 = number_at(size, "p50");
  b.size_max = number_at(size, "max");
  b.ms = stat_from(j.at("ms"));
  b.phases = phases_from(j.at("phases"));
  b.busy_share = number_at(j, "busy_share");
  return b;
}

}  // namespace

std::string summary::json() const {
  json_doc phases_json = phases_json_of(phases);
  json_doc unscoped_json = json_doc::object();
  for (const unscoped_phase& u : unscoped_phases) {
    unscoped_json[u.name] = {{"total_ms", u.total_ms}, {"max_ms", u.max_ms}, {"calls", u.calls}};
  }
  json_doc set_aside_json = json_doc::object();
  for (const set_aside_stats& a : set_aside) {
    set_aside_json[a.name] = {{"calls", a.calls},
                              {"total_ms", a.total_ms},
                              {"mean_ms", a.mean_ms},
                              {"max_ms", a.max_ms},
                              {"run_share", a.run_share}};
  }
  json_doc facts_json = json_doc::object();
  for (const auto& [key, value] : facts) facts_json[key] = value;
  json_doc doc = {
      {"schema", schema_name},
      {"steps", steps},
      {"warmup_steps", warmup_steps},
      {"failed_steps", failed_steps},
      {"threads", threads},
      {"windows", windows},
      {"requests", requests},
      {"wall_ms", wall_ms},
      {"step_ms", stat_json(step_ms)},
      {"phases", phases_json},
      {"unscoped_phases", unscoped_json},
      {"set_aside", set_aside_json},
      {"run_ms", run_ms},
      {"gpu", gpu ? gpu_json(*gpu) : json_doc(nullptr)},
      {"diagnosis",
       {{"label", diag.label.empty() ? json_doc(nullptr) : json_doc(diag.label)},
        {"evidence", diag.evidence},
        {"advice", diag.advice},
        {"gains", gains_json(diag.gains)},
        {"runner_up", diag.runner_up.empty() ? json_doc(nullptr) : json_doc(diag.runner_up)},
        {"hypotheses", hypotheses_json(diag.hypotheses)},
        {"periodic", periodic_json(diag.periodic)}}},
      {"backend",
       {{"cuda", backend.cuda},
        {"cupti", backend.cupti},
        {"reason", backend.reason},
        {"host_clock", backend.host_clock}}},
      {"errors",
       {{"nested_steps", errors.nested_steps},
        {"unbalanced_phases", errors.unbalanced_phases},
        {"requests_abandoned", errors.requests_abandoned},
        {"request_phases_dropped", errors.request_phases_dropped},
        {"phase_names_folded", errors.phase_names_folded},
        {"windows_dropped", errors.windows_dropped},
        {"window_calls_failed", errors.window_calls_failed}}},
      {"batches", batches ? batches_json(*batches) : json_doc(nullptr)},
      {"facts", facts_json},
  };
  if (rank) doc["rank"] = rank_json(*rank);
  if (ranks) doc["ranks"] = ranks_json(*ranks);
  if (!cycles.empty()) doc["cycles"] = detail::cycles_json(cycles);
  if (step_device_ms) {
    doc["step_device_ms"] = stat_json(*step_device_ms);  // per step, from CUDA events
    doc["step_device_steps"] = step_device_steps;
  }
  if (host_memory) doc["host_memory"] = detail::host_memory_json(*host_memory);
  if (ceiling) doc["ceiling"] = detail::ceiling_json(*ceiling);
  if (!captures.empty()) doc["captures"] = detail::captures_json(captures);
  if (live_ranks) doc["live_ranks"] = detail::live_ranks_json(*live_ranks);
  if (hang) doc["hang"] = detail::hang_json(*hang);
  if (node) {  // a live window of a rank: its node's readings (-1: not read)
    doc["node"] = {{"gpu", node->gpu},
                   {"sm_clock_mhz", node->sm_clock_mhz},
                   {"mem_clock_mhz", node->mem_clock_mhz},
                   {"power_w", node->power_w},
                   {"temperature_c", node->temperature_c},
                   {"throttle", node->throttle},
                   {"ecc_errors", node->ecc_errors},
                   {"xid_errors", node->xid_errors},
                   {"steal_share", node->steal_share},
                   {"involuntary_per_s", node->involuntary_per_s},
                   {"others_cpu_share", node->others_cpu_share}};
  }
  if (!series.points.empty()) doc["series"] = detail::series_json(series);
  if (!timeline.steps.empty() || !timeline.set_aside.empty()) doc["timeline"] = detail::timeline_json(timeline);
  // Names are valid UTF-8 (the registry sees to it); a byte that is not still never throws.
  return doc.dump(2, ' ', false, json_doc::error_handler_t::replace);
}

std::string detail::summary_json_line(const summary& s) {
  return json_doc::parse(s.json()).dump(-1, ' ', false, json_doc::error_handler_t::replace);
}

summary summary::from_json(std::string_view text) {
  if (nests_deeper_than(text, max_json_depth)) {
    throw std::invalid_argument("steptrace: not a steptrace summary: nested deeper than " +
                                std::to_string(max_json_depth) + " levels");
  }
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    throw std::invalid_argument(text.empty() ? "steptrace: not a steptrace summary: the file is empty"
                                             : "steptrace: not a steptrace summary: only white space");
  }
  json_doc doc;
  try {
    doc = printable(json_doc::parse(text.begin(), text.end()));
  } catch (const json_doc::exception& e) {  // a syntax error, or a number out of range (1e400)
    throw std::invalid_argument("steptrace: not a steptrace summary: not valid JSON (" + detail::json_words(e) + ")");
  }
  if (!doc.is_object() || !doc.contains("schema")) {
    throw std::invalid_argument("steptrace: not a steptrace summary: no \"schema\" field");
  }
  if (doc["schema"] != schema_name) {
    throw std::invalid_argument("steptrace: unsupported summary schema " + shown(doc["schema"]) +
                                " (this version reads \"" + schema_name + "\")");
  }
  try {
    summary s;
    s.steps = count_at(doc, "steps");
    s.warmup_steps = count_at(doc, "warmup_steps");
    s.failed_steps = count_at(doc, "failed_steps");
    s.threads = count_at(doc, "threads");
    if (doc.contains("windows")) {
      if (!doc.at("windows").is_boolean()) throw std::invalid_argument("\"windows\" is not true or false");
      s.windows = doc.at("windows").get<bool>();
    }
    s.wall_ms = number_at(doc, "wall_ms");
    s.step_ms = stat_from(doc.at("step_ms"));
    if (doc.contains("step_device_ms")) {
      s.step_device_ms = stat_from(doc.at("step_device_ms"));
      s.step_device_steps = count_at(doc, "step_device_steps");
    }
    s.phases = phases_from(doc.at("phases"));
    if (doc.contains("requests")) s.requests = count_at(doc, "requests");
    if (doc.contains("batches") && !doc.at("batches").is_null()) s.batches = batches_from(doc.at("batches"));
    for (const auto& [name, u] : doc.at("unscoped_phases").items()) {
      s.unscoped_phases.push_back({name, number_at(u, "total_ms"), number_at(u, "max_ms"), count_at(u, "calls")});
    }
    if (doc.contains("set_aside")) {
      for (const auto& [name, a] : doc.at("set_aside").items()) {
        s.set_aside.push_back({name, count_at(a, "calls"), number_at(a, "total_ms"), number_at(a, "mean_ms"),
                               number_at(a, "max_ms"), number_at(a, "run_share")});
      }
    }
    if (doc.contains("run_ms")) s.run_ms = number_at(doc, "run_ms");
    if (!doc.at("gpu").is_null()) s.gpu = gpu_from(doc.at("gpu"));
    const json_doc& d = doc.at("diagnosis");
    s.diag.label = d.at("label").is_null() ? "" : d.at("label").get<std::string>();
    s.diag.evidence = d.at("evidence").get<std::string>();
    s.diag.advice = d.at("advice").get<std::vector<std::string>>();
    if (d.contains("runner_up") && d.at("runner_up").is_string())
      s.diag.runner_up = d.at("runner_up").get<std::string>();
    if (d.contains("gains")) s.diag.gains = gains_from(d.at("gains"));
    if (d.contains("hypotheses")) s.diag.hypotheses = hypotheses_from(d.at("hypotheses"));
    if (d.contains("periodic")) s.diag.periodic = periodic_from(d.at("periodic"));
    const json_doc& b = doc.at("backend");
    s.backend = {b.at("cuda").get<bool>(), b.at("cupti").get<bool>(), b.at("reason").get<std::string>(),
                 b.at("host_clock").get<std::string>()};
    const json_doc& e = doc.at("errors");
    s.errors.nested_steps = count_at(e, "nested_steps");
    s.errors.unbalanced_phases = count_at(e, "unbalanced_phases");
    if (e.contains("requests_abandoned")) s.errors.requests_abandoned = count_at(e, "requests_abandoned");
    if (e.contains("request_phases_dropped")) s.errors.request_phases_dropped = count_at(e, "request_phases_dropped");
    if (e.contains("phase_names_folded")) s.errors.phase_names_folded = count_at(e, "phase_names_folded");
    if (e.contains("windows_dropped")) s.errors.windows_dropped = count_at(e, "windows_dropped");
    if (e.contains("window_calls_failed")) s.errors.window_calls_failed = count_at(e, "window_calls_failed");
    for (const auto& [key, value] : doc.at("facts").items()) s.facts.emplace_back(key, value.get<std::string>());
    if (doc.contains("rank")) s.rank = rank_from(doc.at("rank"));
    if (doc.contains("ranks")) s.ranks = ranks_from(doc.at("ranks"));
    if (doc.contains("cycles")) s.cycles = detail::cycles_from(doc.at("cycles"));
    if (doc.contains("host_memory")) s.host_memory = detail::host_memory_from(doc.at("host_memory"));
    if (doc.contains("ceiling")) s.ceiling = detail::ceiling_from(doc.at("ceiling"));
    if (doc.contains("captures")) s.captures = detail::captures_from(doc.at("captures"));
    if (doc.contains("live_ranks")) s.live_ranks = detail::live_ranks_from(doc.at("live_ranks"));
    if (doc.contains("hang")) s.hang = detail::hang_from(doc.at("hang"));
    if (doc.contains("node")) {
      const json_doc& n = doc.at("node");
      node_health& read = s.node.emplace();
      if (!n.at("gpu").is_boolean()) throw std::invalid_argument("\"node\": \"gpu\" is not true or false");
      read.gpu = n.at("gpu").get<bool>();
      read.throttle = count_at(n, "throttle");
      for (auto [key, field] : {std::pair{"sm_clock_mhz", &node_health::sm_clock_mhz},
                                {"mem_clock_mhz", &node_health::mem_clock_mhz},
                                {"power_w", &node_health::power_w},
                                {"temperature_c", &node_health::temperature_c},
                                {"ecc_errors", &node_health::ecc_errors},
                                {"xid_errors", &node_health::xid_errors},
                                {"steal_share", &node_health::steal_share},
                                {"involuntary_per_s", &node_health::involuntary_per_s},
                                {"others_cpu_share", &node_health::others_cpu_share}}) {
        const double v = signed_at(n, key);
        if (v < -1) throw std::invalid_argument(std::string("\"node\": \"") + key + "\" is below -1");
        read.*field = v;
      }
    }
    if (doc.contains("series")) s.series = detail::series_from(doc.at("series"));
    if (doc.contains("timeline")) s.timeline = detail::timeline_from(doc.at("timeline"));
    detail::check_figures(s);
    return s;
  } catch (const json_doc::exception& e) {
    throw std::invalid_argument("steptrace: malformed steptrace summary: " + detail::json_words(e));
  } catch (const std::logic_error& e) {  // invalid_argument from the checks, out_of_range, length_error
    throw std::invalid_argument("steptrace: malformed steptrace summary: " + cut_reason(e.what()));
  }
}

}  // namespace steptrace
