// Test support for the kernel-access module: an arena simulated without a pager, and a way to
// run each case in a child process (a seccomp filter cannot be removed once installed).
//
// The simulated arena is a 4 GiB PROT_NONE reservation at a fixed address. pin() makes the
// range's pages read-write (a count per page, so overlapping pins nest) and unpin() makes a page
// PROT_NONE again when its last pin goes. A system call touching an unpinned page fails with
// EFAULT, exactly as one touching an evicted page under UFFD_USER_MODE_ONLY; so a test shows the
// EFAULT first, installs the module, and shows the same call succeed. poke() and peek() reach
// the arena from the test itself (they pin around a memcpy).
//
// The address, 256 GiB, lies in ThreadSanitizer's application range and far from everything
// the kernel places by default (mmap_base is near 128 TiB, PIE binaries near 86 TiB); the
// trampoline page sits 1 GiB below it, leaving the page under the arena unmapped. Under
// AddressSanitizer 256 GiB is inside its shadow gap (reserved from 2 GiB to 2 TiB on x86-64),
// so the arena moves to 32 TiB, in ASan's application memory (from 16 TiB) and as far from the
// kernel's defaults.
//
// Thread-safety: pin/unpin/poke/peek from any thread; counts are changed under one spin lock,
// so that a page's count and its protection change together.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>

#include "kernel_access.h"
#include "uswap/base/atomic_max.h"
#include "uswap/base/page.h"

