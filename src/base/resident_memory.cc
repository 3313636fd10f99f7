// Present, user-mapped memory for phys_mem and the ram swap device; see
// include/uswap/base/resident_memory.h for why populating is not enough.
#include "uswap/base/resident_memory.h"

#include <sys/mman.h>

#include <cerrno>
#include <string>

#include "uswap/base/page.h"

namespace uswap {

result<std::byte*> map_resident_memory(size_t bytes, std::string_view what) {
  if (bytes == 0) return error(EINVAL, std::string(what) + ": size 0");
  const size_t len = static_cast<size_t>(round_up_to_page(bytes));
  void* base = ::mmap(nullptr, len, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_POPULATE, -1, 0);
  if (base == MAP_FAILED)
    return error(ENOMEM, std::string(what) + ": cannot map " + std::to_string(len) + " bytes");
  // One user-mode read per page builds the user mapping (see the header). volatile keeps the
  // compiler from dropping loads whose values are unused.
  const volatile std::byte* p = static_cast<const volatile std::byte*>(base);
  for (size_t off = 0; off < len; off += page_size) (void)p[off];
  return static_cast<std::byte*>(base);
}

void unmap_resident_memory(std::byte* base, size_t bytes) noexcept {
  if (base != nullptr) ::munmap(base, static_cast<size_t>(round_up_to_page(bytes)));
}

}  // namespace uswap
