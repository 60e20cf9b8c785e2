// The other threads' fill, made in time order as gaps ask for it, held to the tiling it replaced
// (every piece of every thread sorted, what an earlier piece covers cut away) on random forests.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <tuple>
#include <vector>

#include "profiler/host_fill.hpp"

using namespace steptrace::detail;

namespace {

using piece = std::tuple<std::uint64_t, std::uint64_t, std::uint32_t>;

// Every thread's pieces by a whole walk, sorted, then tiled: the reference.
std::vector<piece> reference_tiling(const std::vector<forest>& threads) {
  std::vector<piece> all;
  for (const forest& f : threads) {
    for (std::uint32_t r : f.roots) {
      std::uint64_t cursor = 0;
      std::vector<std::uint32_t> open;
      auto add = [&](std::uint64_t a, std::uint64_t b, std::uint32_t p) {
        if (b > a) all.emplace_back(a, b, p);
      };
      f.walk(
          r,
          [&](std::uint32_t i) {
            if (!open.empty()) add(cursor, f.begin(i), f.kind[open.back()]);
            cursor = f.begin(i);
            open.push_back(i);
            return true;
          },
          [&](std::uint32_t i) {
            add(cursor, f.end[i], f.kind[i]);
            cursor = f.end[i];
            open.pop_back();
          });
    }
  }
  std::sort(all.begin(), all.end());
  std::vector<piece> tiles;
  std::uint64_t covered = 0;
  for (const auto& [a, b, p] : all) {
    if (b <= covered) continue;
    tiles.emplace_back(std::max(a, covered), b, p);
    covered = b;
  }
  return tiles;
}

// The reference's pieces inside [x, y).
std::vector<piece> reference_within(const std::vector<piece>& tiles, std::uint64_t x, std::uint64_t y) {
  std::vector<piece> out;
  for (const auto& [a, b, p] : tiles) {
    if (b > x && a < y) out.emplace_back(std::max(a, x), std::min(b, y), p);
  }
  return out;
}

}  // namespace

TEST_CASE("the other threads' fill, made as the gaps ask, is the sorted tiling of their pieces",
          "[profiler][host_fill]") {
  std::mt19937_64 rng(20261127);
  for (int round = 0; round < 300; ++round) {
    const int threads = 1 + static_cast<int>(rng() % 4);
    std::vector<trace_event> events;
    std::vector<std::vector<std::uint32_t>> nodes(static_cast<std::size_t>(threads));
    for (int t = 0; t < threads; ++t) {
      const int n = static_cast<int>(rng() % 40);
      for (int k = 0; k < n; ++k) {
        trace_event e;
        e.ts = rng() % 1000;  // coarse: equal starts and ends, nesting and overlap alike
        e.dur = rng() % 4 == 0 ? 0 : rng() % 200;
        nodes[static_cast<std::size_t>(t)].push_back(static_cast<std::uint32_t>(events.size()));
        events.push_back(e);
      }
    }
    std::vector<forest> forests;
    for (auto& ids : nodes) {
      forests.emplace_back(events, ids);
      forest& f = forests.back();
      f.kind.resize(f.size());
      for (auto& k : f.kind) k = static_cast<std::uint32_t>(rng() % 5);
    }
    const std::vector<piece> tiles = reference_tiling(forests);
    host_fill fill(forests);
    std::uint64_t x = rng() % 50;
    for (int gap = 0; gap < 60 && x < 1300; ++gap) {  // gaps going forward in time, some empty, some touching
      const std::uint64_t y = x + rng() % 120;
      std::vector<piece> got;
      fill.within(x, y, [&](std::uint64_t a, std::uint64_t b, std::uint32_t p) { got.emplace_back(a, b, p); });
      INFO("round " << round << ", gap [" << x << ", " << y << ")");
      CHECK(got == reference_within(tiles, x, y));
      x = y + (rng() % 3 == 0 ? 0 : rng() % 60);
      if (rng() % 16 == 0) x = rng() % 1000;  // back in time (windows that overlap): a new pass
    }
  }
}
