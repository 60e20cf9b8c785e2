// Internal (not public API): text that always renders.
#pragma once

#include <string>
#include <string_view>

namespace steptrace::detail {

// `text` with every byte that is not part of a valid UTF-8 sequence, and every control
// character (C0, DEL, C1), replaced by U+FFFD. Valid text comes back unchanged.
std::string printable_utf8(std::string_view text);

}  // namespace steptrace::detail
