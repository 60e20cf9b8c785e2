// The device view's section of the summary JSON: busy and idle time, copies, syncs, kernels,
// NCCL and device memory (cpp/src/report/json/README.md, "The summary JSON").
#include <stdexcept>

#include "report/json/json_fields.hpp"
#include "report/report.hpp"
#include "steptrace/summary.hpp"

namespace steptrace::detail {
namespace {

json_doc memory_json(const device_memory_stats& m) {
  return json_doc{
      {"allocations_per_step", m.allocations_per_step},
      {"allocated_mb_per_step", m.allocated_mb_per_step},
      {"freed_mb_per_step", m.freed_mb_per_step},
      {"net_mb", m.net_mb},
      {"step_peak_mb", {{"p50", m.step_peak_mb_p50}, {"p95", m.step_peak_mb_p95}, {"max", m.step_peak_mb_max}}}};
}

device_memory_stats memory_from(const json_doc& j) {
  device_memory_stats m;
  m.allocations_per_step = number_at(j, "allocations_per_step");
  m.allocated_mb_per_step = number_at(j, "allocated_mb_per_step");
  m.freed_mb_per_step = number_at(j, "freed_mb_per_step");
  m.net_mb = signed_at(j, "net_mb");
  const json_doc& peak = j.at("step_peak_mb");
  m.step_peak_mb_p50 = number_at(peak, "p50");
  m.step_peak_mb_p95 = number_at(peak, "p95");
  m.step_peak_mb_max = number_at(peak, "max");
  return m;
}

json_doc copies_json(const copy_stats& c) {
  return json_doc{
      {"count", c.count},       {"bytes_per_step", c.bytes_per_step}, {"ms_per_step", c.ms_per_step},
      {"gb_per_s", c.gb_per_s}, {"pageable_share", c.pageable_share}, {"exposed_ms_per_step", c.exposed_ms_per_step}};
}

copy_stats copies_from(const json_doc& j) {
  return copy_stats{count_at(j, "count"),
                    number_at(j, "bytes_per_step"),
                    number_at(j, "ms_per_step"),
                    number_at(j, "gb_per_s"),
                    number_at(j, "pageable_share"),
                    j.contains("exposed_ms_per_step") ? number_at(j, "exposed_ms_per_step") : 0.0};  // older: absent
}

}  // namespace

json_doc gpu_json(const gpu_stats& g) {
  json_doc idle = json_doc::object();
  for (const auto& [phase, share] : g.idle_by_phase) idle[phase] = share;
  json_doc out{{"busy_ms", stat_json(g.busy_ms)},
               {"idle_ms", stat_json(g.idle_ms)},
               {"busy_share", g.busy_share},
               {"device_busy_share", g.device_busy_share},
               {"idle_by_phase", idle},
               {"h2d", copies_json(g.h2d)},
               {"d2h", copies_json(g.d2h)},
               {"syncs_per_step", g.syncs_per_step},
               {"sync_ms_per_step", g.sync_ms_per_step},
               {"kernels_per_step", g.kernels_per_step},
               {"graph_kernels_per_step", g.graph_kernels_per_step},
               {"graph_replays_per_step", g.graph_replays_per_step},
               {"kernel_median_us", g.kernel_median_us},
               {"kernel_time_median_us", g.kernel_time_median_us},
               {"nccl", json_doc{{"kernels_per_step", g.nccl.kernels_per_step},
                                 {"ms_per_step", g.nccl.ms_per_step},
                                 {"exposed_ms_per_step", g.nccl.exposed_ms_per_step}}},
               {"memory", memory_json(g.memory)},
               {"incomplete_records", g.incomplete_records},
               {"dropped_records", g.dropped_records},
               {"steps_viewed", g.steps_viewed},
               {"steps_without_records", g.steps_without_records},
               {"steps_all_streams", g.steps_all_streams}};
  if (g.sample_every > 1) {  // device_sample: written only when windows were left out by choice
    out["sample_every"] = g.sample_every;
    out["steps_sampled_out"] = g.steps_sampled_out;
  }
  if (g.kernels) out["kernels"] = kernels_json(*g.kernels);
  return out;
}

gpu_stats gpu_from(const json_doc& j) {
  gpu_stats g;
  g.busy_ms = stat_from(j.at("busy_ms"));
  g.idle_ms = stat_from(j.at("idle_ms"));
  g.busy_share = number_at(j, "busy_share");
  for (const auto& [phase, share] : j.at("idle_by_phase").items())
    g.idle_by_phase.emplace_back(phase, share.get<double>());
  g.h2d = copies_from(j.at("h2d"));
  g.d2h = copies_from(j.at("d2h"));
  g.syncs_per_step = number_at(j, "syncs_per_step");
  g.sync_ms_per_step = number_at(j, "sync_ms_per_step");
  g.kernels_per_step = number_at(j, "kernels_per_step");
  if (j.contains("graph_kernels_per_step")) g.graph_kernels_per_step = number_at(j, "graph_kernels_per_step");
  if (j.contains("graph_replays_per_step")) g.graph_replays_per_step = number_at(j, "graph_replays_per_step");
  g.kernel_median_us = number_at(j, "kernel_median_us");
  g.incomplete_records = count_at(j, "incomplete_records");
  g.dropped_records = count_at(j, "dropped_records");
  // Absent from summaries written before they existed.
  if (j.contains("steps_viewed")) g.steps_viewed = count_at(j, "steps_viewed");
  if (j.contains("steps_without_records")) g.steps_without_records = count_at(j, "steps_without_records");
  if (j.contains("device_busy_share")) g.device_busy_share = number_at(j, "device_busy_share");
  if (j.contains("steps_all_streams")) g.steps_all_streams = count_at(j, "steps_all_streams");
  const std::uint64_t every = j.contains("sample_every") ? count_at(j, "sample_every") : 1;
  if (every < 1 || every > 1000) throw std::invalid_argument("gpu.sample_every: expected 1 to 1000");
  g.sample_every = static_cast<std::uint32_t>(every);
  if (j.contains("steps_sampled_out")) g.steps_sampled_out = count_at(j, "steps_sampled_out");
  if (j.contains("memory")) g.memory = memory_from(j.at("memory"));
  if (j.contains("kernel_time_median_us")) g.kernel_time_median_us = number_at(j, "kernel_time_median_us");
  if (j.contains("kernels")) g.kernels = kernels_from(j.at("kernels"));
  if (j.contains("nccl")) {
    const json_doc& n = j.at("nccl");
    g.nccl = nccl_stats{
        number_at(n, "kernels_per_step"), number_at(n, "ms_per_step"), number_at(n, "exposed_ms_per_step"), {}};
  }
  return g;
}

}  // namespace steptrace::detail
