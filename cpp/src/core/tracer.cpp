// The public tracer: configuration, the library's side of recording (steps, and phases the
// inline path hands over), and the summary assembled from the aggregate.
#include "steptrace/tracer.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <stdexcept>
#include <string>

#include "analysis/device_peaks.hpp"
#include "base/log.hpp"
#include "base/utf8.hpp"
#include "core/tracer_impl.hpp"
#include "gpu/backend.hpp"
#include "record/names.hpp"
#include "report/report.hpp"

namespace steptrace {
namespace detail {

tracer_impl::tracer_impl(const config& c)
    : uid(next_tracer_uid()), creator_pid(getpid()), env_disabled(!config::from_env().enabled), cfg(c) {
  host_clock::init();
  install_fork_guard();
  live.listen(capture_listener);
  live.listen(hang_listener);
}

tracer_impl::~tracer_impl() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    live.stop_listening();
  }
  live.wake_listeners();
  rec.stop();
}

}  // namespace detail

namespace {

// CPU use and demand, in cores, as facts the diagnosis reads (cpu.*).
void add_cpu_facts(summary& out, const detail::cpu_totals& c) {
  if (c.wall_ns < 50'000'000) return;  // too short to say
  const auto cores = [&](std::uint64_t ns) {
    char text[32];
    std::snprintf(text, sizeof text, "%.2f", static_cast<double>(ns) / static_cast<double>(c.wall_ns));
    return std::string(text);
  };
  out.facts.emplace_back("cpu.cores_busy", cores(c.run_ns));
  out.facts.emplace_back("cpu.cores_waiting", cores(c.wait_ns));
  out.facts.emplace_back("cpu.workers_cores_busy", cores(c.children_run_ns));
  out.facts.emplace_back("cpu.workers_cores_waiting", cores(c.children_wait_ns));
}

}  // namespace

using detail::host_clock;
using detail::local_state;
using detail::record_kind;

tracer::tracer() : tracer(config::from_env()) {}

tracer::tracer(const config& cfg) : uid_(0), impl_(std::make_unique<detail::tracer_impl>(cfg)) {
  uid_ = impl_->uid;
  configure(cfg);
  detail::register_tracer(*impl_);
}

tracer::~tracer() {
  detail::unregister_tracer(*impl_);
  if (impl_->forked.load()) detail::keep_forked_copy(impl_.release());
}

void tracer::configure(const config& cfg) {
  cfg.validate();
  if (impl_->forked.load()) return;  // a forked child's copy records nothing, whatever is asked
  detail::set_log_level(detail::parse_log_level(cfg.log_level));
  std::lock_guard<std::mutex> lock(impl_->mutex);
  const bool capture_changed = impl_->cfg.capture != cfg.capture || !impl_->capture.has_rule();
  // CUPTI is the process's: a tracer asks for sampling when its own choice moves from 1, or back
  if (const std::uint32_t period = cfg.live > 0 ? cfg.live : 10;
      cfg.device_sample != impl_->sample_asked.first ||
      (cfg.device_sample > 1 && period != impl_->sample_asked.second)) {
    detail::set_device_sample(cfg.device_sample, period);
    impl_->sample_asked = {cfg.device_sample, period};
    if (cfg.device_sample > 1) impl_->sample_last = cfg.device_sample;
  }
  impl_->cfg = cfg;
  impl_->told_flops.store(cfg.flops_per_step, std::memory_order_relaxed);
  impl_->told_dtype.store(static_cast<unsigned char>(detail::dtype_named(cfg.flops_dtype)), std::memory_order_relaxed);
  impl_->stats.timeline.configure(cfg.timeline_recent, cfg.timeline_slowest);
  impl_->capture.configure(impl_->cfg, capture_changed);
  impl_->rec.configure(cfg);
  const bool inline_path = host_clock::uses_tsc() && !detail::nvtx_requested();
  mode_.store(!cfg.enabled || impl_->env_disabled ? mode::off
              : inline_path                       ? mode::bound
                                                  : mode::unbound,
              std::memory_order_relaxed);
}

config tracer::options() const {
  if (impl_->forked.load()) return impl_->cfg;  // no lock: its holder may not exist here
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->cfg;
}

