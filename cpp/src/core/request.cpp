// Requests (steptrace/request.hpp): a step recorded in its own handle, from any thread, handed
// whole to the tracer through the ring of the thread that ends it.
#include "steptrace/request.hpp"

#include "core/tracer_impl.hpp"

namespace steptrace {

using detail::record_kind;

request::request(tracer& t) noexcept : tracer_(&t) {
  detail::tracer_impl& impl = *t.impl_;
  if (!t.enabled() || impl.forked.load(std::memory_order_relaxed)) return;
  if (__builtin_expect(!impl.started.load(std::memory_order_relaxed), 0)) impl.first_step();
  tsc_ = detail::host_clock::uses_tsc();
  put(0, record_kind::step_begin);
}

void request::take(request& other) noexcept {
  tracer_ = other.tracer_;
  n_ = other.n_;
  open_ = other.open_;
  skipped_ = other.skipped_;
  dropped_ = other.dropped_;
  stray_ends_ = other.stray_ends_;
  tsc_ = other.tsc_;
  for (std::uint32_t i = 0; i < n_; ++i) records_[i] = other.records_[i];
  other.n_ = 0;
}

void request::abandon() noexcept {
  tracer_->impl_->rec.reqs.requests_abandoned.fetch_add(1, std::memory_order_relaxed);
  n_ = 0;
}

void request::end(bool failed) noexcept {
  if (n_ == 0) return;
  detail::tracer_impl& impl = *tracer_->impl_;
  if (open_ != 0) {  // phases left open end with the request (innermost first)
    std::uint32_t stack[capacity];
    std::uint32_t depth = 0;
    for (std::uint32_t i = 0; i < n_; ++i) {
      if (records_[i].kind == record_kind::phase_begin) {
        stack[depth++] = records_[i].id;
      } else if (records_[i].kind == record_kind::phase_end && depth != 0) {
        --depth;
      }
    }
    while (depth != 0) put(stack[--depth], record_kind::phase_end);
    open_ = 0;
  }
  put(0, failed ? record_kind::step_end_failed : record_kind::step_end);
  if (dropped_ != 0) impl.rec.reqs.request_phases_dropped.fetch_add(dropped_, std::memory_order_relaxed);
  if (stray_ends_ != 0) impl.rec.reqs.request_stray_ends.fetch_add(stray_ends_, std::memory_order_relaxed);
  const std::uint32_t count = n_;
  n_ = 0;
  if (impl.forked.load(std::memory_order_relaxed)) return;
  detail::thread_state* s = detail::local_state(impl);  // nullptr after this thread's exit began
  if (s == nullptr) return;
  const detail::record block{0, count, record_kind::request_block};
  if (__builtin_expect(s->records.try_push_run(block, records_, count), 1)) return;
  const auto push = [&](const detail::record& r) {  // the ring is nearly full: record by record
    if (__builtin_expect(!s->records.try_push(r.ticks, r.id, r.kind), 0)) {
      detail::push_after_drain(impl.rec, *s, r.ticks, r.id, r.kind);
    }
  };
  push(block);
  for (std::uint32_t i = 0; i < count; ++i) push(records_[i]);
}

void tracer::set_batch_size(std::uint32_t requests) noexcept {
  if (!enabled() || impl_->forked.load(std::memory_order_relaxed)) return;
  detail::thread_state* s = detail::local_state(*impl_);
  if (s == nullptr || !s->step_open) return;
  detail::push(impl_->rec, *s, record_kind::batch_size, requests);
}

}  // namespace steptrace
