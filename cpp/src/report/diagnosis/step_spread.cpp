// How a phase's time is spread over the steps (report/diagnosis/step_spread.hpp).
#include "report/diagnosis/step_spread.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <vector>

namespace steptrace::detail {
namespace {

// Phase `name`'s own time in a kept step: each of its calls less the calls opened directly
// inside it; `other`: the step less its outermost calls.
double own_time(const timeline_step& st, std::string_view name) {
  const std::vector<timeline_span>& spans = st.phases;  // by start
  if (name == "other") {
    double in_phases = 0;
    for (const timeline_span& sp : spans) in_phases += sp.depth == 0 ? sp.end_ms - sp.begin_ms : 0.0;
    return std::max(0.0, st.step_ms - in_phases);
  }
  double own = 0;
  std::vector<std::size_t> open;  // the calls that contain the current one, outermost first
  for (std::size_t i = 0; i < spans.size(); ++i) {
    const timeline_span& sp = spans[i];
    while (!open.empty() && (spans[open.back()].depth >= sp.depth || spans[open.back()].end_ms <= sp.begin_ms)) {
      open.pop_back();
    }
    const double length = sp.end_ms - sp.begin_ms;
    if (sp.name == name) own += length;
    if (!open.empty() && spans[open.back()].depth + 1 == sp.depth && spans[open.back()].name == name) own -= length;
    open.push_back(i);
  }
  return std::max(0.0, own);
}

struct kept {
  std::uint64_t index;
  double excess;
  bool recent;
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// The period the heavy steps keep on every thread: the most common distance between heavy steps
// next to each other in a thread's recent (consecutive) steps; 0 when none.
std::uint64_t common_distance(const std::map<std::uint32_t, std::vector<kept>>& threads,
                              const std::map<std::uint32_t, std::vector<std::uint64_t>>& heavy) {
  std::map<std::uint64_t, std::size_t> count;
  for (const auto& [thread, steps] : threads) {
    std::uint64_t last = 0;
    bool seen = false;
    for (const kept& k : steps) {
      if (!k.recent) continue;
      const auto& h = heavy.at(thread);
      if (!std::binary_search(h.begin(), h.end(), k.index)) continue;
      if (seen) ++count[k.index - last];
      last = k.index;
      seen = true;
    }
  }
  std::uint64_t best = 0;
  std::size_t most = 0;
  for (const auto& [distance, n] : count) {
    if (n > most) best = distance, most = n;
  }
  return best;
}

// Whether heavy steps keep period `every`: on each thread most heavy steps share one residue, and
// the recent (consecutive) steps hold one heavy step every `every` steps, few missing or extra.
bool regular(const std::map<std::uint32_t, std::vector<kept>>& threads,
             const std::map<std::uint32_t, std::vector<std::uint64_t>>& heavy, std::uint64_t every,
             std::size_t heavy_kept) {
  std::size_t on_period = 0, expected = 0, found = 0, off = 0;
  for (const auto& [thread, steps] : threads) {
    const auto& h = heavy.at(thread);
    if (h.empty()) continue;
    std::map<std::uint64_t, std::size_t> residues;
    for (std::uint64_t i : h) ++residues[i % every];
    std::uint64_t residue = 0;
    std::size_t most = 0;
    for (const auto& [r, n] : residues) {
      if (n > most) residue = r, most = n;
    }
    on_period += most;
    for (const kept& k : steps) {
      if (!k.recent) continue;
      const bool due = k.index % every == residue, is_heavy = std::binary_search(h.begin(), h.end(), k.index);
      expected += due ? 1 : 0;
      found += due && is_heavy ? 1 : 0;
      off += !due && is_heavy ? 1 : 0;
    }
  }
  return 10 * on_period >= 8 * heavy_kept && (expected == 0 || (10 * found >= 8 * expected && 5 * off <= expected));
}

}  // namespace

step_spread spread_of(const summary& s, std::string_view name) {
  step_spread out;
  const phase_stats* p = s.phase(name);
  constexpr std::uint64_t min_steps = 6;
  if (p == nullptr || s.steps < min_steps || p->ms.total <= 0 || s.step_ms.total <= 0) return out;
  out.typical_ms = p->ms.p50;
  const double steps = static_cast<double>(s.steps);
  const double above_typical = std::max(0.0, p->ms.total - steps * p->ms.p50);
  out.excess_share = above_typical / s.step_ms.total;
  if (steps * p->ms.p50 >= 0.5 * p->ms.total) {
    out.shape = step_spread::per_step;
    return out;
  }
  // The kept counted steps of each thread, by index, with their excess over the typical step.
  std::map<std::uint32_t, std::vector<kept>> threads;
  double largest = 0;
  for (const timeline_step& st : s.timeline.steps) {
    if (st.warmup || st.failed || st.phases_dropped > 0) continue;
    const double excess = own_time(st, name) - p->ms.p50;
    threads[st.thread].push_back({st.index, excess, st.recent});
    largest = std::max(largest, excess);
  }
  out.shape = step_spread::few_steps;
  if (largest <= 0) return out;
  // Heavy: at least half the median excess of the steps that carry a real part of the largest
  // (a fifth or more), so one outlier does not hide a period of smaller ones.
  std::vector<double> carrying;
  for (const auto& [thread, steps] : threads) {
    for (const kept& k : steps) {
      if (k.excess >= 0.2 * largest) carrying.push_back(k.excess);
    }
  }
  const double bar = 0.5 * median(carrying);
  std::map<std::uint32_t, std::vector<std::uint64_t>> heavy;
  std::vector<double> excesses;
  for (auto& [thread, steps] : threads) {
    std::sort(steps.begin(), steps.end(), [](const kept& a, const kept& b) { return a.index < b.index; });
    auto& h = heavy[thread];
    for (const kept& k : steps) {
      if (k.excess >= bar) h.push_back(k.index), excesses.push_back(k.excess);
    }
  }
  out.heavy_kept = excesses.size();
  out.excess_ms = median(excesses);
  if (out.heavy_kept < 3) return out;
  // Candidate periods: the distance heavy recent steps keep, and each divisor of the greatest
  // common divisor of the distances between all heavy kept steps (the slowest steps of a long
  // run are some of its periodic ones, so their distances are multiples of the period).
  std::vector<std::uint64_t> candidates;
  if (const std::uint64_t d = common_distance(threads, heavy); d >= 2) candidates.push_back(d);
  std::uint64_t g = 0;
  for (const auto& [thread, h] : heavy) {
    for (std::size_t i = 1; i < h.size(); ++i) g = std::gcd(g, h[i] - h[i - 1]);
  }
  for (std::uint64_t d = 2; d <= g && d <= 100'000; ++d) {
    if (g % d == 0) candidates.push_back(d);
  }
  double best_fit = 0;
  for (const std::uint64_t every : candidates) {
    if (!regular(threads, heavy, every, out.heavy_kept)) continue;
    // The kept steps stand for the run: its time above the typical step is about one step in
    // `every` carrying the kept excess.
    const double run_heavy_ms = above_typical / (steps / static_cast<double>(every));
    const double ratio = run_heavy_ms / out.excess_ms;
    const double fit = std::min(ratio, 1 / ratio);
    if (fit >= 2.0 / 3 && fit > best_fit) {
      best_fit = fit;
      out.shape = step_spread::periodic;
      out.every = every;
    }
  }
  return out;
}

}  // namespace steptrace::detail
