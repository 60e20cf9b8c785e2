// Internal (not public API): which windows record device activity under `device_sample`.
//
// CUPTI costs the GPU ~0.25 us a kernel it records, whoever asks. With device_sample = N > 1, CUPTI
// records one window in N: windows are the live windows' wall-clock slots (`live` seconds, else
// 10), so every rank of a job records the same ones, and slot k records when k % N == 0. Until one
// whole window has been recorded every window records, so a run shorter than N windows still has
// device figures. CUDA events time every step's phases meanwhile (cpp/src/gpu/README.md,
// "Sampled device records").
//
//   sample_plan plan;
//   const bool record = plan.record(slot_now, every);  // on each collector pass
#pragma once

#include <cstdint>
#include <limits>

namespace steptrace::detail {

class sample_plan {
 public:
  // Whether device activity is recorded in `slot` (the window now), told on every pass; a slot
  // is passed in order, the same one many times. every <= 1: always.
  bool record(std::int64_t slot, std::uint32_t every) noexcept {
    if (last_ == unset) {  // the first pass: recording since part way into this slot
      last_ = slot;
      since_ = slot + 1;
      return recording_ = true;
    }
    if (slot == last_) {
      if (every <= 1 && !recording_) {  // sampling turned off mid-window: recording from now
        recording_ = true;
        since_ = slot + 1;
      }
      return recording_;
    }
    if (recording_ && since_ <= last_) whole_ = true;  // the slot just ended was recorded from its start
    const bool next = every <= 1 || !whole_ || slot % every == 0;
    if (next && !recording_) since_ = slot;
    recording_ = next;
    last_ = slot;
    return recording_;
  }
  bool recording() const noexcept { return recording_; }

 private:
  static constexpr std::int64_t unset = std::numeric_limits<std::int64_t>::min();
  std::int64_t last_ = unset;   // the slot of the last pass
  std::int64_t since_ = unset;  // the first slot recorded from its start, in the current stretch
  bool recording_ = true;
  bool whole_ = false;  // a whole window has been recorded
};

}  // namespace steptrace::detail
