// raw_syscall: a system call made by an instruction of uswap's own, never through the C library's
// syscall() function.
//
// The preload shim of `uswap run` interposes syscall() (SBCL maps its heap with
// syscall(SYS_mmap, ...)) and routes the memory calls it sees there into the pager. The pager's
// own memory calls (its tables, staging buffers, guard pages) must reach the kernel, so they are
// made here; a call through syscall() from inside uswap would be routed back into the pager.
//
// Returns as syscall(2) does: the kernel's result, or -1 with errno set.
// Thread-safety: a system call; async-signal-safe (errno is the caller's thread's).
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <type_traits>

namespace uswap {

inline long raw_syscall6(long nr, long a1, long a2, long a3, long a4, long a5, long a6) noexcept {
  long r;
#if defined(__x86_64__)
  register long r10 asm("r10") = a4;
  register long r8 asm("r8") = a5;
  register long r9 asm("r9") = a6;
  asm volatile("syscall"
               : "=a"(r)
               : "a"(nr), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8), "r"(r9)
               : "rcx", "r11", "memory");
#elif defined(__aarch64__)
  register long x8 asm("x8") = nr;
  register long x0 asm("x0") = a1;
  register long x1 asm("x1") = a2;
  register long x2 asm("x2") = a3;
  register long x3 asm("x3") = a4;
  register long x4 asm("x4") = a5;
  register long x5 asm("x5") = a6;
  asm volatile("svc #0"
               : "+r"(x0)
               : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
               : "memory");
  r = x0;
#else
#error "raw_syscall: no system call instruction known for this architecture"
#endif
  if (static_cast<unsigned long>(r) > -4096UL) {
    errno = static_cast<int>(-r);
    return -1;
  }
  return r;
}

namespace detail {
template <class T>
long syscall_arg(T v) noexcept {
  if constexpr (std::is_null_pointer_v<T>)
    return 0;
  else if constexpr (std::is_pointer_v<T>)
    return reinterpret_cast<long>(v);
  else
    return static_cast<long>(v);
}
}  // namespace detail

// Arguments as syscall(2) takes them: integers and pointers, at most six.
template <class... Args>
long raw_syscall(long nr, Args... args) noexcept {
  static_assert(sizeof...(Args) <= 6, "a system call takes at most six arguments");
  long a[6] = {detail::syscall_arg(args)...};
  return raw_syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

}  // namespace uswap
