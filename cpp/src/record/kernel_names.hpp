// Internal (not public API): kernel names from CUPTI records, interned once per process so a
// device record carries a 4-byte id instead of a string (cpp/src/analysis/README.md, "Kernels and ops").
//
// Usage:
//   bool collective = false;
//   std::uint32_t id = intern_kernel_name(record.name, collective);  // CUPTI's buffer thread, off the hot path
//   std::string name = kernel_name(id);                  // the collector, when it adds up kernels
//
// CUPTI hands the same pointer for every record of one kernel, so a name is hashed once; ids are
// bounded (max_kernel_names), the names past the bound share one id, "(other kernels)". Whether a
// name is a collective's (record/collective_kernels.hpp) is found once with it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace steptrace::detail {

inline constexpr std::uint32_t unnamed_kernel = 0;  // a record with no name (not a kernel, or none given)
inline constexpr std::size_t max_kernel_names = 8192;

// `collective`: whether the kernel moves data between GPUs (is_collective_kernel of its name).
std::uint32_t intern_kernel_name(const char* name, bool& collective);
inline std::uint32_t intern_kernel_name(const char* name) {
  bool collective = false;
  return intern_kernel_name(name, collective);
}
std::string kernel_name(std::uint32_t id);  // "" for unnamed_kernel or an unknown id
std::size_t kernel_names_interned();        // distinct names with their own id so far

}  // namespace steptrace::detail
