// Internal (not public API): where a file steptrace writes may go, decided before anything is
// written (cpp/src/core/README.md, "Writes"). An output path is often in a folder other users can
// write (the system's temporary folder, a team's run folder), where they can plant a symbolic
// link or a file of their own at it. So:
//   - a symbolic link is followed only when it is yours or root's (`/dev/stdout`) and it does not
//     sit in a world-writable folder without the sticky bit (where anyone could swap it);
//     each link of a chain is held to this, and so is each folder on the way that is a link;
//   - a file, FIFO or device already at the path, in a world-writable folder, is replaced or
//     written only when it is yours or the folder owner's (the kernel's protected_regular rule)
//     and, a regular file, has no other hard link (an append would reach the file linked to).
// Anything else is refused, with why, and nothing is written.
#pragma once

#include <sys/stat.h>

#include <string>
#include <system_error>

namespace steptrace::detail {

// A write refused for the path's own sake (a planted link or file): EPERM, and `reason()` says
// why in words a user can act on. what() is "PATH: REASON" (no "Operation not permitted").
class refused_output : public std::system_error {
 public:
  refused_output(const std::string& path, std::string reason);
  const std::string& reason() const noexcept { return reason_; }
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  std::string reason_, what_;
};

struct output_target {
  std::string path;       // where the file is (the end of the chain of links): its folder gets the temporary
  bool exists = false;    // `info` holds what is at `path`
  bool in_place = false;  // not a regular file (a FIFO, a device, /dev/stdout): written through `given` as it is
  struct stat info {};
};

// Resolves `given` under the rules above. Throws refused_output, or std::system_error (ELOOP
// past 40 links, EISDIR for a folder).
output_target resolve_output(const std::string& given);

// Why the symbolic link at `path` (lstat `link`) must not be followed; empty when it may be.
std::string untrusted_link(const std::string& path, const struct stat& link);

// Each folder on the way to `path` that is a symbolic link is held to the same rule as a link at
// the path itself (`/tmp/runs` planted as a link to another user's folder). Throws refused_output
// naming `given`.
void check_folders(const std::string& given, const std::string& path);

// The folder holding `path` ("." for a bare name).
std::string folder_of(const std::string& path);

}  // namespace steptrace::detail
