// steptrace/detail/ring.hpp — not API: the per-thread record ring, and the inline fast path
// that writes into it. It sits in the public tree only so that a phase boundary compiles to a
// clock read and a few stores in the caller, with no call into the library:
//
//   tracer::begin_phase(id)  ->  push_bound(uid, phase_begin, id)   // inline; false: slow path
//
// Its layout is shared by the caller's inlined code and libsteptrace, so it is ABI. Everything
// here lives in a versioned inline namespace: change the layout, bump `ring_v1`, and a program
// compiled against the old header fails to link (t_binding's symbol carries the version)
// instead of writing into memory laid out otherwise.
//
// One producer (the owning thread) and one consumer at a time (whoever holds the tracer's
// collect lock). The producer never waits on the consumer: when the ring is full it drains it
// itself, under that lock, which amortises to a few nanoseconds per record.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "steptrace/detail/tsc.hpp"
#include "steptrace/export.hpp"

namespace steptrace::detail {
inline namespace ring_v1 {

// event_begin / event_end follow a phase_begin / precede a phase_end given a stream, and
// step_event_begin / step_event_end do the same for a step: their id is the slot of the CUDA
// event recorded there (no_event: none could be recorded). exclude_begin / exclude_end bound
// time set aside (tracer::begin_exclude): in no step, reported apart under its name. Only the
// library writes the event, stream_scope, request_block and batch_size kinds (never the inline
// path), so adding a kind at the end keeps the layout.
enum class record_kind : std::uint32_t {
  step_begin,
  step_end,
  step_end_failed,
  phase_begin,
  phase_end,
  event_begin,
  event_end,
  step_event_begin,
  step_event_end,
  exclude_begin,  // id: the name the time is set aside under
  exclude_end,
  stream_scope,   // id: a stream the step works on, in the thread's stream table (no_event: unknown)
  request_block,  // id: how many records follow that are one request's whole step (request.hpp)
  batch_size      // id: how many requests the open step serves as one batch
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
  explicit ring(std::uint32_t capacity)                         // a power of two
      : slots_(new record[capacity]()), mask_(capacity - 1) {}  // touched now, not on the hot path

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

  // Producer side: whether more than half the ring is written and not yet drained. The
  // consumer's position is read afresh only when the last one seen says so: a cross-core read
  // once per half ring at most while the consumer keeps up.
  bool half_full() noexcept {
    const std::uint64_t half = (mask_ + 1) / 2;
    if (head_ - consumed_seen_ <= half) return false;
    consumed_seen_ = consumed_.load(std::memory_order_acquire);
    return head_ - consumed_seen_ > half;
  }

  // Producer side: `first` and then `rest[0..n)` published at once (a request's whole step).
  // False, having written nothing, when they do not all fit.
  bool try_push_run(const record& first, const record* rest, std::uint32_t n) noexcept {
    const std::uint64_t room = mask_ + 1, need = static_cast<std::uint64_t>(n) + 1;
    if (head_ + need - consumed_seen_ > room) {
      consumed_seen_ = consumed_.load(std::memory_order_acquire);
      if (head_ + need - consumed_seen_ > room) return false;
    }
    record* const slots = slots_.get();
    slots[head_++ & mask_] = first;
    for (std::uint32_t i = 0; i < n; ++i) slots[head_++ & mask_] = rest[i];
    published_.store(head_, std::memory_order_release);
    return true;
  }

  // Consumer side: hands every published record to fn(first, last), oldest first, as at most
  // two contiguous runs (the ring may wrap), then frees their slots. Returns how many.
  template <class Fn>
  std::uint64_t drain(Fn&& fn) {
    const record* const slots = slots_.get();
    const std::uint64_t end = published_.load(std::memory_order_acquire);
    const std::uint64_t pos = consumed_.load(std::memory_order_relaxed);
    const std::uint64_t first = pos & mask_, count = end - pos;
    const std::uint64_t before_wrap = count < mask_ + 1 - first ? count : mask_ + 1 - first;
    if (before_wrap != 0) fn(slots + first, slots + first + before_wrap);
    if (count != before_wrap) fn(slots, slots + (count - before_wrap));
    consumed_.store(end, std::memory_order_release);
    return count;
  }

  std::uint32_t capacity() const noexcept { return static_cast<std::uint32_t>(mask_ + 1); }

 private:
  // Each line below has one writer, so neither side's writes evict what the other reads.
  std::unique_ptr<record[]> slots_;  // read-only after construction
  const std::uint64_t mask_;
  alignas(64) std::uint64_t head_ = 0;                   // producer only
  std::uint64_t consumed_seen_ = 0;                      // producer's last look at consumed_
  alignas(64) std::atomic<std::uint64_t> published_{0};  // written by the producer
  alignas(64) std::atomic<std::uint64_t> consumed_{0};   // written by the consumer
};

// The ring of the tracer this thread recorded into last. The library's slow path sets it (a
// thread's first record into a tracer, or after recording into another one) and clears it in a
// forked child and when the thread exits. A tracer reads it only when the inline path can be
// used: an invariant TSC, and no tool collecting NVTX ranges.
struct thread_binding {
  std::uint64_t tracer_uid;  // 0: none; uids are never reused, so a dead tracer never matches
  ring* records;
  void* state;  // the library's per-thread state for that tracer
};
extern STEPTRACE_API __thread thread_binding t_binding __attribute__((tls_model("initial-exec")));

// Writes one record stamped now into this thread's ring for tracer `uid`. False, having written
// nothing, when the thread is not bound to that tracer or the ring looks full: the caller then
// takes the library's slow path.
inline bool push_bound(std::uint64_t uid, record_kind kind, std::uint32_t id) noexcept {
#ifdef STEPTRACE_HAVE_TSC
  const thread_binding& b = t_binding;
  return __builtin_expect(b.tracer_uid == uid, 1) && b.records->try_push(read_tsc(), id, kind);
#else
  (void)uid, (void)kind, (void)id;
  return false;
#endif
}

}  // namespace ring_v1
}  // namespace steptrace::detail
