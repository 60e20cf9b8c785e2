// Internal (not public API): the process's resident memory, as the kernel counts it.
#pragma once

#include <cstdint>

namespace steptrace::detail {

// Resident set size of this process in bytes (/proc/self/statm); 0 when it cannot be read.
std::uint64_t resident_bytes() noexcept;

}  // namespace steptrace::detail
