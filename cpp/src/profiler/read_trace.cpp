// A torch.profiler trace through the one analysis: the records the rules rebuild go to the same
// step builder, aggregate, device join, flight recorder and diagnosis as a live run's.
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "analysis/aggregate.hpp"
#include "analysis/flight_recorder.hpp"
#include "analysis/step_builder.hpp"
#include "analysis/step_fan_out.hpp"
#include "base/utf8.hpp"
#include "profiler/bytes/byte_source.hpp"
#include "profiler/device_clock.hpp"
#include "profiler/trace_events.hpp"
#include "profiler/trace_rules.hpp"
#include "profiler/trace_summary.hpp"
#include "report/diagnosis/diagnosis.hpp"
#include "report/report.hpp"
#include "steptrace/phase.hpp"
#include "steptrace/profiler_trace.hpp"

namespace steptrace {
namespace detail {
namespace {

std::uint64_t same_ns(std::uint64_t ns) { return ns; }  // a trace's ticks are nanoseconds

// The first step's spans of work launched before the trace, as device records: busy, never idle.
std::vector<device_record> untraced_records(const std::vector<step_interval>& spans) {
  std::vector<device_record> out(spans.size());
  for (std::size_t i = 0; i < spans.size(); ++i) {
    out[i].kind = device_activity::untraced;
    out[i].start = spans[i].begin;
    out[i].end = spans[i].end;
  }
  return out;
}

std::string steps_said(const trace_reading& r) {
  switch (r.source) {
    case step_source::own_annotations:
      return fmt::format("{} steps from steptrace's own annotations", r.steps);
    case step_source::named_range:
      return fmt::format("{} steps, each a `{}` range", r.steps, escaped_utf8(r.step_name));
    case step_source::profiler_steps:
      return fmt::format("{} steps", r.steps);
    case step_source::loop_iterations:
      return fmt::format(
          "no step ranges in it: {} steps, each an iteration of the training loop {} (--step NAME makes "
          "each range of that name a step)",
          r.steps,
          std::string_view(r.loop.marked_by) == "fetch" ? "from one DataLoader fetch to the next"
                                                        : "ending with its optimizer step");
    case step_source::whole_trace:
      break;
  }
  return "no steps in it: the whole trace is one window (--step NAME makes each range of that name a step)";
}

// A device clock offset taken out of the records (profiler/device_clock.hpp), said.
std::string clock_offset_words(const summary& s) {
  const std::string* clock = s.fact("trace.device_clock");
  double ms = 0;
  unsigned syncs = 0;
  if (clock == nullptr || std::sscanf(clock->c_str(), "%lf %u", &ms, &syncs) != 2 || ms == 0) return "";
  const std::string by = format_ms(std::abs(ms));
  return ms > 0 ? fmt::format(
                      "; the device's clock runs {} ms ahead of the host's ({} blocking sync{} returned {} ms before "
                      "the work {} waited for ended, and no kernel started sooner after its launch): its records "
                      "are moved back by it",
                      by, syncs, syncs == 1 ? "" : "s", by, syncs == 1 ? "it" : "they")
                : fmt::format(
                      "; the device's clock runs {} ms behind the host's ({} blocking sync{} returned {} ms after the "
                      "work {} waited for ended, and kernels started up to that long before their launch): its "
                      "records are moved forward by it",
                      by, syncs, syncs == 1 ? "" : "s", by, syncs == 1 ? "it" : "they");
}

std::string backend_reason(const std::string& path, const trace_events& t, const trace_reading& r, const summary& s) {
  std::string reason =
      fmt::format("read from {} {} ({})",
                  t.own_timeline_events ? "steptrace's own timeline" : "the torch.profiler trace", path, steps_said(r));
  if (r.steps_dropped) {
    reason += fmt::format("; {} more step range{} nested in or overlapping another, left out (errors.nested_steps)",
                          r.steps_dropped, r.steps_dropped == 1 ? "" : "s");
  }
  if (r.stub_steps) {
    reason +=
        fmt::format("; {} ProfilerStep range{} holding no op and no device work (the profiler's closing stub) left out",
                    r.stub_steps, r.stub_steps == 1 ? "" : "s");
  }
  if (const std::string* gpu = s.fact("gpu.name")) reason += fmt::format("; device: {}", *gpu);
  reason += clock_offset_words(s);
  if (r.warmup.ranges != 0) {
    reason += fmt::format(
        "; the window begins where the program's own warm-up ends: {} range{} named warm-up "
        "(`{}`{}), {} ms, left out",
        r.warmup.ranges, r.warmup.ranges == 1 ? "" : "s", escaped_utf8(r.warmup.name).substr(0, 120),
        r.warmup.ranges == 1 ? "" : ", ...", format_ms(static_cast<double>(r.warmup.ns) / 1e6));
  }
  if (r.warmup.steps != 0) {
    reason += fmt::format(
        "; the first {} left out as warm-up by the program's own words: ranges named warm-up "
        "(`{}`) cover most of {}",
        r.warmup.steps == 1 ? "step is" : fmt::format("{} steps are", r.warmup.steps),
        escaped_utf8(r.warmup.name).substr(0, 120), r.warmup.steps == 1 ? "it" : "each");
  }
  if (r.warmup_steps && r.loop.first_is_start) {
    reason += fmt::format(
        "; the first iteration is left out as warm-up: it lasted {} ms against {} ms for the others' "
        "median, the program's start-up (lazy loads, algorithm search, the allocator's growth) in it",
        format_ms(static_cast<double>(r.loop.first_ns) / 1e6),
        format_ms(static_cast<double>(r.loop.others_median_ns) / 1e6));
  } else if (r.untraced_ns && r.launched_before) {  // the trace shows work launched before it
    reason += r.warmup_steps
                  ? fmt::format(
                        "; the first step is left out as warm-up: its device ran work launched before the trace "
                        "for {} ms",
                        format_ms(static_cast<double>(r.untraced_ns) / 1e6))
                  : fmt::format(
                        "; the device ran work launched before the trace for {} ms of the first {}: counted "
                        "busy, not idle",
                        format_ms(static_cast<double>(r.untraced_ns) / 1e6),
                        r.source == step_source::whole_trace ? "window" : "step");
  } else if (r.untraced_ns) {  // no sign of work launched before the trace: the wait is unexplained
    reason += fmt::format(
        "; {}the device started work {} ms after it was launched with nothing traced running before it, though every "
        "kernel's launch is in the trace and no step ran before it (work the trace does not hold, such as another "
        "process's, or a device clock offset from the host's){}",
        r.warmup_steps ? "the first step is left out as warm-up: " : "",
        format_ms(static_cast<double>(r.untraced_ns) / 1e6),
        r.warmup_steps ? ""
                       : fmt::format(": {} ms of the first {} counted busy, not idle",
                                     format_ms(static_cast<double>(r.untraced_ns) / 1e6),
                                     r.source == step_source::whole_trace ? "window" : "step"));
  }
  if (!r.has_device) {
    const std::string* unrecorded = s.fact("trace.device_unrecorded");
    reason += unrecorded == nullptr ? "; the trace holds no GPU activity: host view only"
              : device_unread(*unrecorded)
                  ? "; the trace holds no GPU activity but " + device_unrecorded_words(*unrecorded) +
                        ", which steptrace does not read: host view only"
                  : "; the trace holds no GPU activity, yet its host put work on a GPU (" +
                        device_unrecorded_words(*unrecorded) + "): host view only";
  }
  if (r.has_device && r.steps_without_device) {
    reason += fmt::format("; {} of {} steps have no device activity at all", r.steps_without_device, r.steps);
  }
  if (r.kernels_without_launch) {
    reason += fmt::format("; {} kernels have no launching call in the trace (a sampled or partial trace?)",
                          r.kernels_without_launch);
  }
  if (t.skipped_events) {
    reason += fmt::format("; {} events left out ({})", t.skipped_events, t.problems.front());
  }
  if (r.custom_phases_folded) {
    reason += fmt::format("; {} record_function ranges past the first 64 names folded into their parents",
                          r.custom_phases_folded);
  }
  return reason;
}

// Each reading's steps and device records, in time order, through one aggregate and flight
// recorder: a reading's own warm-up (by evidence), its device records joined before the next.
class trace_run {
 public:
  explicit trace_run(bool device) {
    sink_.add(totals_).add(timeline_);  // the collector's fan-out, with the keepers a trace has
    totals_.set_tick_clock(&same_ns);
    if (device) totals_.enable_device();
    builder_.set_max_segments(SIZE_MAX);
    builder_.keep_segments(device);
    builder_.keep_spans(true);
    try {  // the host's collective, the phase the job timeline aligns ranks on (the rules named it)
      builder_.set_anchor_phase(register_phase(collective_phase).value);
    } catch (const std::invalid_argument&) {  // the registry is full: no collective phase either
    }
  }

