// The reverse map's interval tree, generic over the node type (include/linux/
// interval_tree_generic.h's INTERVAL_TREE_DEFINE, instantiated by mm/interval_tree.c twice):
//   - vma_interval_tree (filemap.h): the VMAs mapping a file, node vm_area_struct::shared, keyed
//     by the VMA's file page range [vm_pgoff, vm_pgoff + pages - 1] (address_space->i_mmap);
//   - anon_vma_interval_tree (rmap.h): the anon_vma_chains linking VMAs to an anon_vma, node
//     anon_vma_chain::rb, keyed by the chain's VMA's range in the anon_vma's linear page space,
//     the same [vm_pgoff, vm_pgoff + pages - 1] (anon_vma->rb_root).
// rmap_walk asks either for the nodes whose range covers one page, [pgoff, pgoff], and visits
// only those, however many other VMAs map other parts of the file or the fork tree.
//
// The kernel's is an augmented red-black tree; this one is a treap (a binary search tree ordered
// by (start, node address), heap-ordered by a priority hashed from the node's address), with the
// same augmentation: each node carries the largest `last` of its subtree (rb_subtree_last), so a
// query descends only into subtrees that reach its first page and whose keys start before its
// last. Expected depth O(log n); insert and remove are split / merge, without rotations to
// maintain. The priority is a hash rather than a random draw so the shape is reproducible.
//
// Traits (one struct per instantiation, defined where the node type is complete):
//   static interval_tree_node<T>& node(T*);  const version too
//   static uint64_t start(const T*);  static uint64_t last(const T*);
//
// Thread-safety: none of its own; the owner's lock (i_mmap_rwsem, the anon_vma root's rwsem)
// is held for write around insert / remove and for read around foreach / check.
// Invariants (check() verifies them): in-order keys ascend; a parent's priority is >= its
// children's; subtree_last == max(last(n), children's subtree_last). A node's start and last
// must not change while it is in a tree: remove it, change its range, insert it again (the
// kernel's anon_vma_interval_tree_pre_update_vma / post_update_vma around vma_adjust).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>

#include "uswap/base/hash.h"

namespace uswap {

template <class T>
struct interval_tree_node {
  T* left = nullptr;
  T* right = nullptr;
  uint64_t prio = 0;
  uint64_t subtree_last = 0;  // the largest Traits::last in this subtree (rb_subtree_last)
};

template <class T, class Traits>
class interval_tree {
 public:
  static void insert(T* n, T** root) {
    node_t& nn = Traits::node(n);
    nn.left = nn.right = nullptr;
    nn.prio = hash_prio(n);
    update(n);
    *root = insert_rec(*root, n);
  }

  static void remove(T* n, T** root) {
    *root = erase_rec(*root, n);
    Traits::node(n).left = Traits::node(n).right = nullptr;
  }

  // Calls fn(n) for every node whose [start, last] overlaps [first, last], in key order; stops
  // when fn returns false, and then returns false.
  template <class Fn>
  static bool foreach(T* root, uint64_t first, uint64_t last, Fn&& fn) {
    return foreach_rec(root, first, last, fn);
  }

  // The node count, or -1 if an invariant is broken.
  static int64_t check(const T* root) { return check_rec(root, nullptr, nullptr, ~uint64_t{0}); }

 private:
  using node_t = interval_tree_node<T>;

  static uint64_t hash_prio(const void* p) { return mix64(reinterpret_cast<uintptr_t>(p)); }

  static bool key_less(const T* a, const T* b) {
    const uint64_t sa = Traits::start(a), sb = Traits::start(b);
    if (sa != sb) return sa < sb;
    return std::less<const T*>()(a, b);
  }

  static uint64_t augmented_last(const T* n) {
    const node_t& nn = Traits::node(n);
    uint64_t last = Traits::last(n);
    if (nn.left) last = std::max(last, Traits::node(nn.left).subtree_last);
    if (nn.right) last = std::max(last, Traits::node(nn.right).subtree_last);
    return last;
  }

  static void update(T* n) { Traits::node(n).subtree_last = augmented_last(n); }

  // Splits t into keys < k (l) and keys >= k (r).
  static void split(T* t, const T* k, T*& l, T*& r) {
    if (!t) {
      l = r = nullptr;
    } else if (key_less(t, k)) {
      split(Traits::node(t).right, k, Traits::node(t).right, r);
      l = t;
      update(t);
    } else {
      split(Traits::node(t).left, k, l, Traits::node(t).left);
      r = t;
      update(t);
    }
  }

  static T* merge(T* a, T* b) {
    if (!a) return b;
    if (!b) return a;
    if (Traits::node(a).prio > Traits::node(b).prio) {
      Traits::node(a).right = merge(Traits::node(a).right, b);
      update(a);
      return a;
    }
    Traits::node(b).left = merge(a, Traits::node(b).left);
    update(b);
    return b;
  }

  static T* insert_rec(T* t, T* n) {
    if (!t) return n;
    node_t& nn = Traits::node(n);
    node_t& tn = Traits::node(t);
    if (nn.prio > tn.prio) {
      split(t, n, nn.left, nn.right);
      update(n);
      return n;
    }
    if (key_less(n, t))
      tn.left = insert_rec(tn.left, n);
    else
      tn.right = insert_rec(tn.right, n);
    update(t);
    return t;
  }

  static T* erase_rec(T* t, T* n) {
    if (!t) return nullptr;  // not in the tree
    node_t& tn = Traits::node(t);
    if (t == n) return merge(tn.left, tn.right);
    if (key_less(n, t))
      tn.left = erase_rec(tn.left, n);
    else
      tn.right = erase_rec(tn.right, n);
    update(t);
    return t;
  }

  template <class Fn>
  static bool foreach_rec(T* t, uint64_t first, uint64_t last, Fn& fn) {
    if (!t || Traits::node(t).subtree_last < first) return true;
    if (!foreach_rec(Traits::node(t).left, first, last, fn)) return false;
    if (Traits::start(t) > last) return true;  // this node and its right subtree start after `last`
    if (Traits::last(t) >= first && !fn(t)) return false;
    return foreach_rec(Traits::node(t).right, first, last, fn);
  }

  static int64_t check_rec(const T* t, const T* lo, const T* hi, uint64_t parent_prio) {
    if (!t) return 0;
    const node_t& tn = Traits::node(t);
    if (tn.prio > parent_prio) return -1;
    if ((lo && key_less(t, lo)) || (hi && key_less(hi, t))) return -1;
    const int64_t l = check_rec(tn.left, lo, t, tn.prio);
    const int64_t r = check_rec(tn.right, t, hi, tn.prio);
    if (l < 0 || r < 0) return -1;
    if (augmented_last(t) != tn.subtree_last) return -1;
    return l + r + 1;
  }
};

}  // namespace uswap
