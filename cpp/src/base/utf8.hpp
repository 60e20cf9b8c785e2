// Internal (not public API): text that always renders.
#pragma once

#include <string>
#include <string_view>

namespace steptrace::detail {

// `text` with every byte that is not part of a valid UTF-8 sequence, and every control
// character (C0, DEL, C1), replaced by U+FFFD. Valid text comes back unchanged.
std::string printable_utf8(std::string_view text);

// `text` made printable without losing what set it apart: a backslash becomes `\\`, a tab, newline
// and carriage return `\t` `\n` `\r`, and every other control character or byte outside valid
// UTF-8 `\xHH` (each byte). Different texts always give different results.
std::string escaped_utf8(std::string_view text);

// The same escapes for control characters and bytes outside UTF-8, but a backslash stays as it
// is: for text read back from a file, whose labels were escaped when recorded (a recorded label
// comes back unchanged; a crafted one cannot reach a terminal as an escape sequence).
std::string escaped_controls(std::string_view text);

// Where `text` stops being valid UTF-8 (a byte offset), or npos when it is valid throughout.
std::size_t first_invalid_utf8(std::string_view text);

}  // namespace steptrace::detail
