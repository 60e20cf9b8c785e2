// Internal (not public API): streaming histogram for percentiles in bounded memory.
//
// Log-linear buckets: exact below 128, then 128 buckets per power of two, so any reported
// quantile is within 1/256 (0.4%) of a value in the same bucket. 7,424 buckets cover all of
// uint64; memory is allocated on the first sample and never grows.
#pragma once

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

 private:
  std::vector<std::uint64_t> counts_;
  std::uint64_t count_ = 0, zeros_ = 0;  // zeros_: samples known to be 0 without a bucket write
  std::uint64_t min_ = 0, max_ = 0;
};

}  // namespace steptrace::detail
