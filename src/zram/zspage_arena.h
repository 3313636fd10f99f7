// zspage_arena: where a zram device's zsmalloc pool gets zspage memory (a zs_page_allocator).
//
// Why not malloc (zsmalloc's default): every new zspage is fresh memory, and the first touch of
// each 4 KiB page is a page fault. On a virtualised host a fault can cost more than compressing
// the page that fills it, so filling an empty device would run far slower than rewriting a full
// one. The kernel has no such cost: zsmalloc takes pages from the buddy allocator without zeroing
// them.
//
// The arena maps 2 MiB chunks aligned to 2 MiB and asks for transparent huge pages
// (MADV_HUGEPAGE), so a chunk faults in once (when the host grants a huge page) instead of 512
// times, and carves zspages of 1..16 pages from it with a bump pointer. Freed zspages go on a
// free list per size and are reused first. release_free() returns the memory of free blocks to
// the host (MADV_DONTNEED; zram calls it after compaction, the operation meant to give memory
// back); released blocks stay listed and are reused after the resident ones, faulting again.
// At most `max_cached_free_pages` freed pages stay resident: beyond that a freed zspage is given
// back at once, as the kernel's zsmalloc returns an empty zspage's pages to the buddy allocator,
// so a pool that shrinks (a pager swapping its pages back in) shrinks in memory too, not only
// in mem_used_total. Chunks themselves are unmapped only when the arena is destroyed.
//
// Thread-safety: alloc_pages, free_pages and release_free may be called from any thread; one
// mutex guards the lists (zsmalloc calls it only when a zspage is created or freed, not per
// object).
// Invariants: a block is on at most one free list; resident_free_pages() counts the pages of the
// blocks on the resident lists.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "uswap/sync/mutex.h"
#include "uswap/zsmalloc/zsmalloc.h"

namespace uswap::zram_detail {

class zspage_arena final : public zs_page_allocator {
 public:
  static constexpr size_t chunk_bytes = size_t{2} << 20;

  static constexpr uint64_t default_max_cached_free_pages = 256;  // 1 MiB

  explicit zspage_arena(uint64_t max_cached_free_pages = default_max_cached_free_pages,
                        bool huge_pages = true)
      : max_cached_free_(max_cached_free_pages), huge_pages_(huge_pages) {}
  ~zspage_arena() override;
  zspage_arena(const zspage_arena&) = delete;
  zspage_arena& operator=(const zspage_arena&) = delete;

  void* alloc_pages(unsigned nr_pages) noexcept override;
  void free_pages(void* pages, unsigned nr_pages) noexcept override;

  // Gives the memory of every resident free block back to the host; returns the pages released.
  uint64_t release_free() noexcept;

  uint64_t chunks() const noexcept;
  uint64_t resident_free_pages() const noexcept;

 private:
  static constexpr unsigned max_pages = ZS_MAX_PAGES_PER_ZSPAGE;
  void* new_chunk() noexcept;

  mutable mutex lock_;
  std::vector<void*> chunks_;
  uint8_t* bump_ = nullptr;
  size_t bump_pages_ = 0;
  std::array<std::vector<void*>, max_pages + 1> resident_;  // by size in pages
  std::array<std::vector<void*>, max_pages + 1> released_;
  uint64_t resident_free_pages_ = 0;
  const uint64_t max_cached_free_;
  const bool huge_pages_;  // MADV_HUGEPAGE on new chunks
};

}  // namespace uswap::zram_detail