step_open tracer::open_step(void* stream, bool on_stream) noexcept {
  if (!enabled() || impl_->forked.load(std::memory_order_relaxed)) return step_open::disabled;
  detail::thread_state* s = local_state(*impl_);
  if (s == nullptr || s->exclude_depth > 0) return step_open::disabled;  // set aside: no step
  if (s->step_open) {
    impl_->stats.nested_steps.fetch_add(1, std::memory_order_relaxed);
    return step_open::nested;
  }
  if (__builtin_expect(!impl_->started.load(std::memory_order_relaxed), 0)) impl_->first_step();
  s->step_open = true;
  s->step_exclude_depth = s->exclude_depth;
  s->step_on_stream = on_stream;
  s->step_stream = stream;
  detail::push(impl_->rec, *s, record_kind::step_begin, 0);
  detail::ask_drain_if_half_full(impl_->rec, *s);
  if (on_stream) detail::mark_step_event(impl_->rec, *s, true);
  if (detail::nvtx_enabled.load(std::memory_order_relaxed)) detail::nvtx_push(0);
  return step_open::opened;
}

void tracer::end_step(bool failed) noexcept {
  if (impl_->forked.load(std::memory_order_relaxed)) return;
  detail::thread_state* s = local_state(*impl_);
  // A step ends only outside any set-aside span opened after it (a loop of steps inside
  // exclude() must not end the step it sits in).
  if (s == nullptr || !s->step_open || s->exclude_depth != s->step_exclude_depth) return;
  s->step_open = false;
  if (s->step_on_stream) detail::mark_step_event(impl_->rec, *s, false);
  detail::push(impl_->rec, *s, failed ? record_kind::step_end_failed : record_kind::step_end, 0);
  if (detail::nvtx_enabled.load(std::memory_order_relaxed)) detail::nvtx_pop();
}

void tracer::record_phase(std::uint32_t id, bool begin) noexcept {
  detail::thread_state* s = local_state(*impl_);  // nullptr in a forked child, or after exit
  if (s == nullptr) return;
  detail::push(impl_->rec, *s, begin ? record_kind::phase_begin : record_kind::phase_end, id);
  if (__builtin_expect(detail::nvtx_enabled.load(std::memory_order_relaxed), 0)) {
    begin ? detail::nvtx_push(id) : detail::nvtx_pop();
  }
}

void tracer::record_phase_on(std::uint32_t id, void* stream, bool begin) noexcept {
  detail::thread_state* s = local_state(*impl_);
  if (s == nullptr) return;
  if (!begin) detail::mark_phase_event(impl_->rec, *s, stream, false);
  detail::push(impl_->rec, *s, begin ? record_kind::phase_begin : record_kind::phase_end, id);
  if (begin) detail::mark_phase_event(impl_->rec, *s, stream, true);
  if (__builtin_expect(detail::nvtx_enabled.load(std::memory_order_relaxed), 0)) {
    begin ? detail::nvtx_push(id) : detail::nvtx_pop();
  }
}

void tracer::record_exclude(std::uint32_t id, bool begin) noexcept {
  detail::thread_state* s = local_state(*impl_);
  if (s == nullptr) return;
  if (begin) {
    ++s->exclude_depth;
  } else if (s->exclude_depth > 0) {
    --s->exclude_depth;
  }
  detail::push(impl_->rec, *s, begin ? record_kind::exclude_begin : record_kind::exclude_end, id);
}

summary tracer::summary() const { return collect_summary(true); }

