// Internal (not public API): the folder steptrace writes its reports into (`capture_dir`: the
// captures, the hang reports, the Flight Recorder's dump), one rule whichever subsystem writes
// (cpp/src/core/README.md, "Writes"). A report can be read by someone else later (an operator
// analysing a hang runs `pickle.load` on the dump it names), so:
//   - the folder is made if missing (one level), and used only when this user owns it and no
//     other user may change it (world-writable without the sticky bit is refused, even one's own);
//   - a link at it, or on its way, is followed only under base/output_path.hpp's rule for links;
//   - it is held open while it is written into, so swapping it for a link once checked moves
//     nothing: every file lands in the folder that was checked, whole (base/whole_file.hpp).
//
//   own_folder dir("steptrace-captures");                // throws refused_output, naming why
//   std::string path = dir.write_new("run-hang-step5", ".txt", text_for);  // "...step5.txt", "...-2.txt"
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace steptrace::detail {

class own_folder {
 public:
  explicit own_folder(const std::string& path);  // throws refused_output, or std::system_error
  ~own_folder();
  own_folder(const own_folder&) = delete;
  own_folder& operator=(const own_folder&) = delete;

  const std::string& path() const noexcept { return path_; }
  int descriptor() const noexcept { return fd_; }

  // `name` (no slash) written whole, replacing what was there; returns the file's path.
  std::string write(const std::string& name, std::string_view text) const;
  // `stem` + `suffix` written whole, or `stem-2` + `suffix` and on when that name is taken (two
  // hangs in one process each keep their report), never replacing a file; `text` is given the
  // path it will have (a report names itself). Returns the file's path.
  std::string write_new(const std::string& stem, const std::string& suffix,
                        const std::function<std::string(const std::string& path)>& text) const;

 private:
  std::string path_;
  int fd_ = -1;
};

// A name as part of a report's file name: letters, digits, `-`, `_` and `.`, the rest `_`, never
// starting with `-` or `.` (`python -c`'s "-c" is "c"); "run" if empty.
std::string safe_name(std::string name);

}  // namespace steptrace::detail
