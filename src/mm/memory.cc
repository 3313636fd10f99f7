// Page tables, faults and the access API (mm/memory.c): pte_table_of (the pgd -> pud -> pmd ->
// pte walk, allocating levels on demand), handle_pte_fault and do_anonymous_page (do_swap_page
// is in swap_state.cc), access(), and zap (unmap_page_range) for munmap and exit.
#include <algorithm>
#include <cstring>

#include "fault.h"
#include "uswap/mm/filemap.h"
#include "uswap/mm/machine.h"
#include "uswap/mm/mm_types.h"
#include "uswap/mm/rmap.h"

namespace uswap {
namespace {

// Installs a new lower-level table in an empty entry; a thread that loses the race frees its
// own and uses the winner's.
template <class T, class... Args>
T* get_or_alloc(std::atomic<T*>& slot, bool alloc, Args&&... args) {
  T* t = slot.load(std::memory_order_acquire);
  if (t || !alloc) return t;
  T* fresh = new T(std::forward<Args>(args)...);
  if (slot.compare_exchange_strong(t, fresh, std::memory_order_acq_rel, std::memory_order_acquire))
    return fresh;
  delete fresh;
  return t;
}

}  // namespace

pte_table* mm_struct::pte_table_of(uint64_t addr, bool alloc) {
  pud_table* pud = get_or_alloc(pgd_.entry[pgd_index(addr)], alloc);
  if (!pud) return nullptr;
  pmd_table* pmd = get_or_alloc(pud->entry[pud_index(addr)], alloc);
  if (!pmd) return nullptr;
  return get_or_alloc(pmd->entry[pmd_index(addr)], alloc, machine_->ptl_class());
}

pte_t mm_struct::pte_of(uint64_t addr) {
  mmap_lock.down_read();
  pte_t v = 0;
  if (pte_table* t = pte_table_of(addr, false)) {
    t->ptl.lock();
    v = t->pte[pte_index(addr)].load(std::memory_order_relaxed);
    t->ptl.unlock();
  }
  mmap_lock.up_read();
  return v;
}

// ---------------------------------------------------------------------------------------------
// Faults.

// do_anonymous_page: the first touch of an anonymous page gets a zeroed frame of its own. (The
// kernel maps the shared zero page for a read fault and copies on the first write; uswap gives
// every touched page its own frame, which is what reclaim and swap have to handle anyway.)
fault_result do_anonymous_page(vm_area_struct* vma, uint64_t addr, pte_table* t,
                               access_type type, page_access_fn* fn) {
  mm_struct* mm = vma->vm_mm;
  machine& m = mm->mach();
  if (status st = anon_vma_prepare(vma); !st.ok()) return fault_result::fail(std::move(st));
  auto r = m.alloc_page();
  if (!r) return fault_result::fail(r.error());
  page* p = *r;
  std::memset(m.page_address(p), 0, page_size);
  p->set(PG_uptodate);
  p->set(PG_swapbacked);

  std::atomic<pte_t>& ptep = t->pte[pte_index(addr)];
  t->ptl.lock();
  if (!pte_none(ptep.load(std::memory_order_relaxed))) {
    // Another thread's fault on this address won: use its page.
    t->ptl.unlock();
    m.put_page(p);
    return fault_result::retry();
  }
  page_add_new_anon_rmap(p, vma, addr);
  mm->add_counter(MM_ANONPAGES, 1);
  pte_t entry = pfn_pte(p->pfn, _PAGE_ACCESSED);
  if (vma->vm_flags & VM_WRITE) entry |= _PAGE_RW;
  if (type == access_type::write) entry |= _PAGE_DIRTY;
  ptep.store(entry, std::memory_order_relaxed);
  // The allocation's reference now belongs to the pte.
  if (fn) (*fn)(addr, m.mem().page_span(p));
  t->ptl.unlock();
  m.lru_cache_add(p);
  m.event_counters().count(PGFAULT);
  return fault_result::done();
}

fault_result handle_pte_fault(vm_area_struct* vma, uint64_t addr, pte_table* t,
                              access_type type, page_access_fn* fn) {
  const pte_t orig = t->pte[pte_index(addr)].load(std::memory_order_relaxed);
  if (pte_none(orig))
    return vma->vm_file ? do_file_fault(vma, addr, t, type, fn)
                        : do_anonymous_page(vma, addr, t, type, fn);
  if (is_swap_pte(orig)) return do_swap_page(vma, addr, t, orig, type, fn);
  // Present but not writable for a write access (access() checked VM_WRITE): copy-on-write.
  if (pte_present(orig) && type == access_type::write && !pte_write(orig))
    return do_wp_page(vma, addr, t, orig, fn);
  return fault_result::retry();  // the pte changed under us
}

// do_wp_page: a write to a write-protected pte of a VMA that allows writing.
//   - A shared file mapping makes the pte writable (wp_page_shared), under the page lock so that
//     it cannot race reclaim's writeback of the page.
//   - A private mapping reuses an anonymous page that no other pte and no swap pte refers to
//     (wp_page_reuse: the last mm of a fork tree still holding it), and otherwise copies the
//     page into a new anonymous page of this VMA's anon_vma (wp_page_copy). The copy is made
//     while this pte still maps the old page, so every other mapper also sees it mapped more
//     than once and copies rather than reuses: nobody can write the old page meanwhile.
fault_result do_wp_page(vm_area_struct* vma, uint64_t addr, pte_table* t, pte_t orig,
                        page_access_fn* fn) {
  mm_struct* mm = vma->vm_mm;
  machine& m = mm->mach();
  std::atomic<pte_t>& ptep = t->pte[pte_index(addr)];
  page* old = m.pfn_to_page(pte_pfn(orig));
  auto same_pte = [&] {
    const pte_t cur = ptep.load(std::memory_order_relaxed);
    return pte_present(cur) && pte_pfn(cur) == old->pfn && !pte_write(cur);
  };
  auto make_writable_and_access = [&] {
    ptep.fetch_or(_PAGE_RW | _PAGE_DIRTY | _PAGE_ACCESSED, std::memory_order_relaxed);
    if (fn) (*fn)(addr, m.mem().page_span(old));
  };

  t->ptl.lock();
  if (!same_pte()) {
    t->ptl.unlock();
    return fault_result::retry();
  }
  if (vma->vm_flags & VM_SHARED) {
    old->get();
    t->ptl.unlock();
    old->lock(m.page_lock_class());
    t->ptl.lock();
    const bool ok = same_pte();
    if (ok) make_writable_and_access();
    t->ptl.unlock();
    old->unlock();
    m.put_page(old);
    if (!ok) return fault_result::retry();
    m.event_counters().count(PGFAULT);
    return fault_result::done();
  }
  if (old->anon() && old->mapcount() == 1) {
    bool reuse = !old->test(PG_swapcache);
    // In the swap cache: reusable once no swap pte refers to its slot (the slot is freed, the
    // page becomes ordinary dirty anonymous memory). Only try-lock: the pte lock is held.
    if (!reuse && old->trylock(m.page_lock_class())) {
      reuse = old->mapcount() == 1 && m.try_to_free_swap(old);
      old->unlock();
    }
    if (reuse) {
      make_writable_and_access();
      t->ptl.unlock();
      m.event_counters().count(PGFAULT);
      return fault_result::done();
    }
  }
  old->get();
  t->ptl.unlock();

  // wp_page_copy.
  if (status st = anon_vma_prepare(vma); !st.ok()) {
    m.put_page(old);
    return fault_result::fail(std::move(st));
  }
  auto r = m.alloc_page();
  if (!r) {
    m.put_page(old);
    return fault_result::fail(r.error());
  }
  page* fresh = *r;
  std::memcpy(m.page_address(fresh), m.page_address(old), page_size);
  fresh->set(PG_uptodate);
  fresh->set(PG_swapbacked);
  t->ptl.lock();
  if (!same_pte()) {
    t->ptl.unlock();
    m.put_page(fresh);
    m.put_page(old);
    return fault_result::retry();
  }
  const pte_t prev = ptep.load(std::memory_order_relaxed);
  page_add_new_anon_rmap(fresh, vma, addr);
  if (old->anon()) {
    if (pte_dirty(prev)) old->set(PG_dirty);
  } else {
    mm->add_counter(MM_FILEPAGES, -1);
    mm->add_counter(MM_ANONPAGES, 1);
  }
  page_remove_rmap(old);
  ptep.store(pfn_pte(fresh->pfn, _PAGE_RW | _PAGE_DIRTY | _PAGE_ACCESSED), std::memory_order_relaxed);
  if (fn) (*fn)(addr, m.mem().page_span(fresh));
  t->ptl.unlock();
  m.lru_cache_add(fresh);
  // The old pte's reference and ours.
  m.free_swap_cache(old);
  m.put_page(old);
  m.put_page(old);
  m.event_counters().count(PGFAULT);
  return fault_result::done();
}

// ---------------------------------------------------------------------------------------------
// The access API.

status mm_struct::access(uint64_t addr, uint64_t len, access_type type, page_access_fn fn) {
  if (len == 0) return {};
  if (addr >= TASK_SIZE || len > TASK_SIZE - addr)
    return error(EFAULT, "access: [" + std::to_string(addr) + ", +" + std::to_string(len) +
                             ") is outside the user address space");
  mmap_lock.down_read();
  status st = access_locked(addr, len, type, fn);
  mmap_lock.up_read();
  return st;
}

status mm_struct::access_locked(uint64_t addr, uint64_t len, access_type type,
                                page_access_fn fn) {
  const uint64_t end = addr + len;
  const bool write = type == access_type::write;
  vm_area_struct* vma = nullptr;
  for (uint64_t a = addr & page_mask; a < end; a += page_size) {
    if (!vma || !vma->contains(a)) {
      vma = find_vma(a);
      if (!vma || a < vma->vm_start)
        return error(EFAULT, "access: address " + std::to_string(a) + " is not mapped");
    }
    if (write ? !(vma->vm_flags & VM_WRITE) : !(vma->vm_flags & VM_READ))
      return error(EFAULT, std::string("access: ") + (write ? "write to" : "read of") +
                               " address " + std::to_string(a) + " not permitted by the mapping");
    pte_table* t = pte_table_of(a, /*alloc=*/true);
    std::atomic<pte_t>& ptep = t->pte[pte_index(a)];
    for (;;) {
      t->ptl.lock();
      const pte_t pte = ptep.load(std::memory_order_relaxed);
      if (pte_present(pte) && (!write || pte_write(pte))) {
        // What the MMU does on an access: set accessed (and dirty for a write).
        const pte_t bits = _PAGE_ACCESSED | (write ? _PAGE_DIRTY : 0);
        if ((pte & bits) != bits) ptep.fetch_or(bits, std::memory_order_relaxed);
        fn(a, machine_->mem().page_span(machine_->pfn_to_page(pte_pfn(pte))));
        t->ptl.unlock();
        break;
      }
      t->ptl.unlock();
      // The fault performs the access itself under the pte lock when it maps the page, so a
      // page cannot be reclaimed between being faulted in and being used.
      fault_result r = handle_pte_fault(vma, a, t, type, &fn);
      if (r.kind == fault_result::kind_t::error) return std::move(r.st);
      if (r.kind == fault_result::kind_t::done) break;
    }
  }
  return {};
}

status mm_struct::read(uint64_t addr, void* buf, uint64_t len) {
  auto* out = static_cast<std::byte*>(buf);
  return access(addr, len, access_type::read, [&](uint64_t a, std::span<std::byte, page_size> pg) {
    const uint64_t from = std::max(a, addr), to = std::min(a + page_size, addr + len);
    std::memcpy(out + (from - addr), pg.data() + (from - a), to - from);
  });
}

status mm_struct::write(uint64_t addr, const void* buf, uint64_t len) {
  const auto* in = static_cast<const std::byte*>(buf);
  return access(addr, len, access_type::write, [&](uint64_t a, std::span<std::byte, page_size> pg) {
    const uint64_t from = std::max(a, addr), to = std::min(a + page_size, addr + len);
    std::memcpy(pg.data() + (from - a), in + (from - addr), to - from);
  });
}

status mm_struct::touch(uint64_t addr, access_type type) {
  return access(addr, 1, type, [](uint64_t, std::span<std::byte, page_size>) {});
}

// ---------------------------------------------------------------------------------------------
// zap_pte_range: unmapping for munmap and exit. Caller holds mmap_lock for write.

void mm_struct::unmap_page_range(vm_area_struct*, uint64_t start, uint64_t end) {
  machine& m = *machine_;
  for (uint64_t a = start; a < end;) {
    const uint64_t table_end = std::min((a & ~(PMD_SIZE - 1)) + PMD_SIZE, end);
    pte_table* t = pte_table_of(a, /*alloc=*/false);
    if (!t) {
      a = table_end;
      continue;
    }
    // Collect under the lock, release after it (the kernel's mmu_gather), so the pte lock is
    // not held across frees, swap-slot releases and zram frees.
    page* pages[PTRS_PER_TABLE];
    uint64_t entries[PTRS_PER_TABLE];
    unsigned nr_pages = 0, nr_entries = 0, nr_file = 0;
    t->ptl.lock();
    for (uint64_t b = a; b < table_end; b += page_size) {
      const pte_t pte = t->pte[pte_index(b)].exchange(0, std::memory_order_relaxed);
      if (pte_present(pte)) {
        page* p = m.pfn_to_page(pte_pfn(pte));
        if (pte_dirty(pte)) p->set(PG_dirty);  // a file page: set_page_dirty, written back later
        if (!p->anon()) ++nr_file;
        page_remove_rmap(p);
        pages[nr_pages++] = p;
      } else if (is_swap_pte(pte)) {
        entries[nr_entries++] = pte_to_swp_entry_val(pte);
      }
    }
    t->ptl.unlock();
    if (nr_pages > nr_file) add_counter(MM_ANONPAGES, -static_cast<int64_t>(nr_pages - nr_file));
    if (nr_file) add_counter(MM_FILEPAGES, -static_cast<int64_t>(nr_file));
    if (nr_entries) add_counter(MM_SWAPENTS, -static_cast<int64_t>(nr_entries));
    // free_pages_and_swap_cache: a swap-cache page nobody maps any more gives its slot back.
    for (unsigned i = 0; i < nr_pages; ++i) {
      m.free_swap_cache(pages[i]);
      m.put_page(pages[i]);
    }
    for (unsigned i = 0; i < nr_entries; ++i) m.free_swap_and_cache(entries[i]);
    a = table_end;
  }
}

}  // namespace uswap
