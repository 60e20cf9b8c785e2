// device_sample: CUPTI records one window in N (gpu/sample_plan.hpp). At a window's start the
// record kinds go off or on again, steptrace's callbacks and clock kept; each window left out is a
// `sampled` gap, whose end waits for the first kernel launched after the resume. See backend.hpp
// and cpp/src/gpu/README.md, "Sampled device records".
#include <algorithm>
#include <chrono>

#include "base/log.hpp"
#include "gpu/activity.hpp"
#include "gpu/backend_data.hpp"
#include "gpu/testing.hpp"
#include "record/clock.hpp"

namespace steptrace::detail {
namespace {

constexpr std::uint64_t resume_wait_ns = 2'000'000'000;  // a resume's gap ends by then, kernel or not

// Under b.mutex: whether the collectors' ticks have anything to do (else one atomic load each).
void keep_ticking(backend& b) {
  b.sampling.store(b.sample_every > 1 || b.sample_paused || b.resume_pending, std::memory_order_relaxed);
}

// Under b.mutex: the window left out ends at `at`, no earlier than the resume.
void end_resume_gap(backend& b, std::uint64_t at) {
  if (cupti_gap* g = open_gap(b, true)) g->end = std::max(at, b.resume_ns);
  b.resume_pending = false;
  keep_ticking(b);
}

}  // namespace

// A resume's gap ends where the first kernel launched after it starts (a kernel with no launch
// record: one that starts after it).
void end_resume_gap_at_kernels(backend& b, const device_record* first, const device_record* last) {
  if (!b.resume_pending) return;
  std::uint64_t at = UINT64_MAX;
  for (const device_record* r = first; r != last; ++r) {
    if (r->kind == device_activity::kernel && (r->launched != 0 ? r->launched : r->start) >= b.resume_ns) {
      at = std::min(at, r->start);
    }
  }
  if (at != UINT64_MAX) end_resume_gap(b, at);
}

void reset_sampling(backend& b) {
  b.own_callbacks = b.sample_paused = b.resume_pending = false;
  b.sample_every = 1;
  b.sample_period_s = 10;
  b.test_slots = false;
  b.plan = sample_plan{};
  b.sampling.store(false);
}

void set_device_sample(std::uint32_t every, std::uint32_t period_s) noexcept {
  backend& b = backend_data();
  std::lock_guard<std::mutex> lock(b.mutex);
  b.sample_every = std::max<std::uint32_t>(every, 1);
  b.sample_period_s = std::max<std::uint32_t>(period_s, 1);
  keep_ticking(b);
}

namespace {
void sample_at(backend& b, std::int64_t slot, std::uint64_t now) noexcept {
  try {
    std::lock_guard<std::mutex> once(b.start_mutex);  // no start, yield or reclaim meanwhile
    std::lock_guard<std::mutex> lock(b.mutex);
    if (b.forked_child || !b.cupti_loaded || !b.status.cupti) return;
    if (b.resume_pending && now > b.resume_ns + resume_wait_ns) end_resume_gap(b, b.resume_ns + resume_wait_ns);
    const bool record = b.plan.record(slot, b.sample_every);
    if (record == !b.sample_paused) return keep_ticking(b);
    if (!record) {  // this window is left out
      if (b.resume_pending) end_resume_gap(b, now);
      b.sample_paused = true;
      add_gap(b, now, true);
      if (b.collecting) pause_activity();
      b.collecting = false;
    } else {  // recorded again: the gap ends with the first kernel launched from now
      b.sample_paused = false;
      b.resume_pending = true;
      b.resume_ns = now;
      if (b.holder.empty() && !b.collecting) {
        const std::string why_not = b.own_callbacks ? resume_activity() : start_activity(b.cupti, *b.store);
        b.collecting = why_not.empty();
        b.own_callbacks = b.own_callbacks || b.collecting;
        if (!b.collecting) {
          log(log_level::warn, "could not take CUPTI back after a window left out (device_sample) (" + why_not +
                                   "); device activity stays off");
          b.status.cupti = false;
          b.status.reason = "device activity off after a window left out: " + why_not;
        }
      }
    }
    keep_ticking(b);
  } catch (...) {  // never break the traced program
  }
}
}  // namespace

void sample_device_tick() noexcept {
  backend& b = backend_data();
  if (!b.sampling.load(std::memory_order_relaxed) || !b.started.load(std::memory_order_acquire)) return;
  std::uint32_t period_s;
  {
    std::lock_guard<std::mutex> lock(b.mutex);
    if (b.test_slots) return;
    period_s = b.sample_period_s;
  }
  const std::int64_t slot = std::chrono::system_clock::now().time_since_epoch() / std::chrono::seconds(period_s);
  sample_at(b, slot, host_clock::to_monotonic_ns(host_clock::now()));
}

void sample_slots_for_testing() noexcept {
  backend& b = backend_data();
  std::lock_guard<std::mutex> lock(b.mutex);
  b.test_slots = true;
}

void sample_device_at(std::int64_t slot, std::uint64_t now) noexcept { sample_at(backend_data(), slot, now); }

}  // namespace steptrace::detail
