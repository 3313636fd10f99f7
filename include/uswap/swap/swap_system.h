// swap_system: the swap areas of one machine and the slot operations the mm layer calls, after
// the kernel's swap_info[] / swap_avail_head (mm/swapfile.c) and the per-CPU slot caches of
// 4.11's mm/swap_slots.c.
//
// How the mm layer uses it (the kernel's call sites in brackets):
//   swap-out  e = get_swap_page()           [folio_alloc_swap / add_to_swap]  slot has SWAP_HAS_CACHE
//             cache.add_to_swap_cache(e, page)                              (swap_cache.h)
//             swap_duplicate(e) per page table entry that now holds e       [try_to_unmap_one]
//             write the page to the backing store at swp_offset(e)          [swap_writepage]
//             cache.delete_from_swap_cache(e, page) -> put_swap_page(e)     [__remove_mapping]
//   swap-in   cache.read_swap_cache_async(e, ...): a cache hit, or swapcache_prepare(e) claims
//             SWAP_HAS_CACHE (EEXIST: another fault is reading it; retry), read, add to cache
//             [do_swap_page / __read_swap_cache_async]; then swap_free(e) for the page table
//             entry now mapping the page; when swap_free reports SWAP_HAS_CACHE alone is left,
//             the page may leave the cache: delete_from_swap_cache -> slot freed
//             [try_to_free_swap]. A synchronous-I/O fault that skips the cache uses
//             swapcache_prepare / swapcache_clear around the read [swapcache_clear, 6.8].
//   fork      swap_duplicate(e) for each copied swap PTE                    [copy_nonpresent_pte]
//   munmap    swap_free(e) for each swap PTE                                [free_swap_and_cache]
// A slot is freed when its count and its cache reference are both gone; slot_free_notify and,
// for whole clusters, discard_fn tell the backing store (zram frees the objects).
//
// Areas: swapon() adds one; allocation uses the highest priority first and areas of equal
// priority in turn, as swapon -p. A full area is skipped. Areas are not removed (no swapoff):
// swapon may run concurrently with slot operations, but areas are meant to be set up first.
//
// Per-CPU state: the kernel keeps a current cluster and a slot cache per CPU and touches them
// with preemption off. Here each live thread gets a small slot number (the lowest free one) and
// per-CPU structures are indexed by slot % nr_cpu_slots, so they are private to a thread as long
// as no more than nr_cpu_slots threads run; beyond that, threads share them safely (the current
// cluster is only a hint re-checked under the cluster lock, the slot cache has its own locks).
//
// Slot cache (4.11's swap_slots.c): get_swap_page takes slots from the thread slot's cache,
// refilled 64 at a time by get_swap_pages; with the freeing side on, a slot whose last reference
// goes is parked in the cache's return array and freed 64 at a time by swapcache_free_entries.
// With the allocation side only (slot_cache_policy::alloc, the 6.14 kernel, see swap.h) the last
// reference frees the slot at once: under its cluster lock in `percpu` mode, through
// swapcache_free_entries for that one slot in `cluster` mode, under the device lock in `global`.
// Under a low free-slot count (below 2 x 64 per thread slot in use) the caches are deactivated
// and drained, as the kernel's check_cache_active does, so a nearly full system still hands out
// every slot; they come back above 5 x 64. Which sides are used is swap_options::slot_cache.
//
// Thread-safety: every member may be called concurrently from any thread, except
// check_invariants (quiescent states only). Entries are plain values: the caller must own the
// reference it drops (the kernel's rule: a page table entry, a swap cache page).
// Errors: EINVAL for an entry that names no area or slot, ENOENT for a reference not held,
// EEXIST from swapcache_prepare when the cache reference is taken, ENOMEM / EOVERFLOW for counts
// past SWAP_MAP_MAX without continuation room. A failed operation changes nothing.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "uswap/base/status.h"
#include "uswap/swap/swap.h"
#include "uswap/swap/swap_area.h"
#include "uswap/sync/lockstat.h"

namespace uswap {

struct swap_options {
  // Locking of every area (swap.h). Default cluster: seed 000.
  swap_lock_mode lock_mode = swap_lock_mode::cluster;
  // Per-CPU slot caches. Default by_mode: as the kernel of each mode's era (global off,
  // cluster both sides, percpu the allocation side only).
  slot_cache_policy slot_cache = slot_cache_policy::by_mode;
  // Per-CPU structures (current clusters, slot caches): one per thread slot up to this many.
  // Default 64.
  unsigned nr_cpu_slots = 64;
  // percpu mode only: inuse_pages counted per thread slot and folded SWAP_BATCH at a time (a
  // percpu_counter) instead of one shared atomic written by every allocation and free, as the
  // kernel's si->inuse_pages is. Default true; false measures the kernel's form.
  bool percpu_inuse_counter = true;
  // Every mode: a thread slot picking a new cluster passes over partly used clusters another
  // thread slot is freeing into while a free cluster is left (the freer tag, swap_area.h), so
  // that an allocator does not chase a freer through one cluster. Default true; false gives the
  // kernel's order, any partly used cluster first.
  bool freer_tag = true;
  // lockstat classes for the device locks, the cluster locks and the slot cache locks. Default
  // nullptr: the system creates "swap si->lock", "swap cluster_lock", "swap slots_cache".
  // Passing classes lets a benchmark aggregate several systems under one name.
  lock_class* device_lock_class = nullptr;
  lock_class* cluster_lock_class = nullptr;
  lock_class* slot_cache_lock_class = nullptr;
};

class swap_system {
 public:
  explicit swap_system(const swap_options& opts = {});
  ~swap_system();
  swap_system(const swap_system&) = delete;
  swap_system& operator=(const swap_system&) = delete;

