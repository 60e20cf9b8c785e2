// The retroactive capture (capture_back): when a trigger fires, the steps that tripped it, kept
// already by the ring (analysis/back_ring.hpp), are chosen at once and written by the collector
// as a Chrome trace with their diagnosis, before the forward capture's. See
// cpp/src/core/README.md, "Capture on trouble".
#include <algorithm>
#include <chrono>
#include <string>

#include "core/capture/capturer.hpp"
#include "record/clock.hpp"

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

std::vector<std::uint64_t> capturer::arm_back(capture_context& c, std::string reason, kept_steps which,
                                              const std::vector<std::uint64_t>& indices) {
  if (back_.steps() == 0 || chosen_.pending || chosen_.writing || which == kept_steps::none) {
    return {};
  }
  // Bounded as the forward captures are: at most capture_max a run (said by the forward's refusal).
  if (static_cast<std::size_t>(std::count_if(done_.begin(), done_.end(), [](const capture_record& r) {
        return r.retroactive;
      })) >= c.options().capture_max) {
    return {};
  }
  const back_ring::choice how = which == kept_steps::recent    ? back_ring::choice::recent
                                : which == kept_steps::window  ? back_ring::choice::window
                                : which == kept_steps::slowest ? back_ring::choice::slowest
                                                               : back_ring::choice::numbered;
  auto& chosen = chosen_;
  chosen.indices = back_.choose(how, indices, chosen.steps, chosen.lead);
  if (chosen.indices.empty()) return {};
  chosen.pending = true;
  chosen.reason = std::move(reason);
  chosen.armed_at = std::chrono::steady_clock::now();
  return chosen.indices;
}

void capturer::back_tick(std::unique_lock<std::mutex>& lock, capture_context& c, bool last) {
  auto& chosen = chosen_;
  if (!chosen.pending || writing_) return;
  const auto now = std::chrono::steady_clock::now();
  if (const device_join* device = c.device()) {
    if (now - chosen.armed_at < back_settle && !last) return;  // the newest steps' device work lands meanwhile
    c.read_device_now();
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
  record.rank = c.rank() ? c.rank()->rank : 0;
  record.tool = "steptrace";
  summary s;
  aggregate totals;
  chosen.steps.replay(totals);  // the figures of those steps alone, as they were recorded
  totals.fill(s, host_clock::ns_per_tick());
  chosen.steps.fill(s.timeline, c.run_begin(), host_clock::ns_per_tick(), &host_clock::to_monotonic_ns);
  s.facts = c.facts();
  s.rank = c.rank();
  chosen.pending = false;
  chosen.steps.clear();
  chosen.writing = true;
  write(lock, c, record, s, "back-step" + std::to_string(record.tripped), now);
  chosen.writing = false;
}

}  // namespace detail
}  // namespace steptrace
