// Internal (not public API): a costed op's recorded inputs read from its args, as the event reader
// meets them (profiler/trace_events.cpp; the costing: profiler/op_cost.hpp).
#pragma once

#include <string_view>

#include "profiler/bytes/json_scanner.hpp"
#include "profiler/op_cost.hpp"

namespace steptrace::detail {

// The value of `key` when it is "Input Dims", "Input type", "Concrete Inputs" or "flops", read
// into `in` (true); any other key is left unread (false).
bool read_op_arg(json_scanner& json, std::string_view key, op_inputs& in);

}  // namespace steptrace::detail
