#include "base/output_path.hpp"

#include <unistd.h>

#include <cerrno>

namespace steptrace::detail {
namespace {

constexpr int max_links = 40;  // as the kernel's own limit on a path's links

[[noreturn]] void fail(int code, const std::string& path) {
  throw std::system_error(code, std::generic_category(), path);
}

bool anyone_may_write(const struct stat& folder) { return (folder.st_mode & S_IWOTH) != 0; }

}  // namespace

std::string untrusted_link(const std::string& path, const struct stat& link) {
  struct stat folder {};
  if (::stat(folder_of(path).c_str(), &folder) == 0 && anyone_may_write(folder) && (folder.st_mode & S_ISVTX) == 0) {
    return "a symbolic link in a folder anyone can change (world-writable, no sticky bit): not written through";
  }
  if (link.st_uid != ::geteuid() && link.st_uid != 0) {
    return "a symbolic link owned by another user (uid " + std::to_string(link.st_uid) +
           "): not written through; remove it, or name the file it points to";
  }
  return {};
}

namespace {

// Why the file at `path` (lstat `file`, no link) must not be replaced or written; empty when it may be.
std::string untrusted_file(const std::string& path, const struct stat& file) {
  struct stat folder {};
  if (::stat(folder_of(path).c_str(), &folder) != 0 || !anyone_may_write(folder)) return {};
  if (S_ISREG(file.st_mode) && file.st_nlink > 1) {  // appending would write into the file it is linked to
    return "a file with " + std::to_string(file.st_nlink) +
           " hard links in a folder anyone can write: not written; remove it, or write elsewhere";
  }
  if (file.st_uid == ::geteuid() || file.st_uid == folder.st_uid) return {};
  return "owned by another user (uid " + std::to_string(file.st_uid) +
         ") in a folder anyone can write: not replaced; remove it, or write elsewhere";
}

}  // namespace

void check_folders(const std::string& given, const std::string& path) {
  const std::string folder = folder_of(path);
  for (std::size_t end = folder.find('/', 1);; end = folder.find('/', end + 1)) {
    const std::string prefix = folder.substr(0, end);
    struct stat at {};
    if (!prefix.empty() && prefix != "." && ::lstat(prefix.c_str(), &at) == 0 && S_ISLNK(at.st_mode)) {
      if (std::string why = untrusted_link(prefix, at); !why.empty()) {
        throw refused_output(given, "the folder " + prefix + " on its path is " + why);
      }
    }
    if (end == std::string::npos) break;
  }
}

refused_output::refused_output(const std::string& path, std::string reason)
    : std::system_error(EPERM, std::generic_category(), path),
      reason_(std::move(reason)),
      what_(path + ": " + reason_) {}

std::string folder_of(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

output_target resolve_output(const std::string& given) {
  output_target out;
  out.path = given;
  for (int hops = 0;; ++hops) {
    struct stat at {};
    if (::lstat(out.path.c_str(), &at) != 0) break;  // nothing there (or a magic link's target, /proc/self/fd/1)
    if (!S_ISLNK(at.st_mode)) {
      out.exists = true;
      out.info = at;
      break;
    }
    if (std::string why = untrusted_link(out.path, at); !why.empty()) throw refused_output(given, why);
    if (hops == max_links) fail(ELOOP, given);
    std::string target(static_cast<std::size_t>(at.st_size > 0 ? at.st_size : 255) + 1, '\0');
    const ssize_t n = ::readlink(out.path.c_str(), target.data(), target.size());
    if (n < 0) fail(errno, given);
    target.resize(static_cast<std::size_t>(n));
    out.path = target.front() == '/' ? target : folder_of(out.path) + "/" + target;
  }
  check_folders(given, out.path);
  struct stat followed {};
  if (::stat(given.c_str(), &followed) == 0) {
    if (S_ISDIR(followed.st_mode)) fail(EISDIR, given);
    out.in_place = !S_ISREG(followed.st_mode);
  }
  if (out.exists) {
    if (std::string why = untrusted_file(out.path, out.info); !why.empty()) throw refused_output(given, why);
  }
  return out;
}

}  // namespace steptrace::detail
