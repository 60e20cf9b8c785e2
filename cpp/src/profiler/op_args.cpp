#include "profiler/op_args.hpp"

#include <cstdint>
#include <vector>

#include "profiler/trace_events.hpp"

namespace steptrace::detail {
namespace {

// One input's dims: [2, 3] a tensor, [] a scalar, [[2, 3], [4]] a list of tensors.
void read_shape(json_scanner& json, op_inputs& in) {
  std::vector<std::int64_t>& shape = in.next_shape();
  if (json.peek() != json_scanner::kind::array) return json.skip_value();
  json.enter_array();
  while (json.next_element()) {
    std::string_view text;
    bool was_string = false;
    std::uint64_t v = 0;
    if (json.peek() != json_scanner::kind::number) {  // a list's shapes: not kept
      json.skip_value();
      in.tensor_list[in.count - 1] = true;
    } else if (json.read_scalar(text, was_string) && parse_uint_text(text, v) && v < (std::uint64_t{1} << 62)) {
      shape.push_back(static_cast<std::int64_t>(v));
    } else {
      in.tensor_list[in.count - 1] = true;  // not a shape: the input is not costed
    }
  }
}

}  // namespace

bool read_op_arg(json_scanner& json, std::string_view key, op_inputs& in) {
  const bool dims = key == "Input Dims", types = key == "Input type", concrete = key == "Concrete Inputs";
  if (key == "flops") {
    std::string_view text;
    bool was_string = false;
    std::uint64_t v = 0;
    if (json.read_scalar(text, was_string) && !was_string && parse_uint_text(text, v))
      in.flops_arg = static_cast<double>(v);
    return true;
  }
  if (!dims && !types && !concrete) return false;
  if (json.peek() != json_scanner::kind::array) {
    json.skip_value();
    return true;
  }
  json.enter_array();
  while (json.next_element()) {
    if (dims) {
      read_shape(json, in);
    } else {
      std::string_view text;
      bool was_string = false;
      if (!json.read_scalar(text, was_string)) text = {};
      (types ? in.types : in.concrete).emplace_back(text);
    }
  }
  return true;
}

}  // namespace steptrace::detail
