// Internal (not public API): the CUPTI activity record structs steptrace reads, for the CUPTI
// headers it is built against (CUDA 12.6 to 13.x).
//
// A libcupti of either major version may be loaded at run time (the one the process already
// has: PyTorch cu12 or cu13), whatever headers the build saw. That is safe because every field
// read here sits at the same offset in all of them; the static_asserts below hold the build to
// it, so headers that move a field fail to compile instead of decoding garbage.
#pragma once

#include <cupti_activity.h>
#include <cupti_version.h>

#include <cstddef>

namespace steptrace::detail::cupti_records {

// CUPTI_API_VERSION: 24 in CUDA 12.6, 26 in 12.8, 28 in 12.9, 130001 in 13.0.
#if CUPTI_API_VERSION >= 130000
using kernel = CUpti_ActivityKernel10;
#else
using kernel = CUpti_ActivityKernel9;
#endif
#if CUPTI_API_VERSION >= 26
using memcpy = CUpti_ActivityMemcpy6;
using sync = CUpti_ActivitySynchronization2;
#else
using memcpy = CUpti_ActivityMemcpy5;
using sync = CUpti_ActivitySynchronization;
#endif
using memset = CUpti_ActivityMemset4;
using api = CUpti_ActivityAPI;  // runtime and driver calls alike
using memory = CUpti_ActivityMemory4;

// The layout shared by CUPTI 12.6 to 13.x for the fields steptrace reads (scripts/test builds
// against the 12.6, 12.9 and 13 headers).
static_assert(offsetof(kernel, start) == 16 && offsetof(kernel, end) == 24);
static_assert(offsetof(kernel, deviceId) == 40 && offsetof(kernel, contextId) == 44 &&
              offsetof(kernel, streamId) == 48);
static_assert(offsetof(kernel, name) == 104 && offsetof(kernel, correlationId) == 92);
static_assert(offsetof(api, start) == 8 && offsetof(api, end) == 16 && offsetof(api, correlationId) == 32);
static_assert(offsetof(api, kind) == 0 && offsetof(api, cbid) == 4);
static_assert(offsetof(memcpy, copyKind) == 4 && offsetof(memcpy, srcKind) == 5 && offsetof(memcpy, dstKind) == 6);
static_assert(offsetof(memcpy, bytes) == 8 && offsetof(memcpy, start) == 16 && offsetof(memcpy, end) == 24);
static_assert(offsetof(memcpy, deviceId) == 32 && offsetof(memcpy, contextId) == 36 &&
              offsetof(memcpy, streamId) == 40);
static_assert(offsetof(memset, bytes) == 8 && offsetof(memset, start) == 16 && offsetof(memset, end) == 24);
static_assert(offsetof(memset, deviceId) == 32 && offsetof(memset, contextId) == 36 &&
              offsetof(memset, streamId) == 40);
static_assert(offsetof(memory, memoryOperationType) == 4 && offsetof(memory, memoryKind) == 8);
static_assert(offsetof(memory, bytes) == 24 && offsetof(memory, timestamp) == 32);
static_assert(offsetof(memory, deviceId) == 52 && offsetof(memory, contextId) == 56);
static_assert(offsetof(sync, type) == 4 && offsetof(sync, start) == 8 && offsetof(sync, end) == 16);
static_assert(offsetof(sync, contextId) == 28 && offsetof(sync, streamId) == 32);

}  // namespace steptrace::detail::cupti_records
