// Paths under /proc relative to a kept root (uswap/base/proc.h).
#include "uswap/base/proc.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "uswap/base/dcheck.h"
#include "uswap/base/own_fd.h"

namespace uswap {

namespace {

std::atomic<int> proc_root{-1};

constexpr char proc_prefix[] = "/proc/";
constexpr size_t proc_prefix_len = sizeof proc_prefix - 1;

// The path relative to the kept root, or nullptr to use `path` as it is.
const char* relative(const char* path) noexcept {
  USWAP_DCHECK(std::strncmp(path, proc_prefix, proc_prefix_len) == 0);
  if (proc_root.load(std::memory_order_relaxed) < 0) return nullptr;
  return std::strncmp(path, proc_prefix, proc_prefix_len) == 0 ? path + proc_prefix_len : nullptr;
}

}  // namespace

bool proc_keep_root() noexcept {
  if (proc_root.load(std::memory_order_relaxed) >= 0) return true;
  const int fd = ::open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  // Only the proc file system: a /proc that is a plain directory (a chroot's) would answer for
  // no process.
  struct stat self;
  if (::fstatat(fd, "self/ns/pid", &self, 0) != 0) {
    ::close(fd);
    return false;
  }
  proc_root.store(own_fd_take(fd), std::memory_order_relaxed);
  return true;
}

int proc_open(const char* path, int flags) noexcept {
  const char* rel = relative(path);
  return rel ? ::openat(proc_root.load(std::memory_order_relaxed), rel, flags) : ::open(path, flags);
}

int proc_stat(const char* path, struct stat* st) noexcept {
  const char* rel = relative(path);
  return rel ? ::fstatat(proc_root.load(std::memory_order_relaxed), rel, st, 0) : ::stat(path, st);
}

ssize_t proc_readlink(const char* path, char* buf, size_t len) noexcept {
  const char* rel = relative(path);
  return rel ? ::readlinkat(proc_root.load(std::memory_order_relaxed), rel, buf, len)
             : ::readlink(path, buf, len);
}

}  // namespace uswap
