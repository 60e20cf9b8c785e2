#include "base/quiet_write.hpp"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>

namespace steptrace::detail {
namespace {

std::atomic<bool> stderr_gone{false};

}  // namespace

bool write_all(int fd, std::string_view text) noexcept {
  if (fd == 2 && stderr_gone.load(std::memory_order_relaxed)) return false;
  sigset_t pipe_only, before, pending;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  sigemptyset(&pending);
  sigpending(&pending);
  const bool already_pending = sigismember(&pending, SIGPIPE) == 1;  // not ours to swallow
  pthread_sigmask(SIG_BLOCK, &pipe_only, &before);
  bool ok = true;
  int failure = 0;
  const char* at = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, at, left);
    if (n > 0) {
      at += n;
      left -= static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    failure = n < 0 ? errno : ENOSPC;  // a write of 0 bytes: the file can take no more
    if (n < 0 && errno == EPIPE) {
      if (!already_pending) {
        const timespec now{0, 0};
        sigtimedwait(&pipe_only, nullptr, &now);  // the SIGPIPE this write raised, on this thread
      }
      if (fd == 2) stderr_gone.store(true, std::memory_order_relaxed);
    }
    ok = false;
    break;
  }
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  if (!ok) errno = failure;  // the write's reason, for the caller's message
  return ok;
}

}  // namespace steptrace::detail