namespace uswap::ka_test {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr uintptr_t arena_lo = uintptr_t{1} << 45;
#else
inline constexpr uintptr_t arena_lo = uintptr_t{1} << 38;
#endif
inline constexpr uintptr_t arena_size = uintptr_t{1} << 32;
inline constexpr uintptr_t arena_hi = arena_lo + arena_size;
inline constexpr uintptr_t trampoline = arena_lo - (uintptr_t{1} << 30);
inline constexpr uint64_t nr_pages = arena_size / page_size;

struct sim_arena {
  std::atomic<uint32_t>* counts = nullptr;  // per page
  std::atomic_flag lock = ATOMIC_FLAG_INIT;
  uint64_t cap_bytes = 0;                  // 0: no cap; else pins above it get ENOMEM
  std::atomic<uint64_t> pinned_bytes{0};   // currently pinned (what the cap applies to)
  std::atomic<uint64_t> pin_calls{0};
  std::atomic<uint64_t> max_len{0};        // the longest single pin seen
  std::atomic<uint64_t> refused{0};        // ENOMEMs returned
  std::atomic<int64_t> live{0};            // pins minus unpins
};

inline sim_arena& sim() {
  static sim_arena s;
  return s;
}

inline void sim_lock() {
  while (sim().lock.test_and_set(std::memory_order_acquire)) {
  }
}
inline void sim_unlock() { sim().lock.clear(std::memory_order_release); }

inline int sim_pin(void*, const void* addr, uint64_t len, bool) {
  sim_arena& s = sim();
  const auto a = reinterpret_cast<uintptr_t>(addr);
  if (len == 0 || a < arena_lo || a + len > arena_hi) return EINVAL;
  s.pin_calls.fetch_add(1, std::memory_order_relaxed);
  fetch_max(s.max_len, len);
  const uint64_t first = (a - arena_lo) / page_size, last = (a + len - 1 - arena_lo) / page_size;
  sim_lock();
  if (s.cap_bytes && s.pinned_bytes.load(std::memory_order_relaxed) + len > s.cap_bytes) {
    sim_unlock();
    s.refused.fetch_add(1, std::memory_order_relaxed);
    return ENOMEM;
  }
  for (uint64_t p = first; p <= last; ++p) {
    if (s.counts[p].fetch_add(1, std::memory_order_relaxed) == 0)
      ::mprotect(reinterpret_cast<void*>(arena_lo + p * page_size), page_size,
                 PROT_READ | PROT_WRITE);
  }
  s.pinned_bytes.fetch_add(len, std::memory_order_relaxed);
  s.live.fetch_add(1, std::memory_order_relaxed);
  sim_unlock();
  return 0;
}

inline void sim_unpin(void*, const void* addr, uint64_t len) {
  sim_arena& s = sim();
  const auto a = reinterpret_cast<uintptr_t>(addr);
  const uint64_t first = (a - arena_lo) / page_size, last = (a + len - 1 - arena_lo) / page_size;
  sim_lock();
  for (uint64_t p = first; p <= last; ++p) {
    if (s.counts[p].fetch_sub(1, std::memory_order_relaxed) == 1)
      ::mprotect(reinterpret_cast<void*>(arena_lo + p * page_size), page_size, PROT_NONE);
  }
  s.pinned_bytes.fetch_sub(len, std::memory_order_relaxed);
  s.live.fetch_sub(1, std::memory_order_relaxed);
  sim_unlock();
}

// Reserves the arena (PROT_NONE) and the per-page counts. In the child, before install.
inline void map_arena() {
  void* p = ::mmap(reinterpret_cast<void*>(arena_lo), arena_size, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
  ASSERT_EQ(p, reinterpret_cast<void*>(arena_lo)) << std::strerror(errno);
  void* c = ::mmap(nullptr, nr_pages * sizeof(uint32_t), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(c, MAP_FAILED);
  sim().counts = static_cast<std::atomic<uint32_t>*>(c);
}

inline kernel_access_config config(uint64_t max_pin = 1 << 20) {
  kernel_access_config c;
  c.arena_lo = arena_lo;
  c.arena_hi = arena_hi;
  c.trampoline_addr = trampoline;
  c.pin = sim_pin;
  c.unpin = sim_unpin;
  c.max_pin_bytes = max_pin;
  return c;
}

inline void install(uint64_t max_pin = 1 << 20) {
  const status st = kernel_access_install(config(max_pin), false);
  ASSERT_TRUE(st.ok()) << st.to_string();
}

template <class T = void>
T* at(uint64_t offset) {
  return reinterpret_cast<T*>(arena_lo + offset);
}

inline void poke(void* dst, const void* src, size_t n) {
  ASSERT_EQ(sim_pin(nullptr, dst, n, true), 0);
  std::memcpy(dst, src, n);
  sim_unpin(nullptr, dst, n);
}
inline void peek(void* dst, const void* src, size_t n) {
  ASSERT_EQ(sim_pin(nullptr, src, n, false), 0);
  std::memcpy(dst, src, n);
  sim_unpin(nullptr, src, n);
}

// Whether every page of [p, p + n) has no pin left (so it is PROT_NONE again).
inline bool unpinned(const void* p, size_t n) {
  for (size_t o = 0; o < n; o += page_size) {
    const uint64_t idx = (reinterpret_cast<uintptr_t>(p) + o - arena_lo) / page_size;
    if (sim().counts[idx].load() != 0) return false;
  }
  return true;
}

// Runs body in a forked child with the arena mapped (not yet installed: the body shows the
// EFAULT first); the test passes when the child's assertions all held.
inline void in_child(const std::function<void()>& body) {
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    map_arena();
    if (!::testing::Test::HasFailure()) body();
    std::fflush(stdout);
    std::fflush(stderr);
    ::_exit(::testing::Test::HasFailure() ? 1 : 0);
  }
  // A hung child (a call that should have been interrupted, a lost wake-up) fails the test
  // after two minutes instead of hanging the suite.
  int wst = 0;
  pid_t done = 0;
  for (int i = 0; i < 120000 && (done = ::waitpid(pid, &wst, WNOHANG)) == 0; ++i) ::usleep(1000);
  if (done == 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &wst, 0);
    ADD_FAILURE() << "the test child hung";
    return;
  }
  ASSERT_EQ(done, pid);
  if (WIFSIGNALED(wst)) {
    ADD_FAILURE() << "the test child died of signal " << WTERMSIG(wst);
  } else {
    EXPECT_TRUE(WIFEXITED(wst) && WEXITSTATUS(wst) == 0) << "the test child's checks failed";
  }
}

}  // namespace uswap::ka_test
