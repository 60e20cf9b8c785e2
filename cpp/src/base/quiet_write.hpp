// Internal (not public API): writes that never stop the program. A reader that has gone (a
// closed pipe, `prog 2>&1 | head -1`) makes write() raise SIGPIPE, whose default action kills
// the process: steptrace's writes block it on the writing thread, swallow the one they raised,
// and stop writing to that descriptor from then on, quietly.
#pragma once

#include <string_view>

namespace steptrace::detail {

// All of `text` to `fd` (EINTR and short writes retried). False, with errno saying why, when it
// could not be written;
// after EPIPE on stderr every later stderr write returns false at once.
bool write_all(int fd, std::string_view text) noexcept;
inline bool write_stderr(std::string_view text) noexcept { return write_all(2, text); }

}  // namespace steptrace::detail
