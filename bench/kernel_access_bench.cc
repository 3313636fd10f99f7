// What the kernel-access module (src/uffd/kernel_access.h) costs: a 4 KiB pread into the arena
// that the seccomp filter traps and the SIGSYS handler emulates, against the same pread into
// ordinary memory; and a system call the filter lets through (getpid) with and without the
// filter installed. Pins are either free (the arena page is ordinary read-write memory and pin
// does nothing: the module's own overhead) or the tests' mprotect simulation (two mprotect
// calls and a TLB flush per pin; the pager's pin is a few atomic operations on page state).
//
// A filter cannot be removed, so the benchmarks without it run first (registration order);
// one that finds the filter already installed reports an error instead of a wrong figure.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "kernel_access.h"

namespace {

constexpr uintptr_t arena_lo = uintptr_t{1} << 38;
constexpr uintptr_t arena_size = uintptr_t{1} << 32;
constexpr uintptr_t trampoline = arena_lo - (uintptr_t{1} << 30);
constexpr size_t page = 4096;

// The arena's first pages: free_pages are read-write (pins are no-ops there), the mprotect
// pages start PROT_NONE and are made read-write by a pin.
constexpr uintptr_t free_page = arena_lo;
constexpr uintptr_t protected_page = arena_lo + 64 * page;
std::atomic<int> counts[128];

int pin(void*, const void* addr, uint64_t len, bool) {
  const auto a = reinterpret_cast<uintptr_t>(addr);
  if (a < protected_page) return 0;
  for (uintptr_t p = a & ~(page - 1); p < a + len; p += page)
    if (counts[(p - arena_lo) / page].fetch_add(1) == 0)
      mprotect(reinterpret_cast<void*>(p), page, PROT_READ | PROT_WRITE);
  return 0;
}

void unpin(void*, const void* addr, uint64_t len) {
  const auto a = reinterpret_cast<uintptr_t>(addr);
  if (a < protected_page) return;
  for (uintptr_t p = a & ~(page - 1); p < a + len; p += page)
    if (counts[(p - arena_lo) / page].fetch_sub(1) == 1)
      mprotect(reinterpret_cast<void*>(p), page, PROT_NONE);
}

int file_fd() {
  static const int fd = [] {
    char path[] = "/tmp/uswap_ka_bench_XXXXXX";
    const int f = mkstemp(path);
    unlink(path);
    static char buf[page];
    std::memset(buf, 'x', sizeof buf);
    if (f < 0 || pwrite(f, buf, sizeof buf, 0) != static_cast<ssize_t>(sizeof buf)) std::abort();
    return f;
  }();
  return fd;
}

bool ensure_installed() {
  if (uswap::kernel_access_installed()) return true;
  if (mmap(reinterpret_cast<void*>(arena_lo), arena_size, PROT_NONE,
           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1,
           0) != reinterpret_cast<void*>(arena_lo))
    return false;
  mprotect(reinterpret_cast<void*>(free_page), 64 * page, PROT_READ | PROT_WRITE);
  uswap::kernel_access_config c;
  c.arena_lo = arena_lo;
  c.arena_hi = arena_lo + arena_size;
  c.trampoline_addr = trampoline;
  c.pin = pin;
  c.unpin = unpin;
  c.max_pin_bytes = 1 << 20;
  return uswap::kernel_access_install(c, false).ok();
}

void BM_Getpid_NoFilter(benchmark::State& state) {
  if (uswap::kernel_access_installed()) {
    state.SkipWithError("the filter is already installed (run without --benchmark_filter)");
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(syscall(SYS_getpid));
}

void BM_Pread4K_OrdinaryMemory_NoFilter(benchmark::State& state) {
  if (uswap::kernel_access_installed()) {
    state.SkipWithError("the filter is already installed (run without --benchmark_filter)");
    return;
  }
  alignas(4096) static char buf[page];
  for (auto _ : state) benchmark::DoNotOptimize(pread(file_fd(), buf, page, 0));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * page);
}

void BM_Getpid_Filter(benchmark::State& state) {
  if (!ensure_installed()) {
    state.SkipWithError("install failed");
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(syscall(SYS_getpid));
}

void BM_Pread4K_OrdinaryMemory_Filter(benchmark::State& state) {
  if (!ensure_installed()) {
    state.SkipWithError("install failed");
    return;
  }
  alignas(4096) static char buf[page];
  for (auto _ : state) benchmark::DoNotOptimize(pread(file_fd(), buf, page, 0));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * page);
}

void BM_Pread4K_Arena_Trapped_FreePins(benchmark::State& state) {
  if (!ensure_installed()) {
    state.SkipWithError("install failed");
    return;
  }
  auto* buf = reinterpret_cast<char*>(free_page);
  const uint64_t t0 = uswap::kernel_access_get_stats().trapped;
  for (auto _ : state) benchmark::DoNotOptimize(pread(file_fd(), buf, page, 0));
  if (uswap::kernel_access_get_stats().trapped - t0 < static_cast<uint64_t>(state.iterations()))
    state.SkipWithError("the reads were not trapped");
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * page);
}

void BM_Pread4K_Arena_Trapped_MprotectPins(benchmark::State& state) {
  if (!ensure_installed()) {
    state.SkipWithError("install failed");
    return;
  }
  auto* buf = reinterpret_cast<char*>(protected_page);
  for (auto _ : state) {
    if (pread(file_fd(), buf, page, 0) != static_cast<ssize_t>(page)) {
      state.SkipWithError("pread into the arena failed");
      break;
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * page);
}

void BM_Pread4K_Arena_Emulate_FreePins(benchmark::State& state) {
  if (!ensure_installed()) {
    state.SkipWithError("install failed");
    return;
  }
  auto* buf = reinterpret_cast<char*>(free_page);
  for (auto _ : state)
    benchmark::DoNotOptimize(uswap::kernel_access_emulate(SYS_pread64, file_fd(),
                                                          reinterpret_cast<long>(buf), page, 0));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * page);
}

}  // namespace

BENCHMARK(BM_Getpid_NoFilter);
BENCHMARK(BM_Pread4K_OrdinaryMemory_NoFilter);
BENCHMARK(BM_Getpid_Filter);
BENCHMARK(BM_Pread4K_OrdinaryMemory_Filter);
BENCHMARK(BM_Pread4K_Arena_Trapped_FreePins);
BENCHMARK(BM_Pread4K_Arena_Trapped_MprotectPins);
BENCHMARK(BM_Pread4K_Arena_Emulate_FreePins);

BENCHMARK_MAIN();
