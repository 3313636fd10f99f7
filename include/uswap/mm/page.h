// struct page: the descriptor of one page frame of a machine's RAM (include/linux/mm_types.h).
//
// Every frame of phys_mem has one, in one array indexed by page frame number (pfn), for the
// machine's whole life: a page pointer never dangles, which is what lets the swap cache be
// looked up speculatively (find the page, then get_page_unless_zero and re-check, as the kernel's
// lock-free page-cache lookup does under RCU with SLAB_TYPESAFE_BY_RCU).
//
// Fields and who may change them:
//   flags      PG_* bits, changed only by atomic read-modify-write (set/clear/test_and_*), so any
//              thread may flip one bit without a lock; bits 32/33 are the page lock (PG_locked,
//              a sync::bit_lock: spin briefly, then park), which serialises reclaim, swap-in and
//              swap-cache removal of the page, as lock_page() does.
//   _refcount  references: the allocator's caller, each pte mapping it, the swap cache, a pagevec,
//              an isolating reclaimer. 0 means free. get_page_unless_zero takes a reference only
//              from a live page; page_ref_freeze(n) turns exactly n into 0 (reclaim's last step).
//   _mapcount  how many ptes map the page (0-based here; the kernel stores it minus one).
//   mapping    for an anonymous page: its anon_vma | PAGE_MAPPING_ANON; set by the first
//              page_add_new_anon_rmap, cleared when the page is freed. The page holds a reference
//              on that anon_vma meanwhile (the kernel relies on RCU instead; see rmap.h).
//   index      the page's offset in its anon_vma's linear space (linear_page_index), from which
//              vma_address() finds the virtual address in each VMA that may map it.
//   private_   the swap entry (swp_entry_t.val) while PG_swapcache is set (page_private()).
//   lru        links of the LRU list the page is on (PG_lru); changed only under the lru_lock.
//
// Thread-safety: as above; every field that a stale speculative lookup may read is atomic, so a
// racing reader sees old or new values, never a torn one.
#pragma once

#include <atomic>
#include <cstdint>

#include "uswap/sync/bit_lock.h"

namespace uswap {

class lock_class;

// Page flag bits (include/linux/page-flags.h). The lock bits live in the upper 32-bit half so
// that flipping the frequently changed flags below does not disturb a thread parked on the lock.
enum page_flag : unsigned {
  PG_referenced = 0,  // seen referenced once on the inactive list (mark_page_accessed)
  PG_uptodate = 1,    // contents valid (zero-filled or read back from swap)
  PG_dirty = 2,       // contents differ from the copy in swap, if any: must be written first
  PG_lru = 3,         // on an LRU list (or owned by the LRU while isolated: see lruvec)
  PG_active = 4,      // on the active list
  PG_swapcache = 5,   // in the swap cache; private_ holds the swap entry
  PG_swapbacked = 6,  // anonymous memory: reclaimed through swap, not written to a file
  PG_reclaim = 7,     // being written out by reclaim
};
inline constexpr unsigned PG_locked = 32;         // held bit of the page lock
inline constexpr unsigned PG_locked_waiters = 33;  // someone is parked on the page lock

// Low bit of page->mapping: the pointer is an anon_vma, not an address_space.
inline constexpr uintptr_t PAGE_MAPPING_ANON = 1;

// An invalid pfn / list link.
inline constexpr uint32_t no_pfn = 0xffffffffu;

struct anon_vma;

struct page {
  using lock_bits = bit_lock<PG_locked, PG_locked_waiters>;

  std::atomic<uint64_t> flags{0};
  std::atomic<int32_t> _refcount{0};
  std::atomic<int32_t> _mapcount{0};
  std::atomic<uintptr_t> mapping{0};
  std::atomic<uint64_t> index{0};
  std::atomic<uint64_t> private_{0};
  // LRU links (pfns), under the lru_lock.
  uint32_t lru_prev = no_pfn;
  uint32_t lru_next = no_pfn;
  // Free-list link (pfn) while free; see phys_mem.
  std::atomic<uint32_t> free_next{no_pfn};
  uint32_t pfn = no_pfn;  // this page's frame number; set once by phys_mem

  // --- flags ---
  static constexpr uint64_t bit(unsigned f) { return uint64_t{1} << f; }
  bool test(page_flag f) const noexcept { return flags.load(std::memory_order_acquire) & bit(f); }
  void set(page_flag f) noexcept { flags.fetch_or(bit(f), std::memory_order_acq_rel); }
  void clear(page_flag f) noexcept { flags.fetch_and(~bit(f), std::memory_order_acq_rel); }
  bool test_and_set(page_flag f) noexcept {
    return flags.fetch_or(bit(f), std::memory_order_acq_rel) & bit(f);
  }
  bool test_and_clear(page_flag f) noexcept {
    return flags.fetch_and(~bit(f), std::memory_order_acq_rel) & bit(f);
  }

  // --- page lock (lock_page / trylock_page / unlock_page) ---
  void lock(lock_class* cls = nullptr) noexcept { lock_bits::lock(flags, cls); }
  bool trylock(lock_class* cls = nullptr) noexcept { return lock_bits::try_lock(flags, cls); }
  void unlock() noexcept { lock_bits::unlock(flags); }
  bool locked() const noexcept { return lock_bits::is_locked(flags); }

  // --- references ---
  int32_t refcount() const noexcept { return _refcount.load(std::memory_order_acquire); }
  void get() noexcept { _refcount.fetch_add(1, std::memory_order_relaxed); }
  // Takes a reference unless the page is free (refcount 0): the speculative-lookup primitive.
  bool get_unless_zero() noexcept {
    int32_t r = _refcount.load(std::memory_order_relaxed);
    while (r > 0) {
      if (_refcount.compare_exchange_weak(r, r + 1, std::memory_order_acquire,
                                          std::memory_order_relaxed))
        return true;
    }
    return false;
  }
  // Drops a reference; true when it was the last one (the caller then frees the page).
  bool put_testzero() noexcept { return _refcount.fetch_sub(1, std::memory_order_acq_rel) == 1; }
  // page_ref_freeze: refcount n -> 0 atomically, only if nobody else holds a reference.
  bool ref_freeze(int32_t n) noexcept {
    return _refcount.compare_exchange_strong(n, 0, std::memory_order_acq_rel,
                                             std::memory_order_relaxed);
  }

  // --- mapping ---
  int32_t mapcount() const noexcept { return _mapcount.load(std::memory_order_acquire); }
  bool mapped() const noexcept { return mapcount() > 0; }
  bool anon() const noexcept {
    return mapping.load(std::memory_order_acquire) & PAGE_MAPPING_ANON;
  }
  // page_anon_vma(): the anon_vma of an anonymous page, or nullptr.
  anon_vma* anon_vma_of() const noexcept {
    const uintptr_t m = mapping.load(std::memory_order_acquire);
    return (m & PAGE_MAPPING_ANON) ? reinterpret_cast<anon_vma*>(m & ~PAGE_MAPPING_ANON)
                                   : nullptr;
  }
};

}  // namespace uswap
