// Internal (not public API): the library's few messages. spdlog stays private to libsteptrace.
#pragma once

#include <string_view>

namespace steptrace::detail {

enum class log_level { trace, debug, info, warn, error, off };

// Throws std::invalid_argument for an unknown level name.
log_level parse_log_level(std::string_view name);
void set_log_level(log_level level);
void log(log_level level, std::string_view message);

}  // namespace steptrace::detail
