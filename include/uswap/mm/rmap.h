// The reverse map (mm/rmap.c): from a page to every pte that maps it. Anonymous pages are found
// through anon_vma (below), file pages through their address_space's i_mmap interval tree
// (filemap.h); rmap_walk, page_referenced and try_to_unmap handle both.
//
// An anonymous page's mapping points to an anon_vma; every VMA that may map pages of that
// anon_vma is linked to it by an anon_vma_chain (avc), which also sits on the VMA's own list of
// avcs. A VMA has one avc per anon_vma it may see pages of: its own, and (after fork, in the rmap
// fork) those of its ancestors: anon_vma_fork links the child's VMA to every anon_vma of the
// parent's VMA (anon_vma_clone) and gives it a new anon_vma of its own whose root is the parent's
// root. An anon_vma keeps its avcs in rb_root, an interval tree (interval_tree.h, the one
// i_mmap uses) keyed by each avc's VMA range [vm_pgoff, vm_pgoff + pages - 1] in the anon_vma's
// linear page space. rmap_walk takes the anon_vma's root lock for read, asks the tree for the
// avcs covering [page->index, page->index] (anon_vma_interval_tree_foreach), so a walk visits
// only the VMAs that can map the page however many other VMAs the fork tree has, and runs the
// walker's rmap_one there under the pte lock. Linking and unlinking (anon_vma_prepare, anon_vma_clone, unlink_anon_vmas) take the root
// lock for write. The lock taken is always the root's (anon_vma->root->rwsem), as in the kernel
// since 2.6.36, so a whole fork tree shares one lock.
//
// Lock forms (rmap_lock.h, chosen by machine_options::rmap_lock): `rwsem`, a sync rw_semaphore
// taken shared by walks (the kernel's since 3.8, seed 001's design), or `spin`, the pre-seed
// exclusive lock (a spin-then-park mutex) that walks take exclusively too. The same mode is used
// for every file's i_mmap_rwsem.
//
// Lifetime, and how it differs from the kernel: the kernel frees anon_vmas with
// SLAB_TYPESAFE_BY_RCU and page_lock_anon_vma_read re-validates page->mapping under RCU. uswap
// has no RCU, so each page whose mapping points to an anon_vma holds a reference on it (taken by
// page_add_new_anon_rmap, dropped when the page is freed). A reclaimer holding a reference on a
// page therefore always finds its anon_vma alive, and a non-root anon_vma holds a reference on
// its root. The anon_vma's own "linked" reference is dropped when its last avc is unlinked.
//
// Thread-safety: as described; functions say which locks their caller must hold.
// Invariants: avc in anon_vma->rb_root <=> avc on its VMA's list, keyed by the VMA's current
// range (a VMA whose range changes leaves its anon_vmas' trees first: anon_vma_interval_tree_
// pre_update_vma / post_update_vma); anon_vma->root->root == root; refcount >= 1 while any avc
// links it or any page points to it.
#pragma once

#include <atomic>
#include <cstdint>

#include "uswap/base/status.h"
#include "uswap/mm/interval_tree.h"
#include "uswap/mm/mm_types.h"
#include "uswap/mm/page.h"
#include "uswap/mm/rmap_lock.h"

