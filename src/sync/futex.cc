#include "uswap/sync/futex.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace uswap {

void futex_wait(const std::atomic<uint32_t>* word, uint32_t expected) noexcept {
  // FUTEX_PRIVATE_FLAG: all uswap locks are process-private, which saves the kernel a
  // page-table walk per call.
  syscall(SYS_futex, reinterpret_cast<const uint32_t*>(word), FUTEX_WAIT | FUTEX_PRIVATE_FLAG,
          expected, nullptr, nullptr, 0);
}

int futex_wake(const std::atomic<uint32_t>* word, int count) noexcept {
  return static_cast<int>(syscall(SYS_futex, reinterpret_cast<const uint32_t*>(word),
                                  FUTEX_WAKE | FUTEX_PRIVATE_FLAG, count, nullptr, nullptr, 0));
}

}  // namespace uswap
