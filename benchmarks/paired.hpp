// Overhead measured so that a busy machine cannot turn it into a verdict (the C++ twin of
// benchmarks/paired.py): the variants run in rounds, each round in a rotated order, each timed
// by thread CPU, process CPU (every thread of the process: the collector's work included) and
// wall clock; a cost is compared within a round, so a preemption or a frequency change hits
// both sides alike, and the report is the median of the per-round ratios with their middle
// half, the load average beside it. A target is "met" or "missed" only when the whole middle
// half is on one side of it; else "not measurable here".
//
//   paired::bench b(rounds);
//   b.add("work", [&](long n) { for (long i = 0; i < n; ++i) x = work(x); });
//   b.add("phase + work", ...);
//   b.run(n, settle);                         // settle(): after each variant, e.g. a drain
//   double r = b.ratio_of_costs("phase + work", "pair + work", "work", paired::process);
#pragma once

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace paired {

enum clock_kind { thread, process, wall };
inline const char* clock_name(clock_kind c) {
  return c == thread ? "thread CPU" : c == process ? "process CPU" : "wall";
}

inline double now_ns(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

struct sample {
  double ns[3];  // per iteration, by clock_kind
};

struct spread {
  double low, median, high;  // the middle half of the rounds, and their median
};

inline spread quartiles(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {  // linear interpolation, as Python's statistics.quantiles (inclusive)
    const double pos = q * static_cast<double>(v.size() - 1);
    const auto i = static_cast<std::size_t>(pos);
    const double f = pos - static_cast<double>(i);
    return i + 1 < v.size() ? v[i] * (1 - f) + v[i + 1] * f : v[i];
  };
  return {at(0.25), at(0.5), at(0.75)};
}

inline const char* verdict(const spread& s, double target) {
  if (s.high <= target) return "met";
  if (s.low > target) return "missed";
  return "not measurable here";
}

inline std::string load_average() {
  std::FILE* f = std::fopen("/proc/loadavg", "r");
  if (f == nullptr) return "?";
  char text[32] = {0};
  const int got = std::fscanf(f, "%31s", text);
  std::fclose(f);
  return got == 1 ? text : "?";
}

class bench {
 public:
  explicit bench(int rounds) : rounds_(rounds) {}

  void add(std::string name, std::function<void(long)> fn) {
    variants_.push_back({std::move(name), std::move(fn), {}});
  }

  // Runs every variant n times a round; settle() after each (inside its process-CPU span, outside
  // its thread-CPU and wall spans): for work another thread finishes for it.
  void run(
      long n, const std::function<void()>& settle = [] {}) {
    for (auto& v : variants_) v.fn(std::max(1L, n / 10));  // warm every path once
    settle();
    const std::size_t k = variants_.size();
    for (int r = 0; r < rounds_; ++r) {
      for (std::size_t j = 0; j < k; ++j) {
        auto& v = variants_[(j + static_cast<std::size_t>(r)) % k];  // rotated: none always first
        const double p0 = now_ns(CLOCK_PROCESS_CPUTIME_ID), t0 = now_ns(CLOCK_THREAD_CPUTIME_ID),
                     w0 = now_ns(CLOCK_MONOTONIC);
        v.fn(n);
        const double t1 = now_ns(CLOCK_THREAD_CPUTIME_ID), w1 = now_ns(CLOCK_MONOTONIC);
        settle();
        const double p1 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
        const double dn = static_cast<double>(n);
        v.samples.push_back({{(t1 - t0) / dn, (p1 - p0) / dn, (w1 - w0) / dn}});
      }
    }
  }

  // Per round: what `a` costs above `floor` over what `b` costs above it (floor "" : nothing).
  spread ratio_of_costs(const std::string& a, const std::string& b, const std::string& floor, clock_kind c) const {
    const auto &va = find(a), &vb = find(b);
    std::vector<double> ratios;
    for (std::size_t r = 0; r < va.samples.size(); ++r) {
      const double base = floor.empty() ? 0 : find(floor).samples[r].ns[c];
      ratios.push_back((va.samples[r].ns[c] - base) / std::max(vb.samples[r].ns[c] - base, 1e-3));
    }
    return quartiles(ratios);
  }

  // Per round: what `a` costs above `floor`, in ns an iteration.
  spread cost(const std::string& a, const std::string& floor, clock_kind c) const {
    const auto& va = find(a);
    std::vector<double> costs;
    for (std::size_t r = 0; r < va.samples.size(); ++r) {
      costs.push_back(va.samples[r].ns[c] - (floor.empty() ? 0 : find(floor).samples[r].ns[c]));
    }
    return quartiles(costs);
  }

  void print_table() const {
    std::printf("%d paired rounds, rotated; load average %s; ns an iteration, median of the rounds\n", rounds_,
                load_average().c_str());
    std::printf("  %-44s %14s %14s %14s\n", "variant", "thread CPU", "process CPU", "wall");
    for (const auto& v : variants_) {
      std::printf("  %-44s", v.name.c_str());
      for (clock_kind c : {thread, process, wall}) {
        std::vector<double> ns;
        for (const auto& s : v.samples) ns.push_back(s.ns[c]);
        std::printf(" %14.2f", quartiles(ns).median);
      }
      std::printf("\n");
    }
  }

 private:
  struct variant {
    std::string name;
    std::function<void(long)> fn;
    std::vector<sample> samples;
  };
  const variant& find(const std::string& name) const {
    for (const auto& v : variants_) {
      if (v.name == name) return v;
    }
    std::fprintf(stderr, "paired: no variant %s\n", name.c_str());
    std::abort();
  }

  int rounds_;
  std::vector<variant> variants_;
};

// "  <what>: 0.62x [0.58-0.66] by process CPU, target <= 0.7x: met"
inline void print_target(const char* what, const spread& s, clock_kind c, double target) {
  std::printf("  %s: %.2fx [%.2f-%.2f] by %s, target <= %gx: %s\n", what, s.median, s.low, s.high, clock_name(c),
              target, verdict(s, target));
}

}  // namespace paired
