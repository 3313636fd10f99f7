// uswap/base/own_fd.h: a registry of 32 numbers, lock-free (-1: free slot).
#include "uswap/base/own_fd.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>

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

}  // namespace uswap
