#include "uswap/sync/futex.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "uswap/base/fault_inject.h"

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

bool futex_wait_any(std::span<const futex_waiter> words) noexcept {
  struct futex_waitv v[FUTEX_WAITV_MAX];
  if (words.empty() || words.size() > FUTEX_WAITV_MAX) return false;
  if (should_fail(fault_point::futex_waitv)) return false;
  for (size_t i = 0; i < words.size(); ++i) {
    std::memset(&v[i], 0, sizeof v[i]);
    v[i].val = words[i].expected;
    v[i].uaddr = reinterpret_cast<uintptr_t>(words[i].word);
    v[i].flags = FUTEX_32 | (words[i].shared ? 0 : FUTEX_PRIVATE_FLAG);
  }
  const long rc = syscall(SYS_futex_waitv, v, static_cast<unsigned>(words.size()), 0, nullptr,
                          CLOCK_MONOTONIC);
  return rc >= 0 || (errno != ENOSYS && errno != EPERM && errno != EINVAL);
}

int futex_wake_shared(const std::atomic<uint32_t>* word, int count) noexcept {
  return static_cast<int>(syscall(SYS_futex, reinterpret_cast<const uint32_t*>(word), FUTEX_WAKE,
                                  count, nullptr, nullptr, 0));
}

}  // namespace uswap
