// Internal (not public API): CUPTI activity records -> device_record. Separate from CUPTI's
// buffers and callbacks so it is tested on hand-made records without a GPU.
#pragma once

#include <cupti_activity.h>

#include "gpu/device_record.hpp"

namespace steptrace::detail {

enum class decoded { ok, incomplete, ignored };

// `incomplete`: a record flushed before the device finished it (zero or reversed timestamps);
// it is counted, never read as a real interval. `ignored`: a kind steptrace does not use.
decoded decode(const CUpti_Activity& activity, device_record& out) noexcept;

}  // namespace steptrace::detail
