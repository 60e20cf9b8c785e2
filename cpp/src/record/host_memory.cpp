#include "record/host_memory.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>

namespace steptrace::detail {

std::uint64_t resident_bytes() noexcept {
  const int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[128];
  const ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
  ::close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  unsigned long long size = 0, resident = 0;  // in pages: total program size, then resident
  if (std::sscanf(buf, "%llu %llu", &size, &resident) != 2) return 0;
  const long page = ::sysconf(_SC_PAGESIZE);
  return page > 0 ? resident * static_cast<std::uint64_t>(page) : 0;
}

}  // namespace steptrace::detail
