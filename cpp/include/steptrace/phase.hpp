// steptrace/phase.hpp — phase names and ids, shared by every layer of the library.
//
//   static const steptrace::phase_id decode = steptrace::register_phase("decode");
//   steptrace::scoped_phase p(tracer, decode);            // the hot call passes the id
//   steptrace::phase_label(decode);                       // "decode"
//
// A name is registered once per process and kept for good, so an id never changes meaning.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "steptrace/export.hpp"

namespace steptrace {

struct phase_id {
  std::uint32_t value;
};

namespace builtin {
inline constexpr phase_id other{0};  // time inside a step but outside every phase
inline constexpr phase_id input{1};
inline constexpr phase_id h2d{2};
inline constexpr phase_id compute{3};
inline constexpr phase_id wait{4};
}  // namespace builtin

// The phase, always opened inside `wait`, of the host blocked in a CPU-backend collective (gloo;
// DDP's all-reduce on CPU): the diagnosis counts it as communication (COMM-BOUND), never a sync.
inline constexpr std::string_view collective_phase = "collective";

// Same name, same id; thread-safe; not for the hot path. Throws std::invalid_argument for an
// empty name or the reserved name "other". Past 4096 distinct names, a new name shares one
// phase labelled "(other names)", and every output says how many did. Any bytes are accepted:
// a label is the name with backslashes, control characters and bytes outside UTF-8 escaped
// (`\\`, `\t`, `\n`, `\xHH`), so tables and JSON always render and different names never
// share a label.
STEPTRACE_API phase_id register_phase(std::string_view name);
// The name as printed (valid UTF-8); "phase#N" for an id never registered.
STEPTRACE_API std::string phase_label(phase_id id);

// The host clock steps and phases are stamped with: "tsc" where the TSC is invariant, else
// "clock_monotonic".
STEPTRACE_API const char* host_clock_name() noexcept;

}  // namespace steptrace