  // A reading read again after (a run of cycles): its device records are copied into the join.
  void add(const trace_reading& r) { add(r, r.device, nullptr); }
  // A reading given up: its device records and kernel table are taken, its host records freed
  // once consumed, so that the summary is never built beside them (cpp/src/profiler/README.md, "Memory").
  void add_given(trace_reading& r) { add(r, std::move(r.device), &r); }

  summary finish() {
    summary out;
    totals_.fill(out, 1.0);
    timeline_.fill(out.timeline, totals_.run_begin(), 1.0, &same_ns);
    out.errors.unbalanced_phases = builder_.unbalanced();
    if (out.gpu && !kernels_.empty()) out.gpu->kernels = kernels_.stats(out.steps);
    if (!ceiling_.empty()) {
      out.ceiling = ceiling_.stats(out.steps, out.step_ms.mean, gpu_name_, out.gpu ? out.gpu->busy_share : 0);
    }
    return out;
  }

 private:
  // given: `r` itself, when it is given up.
  void add(const trace_reading& r, std::vector<device_record> records, trace_reading* given) {
    device_join* device = totals_.device();
    if (device && r.has_device) {
      device->add_records(std::move(records));  // before the steps: each finds its records
      if (!r.untraced.empty()) device->add_records(untraced_records(r.untraced));
    }
    builder_.next_part(r.warmup_steps);  // warm-up by evidence (trace_rules.hpp), the step numbers go on
    builder_.consume(r.records.data(), r.records.data() + r.records.size(), sink_);
    builder_.finish(sink_);
    if (given != nullptr) std::vector<record>().swap(given->records);
    if (given != nullptr && readings_ == 0) {
      kernels_ = std::move(given->kernels);
    } else {
      kernels_.merge(r.kernels);
    }
    ceiling_.merge(r.ceiling);
    for (const auto& [key, value] : r.facts) {
      if (key == "gpu.name" && gpu_name_.empty()) gpu_name_ = value;
    }
    ++readings_;
    if (device) {
      device->join(UINT64_MAX);
      timeline_.attach_device(*device, UINT64_MAX, &same_ns);
    }
  }

