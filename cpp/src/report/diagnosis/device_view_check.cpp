// An honest device view (report/diagnosis/hypotheses.hpp): a view that lost records to CUPTI's
// buffer cap, a trace that holds the device records of under half of most steps' kernel
// launches, or one whose device starts work long after each launch with nothing traced running
// before it (another process's work on the GPU, or a device clock offset the syncs could not
// measure) cannot place the GPU's idle time against the host's phases. It is said as such and
// the host view decides. A trace that holds none of the device's records while the host put
// work on it is said so, with how to record them.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "report/diagnosis/hypotheses.hpp"
#include "steptrace/output.hpp"

namespace steptrace::detail {

namespace {

// The device records the view was made of, against those CUPTI lost to its buffer cap.
double dropped_share(const gpu_stats& g) {
  const double kept =
      static_cast<double>(g.steps_viewed) *
      (g.kernels_per_step + static_cast<double>(g.h2d.count + g.d2h.count) / std::max<double>(1, g.steps_viewed));
  const double dropped = static_cast<double>(g.dropped_records);
  return dropped > 0 ? dropped / (dropped + kept) : 0.0;
}

struct coverage {
  std::uint64_t under = 0, weighed = 0, launches = 0, recorded = 0;
};

coverage coverage_of(const summary& s) {
  coverage c;
  const std::string* f = s.fact("trace.device_coverage");
  if (f == nullptr) return c;
  std::istringstream in(*f);
  if (!(in >> c.under >> c.weighed >> c.launches >> c.recorded) || c.weighed == 0) return {};
  return c;
}

bool under_recorded_view(const coverage& c) { return c.under != 0 && 2 * c.under >= c.weighed; }

// True where the trace's syncs measured the two clocks and found them agreeing
// (profiler/device_clock.hpp); an offset found there is taken out before a record is read.
bool clocks_agree(const summary& s, unsigned& syncs) {
  double offset = 0;
  const std::string* clock = s.fact("trace.device_clock");
  return clock != nullptr && std::sscanf(clock->c_str(), "%lf %u", &offset, &syncs) == 2 && offset == 0 && syncs > 0;
}

bool late_device(const summary& s) { return s.fact("trace.device_late") != nullptr; }

}  // namespace

std::string under_recorded_words(const summary& s) {
  const coverage c = coverage_of(s);
  if (c.under == 0) return "";
  return fmt::format(
      "in {} of {} steps the trace holds the device records of under half the kernels launched ({} of {} launches "
      "in them)",
      c.under, c.weighed, c.recorded, c.launches);
}

std::string complete_view_advice(const summary& s) {
  if (s.gpu && dropped_share(*s.gpu) >= dropped_share_limit) {
    return "make the device view whole: fewer device records at once (device_sample=4 records one window in 4), or "
           "fewer kernels a step (CUDA graphs, fusion)";
  }
  if (under_recorded_view(coverage_of(s)) && !late_device(s)) {
    return "make the device view whole: record fewer steps a trace (torch.profiler.schedule(active=...)) so the "
           "profiler keeps every device record, and let it stop and flush before the program exits";
  }
  unsigned syncs = 0;
  return clocks_agree(s, syncs)
             ? "make the device view whole: profile with no other process on the GPU (nvidia-smi or rocm-smi lists "
               "them)"
             : "make the device view whole: profile with no other process on the GPU (nvidia-smi or rocm-smi lists "
               "them), or with a PyTorch whose profiler aligns the device clock with the host's";
}

std::string dropped_records_words(const summary& s) {
  if (!s.gpu || s.gpu->dropped_records == 0) return "";
  const double pct = 100 * dropped_share(*s.gpu);
  return fmt::format("CUPTI dropped {} device records to its buffer cap ({}% of those it recorded)",
                     s.gpu->dropped_records, pct >= 10 ? fmt::format("{:.0f}", pct) : fmt::format("{:.1f}", pct));
}

std::string incomplete_device_view(const summary& s) {
  if (!s.gpu) return "";
  if (dropped_share(*s.gpu) >= dropped_share_limit) return dropped_records_words(s);
  if (const coverage c = coverage_of(s); under_recorded_view(c)) return under_recorded_words(s);
  const std::string* late = s.fact("trace.device_late");
  if (late == nullptr) return "";
  std::istringstream in(*late);
  std::uint64_t steps_late = 0, weighed = 0;
  double ms = 0;
  if (!(in >> steps_late >> weighed >> ms) || weighed == 0) return "";
  // The premise of a clock offset, checked where the trace's syncs measured the clocks
  // (profiler/device_clock.hpp): an offset found there is taken out before this reads a record.
  unsigned syncs = 0;
  const std::string why = clocks_agree(s, syncs)
                              ? fmt::format(
                                    "work the trace does not hold, such as another process's on the GPU: the clocks "
                                    "agree, {} blocking sync{} returning as the work {} waited for ended",
                                    syncs, syncs == 1 ? "" : "s", syncs == 1 ? "it" : "they")
                              : "another process's work on the GPU, or a device clock offset from the host's";
  return fmt::format(
      "in {} of {} steps the device started work {} ms a step after its launch with nothing traced running before "
      "it ({})",
      steps_late, weighed, format_ms(ms), why);
}

// The advice to see the device's side: first where the label's own advice needs it, last where
// the host view proves the cause.
static void place_device_advice(diagnosis& d, std::string advice) {
  if (d.label == "COMPUTE-BOUND" || d.label == "WAIT-HEAVY" || d.label == "BALANCED") {
    d.advice.insert(d.advice.begin(), std::move(advice));
  } else {
    d.advice.push_back(std::move(advice));
  }
}

bool device_unread(const std::string& fact) {
  return fact.size() > 5 && fact.compare(fact.size() - 5, 5, " mtia") == 0;
}

std::string device_unrecorded_words(const std::string& fact) {
  if (fact.rfind("op ", 0) == 0) return fmt::format("`{}`, an op only a GPU runs", fact.substr(3));
  const std::string calls = fact.substr(0, fact.find(' '));
  if (device_unread(fact)) return fmt::format("{} record{} of an MTIA accelerator", calls, calls == "1" ? "" : "s");
  return fmt::format("{} runtime call{} that launch{} kernels or cop{} memory", calls, calls == "1" ? "" : "s",
                     calls == "1" ? "es" : "", calls == "1" ? "ies" : "y");
}

void device_unrecorded_advice(const summary& s, diagnosis& d) {
  if (s.gpu) return;
  const std::string* fact = s.fact("trace.device_unrecorded");
  if (fact == nullptr) return;
  if (device_unread(*fact)) {  // its device was recorded, in records steptrace does not read
    d.evidence += fmt::format(
        " The trace holds {}, a device steptrace does not read (it reads NVIDIA and AMD GPUs): "
        "what the accelerator waited on is unseen.",
        device_unrecorded_words(*fact));
    place_device_advice(d,
                        "read the accelerator's side with a tool that reads its records (HTA reads MTIA traces); "
                        "steptrace's figures here are the host's");
    return;
  }
  const bool cpu_only = fact->rfind("op ", 0) == 0;  // no runtime call either: recorded with the CPU's activity alone
  d.evidence += fmt::format(
      " The host put work on a GPU ({}), but the trace holds none of the GPU's records: what "
      "the GPU waited on is unseen.",
      device_unrecorded_words(*fact));
  std::string advice =
      cpu_only ? "record the GPU's side too: add ProfilerActivity.CUDA to torch.profiler.profile(activities=[...]); "
                 "with the GPU's records steptrace says what the GPU waited on"
               : "record the GPU's activity too: torch.profiler.profile(activities=[ProfilerActivity.CPU, "
                 "ProfilerActivity.CUDA]), without CUPTI's range profiler, which keeps no kernel records; with them "
                 "steptrace says what the GPU waited on";
  place_device_advice(d, std::move(advice));
}

}  // namespace steptrace::detail
