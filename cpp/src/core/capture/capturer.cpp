// Captures on trouble in a C++ program (steptrace/capture.hpp): armed by the rule on a live
// window, by SIGUSR2 or by tracer::capture; fed the steps that begin after that by the fan-out;
// written by the collector as a Chrome trace of those steps with their diagnosis alone. See
// cpp/src/core/README.md, "Capture on trouble".
#include "core/capture/capturer.hpp"

#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <system_error>

#include "base/log.hpp"
#include "base/own_folder.hpp"
#include "base/quiet_write.hpp"
#include "base/whole_file.hpp"
#include "record/clock.hpp"
#include "report/json/json_fields.hpp"
#include "report/report.hpp"
#include "steptrace/tracer.hpp"

namespace steptrace {
namespace detail {
namespace {

// The device records of the steps kept: taken as they come, with later work's (which marks them
// settled); else, a second after the last step, by asking CUPTI for its finished records (a loop
// that stopped launching, or waits, brings no later work: the H100 run wrote such a capture after
// a 5 s wait, with no device records).
constexpr auto device_settle = std::chrono::seconds(1);

// SIGUSR2 arms a capture: the handler only sets this; the collector looks each pass.
std::atomic<bool> signalled{false};
struct sigaction before_usr2 {};

void on_usr2(int sig, siginfo_t* info, void* context) {
  signalled.store(true, std::memory_order_relaxed);
  // The program's own handler still runs.
  if (before_usr2.sa_flags & SA_SIGINFO) {
    if (before_usr2.sa_sigaction != nullptr) before_usr2.sa_sigaction(sig, info, context);
  } else if (before_usr2.sa_handler != SIG_DFL && before_usr2.sa_handler != SIG_IGN &&
             before_usr2.sa_handler != nullptr) {
    before_usr2.sa_handler(sig);
  }
}

void install_usr2() {
  static std::atomic<bool> done{false};
  if (done.exchange(true)) return;
  struct sigaction now {};
  now.sa_sigaction = &on_usr2;
  now.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&now.sa_mask);
  sigaction(SIGUSR2, &now, &before_usr2);
}

}  // namespace

bool capturer::arm(capture_context& c, std::string reason, std::uint32_t steps) {
  if (armed_) return false;
  // Forward captures count, one being written too; the retroactive ones come with them.
  const std::size_t done = static_cast<std::size_t>(
      std::count_if(done_.begin(), done_.end(), [](const capture_record& r) { return !r.retroactive; }));
  if (done + (writing_ && !chosen_.writing ? 1 : 0) >= c.options().capture_max) {
    if (!said_limit_) {
      said_limit_ = true;
      log(log_level::warn,
          "capture: " + reason + ", but this run has had its " + std::to_string(done) + " captures (capture_max)");
    }
    return false;
  }
  armed_ = true;
  complete_ = device_ready_ = false;
  reason_ = std::move(reason);
  steps_ = steps != 0 ? steps : c.options().capture_steps;
  seen_ = 0;
  armed_at_ = host_clock::now();
  kept_.configure(steps_, 0);
  kept_.clear();
  totals_.clear();
  c.spans_wanted_changed();  // phase calls, even with the timeline off
  return true;
}

void capturer::on_step(const built_step& s) {
  if (s.begin < armed_at_ || complete_) return;
  built_step whole = s;  // the steps chosen are read as they are: warm-up or not
  whole.warmup = false;
  if (seen_ == 0) first_index_ = s.index;
  last_index_ = s.index;
  last_end_ = std::max(last_end_, s.end);
  kept_.on_step(whole);
  totals_.on_step(whole);
  if (++seen_ == steps_) {
    complete_ = true;
    complete_at_ = std::chrono::steady_clock::now();
  }
}

void capturer::on_set_aside(std::uint32_t thread, std::uint32_t id, std::uint64_t begin, std::uint64_t end) {
  if (begin < armed_at_ || complete_) return;
  kept_.on_set_aside(thread, id, begin, end);
  totals_.on_set_aside(id, begin, end);
}

void capturer::on_device(const device_join& join, std::uint64_t settled_ns) {
  back_.attach_device(join, settled_ns, &host_clock::to_monotonic_ns);
  if (!armed_ || seen_ == 0) return;
  kept_.attach_device(join, settled_ns, &host_clock::to_monotonic_ns);
  if (complete_ && settled_ns >= host_clock::to_monotonic_ns(last_end_)) device_ready_ = true;
}

std::string capturer::weigh(const summary& w) {
  if (elsewhere_ || !rule_) return {};
  double share = std::numeric_limits<double>::quiet_NaN();
  if (!rule_->phase().empty()) {
    if (const phase_stats* p = w.phase(rule_->phase())) share = p->share;
  }
  return rule_->weigh(w.steps ? w.step_ms.p50 : 0, w.steps ? w.step_ms.p95 : 0, w.diag.label, share,
                      w.steps ? w.step_ms.max : 0);
}

void capturer::on_window(capture_context& c, const summary& w, bool last) {
  if (!last) {  // the rule, once a window: it arms a capture from the next step, and the kept steps
    const std::string reason = weigh(w);  // that tripped it are written at once
    if (!reason.empty() && arm(c, reason, 0)) arm_back(c, reason, back_choice(*rule_), {});
  }
  back_.next_window();
}

std::vector<capture_record> capturer::take_unsent() {
  std::vector<capture_record> out(done_.begin() + static_cast<std::ptrdiff_t>(sent_), done_.end());
  sent_ = done_.size();  // a window carries the captures that ended since the last
  return out;
}

void capturer::configure(const config& cfg, bool triggers_changed) {
  back_.configure(cfg.capture_back);
  if (!triggers_changed) return;
  rule_.reset();
  if (elsewhere_ || cfg.capture.empty()) return;
  rule_.emplace(cfg.capture);                // the triggers start afresh with the words
  if (rule_->has("signal")) install_usr2();  // before configure returns: a signal sent next is ours
}

void capturer::tick(std::unique_lock<std::mutex>& lock, capture_context& c, bool last) {
  // Only a tracer that asked for it takes the signal: another tracer in the process (the default
  // one, a library's) must not take it first and arm a capture no one asked of it.
  if (rule_ && rule_->has("signal") && signalled.exchange(false, std::memory_order_relaxed)) {
    if (arm(c, "signal SIGUSR2", 0)) arm_back(c, "signal SIGUSR2", kept_steps::recent, {});
  }
  back_tick(lock, c, last);  // the kept steps a trigger chose, before the forward capture's
  if (!armed_) return;
  const bool device = c.device() != nullptr;
  const auto now = std::chrono::steady_clock::now();
  if (complete_ && device && !device_ready_ && now - complete_at_ > device_settle) {
    c.read_device_now();
    // Work of these steps still running a second after them is missed (a GPU that far behind).
    kept_.attach_device(*c.device(), UINT64_MAX, &host_clock::to_monotonic_ns);
    device_ready_ = true;
  }
  if (!(complete_ && (!device || device_ready_)) && !(last && seen_ > 0)) {
    if (last) armed_ = false;  // the run ended before one step was captured: nothing to say
    return;
  }
  const auto started = std::chrono::steady_clock::now();
  capture_record record;
  record.reason = reason_;
  record.first_step = first_index_;
  record.last_step = last_index_;
  record.steps = seen_;
  record.rank = c.rank() ? c.rank()->rank : 0;
  record.tool = "steptrace";
  summary s;
  totals_.fill(s, host_clock::ns_per_tick());
  kept_.fill(s.timeline, c.run_begin(), host_clock::ns_per_tick(), &host_clock::to_monotonic_ns);
  s.facts = c.facts();
  s.rank = c.rank();
  armed_ = false;
  c.spans_wanted_changed();
  write(lock, c, record, s, "step" + std::to_string(record.first_step), started);
  if (rule_) rule_->cool();
}

}  // namespace detail
}  // namespace steptrace
