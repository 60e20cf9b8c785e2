// steptrace/request.hpp — a step that belongs to a request, not to a thread.
//
//   auto r = std::make_unique<steptrace::request>();     // begins now, on the I/O thread
//   r->begin_phase(queue);  pool.push(std::move(r));      // hand it to any thread
//   ...                                                   // on a pool thread:
//   r->end_phase(queue);
//   { steptrace::request_phase p(*r, preprocess); parse(*r); }
//   ...                                                   // on the thread that answers:
//   r->end();                                             // one step: same statistics, table, JSON
//
// A request's records live in the handle itself (1 KB, no allocation), so a phase boundary is a
// clock read and two stores, from whichever thread holds the request; end() hands the whole step
// to the tracer through the ending thread's ring. Any number of requests may be open on a thread,
// beside that thread's own step: neither sees the other's phases. One thread at a time records
// into a request (hand it over through a queue, a future, a lock: anything that orders the two).
//
// A handle destroyed without end() is an abandoned request: counted (`errors.requests_abandoned`),
// never in the statistics. Past `capacity` records a request's further phase calls are dropped,
// counted (`errors.request_phases_dropped`); phases still open at end() are closed there.
#pragma once

#include <cstdint>

#include "steptrace/detail/ring.hpp"
#include "steptrace/detail/tsc.hpp"
#include "steptrace/export.hpp"
#include "steptrace/phase.hpp"
#include "steptrace/tracer.hpp"

namespace steptrace {

class STEPTRACE_API request {
 public:
  static constexpr std::uint32_t capacity = 64;  // records: its begin and end, 31 phase calls

  request() noexcept : request(default_tracer()) {}
  explicit request(tracer& t) noexcept;  // begins now (records nothing when t is disabled)
  ~request() {
    if (n_ != 0) abandon();
  }
  request(request&& other) noexcept { take(other); }
  request& operator=(request&& other) noexcept {
    if (this != &other) {
      if (n_ != 0) abandon();
      take(other);
    }
    return *this;
  }
  request(const request&) = delete;
  request& operator=(const request&) = delete;

  void begin_phase(phase_id id) noexcept {
    if (n_ == 0) return;
    // Room for this begin, the ends of every open phase and this one, and the request's end.
    if (skipped_ != 0 || n_ + open_ + 3 > capacity) {
      ++skipped_;
      ++dropped_;
      return;
    }
    put(id.value, detail::record_kind::phase_begin);
    ++open_;
  }
  void end_phase(phase_id id) noexcept {
    if (n_ == 0) return;
    if (skipped_ != 0) {  // the end of a dropped phase (phases on a request nest)
      --skipped_;
      return;
    }
    if (open_ == 0) {
      ++stray_ends_;
      return;
    }
    put(id.value, detail::record_kind::phase_end);
    --open_;
  }
  // This request is a batch serving `requests` requests (see tracer::set_batch_size).
  void set_batch_size(std::uint32_t requests) noexcept {
    if (n_ != 0 && n_ + open_ + 2 <= capacity) put(requests, detail::record_kind::batch_size);
  }
  // Ends the request now (`failed`: kept out of the statistics, counted). The handle is then
  // empty: a second end(), or a phase on it, records nothing.
  void end(bool failed = false) noexcept;
  bool open() const noexcept { return n_ != 0; }

 private:
  void put(std::uint32_t id, detail::record_kind kind) noexcept {
    detail::record& r = records_[n_++];
    r.ticks = detail::read_ticks(tsc_);
    r.id = id;
    r.kind = kind;
  }
  void take(request& other) noexcept;
  void abandon() noexcept;

  tracer* tracer_ = nullptr;
  std::uint32_t n_ = 0;        // records so far; 0: not open
  std::uint32_t open_ = 0;     // phases open (recorded)
  std::uint32_t skipped_ = 0;  // phases open that were dropped for want of room
  std::uint32_t dropped_ = 0, stray_ends_ = 0;
  bool tsc_ = false;
  detail::record records_[capacity];
};

// A phase of a request until the end of the enclosing scope.
class request_phase {
 public:
  request_phase(request& r, phase_id id) noexcept : request_(r), id_(id) { request_.begin_phase(id_); }
  ~request_phase() { request_.end_phase(id_); }
  request_phase(const request_phase&) = delete;
  request_phase& operator=(const request_phase&) = delete;

 private:
  request& request_;
  phase_id id_;
};

}  // namespace steptrace
