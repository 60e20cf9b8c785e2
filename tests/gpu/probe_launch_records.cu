// A GPU probe, apart from steptrace: which way of asking CUPTI for the launch calls' records gives
// records, and what each way costs a launch and a plain runtime call. One strategy a process:
//   0  no CUPTI at all (the baseline)
//   1  kernels, and the launch calls chosen by id alone (cuptiActivityEnableRuntimeApi/DriverApi)
//   2  as 1, but chosen after the CUDA context exists
//   3  kernels, the RUNTIME and DRIVER kinds on, then every call id off but the launches
//   4  kernels, the RUNTIME and DRIVER kinds on (every API call recorded)
//   5  as 3, but after the CUDA context exists (as steptrace starts in most programs)
// Prints one line: the strategy, us a launch, us a cudaGetDevice, kernel records, API records,
// and the most frequent API record ids by kind. Build: nvcc -O2 -arch=sm_90 -I<cupti headers>
// probe_launch_records.cu -l:libcupti.so.13 (`scripts/gpu probe-launch`).
#include <cuda_runtime.h>
#include <cupti.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <vector>

#include "probe_cupti.hpp"

namespace {

__global__ void empty() {}

std::map<std::pair<int, unsigned>, long> g_api;  // (kind, cbid) -> records
long g_kernels = 0;

void CUPTIAPI requested(uint8_t** buffer, size_t* size, size_t* max) {
  *size = 8 << 20;
  *buffer = static_cast<uint8_t*>(aligned_alloc(8, *size));
  *max = 0;
}

void CUPTIAPI completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* r = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS) {
    if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) ++g_kernels;
    if (r->kind == CUPTI_ACTIVITY_KIND_RUNTIME || r->kind == CUPTI_ACTIVITY_KIND_DRIVER) {
      const unsigned cbid = reinterpret_cast<CUpti_ActivityAPI*>(r)->cbid;
      ++g_api[{static_cast<int>(r->kind), cbid}];
    }
  }
  free(buffer);
}

double per_call_us(int n, void (*call)()) {
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) call();
  cudaDeviceSynchronize();
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / n;
}

}  // namespace

int main(int argc, char** argv) {
  const int strategy = argc > 1 ? std::atoi(argv[1]) : 0;
  const int n = argc > 2 ? std::atoi(argv[2]) : 20000;
  int refused = 0;
  if (strategy == 2 || strategy == 5) cudaFree(nullptr);
  if (strategy > 0) {
    cuptiActivityRegisterCallbacks(requested, completed);
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  }
  if (strategy == 1 || strategy == 2) refused = probe::choose_launches();
  if (strategy == 4) {
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME);
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER);
  }
  if (strategy == 3 || strategy == 5) refused = probe::only_launches();
  cudaFree(nullptr);
  for (int i = 0; i < 200; ++i) empty<<<1, 1>>>();  // warm-up
  cudaDeviceSynchronize();
  double launch = 1e9, get = 1e9;
  for (int round = 0; round < 3; ++round) {  // the best of three
    launch = std::min(launch, per_call_us(n, [] { empty<<<1, 1>>>(); }));
    get = std::min(get, per_call_us(n, [] {
      int d;
      cudaGetDevice(&d);
    }));
  }
  if (strategy > 0) cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  long api = 0;
  std::vector<std::pair<long, std::pair<int, unsigned>>> top;
  for (auto& [key, count] : g_api) {
    api += count;
    top.push_back({count, key});
  }
  std::sort(top.rbegin(), top.rend());
  std::printf("probe launch records: strategy %d: %.3f us a launch, %.3f us a cudaGetDevice; kernels %ld, API records %ld, refused %d; top ids:",
              strategy, launch, get, g_kernels, api, refused);
  for (std::size_t i = 0; i < top.size() && i < 5; ++i) {
    std::printf(" %s/%u x%ld", top[i].second.first == CUPTI_ACTIVITY_KIND_RUNTIME ? "rt" : "drv", top[i].second.second,
                top[i].first);
  }
  std::printf("\n");
  return 0;
}
