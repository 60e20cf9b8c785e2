// A GPU's health through NVML (gpu/nvml.hpp). The few NVML types and values used are declared
// here (nvml.h is not needed to build): they are NVML's stable C ABI.
#include "gpu/nvml.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace steptrace::detail {
namespace {

using nvml_return = int;  // nvmlReturn_t: 0 is NVML_SUCCESS
using nvml_device = void*;
using nvml_event_set = void*;
struct nvml_event_data {  // nvmlEventData_t
  nvml_device device;
  unsigned long long event_type, event_data;
  unsigned int gpu_instance, compute_instance;
};
constexpr unsigned clock_sm = 1, clock_mem = 2, temperature_gpu = 0;
constexpr unsigned ecc_uncorrected = 1, ecc_volatile = 0;
constexpr unsigned long long event_xid = 0x8;  // nvmlEventTypeXidCriticalError
constexpr std::size_t max_events_a_read = 64;

template <class F>
F symbol(void* lib, const char* name) {
  return reinterpret_cast<F>(dlsym(lib, name));
}

// CUDA_VISIBLE_DEVICES's entry for CUDA ordinal `device`: an index or a UUID ("" if unset).
std::string visible_entry(std::int64_t device) {
  const char* list = std::getenv("CUDA_VISIBLE_DEVICES");
  if (list == nullptr || *list == '\0') return {};
  std::string all(list);
  std::int64_t i = 0;
  for (std::size_t from = 0; from <= all.size(); ++i) {
    const std::size_t comma = std::min(all.find(',', from), all.size());
    if (i == device) return all.substr(from, comma - from);
    from = comma + 1;
  }
  return {};
}

}  // namespace

bool nvml_reader::start(std::int64_t device) {
  tried_ = true;
  const char* named = std::getenv(nvml_library_variable);
  const std::string path = named != nullptr && *named != '\0' ? named : "libnvidia-ml.so.1";
  lib_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib_ == nullptr) {
    why_not_ = "NVML (" + path + ") could not be loaded";
    return false;
  }
  auto init = symbol<nvml_return (*)()>(lib_, "nvmlInit_v2");
  auto by_index = symbol<nvml_return (*)(unsigned, nvml_device*)>(lib_, "nvmlDeviceGetHandleByIndex_v2");
  auto by_uuid = symbol<nvml_return (*)(const char*, nvml_device*)>(lib_, "nvmlDeviceGetHandleByUUID");
  if (init == nullptr || by_index == nullptr || init() != 0) {
    why_not_ = "NVML did not start";
    return false;
  }
  const std::string entry = visible_entry(device);
  nvml_device handle = nullptr;
  nvml_return r = 1;
  if (entry.empty()) {
    r = device >= 0 ? by_index(static_cast<unsigned>(device), &handle) : 1;
  } else if (entry.find_first_not_of("0123456789") == std::string::npos) {
    r = by_index(static_cast<unsigned>(std::strtoul(entry.c_str(), nullptr, 10)), &handle);
  } else if (by_uuid != nullptr) {
    r = by_uuid(entry.c_str(), &handle);
  }
  if (r != 0 || handle == nullptr) {
    why_not_ =
        "NVML has no GPU " + std::to_string(device) + (entry.empty() ? "" : " (CUDA_VISIBLE_DEVICES " + entry + ")");
    return false;
  }
  device_ = handle;
  auto create = symbol<nvml_return (*)(nvml_event_set*)>(lib_, "nvmlEventSetCreate");
  auto listen =
      symbol<nvml_return (*)(nvml_device, unsigned long long, nvml_event_set)>(lib_, "nvmlDeviceRegisterEvents");
  nvml_event_set set = nullptr;
  if (create != nullptr && listen != nullptr && create(&set) == 0 && listen(handle, event_xid, set) == 0) events_ = set;
  return ok_ = true;
}

bool nvml_reader::read(std::int64_t device, gpu_health& out) {
  if (!tried_) start(device);
  if (!ok_) return false;
  auto clock = symbol<nvml_return (*)(nvml_device, unsigned, unsigned*)>(lib_, "nvmlDeviceGetClockInfo");
  auto power = symbol<nvml_return (*)(nvml_device, unsigned*)>(lib_, "nvmlDeviceGetPowerUsage");
  auto temperature = symbol<nvml_return (*)(nvml_device, unsigned, unsigned*)>(lib_, "nvmlDeviceGetTemperature");
  auto reasons =
      symbol<nvml_return (*)(nvml_device, unsigned long long*)>(lib_, "nvmlDeviceGetCurrentClocksEventReasons");
  if (reasons == nullptr) {  // before NVML 12.2
    reasons =
        symbol<nvml_return (*)(nvml_device, unsigned long long*)>(lib_, "nvmlDeviceGetCurrentClocksThrottleReasons");
  }
  auto ecc = symbol<nvml_return (*)(nvml_device, unsigned, unsigned, unsigned long long*)>(
      lib_, "nvmlDeviceGetTotalEccErrors");
  auto wait = symbol<nvml_return (*)(nvml_event_set, nvml_event_data*, unsigned)>(lib_, "nvmlEventSetWait_v2");
  unsigned v = 0;
  unsigned long long big = 0;
  if (clock != nullptr && clock(device_, clock_sm, &v) == 0) out.sm_clock_mhz = v;
  if (clock != nullptr && clock(device_, clock_mem, &v) == 0) out.mem_clock_mhz = v;
  if (power != nullptr && power(device_, &v) == 0) out.power_w = v / 1000.0;  // mW
  if (temperature != nullptr && temperature(device_, temperature_gpu, &v) == 0) out.temperature_c = v;
  if (reasons != nullptr && reasons(device_, &big) == 0) out.clock_event_reasons = big;
  if (ecc != nullptr && ecc(device_, ecc_uncorrected, ecc_volatile, &big) == 0)
    out.ecc_uncorrected = static_cast<double>(big);
  if (events_ != nullptr && wait != nullptr) {
    nvml_event_data data{};
    for (std::size_t i = 0; i < max_events_a_read && wait(events_, &data, 0) == 0; ++i) {  // 0 ms: never waits
      if (data.event_type & event_xid) xids_ += 1;
    }
  }
  out.xid_errors = events_ != nullptr ? xids_ : -1;
  return true;
}

}  // namespace steptrace::detail
