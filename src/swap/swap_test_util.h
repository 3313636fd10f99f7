// Helpers for the swap layer's tests: start N threads at once, scale work down under
// ThreadSanitizer, build systems in every lock mode with each slot cache form (off, the
// allocation side only as 6.14, both sides as 4.11).
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "uswap/swap/swap.h"
#include "uswap_testing/threads.h"

namespace uswap::testing {



inline constexpr swap_lock_mode all_modes[] = {swap_lock_mode::global, swap_lock_mode::cluster,
                                               swap_lock_mode::percpu};

struct mode_and_cache {
  swap_lock_mode mode;
  slot_cache_policy cache;
  bool percpu_inuse_counter = true;  // false: the kernel's single atomic inuse_pages
  bool freer_tag = true;             // false: the kernel's choice of a new cluster
};

inline std::string param_name(const mode_and_cache& p) {
  const std::string cache = p.cache == slot_cache_policy::by_mode ? "bymode" : to_string(p.cache);
  return std::string(to_string(p.mode)) + "_cache_" + cache +
         (p.percpu_inuse_counter ? "" : "_atomic_inuse") + (p.freer_tag ? "" : "_notag");
}

inline std::vector<mode_and_cache> every_mode_and_cache() {
  std::vector<mode_and_cache> v;
  for (swap_lock_mode m : all_modes)
    for (slot_cache_policy c :
         {slot_cache_policy::off, slot_cache_policy::alloc, slot_cache_policy::on})
      v.push_back({m, c});
  v.push_back({swap_lock_mode::percpu, slot_cache_policy::off, false});
  v.push_back({swap_lock_mode::percpu, slot_cache_policy::alloc, true, false});
  v.push_back({swap_lock_mode::cluster, slot_cache_policy::on, true, false});
  return v;
}

}  // namespace uswap::testing
