// The live view (core/live/live_view.hpp): windows on the wall clock's period, written out
// without the tracer lock, then heard by the subsystems that listen.
#include "core/live/live_view.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <utility>

#include "base/log.hpp"
#include "base/quiet_write.hpp"
#include "base/whole_file.hpp"
#include "gpu/backend.hpp"
#include "record/names.hpp"
#include "report/report.hpp"

namespace steptrace::detail {

bool live_view::on(const config& cfg) const {
  if (ended_) return false;
  if (cfg.live > 0 || !cfg.jsonl_path.empty() || listening_) return true;
  return std::any_of(subsystems_.begin(), subsystems_.end(),
                     [](const window_listener* l) { return l->wants_windows(); });
}

void live_view::note_rss(std::uint64_t bytes) {
  window_totals_.note_rss(bytes);
  live_totals_.note_rss(bytes);
}

std::string live_view::note_drift(summary& w) {
  if (!w.gpu || !w.gpu->kernels || w.gpu->steps_viewed == 0) return {};
  const auto found = drift_.check(*w.gpu->kernels, w.gpu->steps_viewed);
  if (found.empty()) return {};
  const kernel_drift::finding& worst = found.front();
  // "NAME\tBASELINE_US\tNOW_US": the diagnosis's finding (report/diagnosis/drift_advice.cpp).
  w.facts.emplace_back("gpu.kernel_drift",
                       fmt::format("{}\t{:.3f}\t{:.3f}", worst.name, worst.baseline_us, worst.now_us));
  if (std::find(drift_said_.begin(), drift_said_.end(), worst.name) != drift_said_.end() ||
      drift_said_.size() >= kernel_drift::max_names) {
    return {};
  }
  drift_said_.push_back(worst.name);
  return fmt::format(
      "the kernel {} takes {:.0f}% longer a call than in the first window it ran in ({:.1f} us against "
      "{:.1f} us): clocks held lower (heat, power) or larger shapes (said once a kernel)",
      short_kernel_name(worst.name), 100 * (worst.now_us / worst.baseline_us - 1), worst.now_us, worst.baseline_us);
}

void live_view::tick(std::unique_lock<std::mutex>& lock, live_context& ctx, bool last) {
  const config& cfg = ctx.options();
  const bool is_on = on(cfg);
  if (device_join* device = ctx.device()) device->recent_on = is_on && !last;  // the windows' device view
  if (!is_on) return;
  if (last) ended_ = true;  // whatever follows: no window, no line after this one
  const auto now = std::chrono::steady_clock::now();
  const double now_s = std::chrono::duration<double>(now.time_since_epoch()).count();
  // Windows end on the wall clock's multiples of the period, so every rank of a job (one clock,
  // or clocks kept in step) cuts its windows at the same instants: rank 0 compares like with like.
  const auto period = std::chrono::seconds(cfg.live > 0 ? cfg.live : 10);
  const std::int64_t slot = std::chrono::system_clock::now().time_since_epoch() / period;
  if (origin_s_ < 0 && !last) {  // the first pass with the view on starts its first window
    origin_s_ = now_s;
    slot_ = slot;
    period_ = period;
    // The first window ends at the first boundary, however soon: a listener never waits more
    // than a period for its first window.
    merge_first_ = false;
    live_totals_.clear();
    if (device_join* device = ctx.device()) device->take_recent();  // views from before the view began
    return;
  }
  if (origin_s_ < 0) origin_s_ = now_s, slot_ = slot;  // the last window is the first: it began with the run
  if (!last && period != period_) {                    // the period changed (configure): the window in progress
    period_ = period;                                  // ends at the new period's next boundary, not at once
    slot_ = slot;
    return;
  }
  if (!last && slot == slot_) return;
  if (!last && merge_first_) {  // the short first slot joins the next one
    merge_first_ = false;
    slot_ = slot;
    return;
  }
  if (last && live_totals_.steps() == 0) return;  // nothing counted since the last window: none to send
  const std::int64_t covered = slot_;             // the slot this window covers (the last one: to now)
  slot_ = slot;
  summary w = ctx.window_of(live_totals_);
  if (device_join* device = ctx.device()) w.gpu = device->take_recent();  // the steps viewed since
  if (w.gpu) w.gpu->sample_every = ctx.sample_every(*w.gpu);
  const std::string drift = note_drift(w);  // said once the lock is let go
  for (window_listener* l : subsystems_) l->on_window_closing(w);
  const std::optional<rank_info> who = ctx.rank();
  const std::string jsonl = rank_path(cfg.jsonl_path, who ? who->rank : 0);
  const bool print = cfg.live > 0;
  const std::uint64_t step = ctx.steps_ended();
  const bool in_job = who && who->world_size > 1;
  const std::int64_t device = who ? who->local_rank : 0;
  lock.unlock();  // formatting and writing without the tracer lock
  if (!drift.empty()) log(log_level::warn, drift);
  try {
    if (in_job) w.node = node_.read(device, w.gpu.has_value() || gpu_backend_status().cuda);
    ctx.finish(w);
    if (print) write_stderr(live_line(w, now_s - origin_s_));
    if (!jsonl.empty()) {
      std::string why;
      if (const int code = append_whole_line(jsonl, summary_json_line(w) + "\n", &why); code != 0 && !jsonl_failed_) {
        jsonl_failed_ = true;  // once: it would repeat every window; later windows are still tried
        log(log_level::error,
            "could not append a live window to " + jsonl + ": " + why + " (the file keeps whole lines; said once)");
      }
    }
  } catch (const std::exception& e) {
    log(log_level::error, std::string("live view: ") + e.what());
  }
  lock.lock();
  for (window_listener* l : subsystems_) l->on_window(w, last);  // capture's rule weighs it; its ring turns
  if (listening_ && !listening_stopped_) {
    if (queued_.size() == queued) {  // the listener fell behind: it loses the oldest
      queued_.pop_front();
      windows_dropped_.fetch_add(1, std::memory_order_relaxed);
    }
    queued_.push_back({std::move(w), step, now_s - origin_s_, covered});
    queued_cv_.notify_all();
  }
}

void live_view::listen_windows() {
  listening_ = true;
  listening_stopped_ = false;
}

std::optional<live_window> live_view::next_window(std::unique_lock<std::mutex>& lock, double timeout_s) {
  const auto wait = std::chrono::duration<double>(std::max(0.0, timeout_s));
  queued_cv_.wait_for(lock, wait, [&] { return !queued_.empty() || listening_stopped_; });
  if (queued_.empty() || listening_stopped_) return std::nullopt;
  live_window w = std::move(queued_.front());
  queued_.pop_front();
  return w;
}

void live_view::stop_listening() {
  listening_stopped_ = true;
  queued_.clear();
}

void live_view::restart() {
  window_totals_.clear();
  live_totals_.clear();
  live_ranks_.reset();
  live_rank_phases_.clear();
  windows_dropped_.store(0, std::memory_order_relaxed);
  window_calls_failed_.store(0, std::memory_order_relaxed);
}

}  // namespace steptrace::detail
