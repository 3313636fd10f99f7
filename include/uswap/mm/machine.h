// machine: one simulated computer's memory management: its RAM (phys_mem), the LRU lists that
// reclaim scans, the page allocator, and the address spaces (mm_struct) that run on it. The
// kernel counterpart is a NUMA node (pglist_data: node_zones, lruvec) plus the global VM state
// of mm/page_alloc.c and mm/swap.c.
//
// LRU (mm/swap.c): new anonymous pages go to the inactive anon list through a per-thread pagevec
// (the kernel's per-CPU lru_add pagevec), so the lru_lock is taken once per PAGEVEC_SIZE pages.
// A page on a list has PG_lru set; the list holds no reference of its own, so the last
// put_page takes the page off its list before freeing it.
//
// This first form has no swap area: allocation fails with ENOMEM once every frame is in use.
//
// Thread-safety: all public functions may be called from any thread, except that the machine
// must outlive every mm_struct it made, and the destructor must not race any other call.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "uswap/base/status.h"
#include "uswap/mm/mm_types.h"
#include "uswap/mm/page.h"
#include "uswap/mm/phys_mem.h"
#include "uswap/mm/vmstat.h"
#include "uswap/sync/lockstat.h"
#include "uswap/sync/mutex.h"

namespace uswap {

struct machine_options {
  uint64_t ram = uint64_t{64} << 20;  // bytes of RAM (page frames); default 64 MiB
  watermarks wmark{};                 // zero fields: derived from ram as the kernel does
};

// The LRU lists (enum lru_list). File lists are used by the rmap issue's file pages.
enum lru_list : unsigned {
  LRU_INACTIVE_ANON = 0,
  LRU_ACTIVE_ANON = 1,
  LRU_INACTIVE_FILE = 2,
  LRU_ACTIVE_FILE = 3,
  NR_LRU_LISTS = 4
};

inline constexpr unsigned PAGEVEC_SIZE = 15;  // pages per lru_add batch

class machine {
 public:
  // EINVAL for RAM below 16 pages; ENOMEM if the host cannot reserve it.
  static result<std::unique_ptr<machine>> create(const machine_options& opts);
  ~machine();
  machine(const machine&) = delete;
  machine& operator=(const machine&) = delete;

  // A new, empty address space (mm_alloc). It must be destroyed before the machine.
  std::unique_ptr<mm_struct> mm_alloc();

  phys_mem& mem() noexcept { return *mem_; }
  const phys_mem& mem() const noexcept { return *mem_; }
  uint64_t nr_free_pages() const noexcept { return mem_->nr_free(); }
  vm_event_counts events() const { return events_.snapshot(); }
  // Pages on each LRU list (not counting those in pagevecs or isolated by reclaim).
  uint64_t lru_size(lru_list l) const;

  // Moves every thread's pagevec onto the LRU (lru_add_drain_all).
  void lru_add_drain_all();

  // ---- for the mm layer's own files (memory.cc, rmap.cc, vmscan.cc, swap.cc) ----

  // Allocates a frame for a fault; ENOMEM when every frame is in use.
  result<page*> alloc_page();
  // Drops a reference; the last one frees the page (off the LRU, anon_vma reference dropped).
  void put_page(page* p) noexcept;
  // Queues a new page for the inactive LRU via this thread's pagevec (takes a reference).
  void lru_cache_add(page* p);
  // Frees a page whose refcount is already 0 (after page_ref_freeze): no LRU, no mapping.
  void free_frozen_page(page* p) noexcept;

  std::byte* page_address(const page* p) noexcept { return mem_->page_address(p); }
  page* pfn_to_page(uint32_t pfn) noexcept { return mem_->pfn_to_page(pfn); }
  vm_events& event_counters() noexcept { return events_; }

  lock_class* mmap_lock_class() noexcept { return &cls_mmap_lock_; }
  lock_class* ptl_class() noexcept { return &cls_ptl_; }
  lock_class* anon_vma_class() noexcept { return &cls_anon_vma_; }
  lock_class* page_lock_class() noexcept { return &cls_page_lock_; }

 private:
  struct pagevec;
  struct lru_head {
    uint32_t head = no_pfn;  // most recently added
    uint32_t tail = no_pfn;  // oldest: reclaim scans from here
    uint64_t nr = 0;
  };

  explicit machine(const machine_options& opts, std::unique_ptr<phys_mem> mem);

  // LRU list primitives, under lru_lock_.
  void add_page_to_lru_list(page* p, lru_list l);
  void del_page_from_lru_list(page* p, lru_list l);
  static lru_list page_lru(const page* p);
  pagevec* my_pagevec();
  void drain_pagevec(pagevec& pv);  // caller holds pv.lock
  // Frees a page whose refcount reached 0 (the rest of put_page).
  void free_unref_page(page* p) noexcept;

  const machine_options opts_;
  const uint64_t id_;  // unique per machine ever created: keys the thread-local pagevec cache
  lock_class cls_mmap_lock_{"mm.mmap_lock"};
  lock_class cls_ptl_{"mm.ptl"};
  lock_class cls_anon_vma_{"mm.anon_vma"};
  lock_class cls_page_lock_{"mm.page_lock"};
  lock_class cls_lru_lock_{"mm.lru_lock"};
  std::unique_ptr<phys_mem> mem_;
  vm_events events_;

  alignas(64) mutex lru_lock_{&cls_lru_lock_};
  lru_head lists_[NR_LRU_LISTS];
  std::atomic<uint64_t> lru_nr_[NR_LRU_LISTS] = {};  // lists_[l].nr, readable without the lock

  std::mutex pagevecs_lock_;  // the registry of per-thread pagevecs
  std::vector<std::unique_ptr<pagevec>> pagevecs_;

  friend struct mm_struct;
};

}  // namespace uswap
