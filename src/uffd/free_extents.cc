// The arena's free extents: see free_extents.h.
#include "free_extents.h"

#include <iterator>

#include "uswap/base/dcheck.h"

namespace uswap {

void free_extent_map::insert(uint64_t s, uint64_t n) noexcept {
  USWAP_DCHECK(n > 0);
  auto next = extents_.lower_bound(s);
  // None of the run may be free already: the extent before it ends at or before s, the one
  // after starts at or after its end.
  USWAP_DCHECK(next == extents_.end() || s + n <= next->first);
  USWAP_DCHECK(next == extents_.begin() || std::prev(next)->first + std::prev(next)->second <= s);
  if (next != extents_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == s) {
      s = prev->first;
      n += prev->second;
      nodes_.erase(extents_, prev);
    }
  }
  if (next != extents_.end() && s + n == next->first) {
    n += next->second;
    nodes_.erase(extents_, next);
  }
  nodes_.put(extents_, s, n);
}

void free_extent_map::remove(uint64_t first, uint64_t last) noexcept {
  // Split the extents that straddle either end, so that the range is whole extents.
  for (const uint64_t at : {first, last}) {
    auto it = extents_.upper_bound(at);
    if (it == extents_.begin()) continue;
    --it;
    const uint64_t s = it->first, n = it->second;
    if (s < at && at < s + n) {
      it->second = at - s;
      nodes_.put(extents_, at, s + n - at);
    }
  }
  for (auto it = extents_.lower_bound(first); it != extents_.end() && it->first < last;)
    it = nodes_.erase(extents_, it);
}

uint64_t free_extent_map::run_at(uint64_t idx) const noexcept {
  auto it = extents_.upper_bound(idx);
  if (it == extents_.begin()) return 0;
  --it;
  const uint64_t end = it->first + it->second;
  return idx < end ? end - idx : 0;
}

std::optional<uint64_t> free_extent_map::first_fit(uint64_t n, uint64_t align_pages,
                                                   uint64_t base_page) const noexcept {
  USWAP_DCHECK(align_pages != 0 && (align_pages & (align_pages - 1)) == 0);
  for (const auto& [s, len] : extents_) {
    // The extent's first page whose address is aligned.
    const uint64_t a = ((base_page + s + align_pages - 1) & ~(align_pages - 1)) - base_page;
    if (a + n <= s + len) return a;
  }
  return std::nullopt;
}

uint64_t free_extent_map::pages() const noexcept {
  uint64_t total = 0;
  for (const auto& [s, n] : extents_) total += n;
  return total;
}

bool free_extent_map::well_formed() const noexcept {
  uint64_t prev_end = 0;
  bool first = true;
  for (const auto& [s, n] : extents_) {
    if (n == 0) return false;
    if (!first && s <= prev_end) return false;  // overlapping or touching: not merged
    prev_end = s + n;
    first = false;
  }
  return true;
}

}  // namespace uswap
