// Captures on trouble in a C++ program (steptrace/capture.hpp): armed by the rule on a live
// window, by SIGUSR2 or by tracer::capture; fed the steps that begin after that by the fan-out;
// written by the collector as a Chrome trace of those steps with their diagnosis alone. See
// cpp/src/core/README.md, "Capture on trouble".
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
#include "core/tracer_impl.hpp"
#include "report/json/json_fields.hpp"
#include "report/report.hpp"
#include "steptrace/tracer.hpp"

extern char* program_invocation_short_name;  // glibc

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

bool tracer_impl::arm_capture(std::string reason, std::uint32_t steps) {
  if (capture.armed) return false;
  // Forward captures count, one being written too; the retroactive ones come with them.
  const std::size_t done = static_cast<std::size_t>(
      std::count_if(capture.done.begin(), capture.done.end(), [](const capture_record& c) { return !c.retroactive; }));
  if (done + (capture.writing && !capture.back_chosen.writing ? 1 : 0) >= cfg.capture_max) {
    if (!capture.said_limit) {
      capture.said_limit = true;
      log(log_level::warn,
          "capture: " + reason + ", but this run has had its " + std::to_string(done) + " captures (capture_max)");
    }
    return false;
  }
  capture.armed = true;
  capture.complete = capture.device_ready = false;
  capture.reason = std::move(reason);
  capture.steps = steps != 0 ? steps : cfg.capture_steps;
  capture.seen = 0;
  capture.armed_at = host_clock::now();
  capture.kept.configure(capture.steps, 0);
  capture.kept.clear();
  capture.totals.clear();
  for (auto& t : threads) t->builder.keep_spans(true);  // phase calls, even with the timeline off
  if (reqs.requests) reqs.requests->keep_spans(true);
  return true;
}

void tracer_impl::capture_step(const built_step& s) {
  if (s.begin < capture.armed_at || capture.complete) return;
  built_step whole = s;  // the steps chosen are read as they are: warm-up or not
  whole.warmup = false;
  if (capture.seen == 0) capture.first_index = s.index;
  capture.last_index = s.index;
  capture.last_end = std::max(capture.last_end, s.end);
  capture.kept.on_step(whole);
  capture.totals.on_step(whole);
  if (++capture.seen == capture.steps) {
    capture.complete = true;
    capture.complete_at = std::chrono::steady_clock::now();
  }
}

void tracer_impl::capture_set_aside(std::uint32_t thread, std::uint32_t id, std::uint64_t begin, std::uint64_t end) {
  if (begin < capture.armed_at || capture.complete) return;
  capture.kept.on_set_aside(thread, id, begin, end);
  capture.totals.on_set_aside(id, begin, end);
}

void tracer_impl::capture_device(const device_join& join, std::uint64_t settled_ns) {
  if (!capture.armed || capture.seen == 0) return;
  capture.kept.attach_device(join, settled_ns, &host_clock::to_monotonic_ns);
  if (capture.complete && settled_ns >= host_clock::to_monotonic_ns(capture.last_end)) capture.device_ready = true;
}

std::string tracer_impl::weigh_capture(const summary& w) {
  if (capture.elsewhere || !capture.rule) return {};
  double share = std::numeric_limits<double>::quiet_NaN();
  if (!capture.rule->phase().empty()) {
    if (const phase_stats* p = w.phase(capture.rule->phase())) share = p->share;
  }
  return capture.rule->weigh(w.steps ? w.step_ms.p50 : 0, w.steps ? w.step_ms.p95 : 0, w.diag.label, share,
                             w.steps ? w.step_ms.max : 0);
}

void tracer_impl::capture_configured() {
  capture.rule.reset();
  if (capture.elsewhere || cfg.capture.empty()) return;
  capture.rule.emplace(cfg.capture);                // the triggers start afresh with the words
  if (capture.rule->has("signal")) install_usr2();  // before configure returns: a signal sent next is ours
}

