#include "record/clock.hpp"

#include <cstring>
#include <fstream>
#include <mutex>
#include <string>

#include "steptrace/phase.hpp"

namespace steptrace::detail {

bool host_clock::use_tsc_ = false;

namespace {

struct calibration {
  std::once_flag init_once, ratio_once;
  std::uint64_t tick0 = 0, ns0 = 0;
  double ns_per_tick = 1.0;
};

calibration& cal() {
  static calibration c;
  return c;
}

bool tsc_is_invariant() {
#ifdef STEPTRACE_HAVE_TSC
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) == 0) {
      return line.find(" constant_tsc") != std::string::npos && line.find(" nonstop_tsc") != std::string::npos;
    }
  }
#endif
  return false;
}

clock_pair read_now() {
  return read_both([] { return host_clock::now(); }, [] { return monotonic_ns(); });
}

}  // namespace

void host_clock::init() noexcept {
  std::call_once(cal().init_once, [] {
    use_tsc_ = tsc_is_invariant();
    const clock_pair p = read_now();
    cal().ns0 = p.ns;
    cal().tick0 = p.tick;
  });
}

double host_clock::ns_per_tick() noexcept {
  init();
  std::call_once(cal().ratio_once, [] {
    if (!use_tsc_) return;  // ticks are nanoseconds
    constexpr std::uint64_t min_span_ns = 20'000'000;
    while (monotonic_ns() - cal().ns0 < min_span_ns) {
    }
    const clock_pair end = read_now();
    cal().ns_per_tick = static_cast<double>(end.ns - cal().ns0) / static_cast<double>(end.tick - cal().tick0);
  });
  return cal().ns_per_tick;
}

std::uint64_t host_clock::to_monotonic_ns(std::uint64_t ticks) noexcept {
  const double r = ns_per_tick();
  const double delta = (static_cast<double>(ticks) - static_cast<double>(cal().tick0)) * r;
  return static_cast<std::uint64_t>(static_cast<double>(cal().ns0) + delta);
}

}  // namespace steptrace::detail

namespace steptrace {
const char* host_clock_name() noexcept {
  detail::host_clock::init();
  return detail::host_clock::uses_tsc() ? "tsc" : "clock_monotonic";
}
}  // namespace steptrace
