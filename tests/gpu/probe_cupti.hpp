// What the GPU probes of tests/gpu share: the launch calls' CUPTI ids, and the two ways of asking
// for their records (probe_launch_records.cu tried each way round on 11-28).
#pragma once
#include <cupti.h>

namespace probe {

inline const CUpti_CallbackId runtime_launches[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,     CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
    CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000,  CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000};
inline const CUpti_CallbackId driver_launches[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz};

// The launch calls chosen by id alone; returns how many ids CUPTI refused.
inline int choose_launches() {
  int refused = 0;
  for (auto id : runtime_launches) refused += cuptiActivityEnableRuntimeApi(id, 1) != CUPTI_SUCCESS;
  for (auto id : driver_launches) refused += cuptiActivityEnableDriverApi(id, 1) != CUPTI_SUCCESS;
  return refused;
}

// Both API kinds on, then every call off but the launches (steptrace's way since 11-28).
inline int only_launches() {
  int refused = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME) != CUPTI_SUCCESS;
  refused += cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER) != CUPTI_SUCCESS;
  for (unsigned id = 1; id < CUPTI_RUNTIME_TRACE_CBID_SIZE; ++id) cuptiActivityEnableRuntimeApi(id, 0);
  for (unsigned id = 1; id < CUPTI_DRIVER_TRACE_CBID_SIZE; ++id) cuptiActivityEnableDriverApi(id, 0);
  return refused + choose_launches();
}

}  // namespace probe