  aggregate totals_;
  flight_recorder timeline_;
  step_fan_out sink_{0};
  step_builder builder_{0, 0};  // one thread: the main one, cycle after cycle
  kernel_table kernels_;
  ceiling_table ceiling_;
  std::string gpu_name_;      // the first reading's (facts' gpu.name)
  std::size_t readings_ = 0;  // added so far
};

// The summary's rank (distributedInfo) and source, shared by a trace and a run of cycles.
void complete_trace(summary& out, const trace_events& events, const trace_reading& reading, const std::string& path) {
  out.errors.nested_steps += reading.steps_dropped;
  out.windows = reading.source == step_source::whole_trace;
  out.facts = reading.facts;
  out.facts.emplace_back("trace.steps_from", steps_from(reading.source));
  if (reading.span) {  // when its records ran: one process's cycles never overlap (python/steptrace/_job.py)
    out.facts.emplace_back("trace.span_ns",
                           std::to_string(reading.span->begin) + " " + std::to_string(reading.span->end));
  }
  if (events.rank) {
    rank_info who;
    who.rank = *events.rank;
    who.world_size = events.world_size.value_or(*events.rank + 1);
    who.host = escaped_utf8(events.host);
    if (who.world_size > max_world_size || who.rank >= max_world_size) {
      throw std::invalid_argument(path + ": its distributedInfo claims rank " + std::to_string(who.rank) + " of " +
                                  std::to_string(who.world_size) + ", more ranks than steptrace reads (" +
                                  std::to_string(max_world_size) + " at most)");
    }
    if (who.rank < who.world_size) out.rank = who;
  }
  out.backend.cuda = reading.has_device;
  out.backend.cupti = reading.has_device;
  out.backend.host_clock = "trace";
}

// A trace's summary made whole: rank, source, facts, the backend's reason, the diagnosis.
summary completed(summary out, const trace_events& events, const trace_reading& reading, const std::string& path) {
  complete_trace(out, events, reading, path);
  out.collective_calls = reading.calls;
  out.collective_calls_numbered = reading.calls_numbered;
  out.backend.reason = backend_reason(path, events, reading, out);
  complete(out);
  return out;
}

}  // namespace

summary summarise_readings(const std::vector<const trace_reading*>& readings) {
  bool device = false;
  for (const trace_reading* r : readings) device = device || r->has_device;
  trace_run run(device);
  for (const trace_reading* r : readings) run.add(*r);
  return run.finish();
}

const char* steps_from(step_source s) {
  return s == step_source::own_annotations   ? "annotations"
         : s == step_source::named_range     ? "named range"
         : s == step_source::profiler_steps  ? "ProfilerStep"
         : s == step_source::loop_iterations ? "training loop"
                                             : "window";
}

trace_reading read_trace_reading(std::unique_ptr<byte_source> source, const std::string& name,
                                 const std::string& step_name, trace_events& about) {
  about = read_trace_events(*source, name);
  source.reset();
  device_clock_reading clock = read_device_clock(about);  // taken out before any rule reads a record
  if (clock.offset_ns != 0 && !remove_device_clock_offset(about, clock.offset_ns)) clock = {};
  trace_reading reading = apply_trace_rules(about, name, step_window::profiler_step, step_name);
  if (clock.syncs != 0) {
    reading.facts.emplace_back("trace.device_clock",
                               fmt::format("{:.3f} {}", static_cast<double>(clock.offset_ns) / 1e6, clock.syncs));
  }
  std::vector<trace_event>().swap(about.events);
  std::vector<std::string>().swap(about.names);
  std::vector<std::string>().swap(about.ids);
  return reading;
}

summary summarise_trace(const trace_events& events, const trace_reading& reading, const std::string& path) {
  return completed(summarise_readings({&reading}), events, reading, path);
}

summary summarise_trace(const trace_events& events, trace_reading&& reading, const std::string& path) {
  trace_run run(reading.has_device);
  run.add_given(reading);
  return completed(run.finish(), events, reading, path);
}

}  // namespace detail

summary read_profiler_trace(const std::string& path, const trace_options& options) {
  using namespace detail;
  const std::string& name = options.name.empty() ? path : options.name;
  trace_events about;
  return summarise_trace(about, read_trace_reading(open_trace_file(path, name), name, options.step, about), name);
}

}  // namespace steptrace
