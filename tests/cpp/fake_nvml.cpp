// A fake libnvidia-ml for the tests (loaded through STEPTRACE_NVML_LIBRARY, as gpu/nvml.hpp says):
// one GPU whose readings come from the environment, so a test sets a throttled or a healthy node.
//   FAKE_NVML_SM_MHZ, FAKE_NVML_MEM_MHZ, FAKE_NVML_POWER_MW, FAKE_NVML_TEMP_C, FAKE_NVML_REASONS
//   (hex), FAKE_NVML_ECC, FAKE_NVML_XIDS (XID events pending at the first read), FAKE_NVML_FAIL=1
//   (nvmlInit_v2 fails).
#include <cstdlib>

namespace {

unsigned long long value(const char* name, unsigned long long fallback, int base = 10) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, base) : fallback;
}

int device_token = 0, set_token = 0;
unsigned long long xids_left = 0;
bool xids_read = false;

struct event_data {
  void* device;
  unsigned long long event_type, event_data;
  unsigned int gpu_instance, compute_instance;
};

}  // namespace

extern "C" {

int nvmlInit_v2() { return value("FAKE_NVML_FAIL", 0) ? 1 : 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned index, void** device) {
  if (index != 0) return 2;  // NVML_ERROR_INVALID_ARGUMENT: one GPU
  *device = &device_token;
  return 0;
}
int nvmlDeviceGetClockInfo(void*, unsigned type, unsigned* mhz) {
  *mhz = static_cast<unsigned>(type == 1 ? value("FAKE_NVML_SM_MHZ", 1980) : value("FAKE_NVML_MEM_MHZ", 2619));
  return type == 1 || type == 2 ? 0 : 2;
}
int nvmlDeviceGetPowerUsage(void*, unsigned* mw) {
  *mw = static_cast<unsigned>(value("FAKE_NVML_POWER_MW", 450000));
  return 0;
}
int nvmlDeviceGetTemperature(void*, unsigned, unsigned* c) {
  *c = static_cast<unsigned>(value("FAKE_NVML_TEMP_C", 55));
  return 0;
}
int nvmlDeviceGetCurrentClocksEventReasons(void*, unsigned long long* reasons) {
  *reasons = value("FAKE_NVML_REASONS", 0, 16);
  return 0;
}
int nvmlDeviceGetTotalEccErrors(void*, unsigned, unsigned, unsigned long long* count) {
  *count = value("FAKE_NVML_ECC", 0);
  return 0;
}
int nvmlEventSetCreate(void** set) {
  *set = &set_token;
  return 0;
}
int nvmlDeviceRegisterEvents(void*, unsigned long long, void*) { return 0; }
int nvmlEventSetWait_v2(void*, event_data* data, unsigned) {
  if (!xids_read) xids_read = true, xids_left = value("FAKE_NVML_XIDS", 0);
  if (xids_left == 0) return 10;  // NVML_ERROR_TIMEOUT
  --xids_left;
  data->event_type = 0x8;
  data->event_data = 79;
  return 0;
}

}  // extern "C"
