#include "base/whole_file.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <system_error>

#include "base/quiet_write.hpp"

namespace steptrace::detail {
namespace {

constexpr std::string_view prefix = ".steptrace-", suffix = ".tmp";

[[noreturn]] void fail(int code, const std::string& path) {
  throw std::system_error(code, std::generic_category(), path);
}

// The pid in a temporary's name (`.steptrace-PID-N.tmp`), or 0 when it is not one.
pid_t temporary_pid(std::string_view name) {
  if (name.size() <= prefix.size() + suffix.size() || name.substr(0, prefix.size()) != prefix ||
      name.substr(name.size() - suffix.size()) != suffix) {
    return 0;
  }
  const std::string_view middle = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  const std::size_t dash = middle.find('-');
  if (dash == 0 || dash == std::string_view::npos || dash > 9) return 0;
  pid_t pid = 0;
  for (const char c : middle.substr(0, dash)) {
    if (c < '0' || c > '9') return 0;
    pid = pid * 10 + (c - '0');
  }
  for (const char c : middle.substr(dash + 1)) {
    if (c < '0' || c > '9') return 0;
  }
  return pid;
}

}  // namespace

int remove_stale_temporaries(const std::string& folder) noexcept {
  DIR* dir = ::opendir(folder.c_str());
  if (dir == nullptr) return 0;
  int removed = 0;
  while (const dirent* e = ::readdir(dir)) {
    const pid_t pid = temporary_pid(e->d_name);
    if (pid <= 0 || pid == ::getpid()) continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to judge
    if (::unlinkat(::dirfd(dir), e->d_name, 0) == 0) ++removed;
  }
  ::closedir(dir);
  return removed;
}

namespace {

// A target that is not a regular file (a device, a FIFO, /dev/stdout) is written in place: it
// cannot be replaced by a rename, and holds no file to leave half-written.
void write_in_place(const std::string& path, std::string_view text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) fail(errno, path);
  const bool written = write_all(fd, text);
  const int write_error = errno;
  ::close(fd);
  if (!written) fail(write_error, path);
}

}  // namespace

void write_whole_file(const std::string& given, std::string_view text) {
  if (given.find('\0') != std::string::npos) fail(EINVAL, "a path holding a NUL byte");
  if (given.empty()) fail(ENOENT, given);
  std::string path = given;
  struct stat info;
  if (::lstat(path.c_str(), &info) == 0 && S_ISLNK(info.st_mode)) {  // write where the link points
    if (char* target = ::realpath(path.c_str(), nullptr)) {
      path = target;
      std::free(target);
    }
  }
  if (::stat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode)) {
    if (S_ISDIR(info.st_mode)) fail(EISDIR, given);
    return write_in_place(path, text);
  }
  const std::size_t slash = path.rfind('/');
  const std::string folder = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  remove_stale_temporaries(folder);
  static std::atomic<unsigned> serial{0};
  const std::string tmp = folder + "/" + std::string(prefix) + std::to_string(::getpid()) + "-" +
                          std::to_string(serial.fetch_add(1)) + std::string(suffix);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) fail(errno, given);
  const bool written = write_all(fd, text);
  const int write_error = errno;
  if (::close(fd) != 0 || !written) {
    const int code = written ? errno : write_error;
    ::unlink(tmp.c_str());
    fail(code, given);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int code = errno;
    ::unlink(tmp.c_str());
    fail(code, given);
  }
}

int append_whole_line(const std::string& path, std::string_view line) noexcept {
  if (path.find('\0') != std::string::npos) return EINVAL;
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) return errno;
  const off_t before = ::lseek(fd, 0, SEEK_END);
  int code = 0;
  if (!write_all(fd, line)) {
    code = errno;
    if (before >= 0) (void)::ftruncate(fd, before);  // a regular file: back to whole lines
  }
  ::close(fd);
  return code;
}

}  // namespace steptrace::detail
