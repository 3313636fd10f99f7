#include "uswap/base/zeroed_array.h"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "uswap/base/raw_syscall.h"

namespace uswap::detail {

namespace {
// A core dump walks every page of a written private mapping: a table sized for a terabyte arena
// would add seconds to a crashing program's dump, and a sparse file of its size. Tables that
// large are left out of cores.
constexpr size_t dump_max = size_t{1} << 30;
}  // namespace

#if defined(USWAP_TSAN)
void* map_zeroed(size_t bytes) noexcept {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  if (bytes >= dump_max) ::madvise(p, bytes, MADV_DONTDUMP);
  return p;
}
void unmap_zeroed(void* p, size_t bytes) noexcept { ::munmap(p, bytes); }
void drop_zeroed(void* p, size_t bytes) noexcept { ::madvise(p, bytes, MADV_DONTNEED); }
#else
void* map_zeroed(size_t bytes) noexcept {
  const long r = uswap::raw_syscall(SYS_mmap, nullptr, bytes, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (r == -1) return nullptr;  // syscall(2) sets errno, returns -1
  if (bytes >= dump_max) uswap::raw_syscall(SYS_madvise, r, bytes, MADV_DONTDUMP);
  return reinterpret_cast<void*>(r);
}
void unmap_zeroed(void* p, size_t bytes) noexcept { uswap::raw_syscall(SYS_munmap, p, bytes); }
void drop_zeroed(void* p, size_t bytes) noexcept { uswap::raw_syscall(SYS_madvise, p, bytes, MADV_DONTNEED); }
#endif

}  // namespace uswap::detail
