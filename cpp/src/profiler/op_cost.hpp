// Internal (not public API): what an op of a trace costs the device, from its recorded shapes
// (torch.profiler's record_shapes: "Input Dims", "Input type", "Concrete Inputs") or its own
// `flops` arg: the FLOPs of the ops that carry them (matmuls, convolutions, attention) by the
// textbook formulas torch's FlopCounterMode uses, and the bytes an op must move (its inputs read
// once, its output written once) where its shapes tell them (cpp/src/analysis/README.md, "The ceiling").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/device_peaks.hpp"

namespace steptrace::detail {

enum class op_kind : std::uint8_t { none, gemm, conv, attention, elementwise, norm };
const char* op_kind_name(op_kind k);

// One op's recorded inputs, as read from its args; kept and reused by the reader (no allocation
// per op once the vectors have grown).
struct op_inputs {
  std::vector<std::vector<std::int64_t>> dims;  // by input: a tensor's shape; empty for a scalar or none
  std::vector<bool> tensor_list;                // by input: a list of tensors (shapes not kept)
  std::vector<std::string> types, concrete;     // "Input type", "Concrete Inputs" by input
  std::size_t count = 0;                        // inputs read into dims (the rest are stale)
  double flops_arg = -1;                        // the op's own `flops` arg; -1: none
  void clear() {
    count = 0;
    types.clear();
    concrete.clear();
    flops_arg = -1;
  }
  // The next input's shape, cleared (reusing its room).
  std::vector<std::int64_t>& next_shape() {
    if (dims.size() == count) dims.emplace_back(), tensor_list.push_back(false);
    dims[count].clear();
    tensor_list[count] = false;
    return dims[count++];
  }
};

struct op_cost {
  double flops = 0;  // multiply-adds count two
  double bytes = 0;  // 0: not known
  dtype_class dtype = dtype_class::unknown;
  op_kind kind = op_kind::none;
};

// Whether the reader should keep an op of this name's inputs (a name cost_of knows).
bool costed_op_name(std::string_view name);
// The op's cost, or kind none when its name or shapes say nothing (an unknown op, a shape that
// does not fit the op, a convolution whose strides were not recorded).
op_cost cost_of(std::string_view name, const op_inputs& in);

// The class of a recorded "Input type" ("float", "c10::BFloat16", "c10::Float8_e4m3fn", ...).
dtype_class dtype_of(std::string_view type);

}  // namespace steptrace::detail
