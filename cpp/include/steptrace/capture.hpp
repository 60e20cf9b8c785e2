// steptrace/capture.hpp — capture on trouble: when a live window turns bad, the next few steps
// kept whole and diagnosed alone.
//
//   steptrace::config cfg = tracer.options();
//   cfg.capture = "slow,label,signal";   // or STEPTRACE_CAPTURE=slow,label,signal
//   tracer.configure(cfg);               // a window 2x slower than the run's first ones: the next
//                                        // capture_steps steps go to capture_dir as a Chrome trace
//   tracer.capture(5);                   // or now, from the code
//
// A C++ program's capture is steptrace's own: the flight recorder's records of those steps (phase
// calls, set-aside spans, device records where CUPTI runs), written by the collector thread, its
// diagnosis from those steps alone. Before it, the steps that tripped the trigger, already kept
// (capture_back), are written the same way: a retroactive capture. Python captures with torch.profiler where torch is
// there (steptrace/_capture.py) and weighs the same rule, this one.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "steptrace/export.hpp"
#include "steptrace/summary.hpp"

namespace steptrace {

// The triggers of the `capture` option, weighed once a live window (cpp/src/core/README.md,
// "Capture on trouble"). Not thread-safe: one window thread weighs it.
class STEPTRACE_API capture_rule {
 public:
  static constexpr int cool_down = 3;          // windows a trigger waits after a capture; a slow stretch's end
  static constexpr int baseline_windows = 3;   // stable windows (after the first) whose medians are the baselines
  static constexpr double slow_factor = 2.0;   // `slow` alone
  static constexpr double stall_factor = 5.0;  // `stall` alone
  static constexpr double stall_min_ms = 100;  // and a stall is at least this far past the baseline p50

  // Words as the `capture` option takes them; throws std::invalid_argument naming a bad one.
  explicit capture_rule(std::string_view spec);

  // One window's figures: its step p50 and p95 (0: no steps), its label ("" none), the share
  // of the `phase=` trigger's phase (NaN: not in the window) and its slowest step (0: not known).
  // The reason to capture now, or "".
  // `slow`: p95 and p50 both over F x their baselines (the medians of windows 2-4; a p95 alone
  // moves with preemption on a busy machine), or the p50 alone over 1.5 F x, once per slow stretch, which ends after
  // cool_down windows in a row that are not slow. `stall`: a one-off, the slowest step over F x the p50 baseline and
  // stall_min_ms past it while the window's p50 is not slow. `label`: a new label that holds two windows. `phase`: once
  // per crossing. `file`: the file's mtime moved. Nothing while cooling down.
  std::string weigh(double step_p50_ms, double step_p95_ms, std::string_view label, double phase_share,
                    double step_max_ms = 0);
  // The trigger the last reason came from ("slow", "stall", "label", "phase", "file"; "" none).
  const std::string& fired() const noexcept { return fired_; }

  void cool(int windows = cool_down) noexcept { cool_ = windows; }  // a capture ended (or was planned)
  bool has(std::string_view trigger) const;  // "slow", "label", "straggler", "phase", "signal", "file"
  const std::string& phase() const noexcept { return phase_; }  // the `phase=` trigger's phase ("" none)

 private:
  std::vector<std::string> words_;
  double slow_ = 0, stall_ = 0, share_ = 0;
  std::string phase_, file_, fired_;
  std::vector<std::pair<double, double>> base_;  // the first windows' (p50, p95)
  bool in_slow_ = false, phase_over_ = false, file_known_ = false;
  int calm_ = 0, cool_ = 0;
  double file_seen_ = 0;
  std::string label_, last_label_;
};

// Which kept steps a retroactive capture writes (tracer::capture_kept): none; the last ones; the
// slowest counted ones of the live window that closed last (and the one since); the slowest of
// every kept window; those numbered so (another rank's choice).
enum class kept_steps { none, recent, window, slowest, numbered };

// The lines a capture says on stderr, whoever took it.
STEPTRACE_API std::string capture_block(const capture_record& c);

}  // namespace steptrace