  // Adds an area; returns its type. EINVAL for bad options (named), ENOSPC past MAX_SWAPFILES,
  // ENOMEM if its tables cannot be allocated.
  result<unsigned> swapon(swap_area_options opts);

  // One slot with SWAP_HAS_CACHE, through the slot cache when it is on; the empty entry when
  // every area is full.
  swap_entry get_swap_page();
  // Up to n slots with SWAP_HAS_CACHE from one area, highest priority first, bypassing the slot
  // cache; returns how many were written to out (0: every area is full).
  int get_swap_pages(int n, swap_entry* out);

  // One more swap count (a page table entry now holds e).
  status swap_duplicate(swap_entry e);
  // Claims SWAP_HAS_CACHE for a swap-in: EEXIST if another holder has it (a racing fault or a
  // page already in the swap cache), ENOENT if the slot has no count (freed meanwhile).
  status swapcache_prepare(swap_entry e);
  // Drops one swap count; returns the slot's remaining swap_map byte: 0 when the slot is free,
  // SWAP_HAS_CACHE when only the swap cache holds it (the page may now leave the cache).
  result<unsigned char> swap_free(swap_entry e);
  // Drops SWAP_HAS_CACHE (put_swap_folio / swapcache_free in the kernel), freeing the slot if
  // no count is left. swap_cache::delete_from_swap_cache calls it.
  status put_swap_page(swap_entry e);
  // The 6.8 name for dropping a cache reference taken by swapcache_prepare without adding a
  // page to the cache (synchronous-I/O swap-in); the same operation as put_swap_page.
  status swapcache_clear(swap_entry e) { return put_swap_page(e); }

  // Exact swap count, continuation included (swp_swapcount).
  result<uint64_t> swap_count(swap_entry e) const;
  // The slot's swap_map byte, unlocked snapshot (0 for an entry that names no slot).
  unsigned char swap_map_byte(swap_entry e) const;

  // Returns every slot parked in the slot caches to its area (swapoff and tests use this).
  void drain_swap_slots_cache();
  // The allocation side is on (policy on or alloc), the freeing side is on (policy on).
  bool slot_cache_enabled() const noexcept { return cache_enabled_; }
  bool slot_cache_free_enabled() const noexcept { return free_cache_enabled_; }
  bool slot_cache_active() const noexcept { return cache_active_.load(std::memory_order_relaxed); }

  // Free slots over all areas (slots parked in slot caches count as used), and all usable slots.
  uint64_t nr_swap_pages() const noexcept;
  uint64_t total_swap_pages() const noexcept;
  unsigned nr_areas() const noexcept { return nr_areas_.load(std::memory_order_acquire); }
  // nullptr if no such area.
  swap_area* area(unsigned type) const noexcept;

  swap_lock_mode lock_mode() const noexcept { return opts_.lock_mode; }
  const swap_options& options() const noexcept { return opts_; }

  // Quiescent only: every area's check_invariants.
  status check_invariants() const;

 private:
  struct swap_slots_cache;
  struct avail_order {
    // Areas grouped by priority, highest first.
    std::vector<std::vector<swap_area*>> groups;
  };

  result<swap_area*> area_of(swap_entry e, const char* op) const;
  result<unsigned char> put(swap_entry e, unsigned char usage);
  int get_swap_pages_on(unsigned cpu, int n, swap_entry* out);
  swap_slots_cache& cache_for(unsigned cpu);
  bool check_cache_active();
  void deactivate_swap_slots_cache();
  void drain_locked();
  void free_swap_slot(swap_entry e);
  // swapcache_free_entries over areas: sorts by area, frees each area's run in one call.
  void free_entries(swap_entry* entries, size_t n);

  swap_options opts_;
  std::unique_ptr<lock_class> own_device_class_, own_cluster_class_, own_cache_class_;
  lock_class* device_class_;
  lock_class* cluster_class_;
  lock_class* cache_class_;

  std::mutex swapon_mutex_;
  int least_priority_ = 0;
  std::unique_ptr<swap_area> areas_[MAX_SWAPFILES];
  std::atomic<unsigned> nr_areas_{0};
  // The current priority order, replaced (never changed) by swapon; old orders are kept until
  // destruction so a reader never sees one freed.
  std::atomic<const avail_order*> avail_{nullptr};
  std::vector<std::unique_ptr<avail_order>> avail_history_;

  const bool cache_enabled_;       // allocation side
  const bool free_cache_enabled_;  // freeing side (implies the allocation side)
  std::atomic<bool> cache_active_{false};
  std::atomic<unsigned> slots_in_use_{0};
  std::mutex slots_cache_mutex_;  // activation, deactivation, drain
  std::vector<std::unique_ptr<swap_slots_cache>> caches_;
};

}  // namespace uswap
