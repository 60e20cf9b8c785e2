// Internal (not public API): where decoded device records wait for the tracers, and the pool of
// activity buffers handed to CUPTI. Plain C++, no CUDA: tested directly.
//
// Usage:
//   record_store store;
//   std::uint64_t cursor = store.end();          // a new reader sees only records from now on
//   std::uint8_t* b = store.take_buffer();        // CUPTI asks for a buffer (nullptr at the cap)
//   store.add(decoded, incomplete, dropped);      // CUPTI gave back a buffer's records
//   store.give_back(b);
//   store.read(cursor, out, lost);                // what this reader has not seen yet
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

#include "gpu/device_record.hpp"

namespace steptrace::detail {

class record_store {
 public:
  static constexpr std::size_t buffer_bytes = std::size_t{1} << 20;  // one CUPTI buffer
  static constexpr std::size_t default_max_buffers = 32;             // 32 MiB in CUPTI's hands at most
  static constexpr std::size_t default_max_records = std::size_t{1} << 19;

  explicit record_store(std::size_t max_buffers = default_max_buffers, std::size_t max_records = default_max_records)
      : max_buffers_(max_buffers), max_records_(max_records) {}
  record_store(const record_store&) = delete;
  record_store& operator=(const record_store&) = delete;
  ~record_store();

  // A buffer for CUPTI: a recycled one, a new one below the cap, else nullptr (CUPTI then drops
  // records and counts them). Buffers are only ever freed with the store.
  std::uint8_t* take_buffer();
  void give_back(std::uint8_t* buffer);
  std::size_t buffers_out() const;
  std::size_t buffers_made() const;

  // Records of one completed buffer, in arrival order; `incomplete`: records flushed before
  // they finished; `dropped`: records CUPTI could not store; `bad_clock`: records left out for times
  // no work could have had (activity.cpp). The oldest records go past the cap.
  void add(const std::vector<device_record>& records, std::uint64_t incomplete, std::uint64_t dropped,
           std::uint64_t bad_clock = 0);

  // The sequence number after the newest record: a reader starting here sees only what follows.
  std::uint64_t end() const;
  // Appends the records after `cursor` to out and moves the cursor past them; records the store
  // let go before this reader saw them are added to `lost`.
  void read(std::uint64_t& cursor, std::vector<device_record>& out, std::uint64_t& lost) const;
  // Since the process started: records flushed unfinished, and records CUPTI dropped. A reader
  // that starts later keeps the value at its start and reports the difference.
  struct counts_t {
    std::uint64_t incomplete = 0, dropped = 0, bad_clock = 0;
  };
  counts_t counts() const;

 private:
  const std::size_t max_buffers_, max_records_;
  mutable std::mutex mutex_;
  std::deque<device_record> records_;
  std::uint64_t first_ = 0;  // sequence number of records_.front()
  counts_t counts_;
  std::vector<std::uint8_t*> free_, all_;
  std::size_t out_ = 0;
};

}  // namespace steptrace::detail
