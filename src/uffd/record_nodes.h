// record_nodes: spare nodes for a std::map of arena records (the pager's mappings, foreign ranges
// and free extents), so that the record updates an operation makes once it has started changing
// the arena never allocate. An operation reserves what it may need first, and fails with ENOMEM
// while nothing has changed yet if the host refuses; the updates after it (noexcept: a throw
// there would leave the records half-changed, and terminates) take nodes from the spares, and
// erasures give their nodes back to them, so the spares a pager keeps stay at its high-water
// mark and a steady program allocates nothing.
//
// Thread-safety: none of its own; the owner guards it as it guards the map (map_lock held for
// writing).
// Invariants: every spare node is unlinked from every record map; its key is a private counter.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <utility>

#include "uswap/base/fault_inject.h"

namespace uswap {

template <class Map>
class record_nodes {
 public:
  using key_type = typename Map::key_type;
  using mapped_type = typename Map::mapped_type;
  using iterator = typename Map::iterator;

  // At least n spare nodes. false when memory is refused (fault_point::pager_meta included):
  // the spares made so far stay for the next try.
  bool reserve(size_t n) noexcept {
    while (spare_.size() < n) {
      if (should_fail(fault_point::pager_meta)) return false;
      try {
        spare_.emplace_hint(spare_.end(), next_key_++, mapped_type{});
      } catch (const std::bad_alloc&) {
        return false;
      }
    }
    return true;
  }

  // m[k] = v, from a spare node when k is new. Without a spare (a caller that reserved nothing,
  // as the unit tests of free_extent_map) it allocates as operator[] would.
  void put(Map& m, const key_type& k, const mapped_type& v) {
    auto at = m.lower_bound(k);
    if (at != m.end() && at->first == k) {
      at->second = v;
      return;
    }
    if (spare_.empty()) {
      m.emplace_hint(at, k, v);
      return;
    }
    auto node = spare_.extract(spare_.begin());
    node.key() = k;
    node.mapped() = v;
    m.insert(at, std::move(node));
  }

  // m.erase(it), keeping the node as a spare.
  iterator erase(Map& m, iterator it) noexcept {
    auto next = std::next(it);
    give(m.extract(it));
    return next;
  }

  // A node taken out of a record map (extract) becomes a spare.
  void give(typename Map::node_type&& node) noexcept {
    node.key() = next_key_++;
    spare_.insert(spare_.end(), std::move(node));
  }

  size_t spares() const noexcept { return spare_.size(); }

 private:
  Map spare_;
  key_type next_key_{};
};

}  // namespace uswap
