// The libc calls whose arena pointers the seccomp filter cannot see: the buffers of readv and
// writev, of sendmsg and recvmsg, sit behind an iovec array or a msghdr that usually lives on the
// stack, outside the arena. With seccomp (no kernel-mode faults) these calls go through the
// kernel-access engine, which decodes them and pins every arena buffer; otherwise, or when
// nothing they point to is in the arena, they are libc's own.
#include <dlfcn.h>
#include <errno.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "../kernel_access.h"
#include "shim.h"

namespace uswap::shim {

namespace {

// The engine's call off a stack in the arena: its pins are pager code, which must not run there
// (off_arena_stack). A call that blocks waits on the pager stack, as a trapped one waits on the
// signal stack; a program signal that comes meanwhile is delivered once the thread is back on
// its own stack, and a call it kept from being made is made then.
long emulate_call(long nr, long a1, long a2, long a3 = 0, long a4 = 0, long a5 = 0,
                  long a6 = 0) noexcept {
  for (;;) {
    const long r =
        off_arena_stack([&] { return kernel_access_emulate(nr, a1, a2, a3, a4, a5, a6); });
    if (!kernel_access_redeliver_deferred()) return r;
  }
}

bool iov_in_arena(const iovec* iov, long cnt) noexcept {
  if (!iov || cnt <= 0) return false;
  if (overlaps_arena(iov, sizeof(iovec) * static_cast<size_t>(cnt))) return true;
  for (long i = 0; i < cnt; ++i)
    if (overlaps_arena(iov[i].iov_base, iov[i].iov_len)) return true;
  return false;
}

bool msg_in_arena(const msghdr* m) noexcept {
  if (!m) return false;
  return overlaps_arena(m, sizeof *m) || overlaps_arena(m->msg_name, m->msg_namelen) ||
         overlaps_arena(m->msg_control, m->msg_controllen) ||
         iov_in_arena(m->msg_iov, static_cast<long>(m->msg_iovlen));
}

bool mmsg_in_arena(const mmsghdr* v, unsigned n) noexcept {
  if (!v) return false;
  if (overlaps_arena(v, sizeof(mmsghdr) * n)) return true;
  for (unsigned i = 0; i < n; ++i)
    if (msg_in_arena(&v[i].msg_hdr)) return true;
  return false;
}

inline bool emulate() noexcept { return active() && g.seccomp; }

template <class T>
T next_fn(const char* name) {
  return reinterpret_cast<T>(dlsym(RTLD_NEXT, name));
}

}  // namespace
}  // namespace uswap::shim

using namespace uswap::shim;

#define L(x) reinterpret_cast<long>(x)

USWAP_EXPORT ssize_t readv(int fd, const iovec* iov, int cnt) {
  static auto real = next_fn<ssize_t (*)(int, const iovec*, int)>("readv");
  if (!emulate() || !iov_in_arena(iov, cnt)) return real(fd, iov, cnt);
  return libc_result(emulate_call(SYS_readv, fd, L(iov), cnt));
}

USWAP_EXPORT ssize_t writev(int fd, const iovec* iov, int cnt) {
  static auto real = next_fn<ssize_t (*)(int, const iovec*, int)>("writev");
  if (!emulate() || !iov_in_arena(iov, cnt)) return real(fd, iov, cnt);
  return libc_result(emulate_call(SYS_writev, fd, L(iov), cnt));
}

// preadv/pwritev(2): the kernel takes the offset as two longs (low, high); on x86-64 the high
// half is ignored, so the whole offset goes in the first.
USWAP_EXPORT ssize_t preadv(int fd, const iovec* iov, int cnt, off_t off) {
  static auto real = next_fn<ssize_t (*)(int, const iovec*, int, off_t)>("preadv");
  if (!emulate() || !iov_in_arena(iov, cnt)) return real(fd, iov, cnt, off);
  return libc_result(emulate_call(SYS_preadv, fd, L(iov), cnt, off, 0));
}
USWAP_EXPORT ssize_t preadv64(int fd, const iovec* iov, int cnt, off_t off) {
  return preadv(fd, iov, cnt, off);
}

USWAP_EXPORT ssize_t pwritev(int fd, const iovec* iov, int cnt, off_t off) {
  static auto real = next_fn<ssize_t (*)(int, const iovec*, int, off_t)>("pwritev");
  if (!emulate() || !iov_in_arena(iov, cnt)) return real(fd, iov, cnt, off);
  return libc_result(emulate_call(SYS_pwritev, fd, L(iov), cnt, off, 0));
}
USWAP_EXPORT ssize_t pwritev64(int fd, const iovec* iov, int cnt, off_t off) {
  return pwritev(fd, iov, cnt, off);
}

