// Internal (not public API): the device's time added up by kernel name, by the host op that
// launched each kernel and by kind, in bounded memory, then summary::gpu->kernels
// (cpp/src/analysis/README.md, "Kernels and ops").
// - kind, from the name: collective (record/collective_kernels.hpp), else the first match in
//   kernel_kinds (kernel_table.cpp): attention, convolution, gemm, reduction, elementwise, else
//   other; copies and memsets are their own kinds;
// - tensor cores: a name that says so (tensorop, xmma, wgmma, hmma, imma, h884, s1688, ...), or
//   says the opposite (sgemm, scudnn, ...); the share is of the GEMM time whose name tells;
// - at most max_names distinct kernel names and max_ops ops are kept; the rest fold into one
//   row each, "(other kernels)" / "(other ops)", and are counted.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "steptrace/summary.hpp"

namespace steptrace::detail {

std::string_view kernel_kind(std::string_view name);
bool on_tensor_cores(std::string_view name);
// A name that says the kernel runs without them (fp32/fp64 SIMT: sgemm, dgemm, scudnn, ...).
bool off_tensor_cores(std::string_view name);
// "void at::native::(anonymous namespace)::f<float, 4>(int, float*)" -> "at::native::f<float, 4>":
// no return type, no parameters, no anonymous namespaces, template arguments cut past `width`.
std::string short_kernel_name(std::string_view name, std::size_t width = 60);
// A name cut to `width` bytes (on a UTF-8 character's start) and "…", its text as given otherwise:
// an op's or phase's, parentheses and all ("dispatch(F)" and "dispatch(B)" stay apart), or a
// kernel's already shortened that has no template arguments to cut (ROCm's Tensile names).
std::string clip_name(std::string_view name, std::size_t width = 40);

// steptrace's own rows, named in parentheses ("(other ops)", "(no op)", "(launch not seen)",
// "(launched outside the step's phases)"): catch-alls, never an op or a phase to advise on.
inline bool catch_all_row(std::string_view name) {
  return name.size() >= 2 && name.front() == '(' && name.back() == ')';
}

class kernel_table {
 public:
  static constexpr std::size_t max_names = 4096;
  static constexpr std::size_t max_ops = 4096;
  static constexpr const char* folded_kernels = "(other kernels)";
  static constexpr const char* folded_ops = "(other ops)";

  // A kernel of `ns` launched inside `op` ("" when no op was open around the launch); a
  // collective's `exposed_ns`: the part no other kernel overlapped.
  void add_kernel(std::string_view name, std::string_view op, std::uint64_t ns, std::uint64_t exposed_ns = 0);
  // n calls of one kernel in one op at once (one lookup of each): `durations` in ns.
  void add_kernels(std::string_view name, std::string_view op, const std::uint64_t* durations, std::size_t n);
  // A copy or a memset: its kind's time only.
  void add_transfer(bool memset, std::uint64_t ns);
  void merge(const kernel_table& other);
  bool empty() const noexcept { return total_ns_ == 0; }
  // Per-step figures over `steps` counted steps.
  kernel_stats stats(std::uint64_t steps) const;

 private:
  // A call's duration on a log scale, 8 buckets a power of two (within 9%), 1 ns to 2^40 ns.
  static constexpr std::size_t duration_buckets = 320;
  // The calls counted by bucket, from the lowest bucket seen to the highest: a kernel's calls
  // span a few buckets, so a name costs tens of bytes, not a full 320-bucket array (1.3 KB).
  class duration_counts {
   public:
    void add(std::size_t bucket, std::uint64_t calls);
    void merge(const duration_counts& other);
    // The bucket holding the middle one of `calls` calls.
    std::size_t median_bucket(std::uint64_t calls) const;

   private:
    std::uint32_t first_ = 0;
    std::vector<std::uint64_t> counts_;  // counts_[i]: calls in bucket first_ + i
  };
  struct kernel_entry {
    std::string_view kind;  // from the name, found once (kernel_kinds' strings are static)
    bool tensor = false, off = false;
    std::uint64_t calls = 0, ns = 0;
    duration_counts durations;
  };
  struct op_entry {
    std::uint64_t kernels = 0, ns = 0, short_kernels = 0, collective_ns = 0, collective_exposed_ns = 0;
  };
  kernel_entry& entry_for(std::string_view name, std::size_t calls);
  op_entry& entry_for_op(std::string_view op);  // "(no op)" for "", "(other ops)" past max_ops
  static std::size_t duration_bucket(std::uint64_t ns) noexcept;

  std::unordered_map<std::string, kernel_entry> kernels_;
  std::unordered_map<std::string, op_entry> ops_;
  std::unordered_map<std::string, std::uint64_t> kinds_;  // ns by kind
  std::uint64_t total_ns_ = 0, tensor_ns_ = 0, off_ns_ = 0, matrix_ns_ = 0;
  std::uint64_t calls_folded_ = 0;
};

}  // namespace steptrace::detail
