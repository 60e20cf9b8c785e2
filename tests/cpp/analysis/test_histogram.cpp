#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

#include "analysis/histogram.hpp"

using steptrace::detail::histogram;

namespace {

std::uint64_t exact_quantile(std::vector<std::uint64_t> v, double q) {
  std::sort(v.begin(), v.end());
  const auto rank = std::max<std::size_t>(1, static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size()))));
  return v[rank - 1];
}

}  // namespace

TEST_CASE("every value falls inside the bucket it is counted in", "[analysis][histogram]") {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 200000; ++i) {
    const std::uint64_t v = rng() >> (rng() % 64);
    const std::size_t b = histogram::bucket_of(v);
    REQUIRE(b < histogram::bucket_count);
    REQUIRE(histogram::bucket_low(b) <= v);
    REQUIRE(v - histogram::bucket_low(b) < histogram::bucket_width(b));
  }
  REQUIRE(histogram::bucket_of(~std::uint64_t{0}) == histogram::bucket_count - 1);
}

TEST_CASE("percentiles of a known distribution are within 1% of the exact ones", "[analysis][histogram]") {
  std::mt19937_64 rng(42);
  std::vector<std::uint64_t> values;
  SECTION("log-normal step times around 10 ms in nanoseconds") {
    std::lognormal_distribution<double> d(std::log(10e6), 0.5);
    for (int i = 0; i < 100000; ++i) values.push_back(static_cast<std::uint64_t>(d(rng)));
  }
  SECTION("uniform over five decades") {
    std::uniform_int_distribution<std::uint64_t> d(1000, 100000000);
    for (int i = 0; i < 100000; ++i) values.push_back(d(rng));
  }
  SECTION("bimodal: fast steps and a slow tail") {
    std::normal_distribution<double> fast(2e6, 1e5), slow(40e6, 1e6);
    for (int i = 0; i < 100000; ++i) values.push_back(static_cast<std::uint64_t>(i % 50 == 0 ? slow(rng) : fast(rng)));
  }
  histogram h;
  for (auto v : values) h.add(v);
  REQUIRE(h.count() == values.size());
  for (double q : {0.5, 0.95, 0.99}) {
    const double exact = static_cast<double>(exact_quantile(values, q));
    CHECK(static_cast<double>(h.quantile(q)) == Approx(exact).epsilon(0.01));
  }
  CHECK(h.max() == *std::max_element(values.begin(), values.end()));
}

TEST_CASE("small values are exact and implied zeros count as samples", "[analysis][histogram]") {
  histogram h;
  REQUIRE(h.quantile(0.5) == 0);  // empty
  for (std::uint64_t v = 1; v <= 100; ++v) h.add(v);
  CHECK(h.quantile(0.5) == 50);
  CHECK(h.quantile(0.99) == 99);
  h.add_zeros(900);
  CHECK(h.count() == 1000);
  CHECK(h.quantile(0.5) == 0);
  CHECK(h.quantile(0.95) == 50);
  h.clear();
  CHECK(h.count() == 0);
}

TEST_CASE("a histogram holds only the blocks of buckets it met, in any order", "[analysis][histogram]") {
  histogram h;
  CHECK(h.buckets_held() == 0);
  for (std::uint64_t v = 1000; v < 4000; ++v) h.add(v);  // 2^9..2^11: three powers of two
  // ...in five blocks: 1000-1023 is in the upper half of 2^9's, 1024-2047 fills 2^10's, 2048-3999
  // reaches into both halves of 2^11's.
  CHECK(h.buckets_held() == 5 * histogram::block_size);
  histogram one;
  one.add(123'456);
  CHECK(one.buckets_held() == histogram::block_size);  // a single sample: one block

  // Groups met largest first: the quantiles still walk the values in order.
  std::mt19937_64 rng(3);
  std::vector<std::uint64_t> values;
  for (int octave : {40, 30, 20, 10, 3}) {
    for (int i = 0; i < 1000; ++i)
      values.push_back((std::uint64_t{1} << octave) + rng() % (std::uint64_t{1} << octave));
  }
  histogram g;
  for (auto v : values) g.add(v);
  CHECK(g.buckets_held() == 9 * histogram::block_size);  // four whole powers of two, and 8-15 (one block)
  const histogram copy = g;
  for (double q : {0.1, 0.3, 0.5, 0.7, 0.9, 0.99}) {
    const double exact = static_cast<double>(exact_quantile(values, q));
    CHECK(static_cast<double>(g.quantile(q)) == Approx(exact).epsilon(0.01));
    CHECK(copy.quantile(q) == g.quantile(q));
  }
  // Weighted: half the sum lies in the largest octave's values.
  CHECK(static_cast<double>(g.weighted_quantile(0.5)) > static_cast<double>(std::uint64_t{1} << 40));
}
