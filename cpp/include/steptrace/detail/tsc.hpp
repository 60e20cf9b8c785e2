// steptrace/detail/tsc.hpp — not API: the time-stamp counter, where there is one. Whether it is
// used (it must be invariant) is decided once, at run time, by the library.
#pragma once

#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#define STEPTRACE_HAVE_TSC 1
namespace steptrace::detail {
inline std::uint64_t read_tsc() noexcept { return __builtin_ia32_rdtsc(); }  // not serialising
}  // namespace steptrace::detail
#endif
