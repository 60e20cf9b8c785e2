// The tracer's side of capture on trouble: what the program and Python ask of the capture
// subsystem (core/capture), and what that subsystem may ask of the tracer (its context).
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/tracer_impl.hpp"
#include "steptrace/tracer.hpp"

namespace steptrace {
namespace detail {

void tracer_impl::capture_glue::read_device_now() { impl.rec.read_device(device_flush::completed); }

void tracer_impl::capture_glue::spans_wanted_changed() { impl.rec.keep_spans(impl.spans_wanted()); }

}  // namespace detail

bool tracer::capture(std::uint32_t steps, std::string_view reason, kept_steps back) {
  if (steps > max_capture_steps) {
    throw std::invalid_argument("steptrace: capture takes 1 to " + std::to_string(max_capture_steps) +
                                " steps (as the capture_steps option), not " + std::to_string(steps));
  }
  if (impl_->forked.load()) return false;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    if (!impl_->capture.arm(impl_->capture_ctx, std::string(reason), steps)) return false;
    if (back == kept_steps::none || back == kept_steps::numbered) return true;
    impl_->rec.drain_all();  // the steps ended so far are kept before the choice
    if (impl_->capture.arm_back(impl_->capture_ctx, std::string(reason), back, {}).empty()) return true;
  }
  impl_->rec.wake.notify_one();
  return true;
}

std::vector<std::uint64_t> tracer::capture_kept(std::string_view reason, kept_steps which,
                                                const std::vector<std::uint64_t>& indices) {
  if (impl_->forked.load() || which == kept_steps::none) return {};
  std::vector<std::uint64_t> chosen;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->rec.drain_all();  // the steps ended so far are kept before the choice
    chosen = impl_->capture.arm_back(impl_->capture_ctx, std::string(reason), which, indices);
  }
  if (!chosen.empty()) impl_->rec.wake.notify_one();
  return chosen;
}

void tracer::note_capture(capture_record record) {
  if (impl_->forked.load()) return;
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->capture.note(std::move(record));
}

void tracer::capture_triggers_elsewhere() {
  if (impl_->forked.load()) return;
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->capture.weigh_elsewhere();
}

}  // namespace steptrace
