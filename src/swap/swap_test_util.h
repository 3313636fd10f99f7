// Helpers for the swap layer's tests: start N threads at once, scale work down under
// ThreadSanitizer, build systems in every lock mode with each slot cache form (off, the
// allocation side only as 6.14, both sides as 4.11), and the fixture of the suites that run in
// all of them.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "uswap/swap/swap.h"
#include "uswap/swap/swap_system.h"
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

// A suite run in every mode_and_cache: opts() is the swap_options of the case's parameter.
class mode_and_cache_test : public ::testing::TestWithParam<mode_and_cache> {
 protected:
  swap_options opts() const {
    swap_options o;
    o.lock_mode = GetParam().mode;
    o.slot_cache = GetParam().cache;
    o.percpu_inuse_counter = GetParam().percpu_inuse_counter;
    o.freer_tag = GetParam().freer_tag;
    return o;
  }
};

struct mode_and_cache_name {
  std::string operator()(const ::testing::TestParamInfo<mode_and_cache>& info) const {
    return param_name(info.param);
  }
};

}  // namespace uswap::testing
