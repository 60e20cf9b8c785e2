#include "analysis/recent_window.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "steptrace/phase.hpp"

namespace steptrace::detail {

void recent_window::on_step(const built_step& s, std::uint64_t length) {
  std::uint32_t n = 0;
  for (const phase_slice& p : s.phases) {
    if (p.ticks == 0 && p.calls == 0) continue;
    slices_.push_back({p.id, p.ticks});
    ++n;
  }
  steps_.push_back({s.end, length, n});
  while (steps_.size() > max_steps || (slices_.size() > max_slices && steps_.size() > 1)) {
    for (std::uint32_t i = 0; i < steps_.front().slices; ++i) slices_.pop_front();
    steps_.pop_front();
  }
}

namespace {
double quantile(const std::vector<std::uint64_t>& values, std::uint64_t zeros, double q);
}  // namespace

std::uint64_t recent_window::length_quantile(double q) const {
  std::vector<std::uint64_t> lengths;
  lengths.reserve(steps_.size());
  for (const step_entry& e : steps_) lengths.push_back(e.length);
  std::sort(lengths.begin(), lengths.end());
  return static_cast<std::uint64_t>(quantile(lengths, 0, q));
}

std::vector<std::uint64_t> recent_window::last_lengths(std::size_t n) const {
  std::vector<std::uint64_t> out;
  for (std::size_t i = steps_.size() > n ? steps_.size() - n : 0; i < steps_.size(); ++i)
    out.push_back(steps_[i].length);
  return out;
}

void recent_window::clear() {
  steps_.clear();
  slices_.clear();
}

namespace {

// Nearest rank over `values` (sorted) plus `zeros` samples of 0.
double quantile(const std::vector<std::uint64_t>& values, std::uint64_t zeros, double q) {
  const std::uint64_t n = values.size() + zeros;
  if (n == 0) return 0;
  const auto rank = static_cast<std::uint64_t>(std::max(1.0, std::ceil(q * static_cast<double>(n))));
  return rank <= zeros ? 0.0 : static_cast<double>(values[rank - zeros - 1]);
}

void set_quantiles(stat_ms& m, std::vector<std::uint64_t>& values, std::uint64_t zeros, double ms_per_tick) {
  std::sort(values.begin(), values.end());
  m.p50 = quantile(values, zeros, 0.50) * ms_per_tick;
  m.p95 = quantile(values, zeros, 0.95) * ms_per_tick;
  m.p99 = quantile(values, zeros, 0.99) * ms_per_tick;
  m.max = quantile(values, zeros, 1.0) * ms_per_tick;
}

}  // namespace

std::uint64_t recent_window::fill_quantiles(summary& out, std::uint64_t since, double ns_per_tick) const {
  const double ms_per_tick = ns_per_tick * 1e-6;
  std::vector<std::uint64_t> lengths;
  std::map<std::uint32_t, std::vector<std::uint64_t>> by_phase;
  std::size_t at = 0;  // index of the step's first slice
  for (const step_entry& s : steps_) {
    if (s.end >= since) {
      lengths.push_back(s.length);
      for (std::uint32_t i = 0; i < s.slices; ++i) by_phase[slices_[at + i].phase].push_back(slices_[at + i].ticks);
    }
    at += s.slices;
  }
  const std::uint64_t n = lengths.size();
  set_quantiles(out.step_ms, lengths, 0, ms_per_tick);
  std::map<std::string, std::vector<std::uint64_t>*> by_label;
  for (auto& [id, values] : by_phase) by_label[phase_label(phase_id{id})] = &values;
  for (phase_stats& p : out.phases) {
    std::vector<std::uint64_t> none;
    const auto it = by_label.find(p.name);
    std::vector<std::uint64_t>& values = it == by_label.end() ? none : *it->second;
    set_quantiles(p.ms, values, n - std::min<std::uint64_t>(n, values.size()), ms_per_tick);
  }
  return n;
}

}  // namespace steptrace::detail
