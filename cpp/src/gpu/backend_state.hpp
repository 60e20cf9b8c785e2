// Internal to gpu/: the function tables the backend loaded, for the files that call them.
#pragma once

#include "gpu/driver_api.hpp"

namespace steptrace::detail {

// The driver as loaded by start_gpu_backend; an empty table before it, or without a driver.
const cuda_driver& loaded_driver() noexcept;
// CUPTI as loaded by start_gpu_backend; nullptr before it, or without CUPTI.
const cupti_functions* loaded_cupti() noexcept;

}  // namespace steptrace::detail
