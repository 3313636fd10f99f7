// machine: one simulated computer's memory management: its RAM (phys_mem), the LRU lists that
// reclaim scans, the page allocator and its reclaim policy, the background reclaimer (kswapd),
// the swap area with its swap cache and swap device (zram or an uncompressed RAM disk), and the
// address spaces (mm_struct) that run on it. The kernel counterpart is a NUMA node (pglist_data:
// node_zones, lruvec, kswapd) plus the global VM state of mm/page_alloc.c, mm/swap.c,
// mm/vmscan.c and mm/swapfile.c (swap_info[], swapper_spaces).
//
// LRU (mm/swap.c): new anonymous pages go to the inactive anon list through a per-thread pagevec
// (the kernel's per-CPU lru_add pagevec), so the lru_lock is taken once per PAGEVEC_SIZE pages.
// A page on a list has PG_lru set; the list holds no reference of its own, so the last
// put_page takes the page off its list before freeing it.
//
// Reclaim (mm/vmscan.c):
//   - shrink_inactive_list isolates up to SWAP_CLUSTER_MAX pages from the inactive tail and runs
//     shrink_page_list on them: a page referenced through a young pte goes to the active list;
//     otherwise add_to_swap (a slot, the swap cache), try_to_unmap (every pte becomes a swap pte,
//     taking a swap count each), pageout (the swap device's write) and __remove_mapping (the
//     page leaves the swap cache, the slot keeps the data) free the frame. shrink_active_list
//     clears young bits and moves pages back to the inactive list, keeping the inactive list at
//     least as long as the active one (inactive_is_low).
//   - kswapd wakes when free frames drop below the low watermark and reclaims until they reach
//     high. An allocation that finds free frames at or below min reclaims in its own thread
//     (direct reclaim). When reclaim frees nothing for MAX_RECLAIM_RETRIES rounds (swap full, or
//     the swap device refusing writes), the allocation fails with ENOMEM: the kernel would
//     OOM-kill; uswap reports the error to the faulting access and changes nothing.
//
// Swap-in (mm/memory.c do_swap_page, mm/swap_state.c): the swap cache first; else this fault
// claims the slot (swapcache_prepare), reads the page from the swap device into a new frame and
// adds it to the swap cache, so concurrent faults on one entry map one frame.
//
// Thread-safety: all public functions may be called from any thread, except that the machine
// must outlive every mm_struct it made, and the destructor must not race any other call.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "uswap/base/status.h"
#include "uswap/mm/mm_types.h"
#include "uswap/mm/page.h"
#include "uswap/mm/phys_mem.h"
#include "uswap/mm/rmap_lock.h"
#include "uswap/backend/swap_backend.h"
#include "uswap/mm/vmstat.h"
#include "uswap/swap/swap.h"
#include "uswap/sync/lockstat.h"
#include "uswap/sync/mutex.h"
#include "uswap/zram/zram.h"

namespace uswap {

class swap_system;
template <class T>
class swap_cache;

struct machine_options {
  uint64_t ram = uint64_t{64} << 20;  // bytes of RAM (page frames); default 64 MiB
  watermarks wmark{};                 // zero fields: derived from ram as the kernel does
  bool kswapd = true;                 // run the background reclaimer; default on

