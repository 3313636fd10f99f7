// RLIMIT_DATA and RLIMIT_AS under the shim. The kernel counts the pager's reservations against
// them: the whole arena against the address space, and against the data segment
// (may_expand_vm) every private writable one: mimalloc's managed part of the arena, the swap
// device's tables, though the program has used none of it. A program that lowers either limit
// to what it means to use (Chromium's sandbox sets RLIMIT_DATA to 4 GiB in every sandboxed
// process) would then have every later mmap and mprotect to writable fail, the pager's own pool
// allocations with them. So a limit the program sets goes to the kernel raised by what the
// process had reserved when the shim's constructor ended (the "slack": VmData, VmSize), and the
// program reads back what it set. The compressed pool, which grows later, counts as the
// program's data (it is, compressed). What the limit no longer covers: mimalloc's heap
// (RLIMIT_DATA) and everything routed (RLIMIT_AS). A limit inherited across exec is the raised
// one, and an exec'd image reads it as such.
//
// Thread-safety: the asked values are atomics; two threads setting the same limit at once leave
// one of the two, as the kernel would.
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "shim.h"

namespace uswap::shim {
namespace {

struct asked_limit {
  std::atomic<bool> set{false};
  std::atomic<uint64_t> cur{0}, max{0};
};
asked_limit asked_data, asked_as;

asked_limit* asked_for(int resource) noexcept {
  if (resource == RLIMIT_DATA) return &asked_data;
  if (resource == RLIMIT_AS) return &asked_as;
  return nullptr;
}

uint64_t slack(int resource) noexcept {
  return resource == RLIMIT_DATA ? g.reserved_data : g.reserved_vm;
}

uint64_t raised(uint64_t v, uint64_t by) noexcept {
  if (v == RLIM64_INFINITY || v > RLIM64_INFINITY - by) return RLIM64_INFINITY;
  return v + by;
}

long raw_prlimit(pid_t pid, int resource, const struct rlimit64* nv, struct rlimit64* ov) noexcept {
  return ::syscall(SYS_prlimit64, pid, resource, nv, ov);
}

int do_prlimit(pid_t pid, int resource, const struct rlimit64* nv, struct rlimit64* ov) noexcept {
  asked_limit* a = asked_for(resource);
  if (!a || !ready() || (pid != 0 && pid != ::getpid()) || slack(resource) == 0)
    return static_cast<int>(raw_prlimit(pid, resource, nv, ov));
  struct rlimit64 k_new {
  }, k_old{};
  if (nv) {
    if (nv->rlim_cur > nv->rlim_max) {
      errno = EINVAL;
      return -1;
    }
    k_new.rlim_cur = raised(nv->rlim_cur, slack(resource));
    k_new.rlim_max = raised(nv->rlim_max, slack(resource));
  }
  if (raw_prlimit(0, resource, nv ? &k_new : nullptr, &k_old) != 0) return -1;
  if (ov) {
    if (a->set.load(std::memory_order_acquire)) {
      ov->rlim_cur = a->cur.load(std::memory_order_relaxed);
      ov->rlim_max = a->max.load(std::memory_order_relaxed);
    } else {
      *ov = k_old;  // not set in this image: the kernel's (an inherited limit), as it is
    }
  }
  if (nv) {
    a->cur.store(nv->rlim_cur, std::memory_order_relaxed);
    a->max.store(nv->rlim_max, std::memory_order_relaxed);
    a->set.store(true, std::memory_order_release);
  }
  return 0;
}

}  // namespace
}  // namespace uswap::shim

using uswap::shim::do_prlimit;

USWAP_EXPORT int prlimit64(pid_t pid, enum __rlimit_resource resource, const struct rlimit64* nv,
                           struct rlimit64* ov) {
  return do_prlimit(pid, static_cast<int>(resource), nv, ov);
}

USWAP_EXPORT int prlimit(pid_t pid, enum __rlimit_resource resource, const struct rlimit* nv,
                         struct rlimit* ov) {
  static_assert(sizeof(struct rlimit) == sizeof(struct rlimit64));
  return do_prlimit(pid, static_cast<int>(resource), reinterpret_cast<const struct rlimit64*>(nv),
                    reinterpret_cast<struct rlimit64*>(ov));
}

USWAP_EXPORT int setrlimit64(__rlimit_resource_t resource, const struct rlimit64* rl) {
  return do_prlimit(0, static_cast<int>(resource), rl, nullptr);
}

USWAP_EXPORT int setrlimit(__rlimit_resource_t resource, const struct rlimit* rl) {
  return do_prlimit(0, static_cast<int>(resource), reinterpret_cast<const struct rlimit64*>(rl),
                    nullptr);
}

USWAP_EXPORT int getrlimit64(__rlimit_resource_t resource, struct rlimit64* rl) {
  return do_prlimit(0, static_cast<int>(resource), nullptr, rl);
}

USWAP_EXPORT int getrlimit(__rlimit_resource_t resource, struct rlimit* rl) {
  return do_prlimit(0, static_cast<int>(resource), nullptr, reinterpret_cast<struct rlimit64*>(rl));
}
