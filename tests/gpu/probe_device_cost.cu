// A GPU probe, apart from steptrace: what CUPTI's kernel records cost the device itself, per
// kernel, on a GPU-bound stream (the host launches faster than the kernels end). One mode a
// process:
//   0  no CUPTI
//   1  CONCURRENT_KERNEL records
//   2  steptrace's set: kernels, MEMCPY, MEMSET, SYNCHRONIZATION, MEMORY2, and the launch calls
// For spin kernels of about 15 and 40 us: 10,000 back to back, timed by CUDA events around them,
// the best of 3; prints us a kernel (the modes differ by what CUPTI costs the device). Build: nvcc -O2 -arch=sm_90 -I<cupti headers>
// probe_device_cost.cu -l:libcupti.so.13 (`scripts/gpu probe-device`).
#include <cuda_runtime.h>
#include <cupti.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "probe_cupti.hpp"

namespace {

__global__ void spin(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

void CUPTIAPI requested(uint8_t** buffer, size_t* size, size_t* max) {
  *size = 1 << 20;
  *buffer = static_cast<uint8_t*>(aligned_alloc(8, *size));
  *max = 0;
}

long g_records = 0;
void CUPTIAPI completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* r = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS) ++g_records;
  free(buffer);
}

// GPU ms for n spins of `cycles`, launched back to back.
float timed(int n, long long cycles) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  spin<<<1, 1>>>(cycles * 50);  // the host gets ahead before the timed run starts
  cudaEventRecord(a);
  for (int i = 0; i < n; ++i) spin<<<1, 1>>>(cycles);
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  const int mode = argc > 1 ? std::atoi(argv[1]) : 0;
  cudaFree(nullptr);  // the context exists first, as in most programs steptrace joins
  if (mode > 0) {
    cuptiActivityRegisterCallbacks(requested, completed);
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  }
  if (mode == 2) {
    for (auto k : {CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
                   CUPTI_ACTIVITY_KIND_MEMORY2}) {
      cuptiActivityEnable(k);
    }
    probe::only_launches();
  }
  int khz = 0;
  cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0);
  const int n = 10000;
  std::printf("probe device cost: mode %d (clock %d MHz):", mode, khz / 1000);
  for (double us : {15.0, 40.0}) {
    const long long cycles = static_cast<long long>(us * khz / 1000.0);
    timed(200, cycles);  // warm-up
    float best = 1e30f;
    for (int round = 0; round < 3; ++round) best = std::min(best, timed(n, cycles));
    std::printf("  %.0f us spins: %.4f us a kernel", us, 1000.0 * best / n);
  }
  if (mode > 0) cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::printf("; records %ld\n", g_records);
  return 0;
}