summary tracer::collect_summary(bool shown) const {
  ::steptrace::summary out;
  detail::device_counts device_base;  // the backend's counts when this tracer started reading
  if (impl_->forked.load()) {         // no lock (its holder may not exist here), nothing recorded
    out.backend = {false, false,
                   "this process was forked from the one that created the tracer: its copy records nothing",
                   host_clock_name()};
    detail::complete(out);
    return out;
  }
  // The device's records of the steps' last work first, when it is still running (core/recording).
  const auto [still_running, behind_ms] = impl_->rec.await_device_work();  // the device's unfinished phases and steps
  {
    std::unique_lock<std::mutex> lock(impl_->mutex);
    impl_->rec.drain_all();
    impl_->rec.harvest_events();
    // At exit nothing comes later: take even unfinished records. During the run, work still
    // running stays with CUPTI and is read complete by a later summary.
    impl_->rec.read_device(shown ? detail::device_flush::completed : detail::device_flush::forced);
    impl_->sample_rss(lock, true);
    impl_->stats.totals.fill(out, host_clock::ns_per_tick());
    impl_->stats.timeline.fill(out.timeline, impl_->stats.totals.run_begin(), host_clock::ns_per_tick(),
                               &host_clock::to_monotonic_ns);
    device_base = impl_->rec.device_base();
    out.errors.unbalanced_phases += impl_->rec.unbalanced_phases();
    if (impl_->rec.reqs.requests) out.errors.unbalanced_phases += impl_->rec.reqs.requests->unbalanced();
    if (impl_->stats.batches.steps() > 0)
      impl_->stats.batches.fill_batches(out.batches.emplace(), host_clock::ns_per_tick());
    out.facts = impl_->facts;
    out.rank = impl_->rank;
    out.captures = impl_->capture.done();
    out.live_ranks = impl_->live.live_ranks();
    if (out.gpu) out.gpu->sample_every = impl_->sample_every(*out.gpu);
    if (shown) impl_->stats.shown_steps = out.steps + out.warmup_steps + out.failed_steps;
  }
  add_cpu_facts(out, impl_->rec.cpu_so_far());
  if (out.fact("host.cpus") == nullptr) out.facts.emplace_back("host.cpus", std::to_string(detail::usable_cpus()));
  out.errors.nested_steps = impl_->stats.nested_steps.load(std::memory_order_relaxed);
  out.errors.phase_names_folded = detail::folded_phase_names();
  out.errors.requests_abandoned = impl_->rec.reqs.requests_abandoned.load(std::memory_order_relaxed);
  out.errors.request_phases_dropped = impl_->rec.reqs.request_phases_dropped.load(std::memory_order_relaxed);
  out.errors.unbalanced_phases += impl_->rec.reqs.request_stray_ends.load(std::memory_order_relaxed);
  out.errors.windows_dropped = impl_->live.windows_dropped();
  out.errors.window_calls_failed = impl_->live.window_calls_failed();
  out.backend = detail::backend_now();
  if (out.gpu) {
    const detail::device_counts now = detail::device_record_counts();
    out.gpu->incomplete_records = now.incomplete - device_base.incomplete;  // since this tracer's start or reset
    // How the kernel table's launching phases were found (docs/gpu.md): the launch-call records
    // CUPTI gave, and the kernels that came with none.
    out.facts.emplace_back("cupti.launch_records", std::to_string(now.launches - device_base.launches));
    out.facts.emplace_back("cupti.kernels_without_launch",
                           std::to_string(now.kernels_without_launch - device_base.kernels_without_launch));
    out.gpu->dropped_records += now.dropped - device_base.dropped;  // CUPTI's, beside those the store let go unread
    if (now.bad_clock > device_base.bad_clock) {  // left out for times no work could have had (docs/gpu.md)
      out.facts.emplace_back("cupti.records_bad_clock", std::to_string(now.bad_clock - device_base.bad_clock));
    }
  }
  if (behind_ms > 0 && still_running == 0) {  // the host ran ahead: work after the last step is in no step
    out.facts.emplace_back("gpu.behind_at_summary_ms", fmt::format("{:.1f}", behind_ms));
  }
  if (still_running > 0) {
    out.facts.emplace_back("gpu.phases_running_at_summary", std::to_string(still_running));
    detail::log(detail::log_level::warn,
                "the GPU was still running " + std::to_string(still_running) +
                    " of the steps' phases a second after the summary was asked: their kernels and copies are "
                    "not in it yet (a later summary reads them)");
  }
  impl_->add_told_ceiling(out);
  detail::complete(out);
  return out;
}

void tracer::set_rank(const rank_info& who) {
  if (who.rank >= who.world_size) {
    throw std::invalid_argument("steptrace: rank " + std::to_string(who.rank) + " is not below the world size " +
                                std::to_string(who.world_size));
  }
  if (impl_->forked.load()) return;
  rank_info r = who;
  r.host = detail::printable_utf8(r.host);
  r.started_at = detail::printable_utf8(r.started_at);
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->rank = std::move(r);
}

void tracer::set_fact(std::string_view key, std::string_view value) {
  if (impl_->forked.load()) return;
  std::string k = detail::printable_utf8(key), v = detail::printable_utf8(value);
  std::lock_guard<std::mutex> lock(impl_->mutex);
  for (auto& [known, old] : impl_->facts) {
    if (known == k) {
      old = std::move(v);
      return;
    }
  }
  impl_->facts.emplace_back(std::move(k), std::move(v));
}

void tracer::reset() {
  if (impl_->forked.load()) return;
  if (impl_->started.load()) impl_->rec.restart_cpu(false);
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->rec.restart();
  impl_->live.restart();
  impl_->stats.restart();
  impl_->hang.restart();
  impl_->rec.start_device_reading();  // after the totals' restart: from the records that come next
}

}  // namespace steptrace