  // Swap: `swap` bytes of swap space (0, the default: no swap; anonymous pages stay in RAM).
  uint64_t swap = 0;
  swap_dev_kind swap_dev = swap_dev_kind::zram;            // default zram
  swap_lock_mode swap_lock = swap_lock_mode::cluster;      // default cluster (seed 000)
  slot_cache_policy slot_cache = slot_cache_policy::by_mode;  // default: as each mode's kernel
  // zram device settings when swap_dev is zram (disksize is set to `swap`). Defaults: the zram
  // layer's (lzo, slot_bitlock, checksums on, no mem_limit).
  zram_options zram{};
  // The reverse-map locks (anon_vma root lock, every file's i_mmap lock): rwsem (default, seed
  // 001 and today's kernel) or spin (before the seed). See rmap_lock.h.
  rmap_lock_mode rmap_lock = rmap_lock_mode::rwsem;
};

// The LRU lists (enum lru_list): anonymous pages (PG_swapbacked) on the anon lists, page cache
// pages on the file lists.
enum lru_list : unsigned {
  LRU_INACTIVE_ANON = 0,
  LRU_ACTIVE_ANON = 1,
  LRU_INACTIVE_FILE = 2,
  LRU_ACTIVE_FILE = 3,
  NR_LRU_LISTS = 4
};

inline constexpr unsigned SWAP_CLUSTER_MAX = 32;  // pages isolated per reclaim batch
inline constexpr unsigned PAGEVEC_SIZE = 15;      // pages per lru_add batch
inline constexpr int DEF_PRIORITY = 12;           // a pass scans lru_size >> priority pages
inline constexpr int MAX_RECLAIM_RETRIES = 16;    // rounds without progress before ENOMEM

struct scan_control {
  uint64_t nr_to_reclaim = SWAP_CLUSTER_MAX;
  int priority = DEF_PRIORITY;
  bool kswapd = false;  // counts as pgscan_kswapd / pgsteal_kswapd rather than _direct
  uint64_t nr_scanned = 0;
  uint64_t nr_reclaimed = 0;
};

// Swap occupancy, for reports and for the "everything freed" checks.
struct swap_usage {
  uint64_t total = 0;          // usable slots
  uint64_t free = 0;           // free slots (slots parked in slot caches count as used)
  uint64_t inuse = 0;          // slots in use, read from the area (inuse_pages)
  uint64_t cached = 0;         // pages in the swap cache
  uint64_t write_errors = 0;   // pageouts the swap device refused (zram mem_limit)
};

class machine {
 public:
  // EINVAL for RAM below 16 pages or a bad swap option; ENOMEM if the host cannot reserve RAM
  // or the swap device.
  static result<std::unique_ptr<machine>> create(const machine_options& opts);
  ~machine();
  machine(const machine&) = delete;
  machine& operator=(const machine&) = delete;

  // A new, empty address space (mm_alloc). It must be destroyed before the machine.
  std::unique_ptr<mm_struct> mm_alloc();

  const machine_options& options() const noexcept { return opts_; }
  phys_mem& mem() noexcept { return *mem_; }
  const phys_mem& mem() const noexcept { return *mem_; }
  uint64_t nr_free_pages() const noexcept { return mem_->nr_free(); }
  vm_event_counts events() const { return events_.snapshot(); }
  // Pages on each LRU list (not counting those in pagevecs or isolated by reclaim).
  uint64_t lru_size(lru_list l) const;

  // Swap: nullptr when the machine has none.
  swap_system* swap_sys() noexcept { return swap_; }
  // The swap area and its device (statistics, mem_limit), or nullptr.
  swap_backend* backend() noexcept { return backend_.get(); }
  swap_usage swap_stats() const;

  // Reclaims up to nr pages now in the calling thread (try_to_free_pages); returns how many
  // frames it freed.
  uint64_t shrink(uint64_t nr);
  // Moves every thread's pagevec onto the LRU (lru_add_drain_all).
  void lru_add_drain_all();
  // Waits until kswapd is asleep, so counts read afterwards are not moving.
  void kswapd_quiesce();

  // ---- for the mm layer's own files (memory.cc, rmap.cc, vmscan.cc, swap_state.cc) ----

  // Allocates a frame for a fault: fast path while free frames stay above min (waking kswapd
  // below low), else direct reclaim; ENOMEM when reclaim makes no progress.
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

  // Swap, for memory.cc and rmap.cc (swap_state.cc).
  swap_cache<page>* swap_cache_of() noexcept { return cache_.get(); }
  bool swap_duplicate(uint64_t entry);         // try_to_unmap_one's count for a swap pte
  void free_swap_and_cache(uint64_t entry);    // zap of a swap pte
  void free_swap_cache(page* p);               // zap of a present pte of a swap-cache page
  bool try_to_free_swap(page* p);              // page locked; see swap_state.cc
  bool vm_swap_full() const noexcept;
  // The swap cache's page for entry with a reference taken, or nullptr; *busy when the page
  // is there but being freed (retry).
  page* lookup_swap_cache(uint64_t entry, bool* busy);

  lock_class* mmap_lock_class() noexcept { return &cls_mmap_lock_; }
  lock_class* ptl_class() noexcept { return &cls_ptl_; }
  lock_class* anon_vma_class() noexcept { return &cls_anon_vma_; }
  lock_class* i_mmap_class() noexcept { return &cls_i_mmap_; }
  lock_class* i_pages_class() noexcept { return &cls_i_pages_; }
  rmap_lock_mode rmap_mode() const noexcept { return opts_.rmap_lock; }
  // add_to_swap (swap_state.cc): a slot and the swap cache for a locked anonymous page. Public
  // for the layer's tests, which drive try_to_unmap by hand.
  bool add_to_swap(page* p);
  lock_class* page_lock_class() noexcept { return &cls_page_lock_; }

