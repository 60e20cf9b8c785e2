// Loading libcuda and libcupti at run time (nothing CUDA is linked), into the function tables
// of driver_api.hpp.
#include <dlfcn.h>

#include <cstdlib>

#include "gpu/driver_api.hpp"

namespace steptrace::detail {
namespace {

template <class Fn>
bool resolve(void* lib, const char* name, Fn& fn) {
  fn = reinterpret_cast<Fn>(dlsym(lib, name));
  return fn != nullptr;
}

void* open_loaded(const std::string& soname) { return dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD); }

void* open_anywhere(const std::string& soname, const std::vector<std::string>& dirs) {
  if (void* lib = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL)) return lib;
  for (const std::string& dir : dirs) {
    if (void* lib = dlopen((dir + "/" + soname).c_str(), RTLD_NOW | RTLD_LOCAL)) return lib;
  }
  return nullptr;
}

}  // namespace

bool load_cuda_driver(cuda_driver& d, std::string& why) {
  d = cuda_driver{};
  void* lib = open_loaded("libcuda.so.1");
  if (lib == nullptr) lib = open_anywhere("libcuda.so.1", {});
  if (lib == nullptr) {
    why = "no NVIDIA driver (libcuda.so.1 could not be loaded)";
    return false;
  }
  if (!resolve(lib, "cuInit", d.init) || !resolve(lib, "cuDeviceGetCount", d.device_count)) {
    why = "libcuda.so.1 lacks cuInit or cuDeviceGetCount";
    d = cuda_driver{};
    return false;
  }
  resolve(lib, "cuEventCreate", d.event_create);
  resolve(lib, "cuEventRecord", d.event_record);
  resolve(lib, "cuEventQuery", d.event_query);
  if (!resolve(lib, "cuEventElapsedTime_v2", d.event_elapsed)) resolve(lib, "cuEventElapsedTime", d.event_elapsed);
  resolve(lib, "cuCtxGetCurrent", d.current_context);
  resolve(lib, "cuStreamGetCtx", d.stream_context);
  resolve(lib, "cuCtxPushCurrent_v2", d.push_context);
  resolve(lib, "cuCtxPopCurrent_v2", d.pop_context);
  resolve(lib, "cuStreamIsCapturing", d.stream_capturing);
  resolve(lib, "cuThreadExchangeStreamCaptureMode", d.exchange_capture_mode);
  return true;
}

bool load_cupti(cupti_functions& c, const std::vector<std::string>& extra_dirs, std::string& loaded, std::string& why) {
  c = cupti_functions{};
  // The record layouts steptrace reads are the same in CUPTI 12 and 13 (gpu/cupti_records.hpp),
  // so either will do; the one already in the process (PyTorch's) comes first.
  const std::vector<std::string> sonames = {"libcupti.so.13", "libcupti.so.12"};
  auto first_of = [&](auto open) -> void* {  // the first soname `open` finds, named in `loaded`
    for (const std::string& soname : sonames) {
      if (void* lib = open(soname)) {
        loaded = soname;
        return lib;
      }
    }
    return nullptr;
  };
  void* lib = first_of(open_loaded);
  if (lib == nullptr) {
    std::vector<std::string> dirs = extra_dirs;
    for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
      if (const char* root = std::getenv(var)) {
        dirs.push_back(std::string(root) + "/extras/CUPTI/lib64");
        dirs.push_back(std::string(root) + "/lib64");
      }
    }
    dirs.push_back("/usr/local/cuda/extras/CUPTI/lib64");
    dirs.push_back("/usr/local/cuda/lib64");
    lib = first_of([&](const std::string& soname) { return open_anywhere(soname, dirs); });
  }
  if (lib == nullptr) {
    why = "libcupti (12 or 13) was not found";
    return false;
  }
  resolve(lib, "cuptiActivityEnable", c.enable);
  resolve(lib, "cuptiActivityDisable", c.disable);
  resolve(lib, "cuptiActivityRegisterCallbacks", c.register_callbacks);
  resolve(lib, "cuptiActivityRegisterTimestampCallback", c.register_timestamp);
  resolve(lib, "cuptiActivityFlushAll", c.flush_all);
  resolve(lib, "cuptiActivityFlushPeriod", c.flush_period);
  resolve(lib, "cuptiActivityGetNextRecord", c.next_record);
  resolve(lib, "cuptiActivityGetNumDroppedRecords", c.dropped_records);
  resolve(lib, "cuptiGetResultString", c.result_string);
  resolve(lib, "cuptiGetContextId", c.context_id);
  resolve(lib, "cuptiGetStreamIdEx", c.stream_id);
  resolve(lib, "cuptiActivityEnableRuntimeApi", c.enable_runtime_api);
  resolve(lib, "cuptiActivityEnableDriverApi", c.enable_driver_api);
  if (!c.complete()) {
    why = loaded + " lacks the functions steptrace needs";
    c = cupti_functions{};
    return false;
  }
  return true;
}

}  // namespace steptrace::detail
