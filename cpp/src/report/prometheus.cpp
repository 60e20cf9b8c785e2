// summary::prometheus(): the figures in the Prometheus text exposition format 0.0.4, for a
// server's existing metrics endpoint (cpp/src/core/README.md, "Windows").
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "steptrace/summary.hpp"

namespace steptrace {
namespace {

bool valid_name(std::string_view n) {
  if (n.empty()) return false;
  for (std::size_t i = 0; i < n.size(); ++i) {
    const char c = n[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    if (!letter && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

// A label value: backslash, double quote and newline escaped, as the format asks.
std::string escaped(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

class writer {
 public:
  writer(std::string prefix, std::string common) : prefix_(std::move(prefix)), common_(std::move(common)) {}

  void family(const char* name, const char* type, const char* help) {
    out_ += "# HELP " + prefix_ + name + " " + help + "\n# TYPE " + prefix_ + name + " " + type + "\n";
  }
  // labels: `key="value"` pairs already escaped, comma separated (may be empty).
  void sample(const std::string& name, const std::string& labels, double value) {
    std::string all = common_;
    if (!labels.empty()) all += (all.empty() ? "" : ",") + labels;
    out_ += prefix_ + name + (all.empty() ? "" : "{" + all + "}") + " " + number(value) + "\n";
  }
  // A summary family: quantiles of one value per step (seconds), its sum and count.
  void quantiles(const char* name, const std::string& labels, const stat_ms& ms, std::uint64_t count) {
    const std::string sep = labels.empty() ? "" : labels + ",";
    sample(name, sep + "quantile=\"0.5\"", ms.p50 / 1e3);
    sample(name, sep + "quantile=\"0.95\"", ms.p95 / 1e3);
    sample(name, sep + "quantile=\"0.99\"", ms.p99 / 1e3);
    sample(std::string(name) + "_sum", labels, ms.total / 1e3);
    sample(std::string(name) + "_count", labels, static_cast<double>(count));
  }
  std::string text() const { return out_; }

 private:
  std::string prefix_, common_, out_;
};

}  // namespace

std::string summary::prometheus(std::string_view prefix) const {
  if (!valid_name(prefix)) {
    throw std::invalid_argument("steptrace: '" + std::string(prefix) +
                                "' is not a Prometheus metric name prefix (letters, digits, _ and :, not starting "
                                "with a digit)");
  }
  const std::string common = rank ? "rank=\"" + std::to_string(rank->rank) + "\"" : "";
  writer w(std::string(prefix) + "_", common);
  // Counts and sums are the summary's: since the start in tracer::metrics(), which is what a
  // scraper should read; quantiles there are over a recent window.
  w.family("steps_total", "counter", "Counted steps (requests, loop iterations; past warm-up, not failed).");
  w.sample("steps_total", "", static_cast<double>(steps));
  w.family("failed_steps_total", "counter", "Steps ended by an exception.");
  w.sample("failed_steps_total", "", static_cast<double>(failed_steps));
  if (requests > 0 || errors.requests_abandoned > 0) {
    w.family("requests_abandoned_total", "counter", "Requests whose handle was destroyed without end().");
    w.sample("requests_abandoned_total", "", static_cast<double>(errors.requests_abandoned));
  }
  if (batches) {
    w.family("batches_total", "counter", "Counted batches (steps that served several requests at once).");
    w.sample("batches_total", "", static_cast<double>(batches->batches));
    w.family("batch_requests_total", "counter", "Requests served by the counted batches.");
    w.sample("batch_requests_total", "", std::round(batches->size_mean * static_cast<double>(batches->batches)));
    w.family("batch_seconds", "summary", "Time per batch.");
    w.quantiles("batch_seconds", "", batches->ms, batches->batches);
  }
  w.family("phase_names_folded", "gauge", "Distinct phase names past the 4096-name limit, sharing \"(other names)\".");
  w.sample("phase_names_folded", "", static_cast<double>(errors.phase_names_folded));
  w.family("step_seconds", "summary", "Time per step, less any time set aside inside it.");
  w.quantiles("step_seconds", "", step_ms, steps);
  w.family("phase_seconds", "summary", "Time per step in each phase itself (0 in steps where it did not run).");
  for (const phase_stats& p : phases) w.quantiles("phase_seconds", "phase=\"" + escaped(p.name) + "\"", p.ms, steps);
  w.family("phase_share", "gauge", "Share of the summed step time spent in each phase itself.");
  for (const phase_stats& p : phases) w.sample("phase_share", "phase=\"" + escaped(p.name) + "\"", p.share);
  w.family("set_aside_seconds", "gauge", "Time set aside under each name (in no step).");
  for (const set_aside_stats& a : set_aside)
    w.sample("set_aside_seconds", "name=\"" + escaped(a.name) + "\"", a.total_ms / 1e3);
  w.family("diagnosis", "gauge", "1 for the label the diagnosis gives.");
  if (!diag.label.empty()) w.sample("diagnosis", "label=\"" + escaped(diag.label) + "\"", 1);
  w.family("gain", "gauge",
           "The most removing each cause the diagnosis names could save: a fraction of step time (of run time for "
           "time set aside), an upper bound.");
  for (const auto& [cause, gain] : diag.gains) w.sample("gain", "cause=\"" + escaped(cause) + "\"", gain);
  if (gpu) {
    w.family("gpu_busy_share", "gauge", "Device busy time on the steps' own streams, of the summed step time.");
    w.sample("gpu_busy_share", "", gpu->busy_share);
  }
  if (ceiling && ceiling->tflops > 0) {
    w.family("model_flops_per_second", "gauge", "The model's FLOPs a step over the mean step time (the ceiling).");
    w.sample("model_flops_per_second", "", ceiling->tflops * 1e12);
    if (ceiling->mfu > 0) {
      w.family("mfu", "gauge",
               "Model FLOPs utilisation: FLOPs at their dtype's peak on this device, over the step time.");
      w.sample("mfu", "", ceiling->mfu);
    }
  }
  if (host_memory) {
    w.family("host_resident_bytes", "gauge", "The process's resident memory at the last step end sampled.");
    w.sample("host_resident_bytes", "", host_memory->last_mb * 1024 * 1024);
    w.family("host_resident_peak_bytes", "gauge", "The highest resident memory sampled at step ends.");
    w.sample("host_resident_peak_bytes", "", host_memory->peak_mb * 1024 * 1024);
  }
  w.family("stuck_seconds", "gauge",
           "How long the step open longest has been open, once past hang_after (a suspected hang); 0 otherwise.");
  w.sample("stuck_seconds", "", hang && hang->suspected && hang->longest() ? hang->longest()->open_s : 0.0);
  if (live_ranks) {
    w.family("straggler_rank", "gauge", "The rank the latest live window named the straggler; -1: none.");
    w.sample("straggler_rank", "", live_ranks->straggler ? static_cast<double>(*live_ranks->straggler) : -1.0);
    w.family("rank_windows_total", "counter", "Live rank windows judged.");
    w.sample("rank_windows_total", "", static_cast<double>(live_ranks->windows));
    w.family("rank_slowest_windows", "counter", "Live windows each rank was the straggler in.");
    for (const rank_window_count& c : live_ranks->counts) {
      w.sample("rank_slowest_windows", "straggler=\"" + std::to_string(c.rank) + "\"", static_cast<double>(c.windows));
    }
  }
  return w.text();
}

}  // namespace steptrace
