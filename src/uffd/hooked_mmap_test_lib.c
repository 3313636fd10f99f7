// A library that hooks the memory calls as gperftools' tcmalloc does (SWI-Prolog links it): it
// defines mmap, mmap64, munmap and mremap, counts each call and makes it with the C library's
// syscall(). A program linked with it puts it between the shim and the C library, so the shim
// passes its unrouted calls on to these, whose syscall() the shim interposes too.
#define _GNU_SOURCE
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

long hooked_mmap_calls = 0;  // read by the program

void* mmap(void* addr, size_t len, int prot, int flags, int fd, off_t off) {
  __atomic_add_fetch(&hooked_mmap_calls, 1, __ATOMIC_RELAXED);
  return (void*)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

void* mmap64(void* addr, size_t len, int prot, int flags, int fd, off_t off) {
  return mmap(addr, len, prot, flags, fd, off);
}

int munmap(void* addr, size_t len) {
  __atomic_add_fetch(&hooked_mmap_calls, 1, __ATOMIC_RELAXED);
  return (int)syscall(SYS_munmap, addr, len);
}

void* mremap(void* old, size_t old_len, size_t new_len, int flags, ...) {
  void* new_addr = NULL;
  if (flags & MREMAP_FIXED) {
    va_list ap;
    va_start(ap, flags);
    new_addr = va_arg(ap, void*);
    va_end(ap);
  }
  __atomic_add_fetch(&hooked_mmap_calls, 1, __ATOMIC_RELAXED);
  return (void*)syscall(SYS_mremap, old, old_len, new_len, flags, new_addr);
}
