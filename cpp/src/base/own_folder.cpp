// The folder steptrace writes its reports into, checked once and held open (base/own_folder.hpp).
#include "base/own_folder.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <system_error>

#include "base/output_path.hpp"
#include "base/whole_file.hpp"

namespace steptrace::detail {
namespace {

constexpr int max_names = 1000;  // write_new's `-2` ... tried

std::string joined(const std::string& folder, const std::string& name) {
  return folder == "/" ? "/" + name : folder + "/" + name;
}

}  // namespace

own_folder::own_folder(const std::string& given) : path_(given.empty() ? "." : given) {
  if (path_.find('\0') != std::string::npos)
    throw std::system_error(EINVAL, std::generic_category(), "a folder holding a NUL byte");
  while (path_.size() > 1 && path_.back() == '/') path_.pop_back();
  if (::mkdir(path_.c_str(), 0777) != 0 && errno != EEXIST) {  // one level, as the other path options
    throw std::system_error(errno, std::generic_category(), "could not make " + path_);
  }
  struct stat link {};
  if (::lstat(path_.c_str(), &link) == 0 && S_ISLNK(link.st_mode)) {
    if (std::string why = untrusted_link(path_, link); !why.empty()) throw refused_output(path_, why);
  }
  check_folders(path_, path_);  // each folder on the way that is a link
  fd_ = ::open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_ < 0) throw std::system_error(errno, std::generic_category(), path_);
  struct stat at {};
  std::string why;
  if (::fstat(fd_, &at) != 0) {
    why = "cannot be read";
  } else if (at.st_uid != ::geteuid()) {
    why = "belongs to another user (uid " + std::to_string(at.st_uid) +
          "): steptrace writes its reports only into a folder of its own user's; set capture_dir to one";
  } else if ((at.st_mode & S_IWOTH) != 0 && (at.st_mode & S_ISVTX) == 0) {
    why =
        "can be changed by anyone (world-writable, no sticky bit): not written into; chmod o-w it, or set "
        "capture_dir to another";
  }
  if (!why.empty()) {
    ::close(fd_);
    fd_ = -1;
    throw refused_output(path_, why);
  }
}

own_folder::~own_folder() {
  if (fd_ >= 0) ::close(fd_);
}

std::string own_folder::write(const std::string& name, std::string_view text) const {
  const std::string path = joined(path_, name);
  write_whole_at(fd_, path, name, text, true);
  return path;
}

std::string own_folder::write_new(const std::string& stem, const std::string& suffix,
                                  const std::function<std::string(const std::string& path)>& text) const {
  for (int n = 1; n <= max_names; ++n) {
    const std::string name = stem + (n == 1 ? "" : "-" + std::to_string(n)) + suffix;
    struct stat at {};
    if (::fstatat(fd_, name.c_str(), &at, AT_SYMLINK_NOFOLLOW) == 0) continue;  // taken: the next name
    const std::string path = joined(path_, name);
    if (write_whole_at(fd_, path, name, text(path), false)) return path;  // else taken meanwhile
  }
  throw std::system_error(EEXIST, std::generic_category(),
                          joined(path_, stem + "-" + std::to_string(max_names) + suffix));
}

std::string safe_name(std::string name) {
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  }
  // a name that starts with `-` or `.` reads as an option to the next command given it, or hides
  name.erase(0, name.find_first_not_of("-."));
  return name.empty() ? "run" : name;
}

}  // namespace steptrace::detail