namespace uswap {

struct anon_vma {
  anon_vma(rmap_lock_mode mode, lock_class* cls) : rwsem(mode, cls) {}
  anon_vma* root = this;    // whose rwsem serialises this tree
  anon_vma* parent = this;  // fork: the anon_vma of the parent VMA
  rmap_lock rwsem;          // only the root's is ever taken (anon_vma->rwsem; ->lock pre-3.8)
  std::atomic<int32_t> refcount{1};
  // The chains linking VMAs to this anon_vma: an interval tree of anon_vma_chain keyed by the
  // VMA's page range (anon_vma_interval_tree_*). Under root->rwsem.
  anon_vma_chain* rb_root = nullptr;
  // fork bookkeeping kept as the kernel does (anon_vma_clone / anon_vma_fork reuse): number of
  // child anon_vmas, and of VMAs whose vma->anon_vma is this one. Under root->rwsem.
  uint32_t num_children = 0;
  uint32_t num_active_vmas = 0;
};

struct anon_vma_chain {
  vm_area_struct* vma = nullptr;
  struct anon_vma* anon_vma = nullptr;
  anon_vma_chain* same_vma_next = nullptr;  // the VMA's list (vma->anon_vma_chain)
  interval_tree_node<anon_vma_chain> rb;    // in anon_vma->rb_root (rb, rb_subtree_last)
};

// --- the anon_vma interval tree (mm/interval_tree.c's anon_vma_interval_tree_*) ---
// Caller holds the anon_vma's root lock (write for insert / remove, read for queries).
uint64_t avc_start_pgoff(const anon_vma_chain* avc);
uint64_t avc_last_pgoff(const anon_vma_chain* avc);
void anon_vma_interval_tree_insert(anon_vma_chain* avc, anon_vma_chain** root);
void anon_vma_interval_tree_remove(anon_vma_chain* avc, anon_vma_chain** root);
// Calls fn(avc) for every avc whose VMA's page range overlaps [first, last], in pgoff order;
// stops when fn returns false, and then returns false.
bool anon_vma_interval_tree_foreach(anon_vma_chain* root, uint64_t first, uint64_t last,
                                    function_ref<bool(anon_vma_chain*)> fn);
// For tests: checks the tree's invariants (also that every node is keyed by its VMA's current
// range); returns the node count, or -1 if one is broken. Caller holds the lock for read.
int64_t anon_vma_interval_tree_check(const anon_vma_chain* root);
// vma's range is about to change / has changed (__split_vma, vma_adjust): its avcs leave / enter
// their anon_vmas' trees again, so they are keyed by the new range. Caller holds the root lock
// of vma's anon_vma for write across both calls and the change.
void anon_vma_interval_tree_pre_update_vma(vm_area_struct* vma);
void anon_vma_interval_tree_post_update_vma(vm_area_struct* vma);

// --- anon_vma lifetime and locks ---
void get_anon_vma(anon_vma* av) noexcept;
void put_anon_vma(anon_vma* av) noexcept;
inline void anon_vma_lock_write(anon_vma* av) noexcept { av->root->rwsem.lock_write(); }
inline void anon_vma_unlock_write(anon_vma* av) noexcept { av->root->rwsem.unlock_write(); }
inline void anon_vma_lock_read(anon_vma* av) noexcept { av->root->rwsem.lock_read(); }
inline void anon_vma_unlock_read(anon_vma* av) noexcept { av->root->rwsem.unlock_read(); }

// Gives vma an anon_vma on its first anonymous fault. Caller holds mmap_lock (read suffices;
// page_table_lock makes concurrent first faults on one VMA agree).
status anon_vma_prepare(vm_area_struct* vma);
// Links dst to every anon_vma src is linked to (a split VMA, and fork). Caller holds mmap_lock
// for write.
void anon_vma_clone(vm_area_struct* dst, vm_area_struct* src);
// fork: links the child's vma to pvma's anon_vmas and gives it its own anon_vma (root: pvma's
// root). Nothing to do when pvma has no anon_vma. Caller holds both mmap_locks for write.
void anon_vma_fork(vm_area_struct* vma, vm_area_struct* pvma);
// Unlinks vma from its anon_vmas before it is freed. Caller holds mmap_lock for write.
void unlink_anon_vmas(vm_area_struct* vma);

// --- page <-> rmap ---
// A new anonymous page gets its first mapping in vma at addr: sets mapping and index, takes the
// page's reference on the anon_vma, mapcount 1. Caller holds the pte lock.
void page_add_new_anon_rmap(page* p, vm_area_struct* vma, uint64_t addr);
// Another mapping of an anonymous page (swap-in). A page without an anon_vma (just read back
// from swap) gets vma's, or its root's when the page is not exclusive to this pte (its swap
// entry was shared, after fork), so that every VMA of the fork tree finds it. Caller holds the
// page lock and the pte lock.
void page_add_anon_rmap(page* p, vm_area_struct* vma, uint64_t addr, bool exclusive);
// A pte now maps the page cache page p (page_add_file_rmap). Caller holds the pte lock.
inline void page_add_file_rmap(page* p) noexcept { p->_mapcount.fetch_add(1, std::memory_order_acq_rel); }
// One pte stopped mapping p.
inline void page_remove_rmap(page* p) noexcept { p->_mapcount.fetch_sub(1, std::memory_order_acq_rel); }

// vma_address(): where page p would be mapped in vma, or ~0 if vma's range does not cover it.
uint64_t vma_address(const page* p, const vm_area_struct* vma);

// The walker: rmap_one runs for each VMA that covers the page, with the pte lock held and the
// pte known to map the page (page_vma_mapped_walk); it returns false to stop the walk.
struct rmap_walk_control {
  bool (*rmap_one)(page* p, vm_area_struct* vma, uint64_t addr, std::atomic<pte_t>* pte,
                   void* arg) = nullptr;
  void* arg = nullptr;
  // Stops the walk early when it returns true (e.g. the page is no longer mapped).
  bool (*done)(page* p, void* arg) = nullptr;
};
// Caller holds a reference on p (so p's anon_vma stays alive) and, as the kernel requires for
// try_to_unmap, usually the page lock; for a file page the page lock is required (it keeps
// page->mapping, and so the address_space, stable). Pages without either are skipped.
// Anonymous pages: anon_vma root lock for read; file pages: i_mmap_rwsem for read.
void rmap_walk(page* p, const rmap_walk_control& rwc);

// Test-and-clears the young bit of every pte mapping p; returns how many were young.
int page_referenced(page* p);

enum ttu_flags : unsigned { TTU_NONE = 0 };
// Unmaps p from every pte, moving the ptes' dirty bits to PG_dirty. An anonymous page (which
// must be in the swap cache) gets a swap pte of its entry in each, taking one swap count per pte
// (swap_duplicate); a file page's ptes become empty (the next access refaults from the page
// cache). Caller holds the page lock and a reference. Returns true when p is no longer mapped
// anywhere (false: a pte could not be converted, e.g. swap_duplicate failed).
bool try_to_unmap(page* p, ttu_flags flags = TTU_NONE);

}  // namespace uswap
