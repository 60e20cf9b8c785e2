// Internal (not public API): a GPU's health through NVML, loaded at run time as CUPTI is
// (cpp/src/report/README.md, "Node health").
//
// Usage:
//   nvml_reader nvml;                    // nothing is loaded until the first read
//   gpu_health h;
//   if (nvml.read(0, h)) ...             // false (why_not() says why, once): no NVML, no such GPU
//
// `device` is the CUDA ordinal the process uses; CUDA_VISIBLE_DEVICES (indices or UUIDs) maps it
// to NVML's. STEPTRACE_NVML_LIBRARY names another library to load (the tests' fake NVML).
#pragma once

#include <cstdint>
#include <string>

namespace steptrace::detail {

// The variable naming a library loaded in NVML's place (the tests' fake NVML); config's check of
// STEPTRACE_* variables knows it as one of steptrace's.
inline constexpr const char* nvml_library_variable = "STEPTRACE_NVML_LIBRARY";

struct gpu_health {
  double sm_clock_mhz = -1, mem_clock_mhz = -1, power_w = -1, temperature_c = -1;
  std::uint64_t clock_event_reasons = 0;
  double ecc_uncorrected = -1;  // volatile: since the driver loaded
  double xid_errors = 0;        // XID events seen since the first read
};

class nvml_reader {
 public:
  nvml_reader() = default;
  nvml_reader(const nvml_reader&) = delete;
  nvml_reader& operator=(const nvml_reader&) = delete;
  // Reads what NVML gives of GPU `device`; a field it refuses stays -1. Never blocks.
  bool read(std::int64_t device, gpu_health& out);
  const std::string& why_not() const noexcept { return why_not_; }

 private:
  bool start(std::int64_t device);
  bool tried_ = false, ok_ = false;
  std::string why_not_;
  void* lib_ = nullptr;
  void* device_ = nullptr;
  void* events_ = nullptr;  // an event set for XID errors (none when NVML refuses one)
  double xids_ = 0;
};

}  // namespace steptrace::detail
