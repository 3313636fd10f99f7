// swap_backend: one swap area on one swap device, what swapon(8) sets up in the kernel: the slot
// allocator (swap_system), the device under it (zram or a RAM disk), and the hooks between them
// (a freed slot frees its object, a freed cluster is discarded). Both front ends page through it:
// mm's reclaim and do_swap_page with the swap cache's protocol (swap_system.h), and the uffd
// pager, which keeps no swap cache, through store / load / release.
//
// store / load / release (one reference per stored page, the protocol of a swap PTE):
//   store    get_swap_page (SWAP_HAS_CACHE) -> swap_writepage -> swap_duplicate (the reference
//            the caller keeps, as try_to_unmap_one takes for a PTE) -> put_swap_page (the cache
//            reference dropped once the write is done)
//   load     swap_read_folio at the slot; the reference stays (the caller may keep its copy)
//   release  swap_free: the reference goes, the slot is free, and slot_free_notify frees the
//            device's object at once
// store, load and release are async-signal-safe in the sense the uffd pager needs (a
// synchronous fault on pager memory): they return errno values, take only the swap and zram
// locks, and allocate only what the layers below allocate (a zspage, a thread's first
// compression stream, a thread's swap slot number).
//
// Thread-safety: every member may be called concurrently, on different entries; an entry is used
// by one thread at a time (its reference holder). check_invariants only when quiescent.
// Invariants: slot 0 (the area's header) is never written; a free slot holds nothing on the
// device, so stored pages <= slots in use, with equality for a user of store/release only.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "uswap/backend/swap_device.h"
#include "uswap/base/status.h"
#include "uswap/swap/swap.h"
#include "uswap/swap/swap_system.h"
#include "uswap/zram/zram.h"

namespace uswap {

struct swap_backend_options {
  uint64_t slots = 0;                          // swap slots offered; required (no default)
  swap_dev_kind device = swap_dev_kind::zram;  // default zram
  // The zram device's settings when `device` is zram (disksize is derived from `slots`).
  // Default: the zram layer's (lzo, slot_bitlock, checksums on, no mem_limit).
  zram_options zram{};
  // Slot allocator settings. Default: the swap layer's (cluster lock, by-mode slot cache).
  swap_options swap{};
  // Freed clusters are discarded on the device (SWP_PAGE_DISCARD), which also catches anything a
  // free left behind. Default: on for zram, off for the RAM disk (nothing to free there).
  std::optional<bool> discard;
  std::string name;  // the area's name; default: the device kind ("zram", "ram")
};

struct swap_backend_stats {
  uint64_t total_slots = 0;
  uint64_t free_slots = 0;    // slots parked in a slot cache count as used
  uint64_t used_slots = 0;    // total - free
  uint64_t write_errors = 0;  // swap_writepage calls the device refused (zram's mem_limit)
  swap_device_stats device;
};

class swap_backend {
 public:
  // EINVAL for no slots or a bad option; ENOMEM if the device cannot be set up.
  static result<std::unique_ptr<swap_backend>> create(const swap_backend_options& opts);
  ~swap_backend();
  swap_backend(const swap_backend&) = delete;
  swap_backend& operator=(const swap_backend&) = delete;

  // The slot allocator, for a front end that runs the swap cache's protocol itself.
  swap_system& swap() noexcept { return *swap_; }
  const swap_system& swap() const noexcept { return *swap_; }
  swap_device& device() noexcept { return *dev_; }
  const swap_device& device() const noexcept { return *dev_; }

  // --- Page I/O (mm/page_io.c). The caller holds a reference to e.
  // swap_writepage: a refusal (ENOSPC at zram's mem_limit) is counted and leaves the slot as it was.
  status swap_writepage(swap_entry e, const void* src);
  // swap_read_folio: EIO when the page cannot be read back intact.
  status swap_read_folio(swap_entry e, void* dst) { return dev_->read_page(swp_offset(e), dst); }

  // --- One reference per page (see the top of this file).
  // 0 with *e and *stored_bytes (what the page takes on the device: 0 same-filled, compressed
  // size, or page_size) set; ENOSPC (no slot, or the device is full), ENOMEM.
  int store(const void* page, swap_entry* e, uint32_t* stored_bytes) noexcept;
  // 0, or EIO for a page that cannot be read back intact.
  int load(swap_entry e, void* dst) noexcept;
  // load() of n pages (a readahead run; n <= max_load_run): e[i] into dst + i * page_size, read
  // together where the device overlaps its reads. How many leading pages were read intact; the
  // others are not to be used.
  static constexpr unsigned max_load_run = 16;
  unsigned load_run(const swap_entry* e, unsigned n, void* dst) noexcept;
  void release(swap_entry e) noexcept;

  swap_backend_stats stats() const;
  uint64_t write_errors() const noexcept { return write_errors_.load(std::memory_order_relaxed); }
  // Quiescent only: the swap area's invariants, and no free slot holds anything on the device.
  status check_invariants() const;

 private:
  swap_backend() = default;
  std::unique_ptr<swap_device> dev_;
  std::unique_ptr<swap_system> swap_;
  std::atomic<uint64_t> write_errors_{0};
};

}  // namespace uswap
