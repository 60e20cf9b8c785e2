// An honest device view (report/diagnosis/hypotheses.hpp): a view that lost records to CUPTI's
// buffer cap, a trace that holds the device records of under half of most steps' kernel
// launches, or one whose device starts work long after each launch with nothing traced running
// before it (another process's work on the GPU, or a device clock offset the syncs could not
// measure) cannot place the GPU's idle time against the host's phases. It is said as such and
// the host view decides.
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

}  // namespace steptrace::detail
