// uswap/base/own_fd.h: a registry of 32 numbers, lock-free (-1: free slot).
#include "uswap/base/own_fd.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace uswap {
namespace {

constexpr int nr_slots = 32;
std::atomic<int> slots[nr_slots] = {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1};

void add(int fd) noexcept {
  for (std::atomic<int>& s : slots) {
    int free = -1;
    if (s.compare_exchange_strong(free, fd, std::memory_order_acq_rel)) return;
  }
}

}  // namespace

namespace {
thread_local unsigned own_fd_scope_depth = 0;
}  // namespace

own_fd_scope::own_fd_scope() noexcept { ++own_fd_scope_depth; }
own_fd_scope::~own_fd_scope() { --own_fd_scope_depth; }
bool in_own_fd_scope() noexcept { return own_fd_scope_depth != 0; }

int own_fd_floor() noexcept {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return 3;
  const rlim_t soft = std::min<rlim_t>(r.rlim_cur, 1024);
  return soft > 35 ? static_cast<int>(soft) - 32 : 3;
}

int own_fd_take(int fd) noexcept {
  if (fd < 0) return -1;
  const int saved = errno;
  int moved = fd;
  if (fd < own_fd_floor()) {
    const int to = ::fcntl(fd, F_DUPFD_CLOEXEC, own_fd_floor());
    if (to >= 0) {
      ::close(fd);  // not registered: the shim's close closes it
      moved = to;
    }
  }
  add(moved);
  errno = saved;
  return moved;
}

void own_fd_release(int fd) noexcept {
  if (fd < 0) return;
  for (std::atomic<int>& s : slots) {
    int want = fd;
    if (s.compare_exchange_strong(want, -1, std::memory_order_acq_rel)) return;
  }
}

bool own_fd(int fd) noexcept {
  if (fd < 0) return false;
  for (const std::atomic<int>& s : slots)
    if (s.load(std::memory_order_acquire) == fd) return true;
  return false;
}

int own_fds(int* out, int max) noexcept {
  int n = 0;
  for (const std::atomic<int>& s : slots) {
    const int fd = s.load(std::memory_order_acquire);
    if (fd >= 0 && n < max) out[n++] = fd;
  }
  std::sort(out, out + n);
  return n;
}

bool own_fd_pass_on(int fd, char* out, unsigned n) noexcept {
  struct stat st {};
  const int flags = ::fcntl(fd, F_GETFD);
  if (flags < 0 || ::fstat(fd, &st) != 0) return false;
  char name[64];
  const int len = std::snprintf(name, sizeof name, "%d:%" PRIx64 ":%" PRIx64, fd,
                                static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino));
  if (len < 0 || static_cast<unsigned>(len) >= n) return false;
  if ((flags & FD_CLOEXEC) && ::fcntl(fd, F_SETFD, flags & ~FD_CLOEXEC) != 0) return false;
  std::memcpy(out, name, static_cast<size_t>(len) + 1);
  return true;
}

int own_fd_inherited(const char* name) noexcept {
  if (!name) return -1;
  int fd = -1;
  uint64_t dev = 0, ino = 0;
  int used = 0;
  if (std::sscanf(name, "%d:%" SCNx64 ":%" SCNx64 "%n", &fd, &dev, &ino, &used) != 3 ||
      name[used] != '\0' || fd < 0)
    return -1;
  const int saved = errno;
  struct stat st {};
  const bool same = ::fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_dev) == dev &&
                    static_cast<uint64_t>(st.st_ino) == ino;
  errno = saved;
  return same ? fd : -1;
}

}  // namespace uswap
