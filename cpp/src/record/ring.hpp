// Internal (not public API): fixed-size records and the per-thread ring they go into.
//
// One producer (the owning thread) and one consumer at a time (whoever holds the tracer's
// collect lock). The producer never waits on the consumer: when the ring is full it drains it
// itself, under that lock, which amortises to a few nanoseconds per record.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace steptrace::detail {

// event_begin / event_end follow a phase_begin / precede a phase_end given a stream: their id is
// the slot of the CUDA event recorded there (no_event: none could be recorded).
enum class record_kind : std::uint32_t {
  step_begin,
  step_end,
  step_end_failed,
  phase_begin,
  phase_end,
  event_begin,
  event_end
};
inline constexpr std::uint32_t no_event = 0xffffffffu;

struct record {
  std::uint64_t ticks;
  std::uint32_t id;  // phase id (phases only)
  record_kind kind;
};
static_assert(sizeof(record) == 16, "records stay 16 bytes");

class ring {
 public:

  explicit ring(std::uint32_t capacity)  // a power of two
      : slots_(new record[capacity]), mask_(capacity - 1) {}

  // Producer side. False when full: drain, then push again. The fields are written straight
  // into the slot: a record built on the stack and copied whole stalls on store forwarding.
  bool try_push(std::uint64_t ticks, std::uint32_t id, record_kind kind) noexcept {
    if (head_ - consumed_seen_ > mask_) {
      consumed_seen_ = consumed_.load(std::memory_order_acquire);
      if (head_ - consumed_seen_ > mask_) return false;
    }
    record& slot = slots_[head_ & mask_];
    slot.ticks = ticks;
    slot.id = id;
    slot.kind = kind;
    ++head_;
    published_.store(head_, std::memory_order_release);
    return true;
  }

  // Consumer side: hands every published record to fn, oldest first, then frees their slots.
  template <class Fn>
  void drain(Fn&& fn) {
    const std::uint64_t end = published_.load(std::memory_order_acquire);
    std::uint64_t pos = consumed_.load(std::memory_order_relaxed);
    for (; pos != end; ++pos) fn(slots_[pos & mask_]);
    consumed_.store(pos, std::memory_order_release);
  }

  std::uint32_t capacity() const noexcept { return static_cast<std::uint32_t>(mask_ + 1); }

 private:
  std::unique_ptr<record[]> slots_;
  const std::uint64_t mask_;
  std::uint64_t head_ = 0;           // producer only
  std::uint64_t consumed_seen_ = 0;  // producer's last look at consumed_
  alignas(64) std::atomic<std::uint64_t> published_{0};
  alignas(64) std::atomic<std::uint64_t> consumed_{0};
};

}  // namespace steptrace::detail
