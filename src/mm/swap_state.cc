// Anonymous memory through swap (mm/swap_state.c, mm/page_io.c, the swap parts of mm/memory.c
// and mm/vmscan.c): add_to_swap, pageout, __remove_mapping, try_to_free_swap,
// free_swap_and_cache, and do_swap_page.
#include <cstring>
#include <thread>

#include "fault.h"
#include "uswap/mm/machine.h"
#include "uswap/mm/rmap.h"
#include "uswap/mm/swap_device.h"
#include "uswap/swap/swap_cache.h"
#include "uswap/swap/swap_system.h"

namespace uswap {

bool machine::vm_swap_full() const noexcept {
  if (!swap_) return false;
  return swap_->nr_swap_pages() * 2 < swap_->total_swap_pages();
}

// can_reclaim_anon_pages: anonymous pages are scanned only while a swap slot is free (the
// kernel's get_nr_swap_pages() > 0), so a full swap area ends in ENOMEM quickly instead of every
// allocation scanning all of RAM in vain.
bool machine::can_reclaim_anon() const noexcept { return swap_ && swap_->nr_swap_pages() > 0; }

uint64_t machine::swap_count_of(const page* p) const {
  const swap_entry e{p->private_.load(std::memory_order_relaxed)};
  return swap_count(swap_->swap_map_byte(e));
}

bool machine::swap_duplicate(uint64_t entry) {
  return swap_ && swap_->swap_duplicate(swap_entry{entry}).ok();
}

// add_to_swap: give the locked, isolated page a swap slot and put it in the swap cache, dirty
// (its contents exist nowhere else yet). False when every swap area is full.
bool machine::add_to_swap(page* p) {
  const swap_entry e = swap_->get_swap_page();
  if (e.empty()) return false;
  p->private_.store(e.val, std::memory_order_relaxed);
  p->set(PG_swapcache);
  p->get();  // the swap cache's reference
  if (!cache_->add_to_swap_cache(e, p).ok()) {
    p->clear(PG_swapcache);
    p->private_.store(0, std::memory_order_relaxed);
    p->put_testzero();  // cannot be the last: reclaim holds one
    (void)swap_->put_swap_page(e);
    return false;
  }
  p->set(PG_dirty);
  return true;
}

// pageout -> swap_writepage: the page is locked, unmapped, in the swap cache.
bool machine::pageout(page* p) {
  p->clear(PG_dirty);  // folio_clear_dirty_for_io: a later write re-dirties it
  const swap_entry e{p->private_.load(std::memory_order_relaxed)};
  if (status st = swapdev_->write_page(swp_offset(e), mem_->page_address(p)); !st.ok()) {
    p->set(PG_dirty);  // handle_write_error: keep the data in RAM
    write_errors_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  events_.count(PSWPOUT);
  return true;
}

// __remove_mapping for a swap-cache page: only if nobody but reclaim (the isolation reference)
// and the swap cache holds it. page_ref_freeze makes that check atomic against a swap-in that
// looks the page up in the cache: the fault's get_unless_zero fails on a frozen page and it
// retries, finding the slot's SWAP_HAS_CACHE still held until delete_from_swap_cache drops it.
bool machine::remove_mapping(page* p) {
  if (!p->test(PG_swapcache)) return p->ref_freeze(1);
  if (!p->ref_freeze(2)) return false;
  const swap_entry e{p->private_.load(std::memory_order_relaxed)};
  (void)cache_->delete_from_swap_cache(e, p);  // also put_swap_page: frees an orphan's slot
  p->clear(PG_swapcache);
  p->private_.store(0, std::memory_order_relaxed);
  return true;
}

// try_to_free_swap: a locked page in the swap cache whose slot nothing else refers to (no swap
// pte) leaves the cache and frees the slot; the page keeps the only copy, so it is dirty.
bool machine::try_to_free_swap(page* p) {
  if (!p->test(PG_swapcache) || swap_count_of(p) != 0) return false;
  const swap_entry e{p->private_.load(std::memory_order_relaxed)};
  if (!cache_->delete_from_swap_cache(e, p).ok()) return false;
  p->clear(PG_swapcache);
  p->private_.store(0, std::memory_order_relaxed);
  p->set(PG_dirty);
  p->put_testzero();  // the cache's reference; the caller holds another
  return true;
}

// Looks an entry up in the swap cache, taking a reference on the page it finds. A page being
// removed by reclaim (refcount frozen at 0) counts as not found.
page* machine::lookup_swap_cache(uint64_t entry, bool* busy) {
  bool pinned = false;
  page* p = cache_->lookup_swap_cache(swap_entry{entry}, [&](page* pg) { pinned = pg->get_unless_zero(); });
  if (busy) *busy = p && !pinned;
  return pinned ? p : nullptr;
}

// The page-table side of munmap for one page that is now unmapped (free_swap_cache in the
// kernel's free_pages_and_swap_cache): a swap-cache page nobody maps or swaps in any more
// leaves the cache, so that its slot is freed now rather than when reclaim finds it.
void machine::free_swap_cache(page* p) {
  if (!swap_ || !p->test(PG_swapcache) || p->mapped()) return;
  if (!p->trylock(&cls_page_lock_)) return;  // reclaim has it, and will see the orphan
  if (!p->mapped()) try_to_free_swap(p);
  p->unlock();
}

// free_swap_and_cache: a swap pte was zapped. Drop its count; if only the swap cache is left
// holding the slot, free the cached page's slot too (if its lock is free; otherwise whoever
// holds it, reclaim, sees the orphan and drops it).
void machine::free_swap_and_cache(uint64_t entry) {
  auto left = swap_->swap_free(swap_entry{entry});
  if (!left.ok() || *left != SWAP_HAS_CACHE) return;
  page* p = lookup_swap_cache(entry, nullptr);
  if (!p) return;
  if (p->trylock(&cls_page_lock_)) {
    if (p->test(PG_swapcache) && p->private_.load(std::memory_order_relaxed) == entry &&
        !p->mapped())
      try_to_free_swap(p);
    p->unlock();
  }
  put_page(p);
}

// ---------------------------------------------------------------------------------------------
// do_swap_page: the pte holds a swap entry. The page comes from the swap cache if it is there
// (written out but not yet freed, or swapped in by another fault); otherwise this fault claims
// the slot's SWAP_HAS_CACHE (swapcache_prepare), reads the page from the swap device into a new
// frame and adds it to the swap cache, so that concurrent faults on the same entry find this one
// page (they got EEXIST and retry the lookup). Then, with the page locked and the pte rechecked
// under its lock, the page is mapped and the pte's swap count dropped (swap_free). The slot
// stays allocated while the page is clean in the swap cache, so reclaiming it again costs no
// write; a write fault, or swap more than half full (vm_swap_full), frees it (try_to_free_swap).
fault_result do_swap_page(vm_area_struct* vma, uint64_t addr, pte_table* t, pte_t orig,
                          access_type type, page_access_fn* fn) {
  mm_struct* mm = vma->vm_mm;
  machine& m = mm->mach();
  std::atomic<pte_t>& ptep = t->pte[pte_index(addr)];
  const uint64_t entry = pte_to_swp_entry_val(orig);
  if (status st = anon_vma_prepare(vma); !st.ok()) return fault_result::fail(std::move(st));

  page* p = nullptr;
  page* fresh = nullptr;
  bool locked = false;
  for (;;) {
    if (ptep.load(std::memory_order_relaxed) != orig) {  // another fault mapped it
      if (fresh) m.put_page(fresh);
      return fault_result::retry();
    }
    bool busy = false;
    if ((p = m.lookup_swap_cache(entry, &busy))) {
      m.event_counters().count(SWAP_RA_HIT);
      break;
    }
    if (busy) {  // reclaim is freeing the cached page: its slot is released in a moment
      std::this_thread::yield();
      continue;
    }
    // Allocate before claiming the slot, as __read_swap_cache_async does, so that a fault
    // racing this one is never kept waiting while we reclaim.
    if (!fresh) {
      auto r = m.alloc_page();
      if (!r) {
        if (ptep.load(std::memory_order_relaxed) != orig) return fault_result::retry();
        return fault_result::fail(r.error());
      }
      fresh = *r;
    }
    status st = m.swap_sys()->swapcache_prepare(swap_entry{entry});
    if (st.code() == EEXIST) {  // another fault is reading it in, or reclaim is adding it
      std::this_thread::yield();
      continue;
    }
    if (!st.ok()) {  // the slot was freed: the pte must have changed
      m.put_page(fresh);
      if (ptep.load(std::memory_order_relaxed) != orig) return fault_result::retry();
      return fault_result::fail(error(EIO, "swap-in: " + st.to_string()));
    }
    // This fault owns SWAP_HAS_CACHE: read the page in.
    fresh->lock(m.page_lock_class());
    fresh->set(PG_swapbacked);
    st = m.swap_dev()->read_page(swp_offset(swap_entry{entry}), m.page_address(fresh));
    if (st.ok()) {
      fresh->set(PG_uptodate);
      fresh->private_.store(entry, std::memory_order_relaxed);
      fresh->set(PG_swapcache);
      fresh->get();  // the swap cache's reference
      st = m.swap_cache_of()->add_to_swap_cache(swap_entry{entry}, fresh);
      if (!st.ok()) {
        fresh->clear(PG_swapcache);
        fresh->put_testzero();
      }
    }
    if (!st.ok()) {
      (void)m.swap_sys()->swapcache_clear(swap_entry{entry});
      fresh->unlock();
      m.put_page(fresh);
      return fault_result::fail(error(EIO, "swap-in of " + to_string(swap_entry{entry}) + ": " + st.to_string()));
    }
    m.lru_cache_add(fresh);
    m.event_counters().count(PSWPIN);
    m.event_counters().count(PGMAJFAULT);
    p = fresh;
    fresh = nullptr;
    locked = true;
    break;
  }
  if (fresh) m.put_page(fresh);
  if (!locked) p->lock(m.page_lock_class());
  // The page may have left the swap cache (and the slot been reused) while we waited.
  if (!p->test(PG_swapcache) || p->private_.load(std::memory_order_relaxed) != entry) {
    p->unlock();
    m.put_page(p);
    return fault_result::retry();
  }
  t->ptl.lock();
  if (ptep.load(std::memory_order_relaxed) != orig) {
    t->ptl.unlock();
    p->unlock();
    m.put_page(p);
    return fault_result::retry();
  }
  // Drop the pte's swap count; if that was the last one and no other pte maps the page (another
  // mm of the fork tree may have swapped it in already), this pte is the page's only user.
  auto left = m.swap_sys()->swap_free(swap_entry{entry});
  const bool exclusive = left.ok() && *left == SWAP_HAS_CACHE && !p->mapped();
  page_add_anon_rmap(p, vma, addr, exclusive);
  mm->add_counter(MM_ANONPAGES, 1);
  mm->add_counter(MM_SWAPENTS, -1);
  const bool write = type == access_type::write;
  // A page shared with other mms after fork is mapped read-only: a write copies it first
  // (do_wp_page), so that the others keep seeing the contents they swapped out.
  const bool writable = (vma->vm_flags & VM_WRITE) && exclusive;
  pte_t pte = pfn_pte(p->pfn, _PAGE_ACCESSED);
  if (writable) pte |= _PAGE_RW;
  if (write && writable) pte |= _PAGE_DIRTY;
  ptep.store(pte, std::memory_order_relaxed);
  if (fn && (!write || writable)) (*fn)(addr, m.mem().page_span(p));
  t->ptl.unlock();
  if (write && !writable) {  // the access is retried and takes the copy-on-write fault
    p->unlock();
    m.event_counters().count(PGFAULT);
    return fault_result::retry();
  }
  // The lookup's or allocation's reference now belongs to the pte.
  if (exclusive && (write || m.vm_swap_full())) m.try_to_free_swap(p);
  p->unlock();
  m.event_counters().count(PGFAULT);
  return fault_result::done();
}

}  // namespace uswap
