// page_store: where the pager keeps the pages it evicts: uswap's own swap stack. A page goes to
// a swap slot (swap_system::get_swap_page, the kernel's folio_alloc_swap) and is written to the
// zram device at that slot's offset (zram_write_page, the kernel's swap_writepage on a zram swap
// device); the swap entry is the handle the pager keeps in the page's state, as a swap PTE holds
// it in the kernel.
//
// Reference counting follows the kernel's swap-out and swap-in (see swap_system.h):
//   store    get_swap_page (SWAP_HAS_CACHE) -> write_page -> swap_duplicate (the count the
//            pager's state holds, as try_to_unmap_one takes for a PTE) -> put_swap_page (the
//            cache reference dropped once the write is done)
//   load     read_page at the slot; the slot keeps its count (the pager may keep the copy: the
//            swap cache of a clean page)
//   release  swap_free: the count goes, the slot is free, and the area's slot_free_notify hook
//            tells zram to free its object (zram_slot_free_notify)
// The swap area runs in swap_lock_mode::percpu with slot_cache_policy::off, the kernel's current
// design (per-thread current clusters, no slot cache, 6.15 on): a freed slot is freed at once,
// so unmapping memory returns its zram memory immediately rather than when a slot cache happens
// to drain, and no slot is reserved beyond those the pager holds.
//
// Signal safety: store/load/release are called from the SIGBUS handler of a faulting thread.
// They return errno values instead of a uswap::status on the hot path and allocate only what
// the layers below allocate (a zspage, a thread's first compression stream, a thread's swap
// slot number); see the uffd section of docs/DESIGN.md for why that is safe for a synchronous
// fault on pager memory.
//
// Thread-safety: every member may be called concurrently on different handles; a handle is used
// by one thread at a time (the pager holds the page's lock). Invariant: the swap area's
// inuse_pages == slots the pager holds == pages zram stores.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "uswap/base/status.h"
#include "uswap/swap/swap_system.h"
#include "uswap/zram/zram.h"

namespace uswap {

struct page_store_options {
  uint64_t max_pages = 0;  // swap slots (zram disksize in pages); required
  std::string comp_algorithm = "lz4";
};

struct page_store_stats {
  uint64_t pages = 0;  // swap slots in use
  zram_mm_stat mm{};   // the zram device's mm_stat
};

class page_store {
 public:
  static result<std::unique_ptr<page_store>> create(const page_store_options& opts);
  ~page_store();
  page_store(const page_store&) = delete;
  page_store& operator=(const page_store&) = delete;

  // Stores one page under a new swap slot. 0 with *handle (the swap entry) and *compressed_size
  // set, or ENOSPC (swap or zram full), ENOMEM (no memory for the object).
  int store(const void* page, uint64_t* handle, uint32_t* compressed_size) noexcept;
  // Reads the page of `handle` into dst. 0, or EIO for a corrupt object.
  int load(uint64_t handle, void* dst) noexcept;
  // Frees the slot of `handle` and with it the zram object.
  void release(uint64_t handle) noexcept;

  page_store_stats stats() const noexcept;
  // Quiescent only: the swap area's invariants, and zram holds exactly the slots in use.
  status check_invariants() const;

 private:
  page_store() = default;
  std::unique_ptr<zram_device> zram_;
  std::unique_ptr<swap_system> swap_;
};

}  // namespace uswap
