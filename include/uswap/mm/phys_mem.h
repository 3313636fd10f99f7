// phys_mem: a machine's RAM, a fixed pool of 4 KiB page frames with their struct pages, the free
// list and the min / low / high watermarks (mm/page_alloc.c's zone, reduced to one zone).
//
// The frames are one anonymous mapping of nr_pages * 4 KiB; page_address(pfn) is base + pfn * 4K.
// The free list is a lock-free LIFO stack of pfns (Treiber stack with a 32-bit ABA tag next to
// the 32-bit head pfn in one 64-bit word), so that the page allocator itself never becomes the
// contended lock when the benchmarks measure swap and zram locks; the most recently freed frame
// is handed out first, warm in cache, as the kernel's per-CPU lists do.
//
// This class only allocates and frees frames; deciding when to reclaim (the watermarks' use) is
// the machine's (vmscan.cc): alloc_page is __rmqueue, not __alloc_pages.
//
// Thread-safety: every member function may be called from any thread. nr_free() is exact when
// no allocation or free is in flight, and never off by more than the number in flight.
// Invariants: a frame is on the free list <=> its refcount is 0 and it is not on an LRU list;
// nr_free() == the length of the free list (at quiescence); min <= low <= high <= nr_pages.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "uswap/base/page.h"
#include "uswap/base/status.h"
#include "uswap/mm/page.h"

namespace uswap {

struct watermarks {
  uint64_t min = 0;   // below this, allocating threads reclaim themselves (direct reclaim)
  uint64_t low = 0;   // below this, kswapd is woken
  uint64_t high = 0;  // kswapd reclaims until this many frames are free, then sleeps
};

class phys_mem {
 public:
  // Reserves nr_pages frames (ENOMEM if the host refuses the mapping; EINVAL if nr_pages is 0
  // or above 2^32 - 2). Watermarks default to the kernel's shape: min ~ 4*sqrt(KiB of RAM)/4K
  // pages clamped to [16, 1/8 of RAM], low = min * 5/4, high = min * 3/2; `wm` overrides any
  // field given non-zero.
  static result<std::unique_ptr<phys_mem>> create(uint64_t nr_pages, watermarks wm = {});
  ~phys_mem();
  phys_mem(const phys_mem&) = delete;
  phys_mem& operator=(const phys_mem&) = delete;

  uint64_t nr_pages() const noexcept { return nr_pages_; }
  uint64_t nr_free() const noexcept {
    const int64_t n = nr_free_.load(std::memory_order_relaxed);
    return n > 0 ? static_cast<uint64_t>(n) : 0;
  }
  const watermarks& wmark() const noexcept { return wm_; }

  // Takes a free frame: refcount 1, flags 0, not mapped; contents undefined. nullptr if none.
  page* alloc_page() noexcept;
  // Returns a frame whose refcount reached 0 and which is on no list.
  void free_page(page* p) noexcept;

  page* pfn_to_page(uint32_t pfn) noexcept { return &pages_[pfn]; }
  const page* pfn_to_page(uint32_t pfn) const noexcept { return &pages_[pfn]; }
  std::byte* page_address(const page* p) noexcept {
    return base_ + (static_cast<size_t>(p->pfn) << page_shift);
  }
  std::span<std::byte, page_size> page_span(const page* p) noexcept {
    return std::span<std::byte, page_size>(page_address(p), page_size);
  }
  // True when p is one of this pool's struct pages.
  bool owns(const page* p) const noexcept {
    return p >= pages_.get() && p < pages_.get() + nr_pages_;
  }

 private:
  phys_mem(uint64_t nr_pages, std::byte* base, watermarks wm);

  static constexpr uint64_t pack(uint32_t tag, uint32_t pfn) {
    return (uint64_t{tag} << 32) | pfn;
  }

  const uint64_t nr_pages_;
  std::byte* const base_;
  std::unique_ptr<page[]> pages_;
  watermarks wm_;
  alignas(64) std::atomic<uint64_t> free_head_;  // tag << 32 | pfn of the top frame (no_pfn: empty)
  alignas(64) std::atomic<int64_t> nr_free_{0};
};

}  // namespace uswap
