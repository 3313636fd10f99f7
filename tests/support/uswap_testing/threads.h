// Helpers shared by the tests of every layer: start N threads at once (so they contend from the
// first operation), scale work down under ThreadSanitizer, and wait for a condition with a
// deadline (a liveness check, never a timing assertion: the deadline is minutes of slack, only
// there so that a deadlock fails instead of hanging).
//
// Work scaling is the one place a test learns that it runs under ThreadSanitizer (~10x slower):
// a case divides its iteration counts and sizes by work_scale, or by work_scale_by(d) where its
// budget under TSan was tuned to another divisor (a region that must stay a multiple of pages and
// larger than its limit, a compactor that 16 spinning readers would starve). In a plain build
// every divisor is 1, so what the test does there never depends on the sanitizer.
//
// Thread-safety: run_threads and eventually may be called from any thread; the constants are
// compile-time.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

namespace uswap::testing {

#if defined(USWAP_TSAN)
inline constexpr bool tsan_build = true;
#else
inline constexpr bool tsan_build = false;
#endif

// The divisor of a case's work: `tsan_divisor` under ThreadSanitizer, 1 otherwise.
constexpr int work_scale_by(int tsan_divisor) noexcept { return tsan_build ? tsan_divisor : 1; }

// The usual divisor: TSan's slow-down.
inline constexpr int work_scale = work_scale_by(10);

// Runs fn(thread_index) on n threads released together; joins them all.
inline void run_threads(int n, const std::function<void(int)>& fn) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      fn(i);
    });
  }
  while (ready.load() < n) std::this_thread::yield();
  go.store(true, std::memory_order_release);
  for (auto& t : threads) t.join();
}

// Polls pred until it holds or `limit` passes; returns whether it held.
inline bool eventually(const std::function<bool()>& pred,
                       std::chrono::nanoseconds limit = std::chrono::seconds(60)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return true;
}

}  // namespace uswap::testing
