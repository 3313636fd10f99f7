// The arena's free space: the runs of pages (extents) that no mapping and no foreign range
// holds, kept sorted and merged, and the first-fit search with which map() and remap() place a
// new mapping (the kernel's vm_unmapped_area over the gaps between VMAs). Pages are arena page
// numbers (0 is the arena's first page).
//
// Thread-safety: none of its own. The pager changes it only with map_lock held for writing and
// reads it with map_lock held (pager_impl.h).
// Invariants (well_formed() checks them): every extent is non-empty; extents are disjoint and no
// two touch (insert merges a run with the extents it touches), so a page's extent is the one
// starting at or before it and each free run has exactly one extent.
#pragma once

#include <cstdint>
#include <map>
#include <optional>

#include "record_nodes.h"

namespace uswap {

class free_extent_map {
 public:
  using map_type = std::map<uint64_t, uint64_t>;  // first page -> pages

  // Spare nodes for the next inserts and removes (record_nodes.h): insert needs at most one,
  // remove two. false when memory is refused; nothing changed then.
  bool reserve(size_t n) noexcept { return nodes_.reserve(n); }
  // Adds [first, first + n), n > 0, none of it free yet, merged with the extents it touches.
  void insert(uint64_t first, uint64_t n) noexcept;
  // Takes [first, last) out of the free space, splitting the extents at its ends; pages of it
  // that are not free are left as they are.
  void remove(uint64_t first, uint64_t last) noexcept;
  // The free pages from idx to the end of its extent: 0 if idx is not free.
  uint64_t run_at(uint64_t idx) const noexcept;
  // First fit: the lowest page `at` such that [at, at + n) lies in one extent and base_page + at
  // is a multiple of align_pages (a power of two); nullopt when no extent has room. base_page is
  // the arena's address in pages, so that the alignment is the address's, not the index's.
  std::optional<uint64_t> first_fit(uint64_t n, uint64_t align_pages = 1,
                                    uint64_t base_page = 0) const noexcept;

  const map_type& extents() const noexcept { return extents_; }
  uint64_t pages() const noexcept;  // free pages in all
  bool well_formed() const noexcept;

 private:
  map_type extents_;
  record_nodes<map_type> nodes_;
};

}  // namespace uswap
