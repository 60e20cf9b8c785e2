// steptrace/output.hpp — how steptrace writes: numbers and text as it prints them, files written
// whole, lines appended whole.
//
//   steptrace::write_file("run.json", s.json());             // whole or not at all
//   steptrace::append_line("live.jsonl", line + "\n");       // a whole line, or none
//   std::cout << steptrace::printable_text(name);            // no escape sequence reaches a terminal
//
// Every output path is held to one rule (docs/architecture.md, "Writes"): a symbolic link or file
// another user may have planted at it is refused; a link of yours is followed.
#pragma once

#include <string>
#include <string_view>

#include "steptrace/export.hpp"

namespace steptrace {

// Milliseconds as steptrace prints them everywhere (table, diagnosis, reports): about four
// significant figures and never an exponent ("0.412", "16.52", "1630").
STEPTRACE_API std::string format_ms(double ms);

// Text as steptrace echoes it everywhere (messages, tables, values read from files or the
// environment): control characters and bytes outside UTF-8 escaped (`\t`, `\n`, `\xHH`), so no
// value reaches a terminal as an escape sequence. A backslash stays as it is.
STEPTRACE_API std::string printable_text(std::string_view text);

// Writes `text` to `path` whole or not at all, as steptrace writes its own files: a short
// temporary beside it (`.steptrace-PID-N.tmp`), renamed over it; temporaries left in that folder
// by processes that no longer exist are removed first. A file replaced keeps its mode. A symbolic
// link or file at `path` that another user may have planted (not yours or root's, in a folder
// others can write) is refused with EPERM, what() saying why. Throws std::system_error (the
// errno; what() is "PATH: why"), having left nothing behind; a NUL in the path gets EINVAL.
STEPTRACE_API void write_file(const std::string& path, std::string_view text);

// Appends `line` (its newline included) to `path`, created if missing, whole or not at all, as
// steptrace appends its JSON lines: the path held to write_file's rules (a link of yours is
// followed, one another user may have planted is refused with EPERM). Throws as write_file does.
STEPTRACE_API void append_line(const std::string& path, std::string_view line);

}  // namespace steptrace
