// Internal (not public API): the libcuda and libcupti functions steptrace calls, as tables of
// function pointers. gpu/loader.cpp fills them with dlsym; the tests fill them with fakes, so
// everything above this file runs without a GPU.
#pragma once

#include <cuda.h>
#include <cupti.h>

#include <string>
#include <vector>

namespace steptrace::detail {

struct cuda_driver {
  CUresult (*init)(unsigned) = nullptr;
  CUresult (*device_count)(int*) = nullptr;
  CUresult (*event_create)(CUevent*, unsigned) = nullptr;
  CUresult (*event_record)(CUevent, CUstream) = nullptr;
  CUresult (*event_query)(CUevent) = nullptr;
  CUresult (*event_elapsed)(float*, CUevent, CUevent) = nullptr;
  CUresult (*current_context)(CUcontext*) = nullptr;
  CUresult (*stream_context)(CUstream, CUcontext*) = nullptr;  // optional: events for a thread with no current context
  CUresult (*push_context)(CUcontext) = nullptr;
  CUresult (*pop_context)(CUcontext*) = nullptr;
  CUresult (*stream_capturing)(CUstream, CUstreamCaptureStatus*) = nullptr;
  CUresult (*exchange_capture_mode)(CUstreamCaptureMode*) = nullptr;

  // Everything CUDA event timing needs (the optional ones may be missing).
  bool has_events() const noexcept {
    return event_create && event_record && event_query && event_elapsed && current_context && stream_capturing &&
           exchange_capture_mode;
  }
};

struct cupti_functions {
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityDisable) disable = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityRegisterTimestampCallback) register_timestamp = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityFlushPeriod) flush_period = nullptr;  // optional
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) dropped_records = nullptr;  // optional
  decltype(&cuptiGetResultString) result_string = nullptr;
  decltype(&cuptiGetContextId) context_id = nullptr;  // optional: steps' own streams (gpu/stream_ids.hpp)
  decltype(&cuptiGetStreamIdEx) stream_id = nullptr;  // optional: likewise
  // Optional (CUPTI 12.6 and later have them): records of chosen API calls only (gpu/activity.cpp).
  decltype(&cuptiActivityEnableRuntimeApi) enable_runtime_api = nullptr;
  decltype(&cuptiActivityEnableDriverApi) enable_driver_api = nullptr;

  bool complete() const noexcept {
    return enable && disable && register_callbacks && register_timestamp && flush_all && next_record && result_string;
  }
};

// The default streams' handles name the current context's stream, not one of their own.
inline bool is_default_stream(CUstream s) noexcept {
  return s == nullptr || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD;
}

// The context `stream` belongs to: its own, or the current one for a default-stream handle;
// nullptr when there is none (yet).
inline CUcontext context_of(const cuda_driver& d, CUstream stream) noexcept {
  CUcontext c = nullptr;
  if (is_default_stream(stream) || d.stream_context == nullptr || d.stream_context(stream, &c) != CUDA_SUCCESS) {
    if (d.current_context == nullptr || d.current_context(&c) != CUDA_SUCCESS) return nullptr;
  }
  return c;
}

// Loads libcuda.so.1. False, with the reason in `why`, when there is no usable driver.
bool load_cuda_driver(cuda_driver& out, std::string& why);
// Loads the libcupti the process already has (PyTorch's, 12 or 13), else the first found in
// `dirs` and the usual places. `loaded` names the library; false, with the reason in `why`.
bool load_cupti(cupti_functions& out, const std::vector<std::string>& dirs, std::string& loaded, std::string& why);

}  // namespace steptrace::detail
