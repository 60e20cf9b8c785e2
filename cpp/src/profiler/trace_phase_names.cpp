#include "profiler/trace_phase_names.hpp"

#include <stdexcept>

#include "profiler/trace_names.hpp"
#include "steptrace/phase.hpp"

namespace steptrace::detail {

std::uint32_t trace_phase_names::custom(std::string_view name) {
  const auto it = ids_.find(std::string(name));
  if (it != ids_.end()) return it->second;
  if (ids_.size() >= max_custom) {
    ++folded_;
    return none;
  }
  std::uint32_t id = none;
  try {
    id = register_phase(name).value;
  } catch (const std::invalid_argument&) {  // the registry is full: the time stays in its parent
    ++folded_;
  }
  ids_.emplace(std::string(name), id);
  return id;
}

std::uint32_t trace_phase_names::annotated(std::string_view name) {
  const std::string_view phase = name.substr(annotation_prefix.size());
  if (phase == "step") return none;
  if (phase == "input") return builtin::input.value;
  if (phase == "h2d") return builtin::h2d.value;
  if (phase == "compute") return builtin::compute.value;
  if (phase == "wait") return builtin::wait.value;
  return custom(phase);
}

}  // namespace steptrace::detail
