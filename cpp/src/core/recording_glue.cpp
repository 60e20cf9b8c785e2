// The tracer's side of recording: where a drain's steps go, who takes the device records joined
// to them, and what the other subsystems do on each collector pass (core/recording's context).
#include <mutex>

#include "core/tracer_impl.hpp"

namespace steptrace::detail {

// Each finished step of a thread goes to the whole-run totals and the recent steps, the windows
// (while they are on), the timeline, the retroactive ring and an armed capture; a batch to the
// batches alone.
void tracer_impl::recording_glue::add_sinks(step_fan_out& out) {
  out.add_batches(impl.stats.batches).add(impl.stats.totals).add(impl.stats.recent);
  if (impl.live.windows_on()) out.add(impl.live.window_totals());
  if (impl.live.on(impl.cfg)) out.add(impl.live.totals());
  out.add(impl.stats.timeline).add(impl.capture.ring());
  if (impl.capture.armed()) out.add(impl.capture);
}

void tracer_impl::recording_glue::on_device(device_join& d, std::uint64_t before) {
  impl.stats.timeline.attach_device(d, before, &host_clock::to_monotonic_ns);
  impl.capture.on_device(d, before);
}

void tracer_impl::recording_glue::each_pass(std::unique_lock<std::mutex>& lock) {
  impl.sample_rss(lock, false);
  impl.live_tick(lock);
  impl.capture.tick(lock, impl.capture_ctx);
  if (impl.hang.due() && !impl.forked.load()) impl.hang.tick(lock, impl.hang_context_now());
}

}  // namespace steptrace::detail
