// Descriptors: the pager's own stay open whatever the program closes (uswap/base/own_fd.h).
//
// Programs close descriptors they did not open: a daemon's close_range(3, ~0U, 0) or closefrom(3)
// as it starts (varnishd's manager, OpenSSH), a loop over /proc/self/fd. Closing the pager's
// userfaultfd unregisters the arena: every page swapped out then reads back as zeros, and the
// pager's next ioctl goes to whatever the program opened under that number. So close,
// close_range and closefrom (and syscall(SYS_close...)) leave the registered numbers open, as if
// they had been closed: the program cannot tell, but by a call on a number it never opened. The
// registered numbers lie high (own_fd_floor), where a program's dup2 onto a chosen number does
// not reach; one that does is refused, loudly, rather than closing the pager's descriptor.
//
// A library that makes a socket for uswap and keeps its number (libnbd) does so in an
// own_fd_scope: socket() then takes the new descriptor for uswap, and close() of a registered
// number in the scope is the library's own, released and closed.
//
// Thread-safety: as the calls they wrap; the registry is lock-free.
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <climits>

#include "shim.h"
#include "uswap/base/own_fd.h"
#include "uswap/base/raw_syscall.h"

namespace uswap::shim {
namespace {

template <class T>
T next_fn(const char* name) {
  return reinterpret_cast<T>(dlsym(RTLD_NEXT, name));
}

int real_close_range(unsigned first, unsigned last, int flags) {
  using fn = int (*)(unsigned, unsigned, int);
  static const fn real = next_fn<fn>("close_range");
  if (real) return real(first, last, flags);
  return static_cast<int>(uswap::raw_syscall(SYS_close_range, first, last, flags));
}

// EBADF, said once: the program asked for a number the pager holds.
int refuse_dup_onto(int fd) {
  static std::atomic<bool> said{false};
  if (!said.exchange(true))
    fprintf(stderr,
            "uswap: the program asked for descriptor %d, which the pager holds (its "
            "userfaultfd, pidfd or backing file): refused (EBADF)\n",
            fd);
  return fail_with(EBADF, -1);
}

int close_range_keeping_own(unsigned first, unsigned last, int flags) {
  int own[64];
  const int n = uswap::own_fds(own, 64);
  // CLOSE_RANGE_CLOEXEC only marks: the pager's descriptors are close-on-exec already.
  if (n == 0 || (flags & CLOSE_RANGE_CLOEXEC)) return real_close_range(first, last, flags);
  unsigned from = first;
  for (int i = 0; i < n && from <= last; ++i) {
    const auto fd = static_cast<unsigned>(own[i]);
    if (fd < from || fd > last) continue;
    if (fd > from && real_close_range(from, fd - 1, flags) != 0) return -1;
    if (fd == UINT_MAX) return 0;
    from = fd + 1;
  }
  return from <= last ? real_close_range(from, last, flags) : 0;
}

}  // namespace
}  // namespace uswap::shim

using namespace uswap::shim;

USWAP_EXPORT int close(int fd) {
  using fn = int (*)(int);
  static const fn real = next_fn<fn>("close");
  if (uswap::own_fd(fd)) {
    if (!uswap::in_own_fd_scope()) return 0;  // closed, as far as the program can tell
    uswap::own_fd_release(fd);  // a library's close of a socket it made for uswap (libnbd's)
  }
  return real ? real(fd) : static_cast<int>(uswap::raw_syscall(SYS_close, fd));
}

// A socket made for uswap (libnbd's, in an own_fd_scope) is taken before the library sees its
// number, which it keeps: moved above the numbers programs use and registered.
USWAP_EXPORT int socket(int domain, int type, int protocol) {
  using fn = int (*)(int, int, int);
  static const fn real = next_fn<fn>("socket");
  const int fd = real ? real(domain, type, protocol)
                      : static_cast<int>(uswap::raw_syscall(SYS_socket, domain, type, protocol));
  return fd >= 0 && uswap::in_own_fd_scope() ? uswap::own_fd_take(fd) : fd;
}

USWAP_EXPORT int close_range(unsigned first, unsigned last, int flags) {
  if (first > last) return fail_with(EINVAL, -1);
  return close_range_keeping_own(first, last, flags);
}

// glibc's closefrom calls its internal close_range, which no wrapper sees.
USWAP_EXPORT void closefrom(int lowfd) {
  if (lowfd < 0) lowfd = 0;
  if (close_range_keeping_own(static_cast<unsigned>(lowfd), UINT_MAX, 0) == 0) return;
  using fn = void (*)(int);
  static const fn real = next_fn<fn>("closefrom");
  int own[1];
  if (real && uswap::own_fds(own, 1) == 0) real(lowfd);  // no close_range: glibc's own way
}

USWAP_EXPORT int dup2(int oldfd, int newfd) {
  using fn = int (*)(int, int);
  static const fn real = next_fn<fn>("dup2");
  if (oldfd != newfd && uswap::own_fd(newfd)) return refuse_dup_onto(newfd);
  return real(oldfd, newfd);
}

USWAP_EXPORT int dup3(int oldfd, int newfd, int flags) {
  using fn = int (*)(int, int, int);
  static const fn real = next_fn<fn>("dup3");
  if (oldfd != newfd && uswap::own_fd(newfd)) return refuse_dup_onto(newfd);
  return real(oldfd, newfd, flags);
}
