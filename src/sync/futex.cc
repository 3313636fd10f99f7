#include "uswap/sync/futex.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "uswap/base/fault_inject.h"

namespace uswap {

namespace {

std::atomic<futex_syscall_fn> door{nullptr};

// syscall(2)'s contract whichever way the call is made: the result, or -1 with errno set.
long futex_call(long nr, const void* a1, long a2, long a3, long a4 = 0, long a5 = 0,
                long a6 = 0) noexcept {
  const long p = reinterpret_cast<long>(a1);
  if (const futex_syscall_fn fn = door.load(std::memory_order_acquire)) {
    const long r = fn(nr, p, a2, a3, a4, a5, a6);
    if (r < 0 && r > -4096) {
      errno = static_cast<int>(-r);
      return -1;
    }
    return r;
  }
  return syscall(nr, p, a2, a3, a4, a5, a6);
}

}  // namespace

void set_futex_syscall(futex_syscall_fn fn) noexcept { door.store(fn, std::memory_order_release); }

void futex_wait(const std::atomic<uint32_t>* word, uint32_t expected) noexcept {
  // FUTEX_PRIVATE_FLAG: all uswap locks are process-private, which saves the kernel a
  // page-table walk per call.
  futex_call(SYS_futex, word, FUTEX_WAIT | FUTEX_PRIVATE_FLAG, expected);
}

int futex_wake(const std::atomic<uint32_t>* word, int count) noexcept {
  return static_cast<int>(futex_call(SYS_futex, word, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, count));
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
  const long rc = futex_call(SYS_futex_waitv, v, static_cast<long>(words.size()), 0, 0,
                             CLOCK_MONOTONIC);
  return rc >= 0 || (errno != ENOSYS && errno != EPERM && errno != EINVAL);
}

int futex_wake_shared(const std::atomic<uint32_t>* word, int count) noexcept {
  return static_cast<int>(futex_call(SYS_futex, word, FUTEX_WAKE, count));
}

void futex_wait_shared_for(const std::atomic<uint32_t>* word, uint32_t expected,
                           uint64_t timeout_ns) noexcept {
  // FUTEX_WAIT's timeout is relative (CLOCK_MONOTONIC).
  const timespec ts{static_cast<time_t>(timeout_ns / 1000000000u),
                    static_cast<long>(timeout_ns % 1000000000u)};
  futex_call(SYS_futex, word, FUTEX_WAIT, expected, reinterpret_cast<long>(&ts));
}

}  // namespace uswap
