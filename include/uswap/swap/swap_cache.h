// swap_cache<T>: swap entry -> the page-sized object that holds the slot's data in memory, after
// the kernel's swap cache (mm/swap_state.c: add_to_swap_cache, lookup_swap_cache,
// delete_from_swap_cache, __read_swap_cache_async).
//
// The swap layer sits below mm and does not know its page type: T is whatever the mm layer
// keeps a page in (its struct page, a frame index wrapper...). The cache stores a non-owning T*
// and never dereferences it; keeping the object alive while it is in the cache is the caller's
// business (the kernel holds a page reference for the swap cache; do the same in T).
//
// Why a page is in the swap cache: while it is being written out (swap-out keeps the page
// findable until the write finished and the page is freed) and after a swap-in (so that other
// page tables mapping the same entry fault on the same page). A page is in the cache only
// while its slot holds SWAP_HAS_CACHE (add_to_swap_cache checks it; delete_from_swap_cache drops
// it with swap_system::put_swap_page), so the swap_map byte says whether the cache may hold
// the entry, and swapcache_prepare resolves concurrent faults on one entry: exactly one of them
// claims SWAP_HAS_CACHE and reads the page in; the others get EEXIST and find the page in the
// cache once it is added (read_swap_cache_async below does this loop; mm's do_swap_page uses it).
//
// Sharding: one lock and one hash map per shard, the shard chosen from the entry's cluster
// (hashed), so the clusters that different threads allocate from (their current clusters) fall
// in different shards; there is no global lock. The kernel shards the same way by 64 MiB of swap
// (one address_space per SWAP_ADDRESS_SPACE_PAGES).
//
// Thread-safety: every member may be called concurrently. The `pin` callbacks run under the
// shard lock: they must be short and must not call into the swap layer.
#pragma once

#include <cerrno>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "uswap/base/page.h"
#include "uswap/base/status.h"
#include "uswap/swap/swap.h"
#include "uswap/swap/swap_system.h"
#include "uswap/sync/lockstat.h"
#include "uswap/sync/mutex.h"

namespace uswap {

template <class T>
class swap_cache {
 public:
  // nr_shards is rounded up to a power of two (at least 1). Default 64.
  explicit swap_cache(swap_system& sys, unsigned nr_shards = 64, lock_class* cls = nullptr)
      : sys_(sys) {
    unsigned n = 1;
    while (n < nr_shards) n <<= 1;
    shard_bits_ = 0;
    while ((1u << shard_bits_) < n) ++shard_bits_;
    shards_.reserve(n);
    for (unsigned i = 0; i < n; ++i) shards_.push_back(std::make_unique<shard>(cls));
  }
  swap_cache(const swap_cache&) = delete;
  swap_cache& operator=(const swap_cache&) = delete;

  // add_to_swap_cache: the caller holds the entry's SWAP_HAS_CACHE (from get_swap_page or
  // swapcache_prepare). EINVAL: no object, or the slot does not hold SWAP_HAS_CACHE; EEXIST: the
  // entry is already cached (a caller bug: only the SWAP_HAS_CACHE holder adds); ENOMEM.
  status add_to_swap_cache(swap_entry e, T* obj) {
    if (!obj) return error(EINVAL, "add_to_swap_cache: null object for " + to_string(e));
    if (!(sys_.swap_map_byte(e) & SWAP_HAS_CACHE))
      return error(EINVAL, "add_to_swap_cache: " + to_string(e) +
                               " does not hold SWAP_HAS_CACHE (get_swap_page or "
                               "swapcache_prepare first)");
    shard& s = shard_of(e);
    std::lock_guard g(s.lock);
    try {
      if (!s.map.emplace(e.val, obj).second)
        return error(EEXIST, "add_to_swap_cache: " + to_string(e) + " is already cached");
    } catch (const std::bad_alloc&) {
      return error(ENOMEM, "add_to_swap_cache: no memory for " + to_string(e));
    }
    return {};
  }

  // The cached object, or nullptr.
  T* lookup_swap_cache(swap_entry e) const {
    return lookup_swap_cache(e, [](T*) {});
  }
  // The same, calling pin(obj) under the shard lock when found, so the caller can take a
  // reference before a concurrent delete_from_swap_cache may drop the cache's.
  template <class Pin>
  T* lookup_swap_cache(swap_entry e, Pin&& pin) const {
    const shard& s = shard_of(e);
    std::lock_guard g(s.lock);
    auto it = s.map.find(e.val);
    if (it == s.map.end()) return nullptr;
    pin(it->second);
    return it->second;
  }

