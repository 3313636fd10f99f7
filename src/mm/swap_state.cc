// Anonymous memory through swap (mm/swap_state.c, mm/page_io.c, the swap parts of mm/memory.c
// and mm/vmscan.c): add_to_swap, pageout, __remove_mapping, try_to_free_swap,
// free_swap_and_cache, and do_swap_page.
#include <cstring>
#include <thread>

#include "fault.h"
#include "uswap/mm/machine.h"
#include "uswap/mm/rmap.h"
#include "uswap/backend/swap_backend.h"
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
  if (status st = backend_->swap_writepage(e, mem_->page_address(p)); !st.ok()) {
    p->set(PG_dirty);  // handle_write_error: keep the data in RAM (the back end counts it)
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
// the slot's SWAP_HAS_CACHE, reads the page from the swap device into a new frame and adds it to
// the swap cache, so that concurrent faults on the same entry find this one page
// (swap_cache::read_swap_cache_async, the kernel's __read_swap_cache_async; the swap_in_source
// below is mm's side of it). Then, with the page locked and the pte rechecked under its lock, the
// page is mapped and the pte's swap count dropped (swap_free). The slot stays allocated while the
// page is clean in the swap cache, so reclaiming it again costs no write; a write fault, or swap
// more than half full (vm_swap_full), frees it (try_to_free_swap).
namespace {

// The frames, locks and flags of a swap-in, for read_swap_cache_async.
struct swap_in_source {
  machine& m;
  const std::atomic<pte_t>& ptep;
  pte_t orig;
  bool locked = false;  // read() has locked the frame it was given

  // A page being freed by reclaim (refcount frozen at 0) is not taken: its slot is released
  // in a moment and the lookup retried.
  bool pin(page* p) { return p->get_unless_zero(); }
  // Allocated before the slot is claimed, so that a fault racing this one is never kept
  // waiting while this one reclaims.
  result<page*> alloc() { return m.alloc_page(); }
  // With SWAP_HAS_CACHE held: the frame is locked, read, and set up as a swap-cache page (the
  // cache's reference taken), all before it becomes visible in the cache.
  status read(swap_entry e, page* fresh) {
    fresh->lock(m.page_lock_class());
    locked = true;
    fresh->set(PG_swapbacked);
    if (status st = m.backend()->swap_read_folio(e, m.page_address(fresh)); !st.ok()) return st;
    fresh->set(PG_uptodate);
    fresh->private_.store(e.val, std::memory_order_relaxed);
    fresh->set(PG_swapcache);
    fresh->get();  // the swap cache's reference
    return {};
  }
  // A frame that did not make it into the cache: undo read()'s set-up, if it ran.
  void release(page* fresh) {
    if (fresh->test(PG_swapcache)) {
      fresh->clear(PG_swapcache);
      fresh->put_testzero();  // the cache's reference; ours remains
    }
    if (locked) fresh->unlock();
    locked = false;
    m.put_page(fresh);
  }
  bool stale() const { return ptep.load(std::memory_order_relaxed) != orig; }
};

}  // namespace

fault_result do_swap_page(vm_area_struct* vma, uint64_t addr, pte_table* t, pte_t orig,
                          access_type type, page_access_fn* fn) {
  mm_struct* mm = vma->vm_mm;
  machine& m = mm->mach();
  std::atomic<pte_t>& ptep = t->pte[pte_index(addr)];
  const uint64_t entry = pte_to_swp_entry_val(orig);
  if (status st = anon_vma_prepare(vma); !st.ok()) return fault_result::fail(std::move(st));

  swap_in_source src{m, ptep, orig};
  bool allocated = false;
  auto got = m.swap_cache_of()->read_swap_cache_async(swap_entry{entry}, src, &allocated);
  if (!got.ok()) {
    // EAGAIN: another fault mapped the entry, or munmap zapped it; ENOENT / EINVAL: the slot was
    // freed, which only a changed pte explains. Anything else is the device's error.
    if (src.stale()) return fault_result::retry();
    if (got.error().code() == ENOMEM) return fault_result::fail(got.error());  // no frame
    return fault_result::fail(
        error(EIO, "swap-in of " + to_string(swap_entry{entry}) + ": " + got.error().to_string()));
  }
  page* p = *got;
  const bool locked = allocated;
  if (allocated) {
    m.lru_cache_add(p);
    m.event_counters().count(PSWPIN);
    m.event_counters().count(PGMAJFAULT);
  } else {
    m.event_counters().count(SWAP_RA_HIT);
  }
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
