// The retroactive capture (capture_back): when a trigger fires, the steps that tripped it, kept
// already by the ring (analysis/back_ring.hpp), are chosen at once and written by the collector
// as a Chrome trace with their diagnosis, before the forward capture's. See
// cpp/src/core/README.md, "Capture on trouble".
#include <algorithm>
#include <chrono>
#include <string>

#include "core/tracer_impl.hpp"

namespace steptrace {
namespace detail {
namespace {

// The kept steps' device records: those settled are attached as they settle; the newest wait at
// most this long for theirs (as the forward capture's do).
constexpr auto back_settle = std::chrono::seconds(1);

}  // namespace

kept_steps back_choice(const capture_rule& rule) {
  return rule.fired() == "file" ? kept_steps::recent : kept_steps::window;
}

std::vector<std::uint64_t> tracer_impl::arm_back(std::string reason, kept_steps which,
                                                 const std::vector<std::uint64_t>& indices) {
  if (capture.back.steps() == 0 || capture.back_chosen.pending || capture.back_chosen.writing ||
      which == kept_steps::none) {
    return {};
  }
  // Bounded as the forward captures are: at most capture_max a run (said by the forward's refusal).
  if (static_cast<std::size_t>(std::count_if(capture.done.begin(), capture.done.end(), [](const capture_record& c) {
        return c.retroactive;
      })) >= cfg.capture_max) {
    return {};
  }
  const back_ring::choice how = which == kept_steps::recent    ? back_ring::choice::recent
                                : which == kept_steps::window  ? back_ring::choice::window
                                : which == kept_steps::slowest ? back_ring::choice::slowest
                                                               : back_ring::choice::numbered;
  auto& chosen = capture.back_chosen;
  chosen.indices = capture.back.choose(how, indices, chosen.steps, chosen.lead);
  if (chosen.indices.empty()) return {};
  chosen.pending = true;
  chosen.reason = std::move(reason);
  chosen.armed_at = std::chrono::steady_clock::now();
  return chosen.indices;
}

void tracer_impl::back_tick(std::unique_lock<std::mutex>& lock, bool last) {
  auto& chosen = capture.back_chosen;
  if (!chosen.pending || capture.writing) return;
  const auto now = std::chrono::steady_clock::now();
  if (const device_join* device = stats.totals.device()) {
    if (now - chosen.armed_at < back_settle && !last) return;  // the newest steps' device work lands meanwhile
    read_device(device_flush::completed);
    chosen.steps.attach_device(*device, UINT64_MAX, &host_clock::to_monotonic_ns);
  }
  capture_record record;
  record.reason = chosen.reason;
  record.retroactive = true;
  record.indices = chosen.indices;
  record.tripped = chosen.lead;
  record.first_step = chosen.indices.front();
  record.last_step = chosen.indices.back();
  record.steps = chosen.indices.size();
  record.rank = rank ? rank->rank : 0;
  record.tool = "steptrace";
  summary s;
  aggregate totals;
  chosen.steps.replay(totals);  // the figures of those steps alone, as they were recorded
  totals.fill(s, host_clock::ns_per_tick());
  chosen.steps.fill(s.timeline, stats.totals.run_begin(), host_clock::ns_per_tick(), &host_clock::to_monotonic_ns);
  s.facts = facts;
  s.rank = rank;
  chosen.pending = false;
  chosen.steps.clear();
  chosen.writing = true;
  write_capture(lock, record, s, "back-step" + std::to_string(record.tripped), now);
  chosen.writing = false;
}

}  // namespace detail
}  // namespace steptrace
