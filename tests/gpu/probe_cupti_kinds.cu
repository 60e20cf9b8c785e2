// A GPU probe, apart from steptrace: a small library that turns on a chosen set of CUPTI activity
// kinds inside a Python process (loaded with ctypes by probe_cupti_kinds.py), so that what each
// kind costs a torch launch can be measured one kind at a time. The mask's bits:
//   1  CONCURRENT_KERNEL            2  MEMCPY and MEMSET
//   4  SYNCHRONIZATION              8  MEMORY2
//  16  RUNTIME and DRIVER on, every call off but the launches (steptrace's choice since 11-28)
// probe_stop() flushes and returns the records seen: kernels, other device records, API records.
// Build: nvcc -O2 -shared -Xcompiler -fPIC -I<cupti headers> probe_cupti_kinds.cu -l:libcupti.so.13
// (`scripts/gpu probe`).
#include <cupti.h>

#include <cstdint>
#include <cstdlib>

#include "probe_cupti.hpp"

namespace {

long g_kernels = 0, g_device = 0, g_api = 0;

void CUPTIAPI requested(uint8_t** buffer, size_t* size, size_t* max) {
  *size = 1 << 20;  // steptrace's buffer size
  *buffer = static_cast<uint8_t*>(aligned_alloc(8, *size));
  *max = 0;
}

void CUPTIAPI completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* r = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS) {
    if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      ++g_kernels;
    } else if (r->kind == CUPTI_ACTIVITY_KIND_RUNTIME || r->kind == CUPTI_ACTIVITY_KIND_DRIVER) {
      ++g_api;
    } else {
      ++g_device;
    }
  }
  free(buffer);
}

}  // namespace

extern "C" int probe_start(unsigned mask) {
  int refused = cuptiActivityRegisterCallbacks(requested, completed) != CUPTI_SUCCESS;
  if (mask & 1) refused += cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS;
  if (mask & 2) {
    refused += cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY) != CUPTI_SUCCESS;
    refused += cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET) != CUPTI_SUCCESS;
  }
  if (mask & 4) refused += cuptiActivityEnable(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION) != CUPTI_SUCCESS;
  if (mask & 8) refused += cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMORY2) != CUPTI_SUCCESS;
  if (mask & 16) refused += probe::only_launches();
  return refused;
}

extern "C" void probe_stop(long* counts) {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  counts[0] = g_kernels;
  counts[1] = g_device;
  counts[2] = g_api;
}
