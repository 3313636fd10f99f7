// Page patterns and back-end set-up shared by the back end's tests.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>

#include "uswap/backend/swap_backend.h"
#include "uswap/base/hash.h"
#include "uswap/base/page.h"

namespace uswap::testing {

// A page that compresses (about half its words repeat) and says whose it is: every word derives
// from `tag`, so two tags never give the same page.
inline void fill_tagged_page(uint64_t tag, void* page) {
  auto* w = static_cast<uint64_t*>(page);
  for (size_t i = 0; i < page_size / 8; ++i) w[i] = (i & 1) ? tag : mix64(tag * 512 + i);
}

inline bool page_has_tag(uint64_t tag, const void* page) {
  alignas(64) unsigned char want[page_size];
  fill_tagged_page(tag, want);
  return std::memcmp(want, page, page_size) == 0;
}

// A back end as the uffd pager sets one up by default (percpu clusters, no slot cache, so a
// released slot and its object are freed at once), or in another swap lock mode with that mode's
// slot cache.
inline std::unique_ptr<swap_backend> make_backend(uint64_t slots, swap_dev_kind dev,
                                                  swap_lock_mode lock = swap_lock_mode::percpu,
                                                  zram_lock_mode zlock = zram_lock_mode::slot_bitlock) {
  swap_backend_options o;
  o.slots = slots;
  o.device = dev;
  o.swap.lock_mode = lock;
  if (lock == swap_lock_mode::percpu) o.swap.slot_cache = slot_cache_policy::off;
  o.zram.lock_mode = zlock;
  o.zram.comp_algorithm = "lz4";
  auto b = swap_backend::create(o);
  return b ? std::move(*b) : nullptr;
}

}  // namespace uswap::testing
