// fork and exec (kernel/fork.c dup_mmap, mm/memory.c copy_page_range / copy_pte_range,
// fs/exec.c): copying an address space copy-on-write, and replacing one by a fresh image.
#include <algorithm>
#include <vector>

#include "uswap/mm/filemap.h"
#include "uswap/mm/machine.h"
#include "uswap/mm/mm_types.h"
#include "uswap/mm/rmap.h"

namespace uswap {

// dup_mmap. The parent's mmap_lock is held for write throughout, so no fault changes its ptes
// and no VMA comes or goes; reclaim may still walk (and unmap) its pages, which is why every
// pte is copied under the parent's pte lock, and the child's VMAs are linked into the reverse
// maps before their ptes are filled (anon_vma_fork first, as the kernel does): a reclaimer that
// finds a page through the parent finds the child's pte as well.
result<std::unique_ptr<mm_struct>> mm_struct::fork() {
  std::unique_ptr<mm_struct> child = machine_->mm_alloc();
  mmap_lock.down_write();
  child->mmap_lock.down_write();
  status st;
  for (auto& [end, pvma] : vmas_) {
    auto* vma = new vm_area_struct;
    vma->vm_start = pvma->vm_start;
    vma->vm_end = pvma->vm_end;
    vma->vm_pgoff = pvma->vm_pgoff;
    vma->vm_flags = pvma->vm_flags;
    vma->vm_mm = child.get();
    vma->vm_file = pvma->vm_file;
    child->vmas_.emplace(vma->vm_end, vma);
    anon_vma_fork(vma, pvma);
    if (vma->vm_file) link_file_vma(vma);
    // vma_needs_copy: only VMAs with anonymous pages are copied pte by pte; the child faults a
    // shared file mapping (or an untouched private one) in from the page cache.
    if (!pvma->anon_vma.load(std::memory_order_relaxed)) continue;
    st = copy_page_range(*child, vma, pvma);
    if (!st.ok()) break;
  }
  child->mmap_lock.up_write();
  mmap_lock.up_write();
  if (!st.ok()) return st;  // the child's destructor (exit) undoes what was copied
  return child;
}

// copy_pte_range for [src_vma->vm_start, vm_end): present anonymous pages are shared and
// write-protected in both mms (a private VMA's file pages are already read-only); swap ptes
// take a swap count. Locks: dst's pte lock nested inside src's (rmap walkers hold one pte lock
// at a time, so the nesting cannot deadlock with them).
status mm_struct::copy_page_range(mm_struct& dst, vm_area_struct* dst_vma,
                                  vm_area_struct* src_vma) {
  machine& m = *machine_;
  const bool cow = !(src_vma->vm_flags & VM_SHARED) && (src_vma->vm_flags & VM_WRITE);
  for (uint64_t a = src_vma->vm_start; a < src_vma->vm_end;) {
    const uint64_t table_end = std::min((a & ~(PMD_SIZE - 1)) + PMD_SIZE, src_vma->vm_end);
    pte_table* st = pte_table_of(a, /*alloc=*/false);
    if (!st) {
      a = table_end;
      continue;
    }
    pte_table* dt = dst.pte_table_of(a, /*alloc=*/true);
    int64_t anon = 0, filep = 0, swapents = 0;
    bool failed = false;
    st->ptl.lock();
    dt->ptl.lock();
    for (uint64_t b = a; b < table_end; b += page_size) {
      std::atomic<pte_t>& sp = st->pte[pte_index(b)];
      const pte_t pte = sp.load(std::memory_order_relaxed);
      if (pte_none(pte)) continue;
      if (is_swap_pte(pte)) {
        // copy_nonpresent_pte: the child's pte references the slot too.
        if (!m.swap_duplicate(pte_to_swp_entry_val(pte))) {
          failed = true;
          break;
        }
        dt->pte[pte_index(b)].store(pte, std::memory_order_relaxed);
        ++swapents;
        continue;
      }
      page* p = m.pfn_to_page(pte_pfn(pte));
      p->get();
      p->_mapcount.fetch_add(1, std::memory_order_acq_rel);
      pte_t child = pte;
      if (cow && pte_write(pte)) {
        sp.fetch_and(~_PAGE_RW, std::memory_order_relaxed);  // ptep_set_wrprotect
        child &= ~_PAGE_RW;
      }
      dt->pte[pte_index(b)].store(child, std::memory_order_relaxed);
      if (p->anon())
        ++anon;
      else
        ++filep;
    }
    dt->ptl.unlock();
    st->ptl.unlock();
    dst.add_counter(MM_ANONPAGES, anon);
    dst.add_counter(MM_FILEPAGES, filep);
    dst.add_counter(MM_SWAPENTS, swapents);
    if (failed)
      return error(ENOMEM, "fork: a swap count cannot grow any further (no continuation room)");
    a = table_end;
  }
  (void)dst_vma;
  return {};
}

result<std::vector<uint64_t>> mm_struct::exec(const std::vector<exec_mapping>& image) {
  for (const exec_mapping& e : image) {
    if (e.len == 0) return error(EINVAL, "exec: a mapping of length 0");
    if (e.f && (e.offset & ~page_mask)) return error(EINVAL, "exec: file offset not page aligned");
    if (e.f && (e.offset > e.f->size() || e.len > e.f->size() - e.offset))
      return error(EINVAL, "exec: mapping past the end of file " + e.f->name());
  }
  std::vector<uint64_t> addrs;
  mmap_lock.down_write();
  // exec_mmap: the old mm goes (here: its mappings, torn down as at exit).
  exit_mmap_locked();
  for (const exec_mapping& e : image) {
    auto r = mmap_region(e.len, e.prot, e.addr, e.f, e.offset >> page_shift, e.shared);
    if (!r) {
      mmap_lock.up_write();
      return r.error();
    }
    addrs.push_back(*r);
  }
  mmap_lock.up_write();
  return addrs;
}

}  // namespace uswap
