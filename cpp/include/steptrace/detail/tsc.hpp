// steptrace/detail/tsc.hpp — not API: the time-stamp counter, where there is one. Whether it is
// used (it must be invariant) is decided once, at run time, by the library.
#pragma once

#include <cstdint>
#include <ctime>

#if defined(__x86_64__) || defined(__i386__)
#define STEPTRACE_HAVE_TSC 1
namespace steptrace::detail {
inline std::uint64_t read_tsc() noexcept { return __builtin_ia32_rdtsc(); }  // not serialising
}  // namespace steptrace::detail
#endif

namespace steptrace::detail {

inline std::uint64_t monotonic_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<std::uint64_t>(ts.tv_nsec);
}

// The host clock in ticks: the TSC where the library found it invariant (`tsc`), else
// CLOCK_MONOTONIC nanoseconds. For inline code that was told which at its start (a request).
inline std::uint64_t read_ticks(bool tsc) noexcept {
#ifdef STEPTRACE_HAVE_TSC
  if (__builtin_expect(tsc, 1)) return read_tsc();
#else
  (void)tsc;
#endif
  return monotonic_ns();
}

}  // namespace steptrace::detail
