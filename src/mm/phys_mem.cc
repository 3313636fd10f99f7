// The frame pool and its lock-free free list; see include/uswap/mm/phys_mem.h.
#include "uswap/mm/phys_mem.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "uswap/base/resident_memory.h"

namespace uswap {

result<std::unique_ptr<phys_mem>> phys_mem::create(uint64_t nr_pages, watermarks wm) {
  if (nr_pages == 0) return error(EINVAL, "phys_mem: RAM size must be at least one page");
  if (nr_pages >= no_pfn) return error(EINVAL, "phys_mem: at most 2^32 - 2 page frames");
  const size_t bytes = static_cast<size_t>(pages_to_bytes(nr_pages));
  // Present from the start, as a real machine's RAM is, so that a workload's first touch of a
  // frame is not a host fault (see resident_memory.h for what that takes on this VM).
  auto base = map_resident_memory(bytes, "phys_mem: frames");
  if (!base) return base.error();

  // The kernel's init_per_zone_wmark_min: min_free_kbytes = sqrt(lowmem_kbytes * 16), then
  // low = min + min/4 and high = min + min/2 (watermark_scale_factor's floor).
  const double kbytes = static_cast<double>(nr_pages) * (page_size / 1024);
  uint64_t min = static_cast<uint64_t>(std::sqrt(kbytes * 16.0)) / (page_size / 1024);
  min = std::clamp<uint64_t>(min, std::min<uint64_t>(16, nr_pages / 8), std::max<uint64_t>(nr_pages / 8, 1));
  watermarks w{min, min + min / 4, min + min / 2};
  if (wm.min) w.min = wm.min;
  if (wm.low) w.low = wm.low;
  if (wm.high) w.high = wm.high;
  w.low = std::max(w.low, w.min);
  w.high = std::min(std::max(w.high, w.low), nr_pages);
  return std::unique_ptr<phys_mem>(new phys_mem(nr_pages, *base, w));
}

phys_mem::phys_mem(uint64_t nr_pages, std::byte* base, watermarks wm)
    : nr_pages_(nr_pages), base_(base), pages_(new page[nr_pages]), wm_(wm) {
  // Free list in ascending pfn order from the top, so a fresh machine hands out frames
  // sequentially (which keeps the first touches of a workload in ascending memory).
  for (uint64_t i = 0; i < nr_pages; ++i) {
    pages_[i].pfn = static_cast<uint32_t>(i);
    pages_[i].free_next.store(i + 1 < nr_pages ? static_cast<uint32_t>(i + 1) : no_pfn,
                              std::memory_order_relaxed);
  }
  free_head_.store(pack(0, 0), std::memory_order_relaxed);
  nr_free_.store(static_cast<int64_t>(nr_pages), std::memory_order_relaxed);
}

phys_mem::~phys_mem() { unmap_resident_memory(base_, static_cast<size_t>(pages_to_bytes(nr_pages_))); }

page* phys_mem::alloc_page() noexcept {
  uint64_t head = free_head_.load(std::memory_order_acquire);
  for (;;) {
    const uint32_t pfn = static_cast<uint32_t>(head);
    if (pfn == no_pfn) return nullptr;
    // A stale `next` (the frame was taken and freed again meanwhile) is harmless: the tag in
    // `head` has changed, so the CAS fails and we retry.
    const uint32_t next = pages_[pfn].free_next.load(std::memory_order_relaxed);
    const uint64_t want = pack(static_cast<uint32_t>(head >> 32) + 1, next);
    if (free_head_.compare_exchange_weak(head, want, std::memory_order_acquire,
                                         std::memory_order_acquire)) {
      nr_free_.fetch_sub(1, std::memory_order_relaxed);
      page* p = &pages_[pfn];
      p->flags.store(0, std::memory_order_relaxed);
      p->_mapcount.store(0, std::memory_order_relaxed);
      p->mapping.store(0, std::memory_order_relaxed);
      p->index.store(0, std::memory_order_relaxed);
      p->private_.store(0, std::memory_order_relaxed);
      p->_refcount.store(1, std::memory_order_release);
      return p;
    }
  }
}

void phys_mem::free_page(page* p) noexcept {
  uint64_t head = free_head_.load(std::memory_order_relaxed);
  for (;;) {
    p->free_next.store(static_cast<uint32_t>(head), std::memory_order_relaxed);
    const uint64_t want = pack(static_cast<uint32_t>(head >> 32) + 1, p->pfn);
    if (free_head_.compare_exchange_weak(head, want, std::memory_order_release,
                                         std::memory_order_relaxed))
      break;
  }
  nr_free_.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace uswap
