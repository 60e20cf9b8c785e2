// Recording's side of the device: CUDA event pairs read back, CUPTI's records handed to the join,
// and the CPU accounting the first step starts. See cpp/src/gpu/README.md, "The device layer".
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>
#include <utility>
#include <vector>

#include "core/recording/recorder.hpp"
#include "gpu/backend.hpp"

namespace steptrace::detail {

double recorder::harvest_events() {
  for (auto& t : threads_) {
    t->pairs_pending = 0;
    for (const event_pair& p : t->builder.event_pairs()) pending_events_.push_back({t.get(), p});
    t->builder.event_pairs().clear();
  }
  auto done = [&](const pending_pair& p) {
    thread_events& events = p.thread->events;
    if (p.pair.end != no_event) {
      float ms = 0;
      switch (p.pair.timed ? pair_elapsed(events, p.pair.begin, p.pair.end, ms) : event_result::failed) {
        case event_result::pending:
          return false;
        case event_result::done:
          p.pair.phase == event_pair::step ? ctx_.totals().add_step_device_time(ms)
                                           : ctx_.totals().add_phase_device_time(p.pair.phase, ms);
          break;
        case event_result::failed:
          break;
      }
      events.release(p.pair.end);
    }
    events.release(p.pair.begin);
    return true;
  };
  // Every pair held before this harvest, read back now or still running: a loop of short phases
  // fills the pool with pairs that wait for this poll, though few are still on the GPU after it
  // (likely why the H100 run timed 1,659 of 2,000 phases of 20 us: polls could grow to 50 ms apart).
  std::uint32_t most = 0;
  for (const pending_pair& p : pending_events_) most = std::max(most, ++p.thread->pairs_pending);
  pending_events_.erase(std::remove_if(pending_events_.begin(), pending_events_.end(), done), pending_events_.end());
  return static_cast<double>(most) * 2 / event_pool::size;  // two slots a pair
}

void recorder::sample_cpu() {
  std::lock_guard<std::mutex> lock(cpu_mutex_);
  cpu_.sample();
}

cpu_totals recorder::cpu_so_far() {
  std::lock_guard<std::mutex> lock(cpu_mutex_);
  cpu_.sample();
  return cpu_.totals();
}

void recorder::restart_cpu(bool unless_started) {
  std::lock_guard<std::mutex> lock(cpu_mutex_);
  if (!unless_started || !cpu_.started()) cpu_.restart();
}

void recorder::first_step() noexcept {
  bool use_cupti;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    use_cupti = ctx_.options().cupti;
  }
  restart_cpu(true);
  start_gpu_backend(use_cupti);
  if (gpu_backend_status().cupti) {
    std::lock_guard<std::mutex> lock(mutex_);
    ctx_.totals().enable_device();
    start_device_reading();
    for (auto& t : threads_) t->builder.keep_segments(true);
    if (reqs.requests) reqs.requests->keep_segments(true);
  }
}

void recorder::start_device_reading() {
  device_join* device = ctx_.totals().device();
  if (device == nullptr) return;
  device->cursor = device_records_end();  // records stored before now belong to no step of ours
  device_base_ = device_record_counts();
}

void recorder::read_device(device_flush how) {
  device_join* device = ctx_.totals().device();
  if (device == nullptr) return;
  std::vector<device_record> records;
  std::uint64_t lost = 0;
  read_device_records(device->cursor, records, lost, how);
  device->totals.dropped += lost;
  device->add_records(std::move(records));
  device->set_gaps(cupti_gaps());
  // A step is viewed for good a second after the newest record has passed its end (its records
  // have arrived by then), or at exit. A summary before that shows it provisionally.
  const std::uint64_t settled = device->newest_record_end();
  const std::uint64_t before =
      how == device_flush::forced ? UINT64_MAX : (settled > 1'000'000'000 ? settled - 1'000'000'000 : 0);
  device->join(before);
  ctx_.on_device(*device, before);
}

}  // namespace steptrace::detail
