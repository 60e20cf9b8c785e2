// What a rank's host says about its speed (record/host_health.hpp).
#include "record/host_health.hpp"

#include <sys/resource.h>
#include <time.h>

#include <cstdio>

namespace steptrace::detail {
namespace {

std::uint64_t now_ns() noexcept {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<std::uint64_t>(t.tv_sec) * 1'000'000'000ull + static_cast<std::uint64_t>(t.tv_nsec);
}

// /proc/stat's first line: every core's ticks, and the stolen ones.
bool cpu_ticks(const char* path, std::uint64_t& total, std::uint64_t& steal) noexcept {
  std::FILE* f = std::fopen(path, "re");
  if (f == nullptr) return false;
  unsigned long long v[8] = {};
  const int n = std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                            &v[6], &v[7]);
  std::fclose(f);
  if (n < 8) return false;
  total = 0;
  for (unsigned long long x : v) total += x;
  steal = v[7];
  return true;
}

// /proc/self/schedstat: the main thread's time runnable, waiting for a core (ns).
bool main_wait(std::uint64_t& ns) noexcept {
  std::FILE* f = std::fopen("/proc/self/schedstat", "re");
  if (f == nullptr) return false;
  unsigned long long run = 0, wait = 0;
  const int n = std::fscanf(f, "%llu %llu", &run, &wait);
  std::fclose(f);
  if (n < 2) return false;
  ns = wait;
  return true;
}

}  // namespace

host_reading host_health_reader::read() noexcept {
  host_reading out;
  const std::uint64_t wall = now_ns();
  std::uint64_t total = 0, steal = 0, wait = 0;
  const bool ticks = cpu_ticks(stat_path_, total, steal), waits = main_wait(wait);
  rusage u{};
  const bool usage = getrusage(RUSAGE_SELF, &u) == 0;
  const std::uint64_t involuntary = usage ? static_cast<std::uint64_t>(u.ru_nivcsw) : 0;
  if (started_ && wall > wall_ns_) {
    const double span_ns = static_cast<double>(wall - wall_ns_);
    // A counter that stepped back (a hypervisor's steal clock, a counter reset) reads nothing:
    // unsigned, its difference would wrap to a share of 1e15.
    if (ticks && total > cpu_total_ && steal >= cpu_steal_ && steal - cpu_steal_ <= total - cpu_total_) {
      out.steal_share = static_cast<double>(steal - cpu_steal_) / static_cast<double>(total - cpu_total_);
    }
    if (usage && involuntary >= involuntary_)
      out.involuntary_per_s = static_cast<double>(involuntary - involuntary_) / (span_ns / 1e9);
    if (waits && wait >= main_wait_ns_) out.main_wait_share = static_cast<double>(wait - main_wait_ns_) / span_ns;
  }
  started_ = true;
  wall_ns_ = wall, cpu_total_ = total, cpu_steal_ = steal, involuntary_ = involuntary, main_wait_ns_ = wait;
  return out;
}

}  // namespace steptrace::detail
