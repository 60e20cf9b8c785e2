// Internal (not public API): streaming histogram for percentiles in bounded memory.
//
// Log-linear buckets: exact below 128, then 128 buckets per power of two, so any reported
// quantile is within 1/256 (0.4%) of a value in the same bucket. 7,424 buckets cover all of
// uint64, in 116 blocks of 64 (each half of the values below 128 or of a power of two); a
// block's memory (512 bytes) is allocated at its first sample, so a histogram of durations that
// span ten powers of two holds at most twenty blocks, not all 116, and one of a single sample
// (a phase in a one-step trace) holds one: a trace has a few per phase, and they add up.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace steptrace::detail {

class histogram {
 public:
  static constexpr int sub_bits = 7;
  static constexpr std::size_t sub_count = std::size_t{1} << sub_bits;
  static constexpr std::size_t bucket_count = sub_count + (64 - sub_bits) * sub_count;

  void add(std::uint64_t value);
  void add_zeros(std::uint64_t n) { zeros_ += n; }
  std::uint64_t count() const noexcept { return count_ + zeros_; }
  std::uint64_t max() const noexcept { return count_ ? max_ : 0; }
  // Nearest-rank quantile, q in [0, 1]; 0 for an empty histogram.
  std::uint64_t quantile(double q) const noexcept;
  // Weighted by value: the value below which q of the sum of all values lies (the kernel length
  // that holds half of the kernel time, say); 0 for an empty histogram.
  std::uint64_t weighted_quantile(double q) const noexcept;
  void clear();

  static std::size_t bucket_of(std::uint64_t value) noexcept;
  static std::uint64_t bucket_low(std::size_t bucket) noexcept;
  static std::uint64_t bucket_width(std::size_t bucket) noexcept;
  static constexpr int block_bits = 6;  // buckets are held in blocks of 64
  static constexpr std::size_t block_size = std::size_t{1} << block_bits;
  std::size_t buckets_held() const noexcept { return counts_.size(); }  // 64 a block met so far

 private:
  static constexpr std::size_t block_count = bucket_count / block_size;
  static constexpr std::uint16_t absent = 0xffff;
  std::size_t open_block(std::size_t block);  // its slot in counts_, in blocks of block_size
  // The count of bucket b, or 0 where its block was never met.
  std::uint64_t count_at(std::size_t b) const noexcept {
    const std::uint16_t slot = slot_[b >> block_bits];
    return slot == absent ? 0 : counts_[(std::size_t{slot} << block_bits) | (b & (block_size - 1))];
  }
  std::vector<std::uint64_t> counts_;                            // the blocks met, in the order they were met
  std::array<std::uint16_t, block_count> slot_ = empty_slots();  // a block's place in counts_
  static constexpr std::array<std::uint16_t, block_count> empty_slots() {
    std::array<std::uint16_t, block_count> a{};
    for (auto& x : a) x = absent;
    return a;
  }
  std::uint64_t count_ = 0, zeros_ = 0;  // zeros_: samples known to be 0 without a bucket write
  std::uint64_t min_ = 0, max_ = 0;
};

}  // namespace steptrace::detail
