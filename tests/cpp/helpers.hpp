// Shared by the C++ tests.
//
// Ground truth for timing tests: busy-waits timed by std::chrono::steady_clock, a clock
// independent of steptrace's TSC-based one. Each returns how long it really spun (a preempted
// spin runs long), so a test compares steptrace's figure with what actually happened.
#pragma once

#include <dlfcn.h>
#include <stdlib.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "steptrace/tracer.hpp"

namespace steptrace::testing {

// The size of a test of scale (no quadratic walk, bounded memory): a tenth under the sanitizers,
// which check its memory and threads, while the plain build checks how it grows. At full size
// the two such tests took 97 s of the AddressSanitizer run.
#ifdef STEPTRACE_TESTS_SANITIZED
inline constexpr int scale_divisor = 10;
#else
inline constexpr int scale_divisor = 1;
#endif

// A tracer config for tests: no exit report, and no warm-up unless asked for.
// An NVIDIA driver can be loaded here (a GPU machine, as scripts/gpu runs this suite on): the
// checks that hold only without one are left out there.
inline bool driver_here() {
  void* lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (lib != nullptr) dlclose(lib);
  return lib != nullptr;
}

inline config quiet(std::uint32_t warmup = 0) {
  config c;
  c.warmup_steps = warmup;
  c.print_at_exit = steptrace::exit_print::never;
  return c;
}

// A folder of its own under /tmp, removed with everything in it when the test ends.
struct temp_dir {
  std::filesystem::path path;
  temp_dir() {
    char name[] = "/tmp/steptrace-test-XXXXXX";
    path = ::mkdtemp(name);
  }
  ~temp_dir() { std::filesystem::remove_all(path); }
};

inline double spin_for(std::chrono::microseconds d) {
  const auto start = std::chrono::steady_clock::now();
  const auto until = start + d;
  auto now = start;
  while (now < until) now = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::milli>(now - start).count();
}

// Running mean of the real spin lengths, in milliseconds.
struct truth {
  double sum = 0;
  int n = 0;
  void add(double ms) {
    sum += ms;
    ++n;
  }
  double mean() const { return n ? sum / n : 0; }
};

// The whole file at `path` ("" when it cannot be read).
inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace steptrace::testing
