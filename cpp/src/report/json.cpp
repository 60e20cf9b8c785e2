// summary::json() and summary::from_json(): schema "steptrace.summary/1" (design.md).
#include <nlohmann/json.hpp>

#include <stdexcept>

#include "steptrace/summary.hpp"

namespace steptrace {
namespace {

using json_doc = nlohmann::ordered_json;
constexpr const char* schema_name = "steptrace.summary/1";

json_doc stat_json(const stat_ms& m) {
  return json_doc{{"mean", m.mean}, {"p50", m.p50}, {"p95", m.p95}, {"p99", m.p99}, {"max", m.max}, {"total", m.total}};
}

stat_ms stat_from(const json_doc& j) {
  return stat_ms{j.at("total").get<double>(), j.at("mean").get<double>(), j.at("p50").get<double>(),
                 j.at("p95").get<double>(),   j.at("p99").get<double>(),  j.at("max").get<double>()};
}

json_doc copies_json(const copy_stats& c) {
  return json_doc{{"count", c.count},         {"bytes_per_step", c.bytes_per_step}, {"ms_per_step", c.ms_per_step},
                  {"gb_per_s", c.gb_per_s},    {"pageable_share", c.pageable_share}};
}

copy_stats copies_from(const json_doc& j) {
  return copy_stats{j.at("count").get<std::uint64_t>(), j.at("bytes_per_step").get<double>(),
                    j.at("ms_per_step").get<double>(), j.at("gb_per_s").get<double>(),
                    j.at("pageable_share").get<double>()};
}

json_doc gpu_json(const gpu_stats& g) {
  json_doc idle = json_doc::object();
  for (const auto& [phase, share] : g.idle_by_phase) idle[phase] = share;
  return json_doc{{"busy_ms", stat_json(g.busy_ms)},
                  {"idle_ms", stat_json(g.idle_ms)},
                  {"busy_share", g.busy_share},
                  {"idle_by_phase", idle},
                  {"h2d", copies_json(g.h2d)},
                  {"d2h", copies_json(g.d2h)},
                  {"syncs_per_step", g.syncs_per_step},
                  {"sync_ms_per_step", g.sync_ms_per_step},
                  {"kernels_per_step", g.kernels_per_step},
                  {"kernel_median_us", g.kernel_median_us},
                  {"incomplete_records", g.incomplete_records},
                  {"dropped_records", g.dropped_records}};
}

gpu_stats gpu_from(const json_doc& j) {
  gpu_stats g;
  g.busy_ms = stat_from(j.at("busy_ms"));
  g.idle_ms = stat_from(j.at("idle_ms"));
  g.busy_share = j.at("busy_share").get<double>();
  for (const auto& [phase, share] : j.at("idle_by_phase").items()) g.idle_by_phase.emplace_back(phase, share.get<double>());
  g.h2d = copies_from(j.at("h2d"));
  g.d2h = copies_from(j.at("d2h"));
  g.syncs_per_step = j.at("syncs_per_step").get<double>();
  g.sync_ms_per_step = j.at("sync_ms_per_step").get<double>();
  g.kernels_per_step = j.at("kernels_per_step").get<double>();
  g.kernel_median_us = j.at("kernel_median_us").get<double>();
  g.incomplete_records = j.at("incomplete_records").get<std::uint64_t>();
  g.dropped_records = j.at("dropped_records").get<std::uint64_t>();
  return g;
}

}  // namespace

std::string summary::json() const {
  json_doc phases_json = json_doc::object();
  for (const phase_stats& p : phases) {
    phases_json[p.name] = {{"total_ms", p.ms.total}, {"mean_ms", p.ms.mean}, {"p50_ms", p.ms.p50},
                           {"p95_ms", p.ms.p95},     {"p99_ms", p.ms.p99},   {"max_ms", p.ms.max},
                           {"share", p.share},       {"calls", p.calls}};
    if (p.device_ms) {
      phases_json[p.name]["device_ms"] = stat_json(*p.device_ms);  // per call, from CUDA events
      phases_json[p.name]["device_calls"] = p.device_calls;
    }
  }
  json_doc unscoped_json = json_doc::object();
  for (const unscoped_phase& u : unscoped_phases) {
    unscoped_json[u.name] = {{"total_ms", u.total_ms}, {"max_ms", u.max_ms}, {"calls", u.calls}};
  }
  json_doc facts_json = json_doc::object();
  for (const auto& [key, value] : facts) facts_json[key] = value;
  json_doc doc = {
      {"schema", schema_name},
      {"steps", steps},
      {"warmup_steps", warmup_steps},
      {"failed_steps", failed_steps},
      {"threads", threads},
      {"wall_ms", wall_ms},
      {"step_ms", stat_json(step_ms)},
      {"phases", phases_json},
      {"unscoped_phases", unscoped_json},
      {"gpu", gpu ? gpu_json(*gpu) : json_doc(nullptr)},
      {"diagnosis",
       {{"label", diag.label.empty() ? json_doc(nullptr) : json_doc(diag.label)},
        {"evidence", diag.evidence},
        {"advice", diag.advice}}},
      {"backend",
       {{"cuda", backend.cuda}, {"cupti", backend.cupti}, {"reason", backend.reason}, {"host_clock", backend.host_clock}}},
      {"errors", {{"nested_steps", errors.nested_steps}, {"unbalanced_phases", errors.unbalanced_phases}}},
      {"facts", facts_json},
  };
  if (step_device_ms) {
    doc["step_device_ms"] = stat_json(*step_device_ms);  // per step, from CUDA events
    doc["step_device_steps"] = step_device_steps;
  }
  return doc.dump(2);
}

summary summary::from_json(std::string_view text) {
  json_doc doc;
  try {
    doc = json_doc::parse(text.begin(), text.end());
  } catch (const json_doc::parse_error& e) {
    throw std::invalid_argument(std::string("steptrace: not a steptrace summary: not valid JSON (") + e.what() + ")");
  }
  if (!doc.is_object() || !doc.contains("schema")) {
    throw std::invalid_argument("steptrace: not a steptrace summary: no \"schema\" field");
  }
  if (doc["schema"] != schema_name) {
    throw std::invalid_argument("steptrace: unsupported summary schema " + doc["schema"].dump() + " (this version reads \"" +
                                schema_name + "\")");
  }
  try {
    summary s;
    s.steps = doc.at("steps").get<std::uint64_t>();
    s.warmup_steps = doc.at("warmup_steps").get<std::uint64_t>();
    s.failed_steps = doc.at("failed_steps").get<std::uint64_t>();
    s.threads = doc.at("threads").get<std::uint64_t>();
    s.wall_ms = doc.at("wall_ms").get<double>();
    s.step_ms = stat_from(doc.at("step_ms"));
    if (doc.contains("step_device_ms")) {
      s.step_device_ms = stat_from(doc.at("step_device_ms"));
      s.step_device_steps = doc.at("step_device_steps").get<std::uint64_t>();
    }
    for (const auto& [name, p] : doc.at("phases").items()) {
      phase_stats row;
      row.name = name;
      row.ms = stat_ms{p.at("total_ms").get<double>(), p.at("mean_ms").get<double>(), p.at("p50_ms").get<double>(),
                       p.at("p95_ms").get<double>(),   p.at("p99_ms").get<double>(),  p.at("max_ms").get<double>()};
      row.share = p.at("share").get<double>();
      row.calls = p.at("calls").get<std::uint64_t>();
      if (p.contains("device_ms")) {
        row.device_ms = stat_from(p.at("device_ms"));
        row.device_calls = p.at("device_calls").get<std::uint64_t>();
      }
      s.phases.push_back(std::move(row));
    }
    for (const auto& [name, u] : doc.at("unscoped_phases").items()) {
      s.unscoped_phases.push_back(
          {name, u.at("total_ms").get<double>(), u.at("max_ms").get<double>(), u.at("calls").get<std::uint64_t>()});
    }
    if (!doc.at("gpu").is_null()) s.gpu = gpu_from(doc.at("gpu"));
    const json_doc& d = doc.at("diagnosis");
    s.diag.label = d.at("label").is_null() ? "" : d.at("label").get<std::string>();
    s.diag.evidence = d.at("evidence").get<std::string>();
    s.diag.advice = d.at("advice").get<std::vector<std::string>>();
    const json_doc& b = doc.at("backend");
    s.backend = {b.at("cuda").get<bool>(), b.at("cupti").get<bool>(), b.at("reason").get<std::string>(),
                 b.at("host_clock").get<std::string>()};
    const json_doc& e = doc.at("errors");
    s.errors = {e.at("nested_steps").get<std::uint64_t>(), e.at("unbalanced_phases").get<std::uint64_t>()};
    for (const auto& [key, value] : doc.at("facts").items()) s.facts.emplace_back(key, value.get<std::string>());
    return s;
  } catch (const json_doc::exception& e) {
    throw std::invalid_argument(std::string("steptrace: malformed steptrace summary: ") + e.what());
  }
}

}  // namespace steptrace
