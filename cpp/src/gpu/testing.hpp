// Internal, for tests only: run the backend on fake CUDA and CUPTI function tables.
#pragma once

#include <cstdint>

#include "gpu/driver_api.hpp"

namespace steptrace::detail {

// Forgets the process-wide backend and starts the next one on these tables instead of the real
// libraries (cupti: nullptr for none), with a fresh record store. No tracer may be alive.
void use_gpu_tables_for_testing(const cuda_driver& driver, const cupti_functions* cupti);
// device_sample's windows told by the test alone (until the next use_gpu_tables_for_testing): the
// collectors' ticks move nothing; sample_device_at is a tick with the window given (its slot) and
// the host time now (ns).
void sample_slots_for_testing() noexcept;
void sample_device_at(std::int64_t slot, std::uint64_t now_ns) noexcept;
// Back to the real libraries, loaded at the next start.
void use_real_gpu_for_testing();

}  // namespace steptrace::detail
