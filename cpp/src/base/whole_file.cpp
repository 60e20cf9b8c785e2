#include "base/whole_file.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <system_error>

#include "base/output_path.hpp"
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

int remove_stale_temporaries_at(int folder) noexcept {
  const int copy = ::fcntl(folder, F_DUPFD_CLOEXEC, 0);  // fdopendir takes the descriptor it is given
  DIR* dir = copy < 0 ? nullptr : ::fdopendir(copy);
  if (dir == nullptr) {
    if (copy >= 0) ::close(copy);
    return 0;
  }
  ::rewinddir(dir);
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

int remove_stale_temporaries(const std::string& folder) noexcept {
  const int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return 0;
  const int removed = remove_stale_temporaries_at(dir);
  ::close(dir);
  return removed;
}

bool write_whole_at(int folder, const std::string& shown, const std::string& name, std::string_view text,
                    bool replace) {
  if (name.empty() || name.find('/') != std::string::npos || name.find('\0') != std::string::npos) {
    fail(EINVAL, shown);
  }
  remove_stale_temporaries_at(folder);
  // The name's number is random, so nobody can plant it in advance; one taken all the same is passed over.
  std::random_device random;
  std::string tmp;
  int fd = -1;
  for (int tries = 0; fd < 0 && tries < 100; ++tries) {
    const std::uint64_t n = (std::uint64_t{random()} << 32) | random();
    tmp = std::string(prefix) + std::to_string(::getpid()) + "-" + std::to_string(n) + std::string(suffix);
    fd = ::openat(folder, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) fail(errno, shown);
  struct stat was {};
  if (::fstatat(folder, name.c_str(), &was, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(was.st_mode)) {
    (void)::fchown(fd, was.st_uid, was.st_gid);  // the file replaced keeps its owner (where allowed) and mode
    (void)::fchmod(fd, was.st_mode & 0777);
  }
  const bool written = write_all(fd, text);
  const int write_error = errno;
  if (::close(fd) != 0 || !written) {
    const int code = written ? errno : write_error;
    ::unlinkat(folder, tmp.c_str(), 0);
    fail(code, shown);
  }
  int moved = 0;
  if (replace) {
    moved = ::renameat(folder, tmp.c_str(), folder, name.c_str());  // a link there is replaced, never followed
  } else {
    moved = ::renameat2(folder, tmp.c_str(), folder, name.c_str(), RENAME_NOREPLACE);
    if (moved != 0 && (errno == EINVAL || errno == ENOSYS)) {  // a file system without it: a hard link fails alike
      moved = ::linkat(folder, tmp.c_str(), folder, name.c_str(), 0);
      if (moved == 0) ::unlinkat(folder, tmp.c_str(), 0);
    }
  }
  if (moved != 0) {
    const int code = errno;
    ::unlinkat(folder, tmp.c_str(), 0);
    if (code == EEXIST && !replace) return false;
    fail(code, shown);
  }
  return true;
}

namespace {

// Opens what is at `path` for writing without waiting: a FIFO nobody reads is an error (ENXIO),
// never a program hung at exit; the descriptor then blocks as usual.
int open_now(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0666);
  if (fd >= 0) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

// A target that is not a regular file (a device, a FIFO, /dev/stdout) is written in place: it
// cannot be replaced by a rename, and holds no file to leave half-written.
void write_in_place(const std::string& path, std::string_view text) {
  const int fd = open_now(path, 0);
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
  const output_target target = resolve_output(given);
  if (target.in_place) return write_in_place(given, text);
  const std::string folder = folder_of(target.path);
  const int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) fail(errno, given);
  const std::size_t slash = target.path.rfind('/');
  try {
    write_whole_at(dir, given, slash == std::string::npos ? target.path : target.path.substr(slash + 1), text, true);
  } catch (...) {
    ::close(dir);
    throw;
  }
  ::close(dir);
}

int append_whole_line(const std::string& path, std::string_view line, std::string* why) noexcept {
  const auto failed = [why](int code, std::string reason = {}) {
    if (why != nullptr) *why = reason.empty() ? std::strerror(code) : std::move(reason);
    return code;
  };
  if (path.find('\0') != std::string::npos) return failed(EINVAL);
  int fd = -1;
  try {
    const output_target target = resolve_output(path);
    fd = target.in_place ? open_now(path, O_APPEND) : open_now(target.path, O_APPEND | O_CREAT | O_NOFOLLOW);
  } catch (const refused_output& e) {
    return failed(EPERM, e.reason());
  } catch (const std::system_error& e) {
    return failed(e.code().value());
  } catch (...) {
    return failed(ENOMEM);
  }
  if (fd < 0) return failed(errno);
  const off_t before = ::lseek(fd, 0, SEEK_END);
  int code = 0;
  if (!write_all(fd, line)) {
    code = errno;
    if (before >= 0) (void)::ftruncate(fd, before);  // a regular file: back to whole lines
  }
  ::close(fd);
  return code == 0 ? 0 : failed(code);
}

}  // namespace steptrace::detail