  // delete_from_swap_cache: removes e if it maps to obj, then drops SWAP_HAS_CACHE
  // (put_swap_page), which frees the slot when no swap count is left. ENOENT if e does not map
  // to obj (nothing is changed).
  status delete_from_swap_cache(swap_entry e, T* obj) {
    {
      shard& s = shard_of(e);
      std::lock_guard g(s.lock);
      auto it = s.map.find(e.val);
      if (it == s.map.end() || it->second != obj)
        return error(ENOENT, "delete_from_swap_cache: " + to_string(e) +
                                 (it == s.map.end() ? " is not cached" : " caches another object"));
      s.map.erase(it);
    }
    return sys_.put_swap_page(e);
  }

  // __read_swap_cache_async: the object for e, from the cache, or a new one filled from the
  // backing store and added to the cache, with concurrent callers for one entry resolved so that
  // exactly one of them reads (the others get EEXIST from swapcache_prepare and find its object
  // in the cache once it is added). The caller supplies its side as `src`:
  //   bool pin(T* obj)                   a cache hit, under the shard lock: take a reference.
  //                                      false: the object is on its way out (reclaim froze it);
  //                                      its slot is released in a moment, so the lookup retries
  //   result<T*> alloc()                 a new object, made before the entry is claimed, so that
  //                                      racing faults never wait while this one allocates (it
  //                                      may reclaim)
  //   status read(swap_entry e, T* obj)  fills obj from the backing store; e's SWAP_HAS_CACHE is
  //                                      the caller's for the duration
  //   void release(T* obj)               an object from alloc() that was not added to the cache
  //   bool stale()                       the caller's reference to e went away (its PTE changed):
  //                                      give up with EAGAIN, checked before every attempt
  // *allocated tells whether the object returned is this call's, just added to the cache.
  // Errors: EAGAIN (stale), ENOENT / EINVAL from swapcache_prepare (the entry was freed), or
  // alloc's, read's or add_to_swap_cache's error; on error nothing is left claimed or allocated.
  template <class Source>
  result<T*> read_swap_cache_async(swap_entry e, Source& src, bool* allocated = nullptr) {
    if (allocated) *allocated = false;
    T* fresh = nullptr;
    auto give_up = [&](status st) -> result<T*> {
      if (fresh) src.release(fresh);
      return st;
    };
    for (;;) {
      if (src.stale()) return give_up(error(EAGAIN, "swap-in of " + to_string(e) + ": the entry changed"));
      bool busy = false;
      if (T* hit = lookup_swap_cache(e, [&](T* obj) { busy = !src.pin(obj); })) {
        if (!busy) {
          if (fresh) src.release(fresh);
          return hit;
        }
        std::this_thread::yield();
        continue;
      }
      if (!fresh) {
        result<T*> made = src.alloc();
        if (!made.ok()) return made.error();
        fresh = *made;
        continue;  // the allocation may have taken long: look again before claiming
      }
      status st = sys_.swapcache_prepare(e);
      if (st.code() == EEXIST) {
        // Another fault claimed the entry and is reading it, or a swap-out has not finished
        // adding its page yet: the page appears in the cache shortly.
        std::this_thread::yield();
        continue;
      }
      if (!st.ok()) return give_up(std::move(st));
      st = src.read(e, fresh);
      if (st.ok()) st = add_to_swap_cache(e, fresh);
      if (!st.ok()) {
        (void)sys_.swapcache_clear(e);
        return give_up(std::move(st));
      }
      if (allocated) *allocated = true;
      return fresh;
    }
  }

  // Entries cached now (a sum over shards, not an atomic cut).
  size_t size() const {
    size_t n = 0;
    for (const auto& s : shards_) {
      std::lock_guard g(s->lock);
      n += s->map.size();
    }
    return n;
  }
  // Entries per shard, for statistics and for checking the spread.
  std::vector<size_t> shard_sizes() const {
    std::vector<size_t> out;
    for (const auto& s : shards_) {
      std::lock_guard g(s->lock);
      out.push_back(s->map.size());
    }
    return out;
  }
  unsigned nr_shards() const noexcept { return static_cast<unsigned>(shards_.size()); }
  swap_system& system() noexcept { return sys_; }

 private:
  struct alignas(cache_line_size) shard {
    explicit shard(lock_class* cls) : lock(cls) {}
    mutable mutex lock;
    std::unordered_map<uint64_t, T*> map;
  };

  // Fibonacci hashing of (type, cluster): neighbouring clusters, and the column-ordered ones
  // the free list hands out first, spread over all shards.
  unsigned shard_index(swap_entry e) const noexcept {
    if (shard_bits_ == 0) return 0;
    const uint64_t key = e.val / SWAPFILE_CLUSTER;
    return static_cast<unsigned>((key * 0x9E3779B97F4A7C15ULL) >> (64 - shard_bits_));
  }
  shard& shard_of(swap_entry e) noexcept { return *shards_[shard_index(e)]; }
  const shard& shard_of(swap_entry e) const noexcept { return *shards_[shard_index(e)]; }

  swap_system& sys_;
  unsigned shard_bits_ = 0;
  std::vector<std::unique_ptr<shard>> shards_;
};

}  // namespace uswap