 private:
  struct pagevec;
  struct lru_head {
    uint32_t head = no_pfn;  // most recently added
    uint32_t tail = no_pfn;  // oldest: reclaim scans from here
    uint64_t nr = 0;
  };

  explicit machine(const machine_options& opts, std::unique_ptr<phys_mem> mem);
  status swapon();

  // LRU list primitives, under lru_lock_.
  void add_page_to_lru_list(page* p, lru_list l);
  void del_page_from_lru_list(page* p, lru_list l);
  static lru_list page_lru(const page* p);
  pagevec* my_pagevec();
  void drain_pagevec(pagevec& pv);  // caller holds pv.lock
  // Frees a page whose refcount reached 0 (the rest of put_page).
  void free_unref_page(page* p) noexcept;

  // vmscan.cc
  // Returns the pages freed; *scanned (if given) the pages looked at.
  uint64_t try_to_free_pages(uint64_t nr, bool kswapd, uint64_t* scanned = nullptr);
  void shrink_node(scan_control& sc);
  void shrink_active_list(uint64_t nr_to_scan, lru_list l, scan_control& sc);
  void shrink_inactive_list(uint64_t nr_to_scan, lru_list l, scan_control& sc);
  uint64_t isolate_lru_pages(uint64_t nr_to_scan, lru_list l, page** out, uint64_t* scanned);
  void putback_lru_pages(page** pages, uint64_t n);
  uint64_t shrink_page_list(page** pages, uint64_t& n, scan_control& sc);
  bool inactive_is_low(bool file) const;
  void wakeup_kswapd();
  void kswapd_main();

  // swap_state.cc
  bool can_reclaim_anon() const noexcept;
  uint64_t swap_count_of(const page* p) const;
  bool pageout(page* p);
  bool remove_mapping(page* p);

  const machine_options opts_;
  const uint64_t id_;  // unique per machine ever created: keys the thread-local pagevec cache
  lock_class cls_mmap_lock_{"mm.mmap_lock"};
  lock_class cls_ptl_{"mm.ptl"};
  // Kernel names, so lock statistics read like /proc/lock_stat: the pre-seed names in spin mode.
  lock_class cls_anon_vma_{opts_.rmap_lock == rmap_lock_mode::spin ? "anon_vma->lock"
                                                                   : "anon_vma->rwsem"};
  lock_class cls_i_mmap_{opts_.rmap_lock == rmap_lock_mode::spin ? "i_mmap_lock" : "i_mmap_rwsem"};
  lock_class cls_i_pages_{"mm.i_pages"};
  lock_class cls_page_lock_{"mm.page_lock"};
  lock_class cls_lru_lock_{"mm.lru_lock"};
  lock_class cls_swap_cache_{"mm.swap_cache"};
  std::unique_ptr<phys_mem> mem_;
  vm_events events_;

  // Swap (declared before anything that may hold swap entries, destroyed after them).
  std::unique_ptr<swap_backend> backend_;
  swap_system* swap_ = nullptr;  // backend_->swap(), or nullptr without swap
  std::unique_ptr<swap_cache<page>> cache_;

  alignas(64) mutex lru_lock_{&cls_lru_lock_};
  lru_head lists_[NR_LRU_LISTS];
  std::atomic<uint64_t> lru_nr_[NR_LRU_LISTS] = {};  // lists_[l].nr, readable without the lock

  std::mutex pagevecs_lock_;  // the registry of per-thread pagevecs
  std::vector<std::unique_ptr<pagevec>> pagevecs_;

  // Reclaim progress made by anyone: direct reclaim only gives up when this stands still.
  alignas(64) std::atomic<uint64_t> reclaim_progress_{0};
  // Pages isolated from the LRU by reclaimers right now (the kernel's NR_ISOLATED_ANON).
  std::atomic<uint64_t> nr_isolated_{0};

  // kswapd
  std::mutex kswapd_lock_;
  std::condition_variable kswapd_wait_;
  std::condition_variable kswapd_idle_;
  bool kswapd_should_run_ = false;  // under kswapd_lock_
  bool kswapd_running_ = false;     // under kswapd_lock_: balancing now
  bool kswapd_stop_ = false;        // under kswapd_lock_
  std::atomic<bool> kswapd_stop_flag_{false};
  std::atomic<bool> kswapd_awake_{false};
  std::thread kswapd_;

  friend struct mm_struct;
};

}  // namespace uswap