USWAP_EXPORT ssize_t preadv2(int fd, const iovec* iov, int cnt, off_t off, int flags) {
  static auto real = next_fn<ssize_t (*)(int, const iovec*, int, off_t, int)>("preadv2");
  if (!emulate() || !iov_in_arena(iov, cnt)) return real(fd, iov, cnt, off, flags);
  return libc_result(emulate_call(SYS_preadv2, fd, L(iov), cnt, off, 0, flags));
}
USWAP_EXPORT ssize_t preadv64v2(int fd, const iovec* iov, int cnt, off_t off, int flags) {
  return preadv2(fd, iov, cnt, off, flags);
}

USWAP_EXPORT ssize_t pwritev2(int fd, const iovec* iov, int cnt, off_t off, int flags) {
  static auto real = next_fn<ssize_t (*)(int, const iovec*, int, off_t, int)>("pwritev2");
  if (!emulate() || !iov_in_arena(iov, cnt)) return real(fd, iov, cnt, off, flags);
  return libc_result(emulate_call(SYS_pwritev2, fd, L(iov), cnt, off, 0, flags));
}
USWAP_EXPORT ssize_t pwritev64v2(int fd, const iovec* iov, int cnt, off_t off, int flags) {
  return pwritev2(fd, iov, cnt, off, flags);
}

USWAP_EXPORT ssize_t sendmsg(int fd, const msghdr* m, int flags) {
  static auto real = next_fn<ssize_t (*)(int, const msghdr*, int)>("sendmsg");
  if (!emulate() || !msg_in_arena(m)) return real(fd, m, flags);
  return libc_result(emulate_call(SYS_sendmsg, fd, L(m), flags));
}

USWAP_EXPORT ssize_t recvmsg(int fd, msghdr* m, int flags) {
  static auto real = next_fn<ssize_t (*)(int, msghdr*, int)>("recvmsg");
  if (!emulate() || !msg_in_arena(m)) return real(fd, m, flags);
  return libc_result(emulate_call(SYS_recvmsg, fd, L(m), flags));
}

USWAP_EXPORT int sendmmsg(int fd, mmsghdr* v, unsigned n, int flags) {
  static auto real = next_fn<int (*)(int, mmsghdr*, unsigned, int)>("sendmmsg");
  if (!emulate() || !mmsg_in_arena(v, n)) return real(fd, v, n, flags);
  return static_cast<int>(libc_result(emulate_call(SYS_sendmmsg, fd, L(v), n, flags)));
}

USWAP_EXPORT int recvmmsg(int fd, mmsghdr* v, unsigned n, int flags, timespec* tmo) {
  static auto real = next_fn<int (*)(int, mmsghdr*, unsigned, int, timespec*)>("recvmmsg");
  if (!emulate() || !mmsg_in_arena(v, n)) return real(fd, v, n, flags, tmo);
  return static_cast<int>(libc_result(emulate_call(SYS_recvmmsg, fd, L(v), n, flags, L(tmo))));
}

// Always emulated: besides the local iovecs, the remote ones may be this process's arena, or
// another member's memory, whose pages the kernel's copy cannot fault in (kernel_access.h).
USWAP_EXPORT ssize_t process_vm_readv(pid_t pid, const iovec* l, unsigned long ln, const iovec* r,
                                      unsigned long rn, unsigned long flags) {
  static auto real = next_fn<ssize_t (*)(pid_t, const iovec*, unsigned long, const iovec*,
                                         unsigned long, unsigned long)>("process_vm_readv");
  if (!emulate()) return real(pid, l, ln, r, rn, flags);
  return libc_result(emulate_call(SYS_process_vm_readv, pid, L(l), static_cast<long>(ln), L(r),
                                  static_cast<long>(rn), static_cast<long>(flags)));
}

USWAP_EXPORT ssize_t process_vm_writev(pid_t pid, const iovec* l, unsigned long ln, const iovec* r,
                                       unsigned long rn, unsigned long flags) {
  static auto real = next_fn<ssize_t (*)(pid_t, const iovec*, unsigned long, const iovec*,
                                         unsigned long, unsigned long)>("process_vm_writev");
  if (!emulate()) return real(pid, l, ln, r, rn, flags);
  return libc_result(emulate_call(SYS_process_vm_writev, pid, L(l), static_cast<long>(ln), L(r),
                                  static_cast<long>(rn), static_cast<long>(flags)));
}

USWAP_EXPORT ssize_t vmsplice(int fd, const iovec* iov, size_t n, unsigned flags) {
  static auto real = next_fn<ssize_t (*)(int, const iovec*, size_t, unsigned)>("vmsplice");
  if (!emulate() || !iov_in_arena(iov, static_cast<long>(n))) return real(fd, iov, n, flags);
  return libc_result(emulate_call(SYS_vmsplice, fd, L(iov), static_cast<long>(n), flags));
}
