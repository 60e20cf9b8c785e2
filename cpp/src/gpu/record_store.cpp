// The record store and CUPTI's buffer pool. See record_store.hpp.
#include "gpu/record_store.hpp"

#include <cstdlib>

namespace steptrace::detail {

record_store::~record_store() {
  for (std::uint8_t* b : all_) std::free(b);
}

std::uint8_t* record_store::take_buffer() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::uint8_t* buffer = nullptr;
  if (!free_.empty()) {
    buffer = free_.back();
    free_.pop_back();
  } else if (all_.size() < max_buffers_) {
    buffer = static_cast<std::uint8_t*>(std::aligned_alloc(8, buffer_bytes));
    if (buffer == nullptr) return nullptr;
    all_.push_back(buffer);
  } else {
    return nullptr;
  }
  ++out_;
  return buffer;
}

void record_store::give_back(std::uint8_t* buffer) {
  if (buffer == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  free_.push_back(buffer);
  if (out_ > 0) --out_;
}

std::size_t record_store::buffers_out() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return out_;
}

std::size_t record_store::buffers_made() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return all_.size();
}

void record_store::add(const std::vector<device_record>& records, std::uint64_t incomplete, std::uint64_t dropped,
                       std::uint64_t bad_clock) {
  std::lock_guard<std::mutex> lock(mutex_);
  counts_.incomplete += incomplete;
  counts_.dropped += dropped;
  counts_.bad_clock += bad_clock;
  records_.insert(records_.end(), records.begin(), records.end());
  while (records_.size() > max_records_) {  // the oldest go; a reader that had not read them counts them lost
    records_.pop_front();
    ++first_;
  }
}

std::uint64_t record_store::end() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return first_ + records_.size();
}

void record_store::read(std::uint64_t& cursor, std::vector<device_record>& out, std::uint64_t& lost) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (cursor < first_) {
    lost += first_ - cursor;
    cursor = first_;
  }
  const std::uint64_t end = first_ + records_.size();
  if (cursor > end) cursor = end;  // a cursor from another store's life: nothing to read
  out.insert(out.end(), records_.begin() + static_cast<std::ptrdiff_t>(cursor - first_), records_.end());
  cursor = end;
}

record_store::counts_t record_store::counts() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return counts_;
}

}  // namespace steptrace::detail
