// Helpers for the torch.profiler trace tests (test_profiler_trace.cpp, test_trace_steps.cpp):
// real traces by name, temporary trace files, hand-made traces, figures read off a summary.
#pragma once

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>

#include "steptrace/profiler_trace.hpp"

namespace steptrace::testing {

inline std::string data(const std::string& name) {
  return std::string(STEPTRACE_TEST_DATA) + "/profiler_traces/" + name;
}

// A file that is removed when the test ends.
struct temp_file {
  std::string path;
  explicit temp_file(const std::string& text, const std::string& suffix = ".json") {
    char name[] = "/tmp/steptrace-trace-XXXXXX";
    const int fd = mkstemp(name);
    REQUIRE(fd >= 0);
    close(fd);
    std::remove(name);
    path = std::string(name) + suffix;
    std::ofstream(path, std::ios::binary) << text;
  }
  ~temp_file() { std::remove(path.c_str()); }
};

inline double phase_mean(const summary& s, const std::string& name) {
  const phase_stats* p = s.phase(name);
  return p ? p->ms.mean : 0.0;
}

// GPU idle time per step while the host was in `phase`, in ms.
inline double idle_in(const summary& s, const std::string& phase) {
  for (const auto& [name, share] : s.gpu->idle_by_phase) {
    if (name == phase) return share * s.gpu->idle_ms.mean;
  }
  return 0.0;
}

inline constexpr double us = 0.001;  // ms

inline std::string read_error_with(const std::string& path, const std::string& step) {
  try {
    read_profiler_trace(path, {step});
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no error)";
}

inline std::string read_error(const std::string& path) {
  try {
    read_profiler_trace(path);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no error)";
}

// A hand-made trace: pid 100 (tid 1 the training thread, tid 2 autograd's), GPU pid 0. Times in
// us after `base`, written with three decimals as newer traces do.
struct trace_text {
  std::string events;
  void add(const std::string& cat, const std::string& name, int tid, double ts, double dur,
           const std::string& args = "{}", int pid = 100) {
    char t[64], d[64];
    std::snprintf(t, sizeof t, "1712345678%06.0f.567", ts);  // exact only as text
    std::snprintf(d, sizeof d, "%.3f", dur);
    if (!events.empty()) events += ",\n";
    events += "{\"ph\": \"X\", \"cat\": \"" + cat + "\", \"name\": \"" + name + "\", \"pid\": " + std::to_string(pid) +
              ", \"tid\": " + std::to_string(tid) + ", \"ts\": " + t + ", \"dur\": " + d + ", \"args\": " + args + "}";
  }
  std::string json() const {
    return "{\"schemaVersion\": 1, \"deviceProperties\": [{\"id\": 0, \"name\": \"Test GPU\"}],\n"
           "\"traceEvents\": [\n" +
           events + "\n]}";
  }
};

inline std::string device_args(int correlation, int bytes = 0) {
  return "{\"device\": 0, \"context\": 1, \"stream\": 7, \"correlation\": " + std::to_string(correlation) +
         ", \"bytes\": " + std::to_string(bytes) + "}";
}
inline std::string corr(int correlation) { return "{\"correlation\": " + std::to_string(correlation) + "}"; }

}  // namespace steptrace::testing
