// steptrace/output.hpp — how steptrace writes: numbers and text as it prints them, files written
// whole, lines appended whole.
//
//   steptrace::write_file("run.json", s.json());             // whole or not at all
//   steptrace::append_line("live.jsonl", line + "\n");       // a whole line, or none
//   steptrace::write_report("steptrace-captures", "hang.txt", text);  // only into a folder of yours
//   std::cout << steptrace::printable_text(name);            // no escape sequence reaches a terminal
//
// Every output path is held to one rule (cpp/src/core/README.md, "Writes"): a symbolic link or file
// another user may have planted at it is refused; a link of yours is followed.
#pragma once

#include <cstdint>
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

// `path` with each `{rank}` in it the rank's number: every rank of a job appends its own JSONL
// (`live-{rank}.jsonl`), the core's windows and Python's lines alike.
STEPTRACE_API std::string rank_path(std::string_view path, std::uint32_t rank);

// Writes `text` as `name` into `folder`, as steptrace writes its reports (captures, hang reports):
// the folder made if missing, and used only when it is yours and no other user may change it,
// held open while written so that swapping it for a link moves nothing. `fresh`: never replaces
// a file; a name taken becomes `stem-2.suffix`, and on. Returns the path written. Throws as
// write_file does (a folder refused: EPERM, what() saying why).
STEPTRACE_API std::string write_report(const std::string& folder, const std::string& name, std::string_view text,
                                       bool fresh = false);

// That folder's descriptor, held to the same rule, for a writer that needs a path inside it
// (`/proc/self/fd/N/...`); the caller closes it. Throws as write_report does.
STEPTRACE_API int open_report_folder(const std::string& folder);

}  // namespace steptrace
