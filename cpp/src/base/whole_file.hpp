// Internal (not public API): files steptrace writes (the summary JSON, the trace, the HTML
// report) are whole or absent, and the lines it appends (JSON lines) whole or absent. The text goes to a temporary file
// beside the target, named
// `.steptrace-PID-N.tmp`, N random (short whatever the target's name), which is then renamed over it. A
// process killed meanwhile leaves its temporary behind: the next write into that folder, from
// any process, removes the temporaries of processes that no longer exist.
#pragma once

#include <string>
#include <string_view>

namespace steptrace::detail {

// Writes `text` to `path` whole or not at all. Throws std::system_error (the errno, and the path
// in what()) when it cannot, having left nothing behind; a path holding a NUL byte is refused
// the same way (EINVAL). A link or file planted by another user is refused (refused_output, in
// base/output_path.hpp); a link of yours is written through; a target that is no regular file
// (a device, a FIFO, /dev/stdout) is written in place, as it cannot be replaced, and a FIFO
// nobody reads is an error, not a wait. A file replaced keeps its mode (and owner, where allowed).
void write_whole_file(const std::string& path, std::string_view text);

// Appends `line` to `path` (created if missing) whole or not at all: a write cut short (a full
// disk) is truncated away, so the file stays whole lines. 0, or the errno of what failed, with
// `why` (when given) set to words saying it (a planted link: EPERM and the reason). Never raises
// SIGPIPE (a FIFO whose reader left). The path is held to the same rules as write_whole_file.
int append_whole_line(const std::string& path, std::string_view line, std::string* why = nullptr) noexcept;

// Writes `text` as `name` (no slash) in the folder open at descriptor `folder`, whole or not at
// all, the same way; `shown` names it in errors. `replace`: whatever is at `name` is replaced (a
// link too, never followed); else a name already taken is left as it is and false returned.
bool write_whole_at(int folder, const std::string& shown, const std::string& name, std::string_view text, bool replace);

// Removes, in `folder`, the temporaries of write_whole_file whose process is gone. How many.
int remove_stale_temporaries(const std::string& folder) noexcept;
int remove_stale_temporaries_at(int folder) noexcept;  // the same in the folder open at a descriptor

}  // namespace steptrace::detail