void tracer_impl::capture_tick(std::unique_lock<std::mutex>& lock, bool last) {
  // Only a tracer that asked for it takes the signal: another tracer in the process (the default
  // one, a library's) must not take it first and arm a capture no one asked of it.
  if (capture.rule && capture.rule->has("signal") && signalled.exchange(false, std::memory_order_relaxed)) {
    if (arm_capture("signal SIGUSR2", 0)) arm_back("signal SIGUSR2", kept_steps::recent, {});
  }
  back_tick(lock, last);  // the kept steps a trigger chose, before the forward capture's
  if (!capture.armed) return;
  const bool device = stats.totals.device() != nullptr;
  const auto now = std::chrono::steady_clock::now();
  if (capture.complete && device && !capture.device_ready && now - capture.complete_at > device_settle) {
    read_device(device_flush::completed);
    // Work of these steps still running a second after them is missed (a GPU that far behind).
    capture.kept.attach_device(*stats.totals.device(), UINT64_MAX, &host_clock::to_monotonic_ns);
    capture.device_ready = true;
  }
  if (!(capture.complete && (!device || capture.device_ready)) && !(last && capture.seen > 0)) {
    if (last) capture.armed = false;  // the run ended before one step was captured: nothing to say
    return;
  }
  const auto started = std::chrono::steady_clock::now();
  capture_record record;
  record.reason = capture.reason;
  record.first_step = capture.first_index;
  record.last_step = capture.last_index;
  record.steps = capture.seen;
  record.rank = rank ? rank->rank : 0;
  record.tool = "steptrace";
  summary s;
  capture.totals.fill(s, host_clock::ns_per_tick());
  capture.kept.fill(s.timeline, stats.totals.run_begin(), host_clock::ns_per_tick(), &host_clock::to_monotonic_ns);
  s.facts = facts;
  s.rank = rank;
  capture.armed = false;
  for (auto& t : threads) t->builder.keep_spans(spans_wanted());
  if (reqs.requests) reqs.requests->keep_spans(spans_wanted());
  write_capture(lock, record, s, "step" + std::to_string(record.first_step), started);
  if (capture.rule) capture.rule->cool();
}

bool tracer_impl::write_capture(std::unique_lock<std::mutex>& lock, capture_record& record, summary& s,
                                const std::string& name, std::chrono::steady_clock::time_point started) {
  const std::string folder = cfg.capture_dir.empty() ? "." : cfg.capture_dir;
  const std::string jsonl = rank_path(cfg.jsonl_path, rank ? rank->rank : 0);
  std::string program;  // the run's name as the program gave it (Python: its script's), else the process's
  for (const auto& [key, value] : facts) {
    if (key == "run.program") program = value;
  }
  capture.writing = true;
  lock.unlock();  // the diagnosis, the trace and the files without the tracer lock
  try {
    finish_window(s);
    record.label = s.diag.label;
    record.evidence = s.diag.evidence;
    record.advice = s.diag.advice.empty() ? "" : s.diag.advice.front();
    const std::string stem =
        safe_name(program.empty() ? program_invocation_short_name ? program_invocation_short_name : "run" : program) +
        "-rank" + std::to_string(record.rank) + "-" + name + "-pid" + std::to_string(::getpid());
    record.path = folder + "/" + stem + ".trace.json";  // unique to the process: runs may share a folder
    // only a folder of this user's; a second capture tripped by the same step keeps the first
    const std::string trace = s.trace();
    record.path = own_folder(folder).write_new(stem, ".trace.json", [&](const std::string&) { return trace; });
    record.cost_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    write_stderr(capture_block(record));
    if (!jsonl.empty()) {  // the live JSONL gets it as a line of its own: {"capture": {...}}
      const json_doc line = {{"capture", captures_json({record}).at(0)}};
      append_whole_line(jsonl, line.dump(-1, ' ', false, json_doc::error_handler_t::replace) + "\n");
    }
  } catch (const std::exception& e) {
    log(log_level::error, "capture of steps " + std::to_string(record.first_step) + "-" +
                              std::to_string(record.last_step) + " (" + record.reason + ") failed: " +
                              (record.path.empty() ? "" : "could not write " + record.path + ": ") + e.what());
    lock.lock();
    capture.writing = false;
    return false;
  }
  lock.lock();
  capture.writing = false;
  capture.done.push_back(record);
  return true;
}

}  // namespace detail

bool tracer::capture(std::uint32_t steps, std::string_view reason, kept_steps back) {
  if (steps > max_capture_steps) {
    throw std::invalid_argument("steptrace: capture takes 1 to " + std::to_string(max_capture_steps) +
                                " steps (as the capture_steps option), not " + std::to_string(steps));
  }
  if (impl_->forked.load()) return false;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    if (!impl_->arm_capture(std::string(reason), steps)) return false;
    if (back == kept_steps::none || back == kept_steps::numbered) return true;
    impl_->drain_all_locked();  // the steps ended so far are kept before the choice
    if (impl_->arm_back(std::string(reason), back, {}).empty()) return true;
  }
  impl_->wake.notify_one();
  return true;
}

std::vector<std::uint64_t> tracer::capture_kept(std::string_view reason, kept_steps which,
                                                const std::vector<std::uint64_t>& indices) {
  if (impl_->forked.load() || which == kept_steps::none) return {};
  std::vector<std::uint64_t> chosen;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->drain_all_locked();  // the steps ended so far are kept before the choice
    chosen = impl_->arm_back(std::string(reason), which, indices);
  }
  if (!chosen.empty()) impl_->wake.notify_one();
  return chosen;
}

void tracer::note_capture(capture_record record) {
  if (impl_->forked.load()) return;
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->capture.done.push_back(std::move(record));
}

void tracer::capture_triggers_elsewhere() {
  if (impl_->forked.load()) return;
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->capture.elsewhere = true;
}

}  // namespace steptrace
