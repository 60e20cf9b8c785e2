// Internal to gpu/: the process-wide backend's state, shared by backend.cpp (start, hand-over,
// reading) and device_sample.cpp (device_sample's windows). See backend.hpp.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "gpu/backend.hpp"
#include "gpu/driver_api.hpp"
#include "gpu/record_store.hpp"
#include "gpu/sample_plan.hpp"

namespace steptrace::detail {

struct backend {
  std::mutex start_mutex;  // one start at a time
  std::atomic<bool> started{false};
  cuda_driver driver;                      // set by start, before `started`; read-only afterwards
  cupti_functions cupti;                   // likewise
  record_store* store = new record_store;  // never freed: CUPTI may call back during exit
  std::mutex mutex;                        // status, dirs and the hand-over below
  gpu_status status{false, false, "host only: no step has run yet, so the GPU was not looked at"};
  std::vector<std::string> dirs;
  bool cupti_loaded = false;  // CUPTI was found and steptrace may use it
  bool collecting = false;    // steptrace's callbacks and kinds are in place
  std::string holder;         // another tool holding CUPTI now ("" for none)
  std::string collecting_reason;
  std::deque<cupti_gap> gaps;
  bool own_callbacks = false;  // the registered callbacks and timestamp source are steptrace's
  // device_sample (sample_plan.hpp): the setting, the plan, a window being left out now, and a
  // resume whose gap waits for the first kernel launched after it (`sampling`: the ticks have
  // work, N above 1 or either of those; read without the lock).
  std::uint32_t sample_every = 1, sample_period_s = 10;
  sample_plan plan;
  bool sample_paused = false, resume_pending = false;
  std::uint64_t resume_ns = 0;
  std::atomic<bool> sampling{false};
  bool test_slots = false;    // tests: sample_device_at alone moves the plan, not the collectors' ticks
  bool forked_child = false;  // set once, single-threaded, by forget_gpu_in_forked_child
  bool fake = false;          // tests: the tables below instead of the real libraries
  cuda_driver fake_driver;
  cupti_functions fake_cupti;
  bool fake_has_cupti = false;
};

backend& backend_data();  // the one backend, never destroyed: CUPTI may call back during exit

// Under b.mutex: a gap of that kind opens at `at`; the newest one still open, or nullptr.
void add_gap(backend& b, std::uint64_t at, bool sampled);
cupti_gap* open_gap(backend& b, bool sampled);
// Under b.mutex (device_sample.cpp): a resume's gap ends at the first kernel launched after it
// among the records [first, last); device_sample's state back to its start (tests).
void end_resume_gap_at_kernels(backend& b, const device_record* first, const device_record* last);
void reset_sampling(backend& b);

}  // namespace steptrace::detail
