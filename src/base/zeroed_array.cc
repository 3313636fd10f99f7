#include "uswap/base/zeroed_array.h"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace uswap::detail {

#if defined(USWAP_TSAN)
void* map_zeroed(size_t bytes) noexcept {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}
void unmap_zeroed(void* p, size_t bytes) noexcept { ::munmap(p, bytes); }
void drop_zeroed(void* p, size_t bytes) noexcept { ::madvise(p, bytes, MADV_DONTNEED); }
#else
void* map_zeroed(size_t bytes) noexcept {
  const long r = ::syscall(SYS_mmap, nullptr, bytes, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return r == -1 ? nullptr : reinterpret_cast<void*>(r);  // syscall(2) sets errno, returns -1
}
void unmap_zeroed(void* p, size_t bytes) noexcept { ::syscall(SYS_munmap, p, bytes); }
void drop_zeroed(void* p, size_t bytes) noexcept { ::syscall(SYS_madvise, p, bytes, MADV_DONTNEED); }
#endif

}  // namespace uswap::detail
