// The reverse map (mm/rmap.c): anon_vma and anon_vma_chain, anon_vma_fork, rmap_walk over
// anon_vma and i_mmap, page_referenced and try_to_unmap. See include/uswap/mm/rmap.h.
#include "uswap/mm/rmap.h"

#include "uswap/mm/filemap.h"
#include "uswap/mm/machine.h"

namespace uswap {
namespace {

void avc_link_vma(anon_vma_chain* avc, vm_area_struct* vma) {
  avc->same_vma_next = vma->anon_vma_chain_head;
  vma->anon_vma_chain_head = avc;
}

// Under the root's lock held for write.
void avc_link_anon_vma(anon_vma_chain* avc, anon_vma* av) {
  anon_vma_interval_tree_insert(avc, &av->rb_root);
}

void avc_unlink_anon_vma(anon_vma_chain* avc, anon_vma* av) {
  anon_vma_interval_tree_remove(avc, &av->rb_root);
}

struct avc_tree_traits {
  static interval_tree_node<anon_vma_chain>& node(anon_vma_chain* a) { return a->rb; }
  static const interval_tree_node<anon_vma_chain>& node(const anon_vma_chain* a) { return a->rb; }
  static uint64_t start(const anon_vma_chain* a) { return avc_start_pgoff(a); }
  static uint64_t last(const anon_vma_chain* a) { return avc_last_pgoff(a); }
};
using avc_tree = interval_tree<anon_vma_chain, avc_tree_traits>;

anon_vma* anon_vma_alloc(vm_area_struct* vma) {
  machine& m = vma->vm_mm->mach();
  return new anon_vma(m.rmap_mode(), m.anon_vma_class());
}

// Sets the page's anon_vma and index, taking the page's reference on the anon_vma. A page that
// may be mapped by several processes (not exclusive) gets the root, the least specific
// anon_vma, as __page_set_anon_rmap does, so that every VMA of the fork tree is walked.
void page_set_anon_rmap(page* p, vm_area_struct* vma, uint64_t addr, bool exclusive) {
  anon_vma* av = vma->anon_vma.load(std::memory_order_acquire);
  if (!exclusive) av = av->root;
  get_anon_vma(av);
  p->index.store(linear_page_index(vma, addr), std::memory_order_relaxed);
  p->mapping.store(reinterpret_cast<uintptr_t>(av) | PAGE_MAPPING_ANON, std::memory_order_release);
}

}  // namespace

uint64_t avc_start_pgoff(const anon_vma_chain* avc) { return vma_start_pgoff(avc->vma); }
uint64_t avc_last_pgoff(const anon_vma_chain* avc) { return vma_last_pgoff(avc->vma); }

void anon_vma_interval_tree_insert(anon_vma_chain* avc, anon_vma_chain** root) {
  avc_tree::insert(avc, root);
}

void anon_vma_interval_tree_remove(anon_vma_chain* avc, anon_vma_chain** root) {
  avc_tree::remove(avc, root);
}

bool anon_vma_interval_tree_foreach(anon_vma_chain* root, uint64_t first, uint64_t last,
                                    function_ref<bool(anon_vma_chain*)> fn) {
  return avc_tree::foreach(root, first, last, fn);
}

int64_t anon_vma_interval_tree_check(const anon_vma_chain* root) { return avc_tree::check(root); }

void anon_vma_interval_tree_pre_update_vma(vm_area_struct* vma) {
  for (anon_vma_chain* avc = vma->anon_vma_chain_head; avc; avc = avc->same_vma_next)
    anon_vma_interval_tree_remove(avc, &avc->anon_vma->rb_root);
}

void anon_vma_interval_tree_post_update_vma(vm_area_struct* vma) {
  for (anon_vma_chain* avc = vma->anon_vma_chain_head; avc; avc = avc->same_vma_next)
    anon_vma_interval_tree_insert(avc, &avc->anon_vma->rb_root);
}

void get_anon_vma(anon_vma* av) noexcept { av->refcount.fetch_add(1, std::memory_order_relaxed); }

void put_anon_vma(anon_vma* av) noexcept {
  while (av && av->refcount.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    anon_vma* root = av->root;
    delete av;
    // A non-root anon_vma holds a reference on its root (anon_vma_fork, in the rmap issue).
    av = root != av ? root : nullptr;
  }
}

status anon_vma_prepare(vm_area_struct* vma) {
  if (vma->anon_vma.load(std::memory_order_acquire)) return {};
  auto* avc = new anon_vma_chain;
  auto* av = anon_vma_alloc(vma);
  mm_struct* mm = vma->vm_mm;
  anon_vma_lock_write(av);
  mm->page_table_lock.lock();
  const bool installed = vma->anon_vma.load(std::memory_order_relaxed) == nullptr;
  if (installed) {
    avc->vma = vma;
    avc->anon_vma = av;
    avc_link_vma(avc, vma);
    avc_link_anon_vma(avc, av);
    av->num_active_vmas++;
    vma->anon_vma.store(av, std::memory_order_release);
  }
  mm->page_table_lock.unlock();
  anon_vma_unlock_write(av);
  if (!installed) {  // another thread's first fault on this VMA won
    delete avc;
    put_anon_vma(av);
  }
  return {};
}

void anon_vma_clone(vm_area_struct* dst, vm_area_struct* src) {
  // Keep dst's chain in src's order: build it reversed, then it reads the same way.
  anon_vma_chain* built = nullptr;
  for (anon_vma_chain* pavc = src->anon_vma_chain_head; pavc; pavc = pavc->same_vma_next) {
    auto* avc = new anon_vma_chain;
    avc->vma = dst;
    avc->anon_vma = pavc->anon_vma;
    anon_vma_lock_write(avc->anon_vma);
    avc_link_anon_vma(avc, avc->anon_vma);
    anon_vma_unlock_write(avc->anon_vma);
    avc->same_vma_next = built;
    built = avc;
  }
  while (built) {
    anon_vma_chain* next = built->same_vma_next;
    avc_link_vma(built, dst);
    built = next;
  }
  if (anon_vma* av = dst->anon_vma.load(std::memory_order_relaxed)) {
    anon_vma_lock_write(av);
    av->num_active_vmas++;
    anon_vma_unlock_write(av);
  }
}

void anon_vma_fork(vm_area_struct* vma, vm_area_struct* pvma) {
  anon_vma* pav = pvma->anon_vma.load(std::memory_order_relaxed);
  if (!pav) return;
  vma->anon_vma.store(nullptr, std::memory_order_relaxed);
  // The child's VMA sees every page its parent's VMA can see.
  anon_vma_clone(vma, pvma);
  // Its own anon_vma, for the pages it will COW: in the parent's tree (same root, same lock), so
  // a page of the child is walked in the child's VMAs (and its children's) only.
  anon_vma* av = anon_vma_alloc(vma);
  auto* avc = new anon_vma_chain;
  av->root = pav->root;
  av->parent = pav;
  get_anon_vma(av->root);
  av->num_active_vmas++;
  vma->anon_vma.store(av, std::memory_order_release);
  anon_vma_lock_write(av);
  avc->vma = vma;
  avc->anon_vma = av;
  avc_link_vma(avc, vma);
  avc_link_anon_vma(avc, av);
  av->parent->num_children++;
  anon_vma_unlock_write(av);
}

void unlink_anon_vmas(vm_area_struct* vma) {
  if (anon_vma* av = vma->anon_vma.load(std::memory_order_relaxed)) {
    anon_vma_lock_write(av);
    av->num_active_vmas--;
    anon_vma_unlock_write(av);
  }
  anon_vma_chain* avc = vma->anon_vma_chain_head;
  vma->anon_vma_chain_head = nullptr;
  while (avc) {
    anon_vma_chain* next = avc->same_vma_next;
    anon_vma* av = avc->anon_vma;
    anon_vma_lock_write(av);
    avc_unlink_anon_vma(avc, av);
    const bool empty = av->rb_root == nullptr;
    if (empty && av->parent != av) av->parent->num_children--;
    anon_vma_unlock_write(av);
    delete avc;
    // The tree is empty: no VMA can see this anon_vma's pages any more. Drop the "linked"
    // reference; pages still pointing here keep it alive until they are freed.
    if (empty) put_anon_vma(av);
    avc = next;
  }
  vma->anon_vma.store(nullptr, std::memory_order_relaxed);
}

void page_add_new_anon_rmap(page* p, vm_area_struct* vma, uint64_t addr) {
  page_set_anon_rmap(p, vma, addr, /*exclusive=*/true);
  p->_mapcount.store(1, std::memory_order_release);
}

void page_add_anon_rmap(page* p, vm_area_struct* vma, uint64_t addr, bool exclusive) {
  if (!p->anon_vma_of()) page_set_anon_rmap(p, vma, addr, exclusive);
  p->_mapcount.fetch_add(1, std::memory_order_acq_rel);
}

uint64_t vma_address(const page* p, const vm_area_struct* vma) {
  const uint64_t pgoff = p->index.load(std::memory_order_relaxed);
  if (pgoff < vma->vm_pgoff || pgoff - vma->vm_pgoff >= vma->pages()) return ~uint64_t{0};
  return vma->vm_start + ((pgoff - vma->vm_pgoff) << page_shift);
}

namespace {

// page_vma_mapped_walk + rmap_one for one VMA; false stops the walk.
bool rmap_walk_one(page* p, vm_area_struct* vma, const rmap_walk_control& rwc) {
  const uint64_t addr = vma_address(p, vma);
  if (addr == ~uint64_t{0}) return true;
  // Is the pte at addr mapping this very frame?
  pte_table* t = vma->vm_mm->pte_table_of(addr, /*alloc=*/false);
  if (!t) return true;
  std::atomic<pte_t>& ptep = t->pte[pte_index(addr)];
  t->ptl.lock();
  const pte_t pte = ptep.load(std::memory_order_relaxed);
  bool go_on = true;
  if (pte_present(pte) && pte_pfn(pte) == p->pfn) go_on = rwc.rmap_one(p, vma, addr, &ptep, rwc.arg);
  t->ptl.unlock();
  return go_on && !(rwc.done && rwc.done(p, rwc.arg));
}

// rmap_walk_anon: the VMAs linked to the page's anon_vma whose range covers page->index, from
// the anon_vma's interval tree, under the root lock for read.
void rmap_walk_anon(page* p, anon_vma* av, const rmap_walk_control& rwc) {
  const uint64_t pgoff = p->index.load(std::memory_order_relaxed);
  anon_vma_lock_read(av);
  anon_vma_interval_tree_foreach(av->rb_root, pgoff, pgoff,
                                 [&](anon_vma_chain* avc) { return rmap_walk_one(p, avc->vma, rwc); });
  anon_vma_unlock_read(av);
}

// rmap_walk_file: the VMAs of the page's file whose range covers page->index, from the i_mmap
// interval tree, under i_mmap_rwsem for read.
void rmap_walk_file(page* p, address_space* as, const rmap_walk_control& rwc) {
  const uint64_t pgoff = p->index.load(std::memory_order_relaxed);
  as->i_mmap_rwsem.lock_read();
  vma_interval_tree_foreach(as->i_mmap, pgoff, pgoff,
                            [&](vm_area_struct* vma) { return rmap_walk_one(p, vma, rwc); });
  as->i_mmap_rwsem.unlock_read();
}

}  // namespace

void rmap_walk(page* p, const rmap_walk_control& rwc) {
  if (anon_vma* av = p->anon_vma_of())
    rmap_walk_anon(p, av, rwc);
  else if (address_space* as = page_mapping_file(p))
    rmap_walk_file(p, as, rwc);
}

int page_referenced(page* p) {
  int referenced = 0;
  rmap_walk_control rwc;
  rwc.arg = &referenced;
  rwc.rmap_one = [](page*, vm_area_struct*, uint64_t, std::atomic<pte_t>* ptep, void* arg) {
    // ptep_clear_flush_young
    if (ptep->fetch_and(~_PAGE_ACCESSED, std::memory_order_relaxed) & _PAGE_ACCESSED)
      ++*static_cast<int*>(arg);
    return true;
  };
  rmap_walk(p, rwc);
  return referenced;
}

bool try_to_unmap(page* p, ttu_flags) {
  rmap_walk_control rwc;
  bool failed = false;
  rwc.arg = &failed;
  rwc.done = [](page* pg, void*) { return !pg->mapped(); };
  if (!p->anon()) {
    // A file page: its ptes simply go; the page cache keeps the page (and the data).
    rwc.rmap_one = [](page* pg, vm_area_struct* vma, uint64_t, std::atomic<pte_t>* ptep, void*) {
      mm_struct* mm = vma->vm_mm;
      const pte_t pteval = ptep->exchange(0, std::memory_order_relaxed);
      if (pte_dirty(pteval)) pg->set(PG_dirty);
      mm->add_counter(MM_FILEPAGES, -1);
      page_remove_rmap(pg);
      mm->mach().put_page(pg);  // the pte's reference; the caller's keeps the page alive
      return true;
    };
    rmap_walk(p, rwc);
    return !p->mapped();
  }
  if (!p->test(PG_swapcache)) return !p->mapped();  // an anonymous page needs its swap entry
  rwc.rmap_one = [](page* pg, vm_area_struct* vma, uint64_t, std::atomic<pte_t>* ptep, void* arg) {
    mm_struct* mm = vma->vm_mm;
    machine& m = mm->mach();
    const uint64_t entry = pg->private_.load(std::memory_order_relaxed);
    // Take the pte's swap count first, so that failing leaves the pte untouched.
    if (!m.swap_duplicate(entry)) {
      *static_cast<bool*>(arg) = true;
      return false;
    }
    const pte_t pteval = ptep->exchange(swp_entry_to_pte_val(entry), std::memory_order_relaxed);
    if (pte_dirty(pteval)) pg->set(PG_dirty);
    mm->add_counter(MM_ANONPAGES, -1);
    mm->add_counter(MM_SWAPENTS, 1);
    page_remove_rmap(pg);
    m.put_page(pg);  // the pte's reference; the caller's keeps the page alive
    return true;
  };
  rmap_walk(p, rwc);
  return !failed && !p->mapped();
}

}  // namespace uswap

namespace uswap {

// The table's names are string literals, so data() is a NUL-terminated C string.
const char* to_string(rmap_lock_mode m) noexcept { return name_of(rmap_lock_mode_names, m).data(); }

result<rmap_lock_mode> parse_rmap_lock_mode(std::string_view text) {
  return parse_enum(rmap_lock_mode_names, text, "rmap lock mode");
}

}  // namespace uswap
