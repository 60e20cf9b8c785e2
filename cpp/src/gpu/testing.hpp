// Internal, for tests only: run the backend on fake CUDA and CUPTI function tables.
#pragma once

#include "gpu/driver_api.hpp"

namespace steptrace::detail {

// Forgets the process-wide backend and starts the next one on these tables instead of the real
// libraries (cupti: nullptr for none), with a fresh record store. No tracer may be alive.
void use_gpu_tables_for_testing(const cuda_driver& driver, const cupti_functions* cupti);
// Back to the real libraries, loaded at the next start.
void use_real_gpu_for_testing();

}  // namespace steptrace::detail
