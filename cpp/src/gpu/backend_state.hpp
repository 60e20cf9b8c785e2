// Internal to gpu/: the function tables the backend loaded, for the files that call them.
#pragma once

#include "gpu/driver_api.hpp"

namespace steptrace::detail {

// The driver as loaded by start_gpu_backend; an empty table before it, or without a driver.
const cuda_driver& loaded_driver() noexcept;

}  // namespace steptrace::detail
