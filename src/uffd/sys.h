// Raw system calls for the pager's own memory management.
//
// The preload shim of `uswap run` interposes mmap, munmap, madvise and friends to route the
// program's memory into a pager. The pager itself must never be routed back into itself (its
// MADV_DONTNEED would become a pager discard taking the page locks it holds, its staging buffers
// would become pager memory), so it calls the kernel directly, never through the libc symbols
// nor through syscall(), which the shim interposes too (uswap/base/raw_syscall.h).
//
// Under ThreadSanitizer (which has no preload shim: it is not built there) the libc functions
// are used instead, so that TSan's interceptors see every mapping come and go.
//
// Thread-safety: system calls; async-signal-safe.
#pragma once

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>

#include "uswap/base/raw_syscall.h"

namespace uswap::sys {

#if defined(USWAP_TSAN)
inline void* mmap(void* addr, size_t len, int prot, int flags, int fd, off_t off) noexcept {
  return ::mmap(addr, len, prot, flags, fd, off);
}
inline int munmap(void* addr, size_t len) noexcept { return ::munmap(addr, len); }
inline int madvise(void* addr, size_t len, int advice) noexcept {
  return ::madvise(addr, len, advice);
}
inline int mprotect(void* addr, size_t len, int prot) noexcept {
  return ::mprotect(addr, len, prot);
}
#else
inline void* mmap(void* addr, size_t len, int prot, int flags, int fd, off_t off) noexcept {
  // syscall(2) returns -1 with errno set on failure, as the libc wrapper would.
  const long r = uswap::raw_syscall(SYS_mmap, addr, len, prot, flags, fd, off);
  return r == -1 ? MAP_FAILED : reinterpret_cast<void*>(r);
}

inline int munmap(void* addr, size_t len) noexcept {
  return static_cast<int>(uswap::raw_syscall(SYS_munmap, addr, len));
}

inline int madvise(void* addr, size_t len, int advice) noexcept {
  return static_cast<int>(uswap::raw_syscall(SYS_madvise, addr, len, advice));
}

inline int mprotect(void* addr, size_t len, int prot) noexcept {
  return static_cast<int>(uswap::raw_syscall(SYS_mprotect, addr, len, prot));
}

#endif

}  // namespace uswap::sys
