// Helpers for the swap layer's tests: start N threads at once, scale work down under
// ThreadSanitizer, build systems in every lock mode.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "uswap/swap/swap.h"

namespace uswap::testing {

#if defined(USWAP_TSAN)
inline constexpr int work_scale = 10;
#else
inline constexpr int work_scale = 1;
#endif

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

inline constexpr swap_lock_mode all_modes[] = {swap_lock_mode::global, swap_lock_mode::cluster,
                                               swap_lock_mode::percpu};

struct mode_and_cache {
  swap_lock_mode mode;
  slot_cache_policy cache;
  bool percpu_inuse_counter = true;  // false: the kernel's single atomic inuse_pages
};

inline std::string param_name(const mode_and_cache& p) {
  return std::string(to_string(p.mode)) + "_cache_" +
         (p.cache == slot_cache_policy::on ? "on" : p.cache == slot_cache_policy::off ? "off"
                                                                                      : "bymode") +
         (p.percpu_inuse_counter ? "" : "_atomic_inuse");
}

inline std::vector<mode_and_cache> every_mode_and_cache() {
  std::vector<mode_and_cache> v;
  for (swap_lock_mode m : all_modes)
    for (slot_cache_policy c : {slot_cache_policy::off, slot_cache_policy::on}) v.push_back({m, c});
  v.push_back({swap_lock_mode::percpu, slot_cache_policy::off, false});
  return v;
}

}  // namespace uswap::testing
