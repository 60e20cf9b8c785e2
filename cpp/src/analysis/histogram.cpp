#include "analysis/histogram.hpp"

#include <algorithm>
#include <cmath>

namespace steptrace::detail {

std::size_t histogram::bucket_of(std::uint64_t v) noexcept {
  if (v < sub_count) return static_cast<std::size_t>(v);
  const int exponent = 63 - __builtin_clzll(v);
  const int shift = exponent - sub_bits;
  const std::size_t mantissa = static_cast<std::size_t>(v >> shift) - sub_count;
  return sub_count + static_cast<std::size_t>(shift) * sub_count + mantissa;
}

std::uint64_t histogram::bucket_low(std::size_t b) noexcept {
  if (b < sub_count) return b;
  const std::size_t k = b - sub_count;
  const std::size_t shift = k / sub_count;
  return (static_cast<std::uint64_t>(sub_count + k % sub_count)) << shift;
}

std::uint64_t histogram::bucket_width(std::size_t b) noexcept {
  return b < sub_count ? 1 : std::uint64_t{1} << ((b - sub_count) / sub_count);
}

std::size_t histogram::open_block(std::size_t block) {
  const std::size_t slot = counts_.size() >> block_bits;
  counts_.reserve(counts_.size() + block_size);  // a block at a time: no doubling's slack (a few opens a run)
  counts_.resize(counts_.size() + block_size, 0);
  slot_[block] = static_cast<std::uint16_t>(slot);
  return slot;
}

void histogram::add(std::uint64_t v) {
  const std::size_t b = bucket_of(v);
  std::size_t slot = slot_[b >> block_bits];
  if (slot == absent) slot = open_block(b >> block_bits);
  ++counts_[(slot << block_bits) | (b & (block_size - 1))];
  if (count_ == 0 || v < min_) min_ = v;
  if (count_ == 0 || v > max_) max_ = v;
  ++count_;
}

std::uint64_t histogram::quantile(double q) const noexcept {
  const std::uint64_t n = count();
  if (n == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  const auto rank = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(n))));
  if (rank <= zeros_) return 0;
  std::uint64_t seen = zeros_;
  for (std::size_t b = 0; b < bucket_count; ++b) {
    seen += count_at(b);
    if (seen >= rank) {
      const std::uint64_t mid = bucket_low(b) + (bucket_width(b) - 1) / 2;
      return std::clamp(mid, min_, max_);
    }
  }
  return max_;
}

std::uint64_t histogram::weighted_quantile(double q) const noexcept {
  if (count_ == 0) return 0;
  auto mid = [](std::size_t b) {
    return static_cast<double>(bucket_low(b)) + static_cast<double>(bucket_width(b) - 1) / 2;
  };
  double total = 0;
  for (std::size_t b = 0; b < bucket_count; ++b) total += static_cast<double>(count_at(b)) * mid(b);
  const double target = std::clamp(q, 0.0, 1.0) * total;
  double seen = 0;
  for (std::size_t b = 0; b < bucket_count; ++b) {
    const std::uint64_t n = count_at(b);
    if (n == 0) continue;
    seen += static_cast<double>(n) * mid(b);
    if (seen >= target) return std::clamp(static_cast<std::uint64_t>(mid(b)), min_, max_);
  }
  return max_;
}

void histogram::clear() {
  std::fill(counts_.begin(), counts_.end(), 0);
  count_ = zeros_ = min_ = max_ = 0;
}

}  // namespace steptrace::detail
