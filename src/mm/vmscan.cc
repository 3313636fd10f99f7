// Page reclaim (mm/vmscan.c): try_to_free_pages, shrink_node, shrink_active_list,
// shrink_inactive_list, shrink_page_list, and kswapd's balance_pgdat loop.
#include <algorithm>
#include <chrono>
#include <cmath>

#include "uswap/mm/filemap.h"
#include "uswap/mm/machine.h"
#include "uswap/mm/rmap.h"

namespace uswap {

// inactive_is_low: the kernel keeps inactive * inactive_ratio >= active, inactive_ratio being
// int_sqrt(10 * gigabytes of the list pair) (1 below 1 GiB), so that a larger memory keeps a
// smaller share of it on the inactive list.
bool machine::inactive_is_low(bool file) const {
  const uint64_t inactive = lru_size(file ? LRU_INACTIVE_FILE : LRU_INACTIVE_ANON);
  const uint64_t active = lru_size(file ? LRU_ACTIVE_FILE : LRU_ACTIVE_ANON);
  const uint64_t gb = pages_to_bytes(inactive + active) >> 30;
  const uint64_t ratio = gb ? static_cast<uint64_t>(std::sqrt(10.0 * static_cast<double>(gb))) : 1;
  return inactive * ratio < active;
}

uint64_t machine::isolate_lru_pages(uint64_t nr_to_scan, lru_list l, page** out,
                                    uint64_t* scanned) {
  uint64_t taken = 0, seen = 0;
  lru_lock_.lock();
  uint32_t pfn = lists_[l].tail;
  while (pfn != no_pfn && taken < nr_to_scan && seen < 4 * nr_to_scan) {
    page* p = mem_->pfn_to_page(pfn);
    pfn = p->lru_prev;
    ++seen;
    // A page whose last reference is being dropped is left for its freer, which takes it off
    // the list under this lock (folio_try_get in isolate_lru_folios).
    if (!p->get_unless_zero()) continue;
    p->clear(PG_lru);
    del_page_from_lru_list(p, l);
    out[taken++] = p;
  }
  lru_lock_.unlock();
  nr_isolated_.fetch_add(taken, std::memory_order_relaxed);
  *scanned = seen;
  return taken;
}

// move_folios_to_lru: back on the list their flags name, dropping isolation's reference.
void machine::putback_lru_pages(page** pages, uint64_t n) {
  if (!n) return;
  page* to_free[SWAP_CLUSTER_MAX];
  unsigned nr_free = 0;
  lru_lock_.lock();
  for (uint64_t i = 0; i < n; ++i) {
    page* p = pages[i];
    p->set(PG_lru);
    const lru_list l = page_lru(p);
    add_page_to_lru_list(p, l);
    if (p->put_testzero()) {  // unmapped and freed by its owner meanwhile
      p->clear(PG_lru);
      del_page_from_lru_list(p, l);
      to_free[nr_free++] = p;
    }
  }
  lru_lock_.unlock();
  for (unsigned i = 0; i < nr_free; ++i) free_frozen_page(to_free[i]);
}

// shrink_active_list: age the active list. Every page's young bits are cleared through the
// reverse map and the page moves to the inactive list; a page referenced meanwhile gets its
// second chance there (the kernel keeps only executable file pages active). A file page's walk
// needs its page lock (folio_referenced's trylock): one that is busy is just deactivated.
void machine::shrink_active_list(uint64_t nr_to_scan, lru_list l, scan_control&) {
  page* batch[SWAP_CLUSTER_MAX];
  while (nr_to_scan) {
    uint64_t scanned = 0;
    const uint64_t n = isolate_lru_pages(std::min<uint64_t>(nr_to_scan, SWAP_CLUSTER_MAX),
                                         l, batch, &scanned);
    nr_to_scan -= std::min(nr_to_scan, std::max<uint64_t>(scanned, 1));
    events_.count(PGREFILL, scanned);
    if (!n) break;
    for (uint64_t i = 0; i < n; ++i) {
      page* p = batch[i];
      if (p->mapped()) {
        if (p->anon()) {
          page_referenced(p);
        } else if (p->trylock(&cls_page_lock_)) {
          page_referenced(p);
          p->unlock();
        }
      }
      p->clear(PG_active);
    }
    events_.count(PGDEACTIVATE, n);
    putback_lru_pages(batch, n);
    nr_isolated_.fetch_sub(n, std::memory_order_relaxed);
  }
}

void machine::shrink_inactive_list(uint64_t nr_to_scan, lru_list l, scan_control& sc) {
  page* batch[SWAP_CLUSTER_MAX];
  while (nr_to_scan && sc.nr_reclaimed < sc.nr_to_reclaim) {
    uint64_t scanned = 0;
    uint64_t n = isolate_lru_pages(std::min<uint64_t>(nr_to_scan, SWAP_CLUSTER_MAX),
                                   l, batch, &scanned);
    nr_to_scan -= std::min(nr_to_scan, std::max<uint64_t>(scanned, 1));
    sc.nr_scanned += scanned;
    events_.count(sc.kswapd ? PGSCAN_KSWAPD : PGSCAN_DIRECT, scanned);
    if (!n) break;
    const uint64_t isolated = n;
    const uint64_t freed = shrink_page_list(batch, n, sc);
    sc.nr_reclaimed += freed;
    events_.count(sc.kswapd ? PGSTEAL_KSWAPD : PGSTEAL_DIRECT, freed);
    putback_lru_pages(batch, n);
    nr_isolated_.fetch_sub(isolated, std::memory_order_relaxed);
  }
}

// shrink_page_list (shrink_folio_list): for each isolated page, the kernel's sequence for
// anonymous memory, or for a page cache page: unmap it (try_to_unmap), write it back if dirty
// (pageout -> writepage), drop it from the cache (__remove_mapping). Pages it frees leave `pages`; the rest stay there for putback (with
// PG_active set for those to activate). Returns how many it freed.
uint64_t machine::shrink_page_list(page** pages, uint64_t& n, scan_control&) {
  uint64_t kept = 0, freed = 0;
  for (uint64_t i = 0; i < n; ++i) {
    page* p = pages[i];
    auto keep = [&] { pages[kept++] = p; };
    // A swap-cache page whose last pte and swap pte went while we held its lock: the zap's
    // trylock failed and left it to us (free_swap_cache, free_swap_and_cache), so a page kept
    // here must not keep its slot, or it would stay in the cache, owned by no one, until some
    // later scan. try_to_free_swap frees the slot only when no swap pte refers to it.
    auto drop_orphan_slot = [&] {
      if (!p->mapped()) try_to_free_swap(p);
    };
    auto activate = [&] {
      // activate_locked: a page that cannot be reclaimed now goes to the active list; its swap
      // slot is given back if swap is filling up and nothing else refers to it.
      if (vm_swap_full()) try_to_free_swap(p);
      drop_orphan_slot();
      p->set(PG_active);
      events_.count(PGACTIVATE);
      p->unlock();
      keep();
    };
    if (!p->trylock(&cls_page_lock_)) {
      keep();
      continue;
    }
    if (!p->test(PG_swapbacked)) {
      file* f = nullptr;
      if (address_space* as = page_mapping_file(p)) f = as->host;
      if (f) {
        const int referenced_ptes = p->mapped() ? page_referenced(p) : 0;
        p->test_and_clear(PG_referenced);
        if (referenced_ptes) {
          activate();
          continue;
        }
        if (p->mapped() && !try_to_unmap(p)) {
          activate();
          continue;
        }
        if (p->test(PG_dirty)) {
          f->writepage(p);
          events_.count(NR_WRITTEN);
        }
      }
      // A page whose file went away (truncated) only has to lose the isolation reference.
      if (f ? !f->remove_mapping(p, 1) : !p->ref_freeze(1)) {
        p->unlock();
        keep();
        continue;
      }
      p->unlock();
      free_frozen_page(p);
      ++freed;
      continue;
    }
    if (!swap_) {  // nothing to reclaim it to
      activate();
      continue;
    }
    // A swap-cache page that no pte and no swap pte refers to any more (its mm unmapped it
    // while we held the page): drop it without writing.
    const bool orphan = p->test(PG_swapcache) && !p->mapped() && swap_count_of(p) == 0;
    if (orphan) {
      p->clear(PG_dirty);
    } else {
      // page_check_references: a page referenced through a young pte since the last look is
      // activated (PAGEREF_ACTIVATE for swap-backed pages).
      const int referenced_ptes = p->mapped() ? page_referenced(p) : 0;
      p->test_and_clear(PG_referenced);
      if (referenced_ptes) {
        activate();
        continue;
      }
      if (!p->test(PG_swapcache) && !add_to_swap(p)) {  // swap full
        activate();
        continue;
      }
      if (p->mapped() && !try_to_unmap(p)) {
        activate();
        continue;
      }
      if (p->test(PG_dirty) && !pageout(p)) {  // the device refused the write
        activate();
        continue;
      }
    }
    if (!remove_mapping(p)) {  // someone took a reference: a fault is about to map it
      drop_orphan_slot();
      p->unlock();
      keep();
      continue;
    }
    p->unlock();
    free_frozen_page(p);
    ++freed;
  }
  n = kept;
  return freed;
}

void machine::shrink_node(scan_control& sc) {
  // get_scan_count: size >> priority of each list, at least a batch while the list has pages.
  // Anonymous lists only while a swap slot is free; file lists always (clean pages just go,
  // dirty ones are written back first).
  auto target = [&](uint64_t size) {
    return std::max<uint64_t>(size >> sc.priority, std::min<uint64_t>(size, SWAP_CLUSTER_MAX));
  };
  const bool anon = can_reclaim_anon();
  uint64_t nr[NR_LRU_LISTS];
  for (unsigned l = 0; l < NR_LRU_LISTS; ++l)
    nr[l] = (l < LRU_INACTIVE_FILE && !anon) ? 0 : target(lru_size(static_cast<lru_list>(l)));
  auto more = [&] {
    for (uint64_t v : nr)
      if (v) return true;
    return false;
  };
  while (more() && sc.nr_reclaimed < sc.nr_to_reclaim) {
    for (bool file : {false, true}) {
      const lru_list inactive = file ? LRU_INACTIVE_FILE : LRU_INACTIVE_ANON;
      const lru_list active = file ? LRU_ACTIVE_FILE : LRU_ACTIVE_ANON;
      if (nr[active] && inactive_is_low(file)) {
        const uint64_t batch = std::min<uint64_t>(nr[active], SWAP_CLUSTER_MAX);
        shrink_active_list(batch, active, sc);
        nr[active] -= batch;
      }
      if (nr[inactive]) {
        const uint64_t batch = std::min<uint64_t>(nr[inactive], SWAP_CLUSTER_MAX);
        shrink_inactive_list(batch, inactive, sc);
        nr[inactive] -= batch;
      } else if (nr[active] && !inactive_is_low(file)) {
        nr[active] = 0;  // the inactive target is met and the lists are balanced
      }
      if (sc.nr_reclaimed >= sc.nr_to_reclaim) break;
    }
  }
}

uint64_t machine::try_to_free_pages(uint64_t nr, bool kswapd, uint64_t* scanned) {
  scan_control sc;
  sc.nr_to_reclaim = nr;
  sc.kswapd = kswapd;
  for (sc.priority = DEF_PRIORITY; sc.priority >= 0; --sc.priority) {
    shrink_node(sc);
    if (sc.nr_reclaimed >= sc.nr_to_reclaim) break;
  }
  if (sc.nr_reclaimed) reclaim_progress_.fetch_add(1, std::memory_order_acq_rel);
  if (scanned) *scanned = sc.nr_scanned;
  return sc.nr_reclaimed;
}

uint64_t machine::shrink(uint64_t nr) { return try_to_free_pages(nr, /*kswapd=*/false); }

// ---------------------------------------------------------------------------------------------
// kswapd.

void machine::wakeup_kswapd() {
  if (!opts_.kswapd || kswapd_awake_.load(std::memory_order_relaxed)) return;
  {
    std::lock_guard lk(kswapd_lock_);
    if (kswapd_should_run_ || kswapd_running_) return;
    kswapd_should_run_ = true;
    kswapd_awake_.store(true, std::memory_order_relaxed);
  }
  events_.count(KSWAPD_WAKEUP);
  kswapd_wait_.notify_one();
}

void machine::kswapd_main() {
  for (;;) {
    {
      std::unique_lock lk(kswapd_lock_);
      kswapd_running_ = false;
      kswapd_awake_.store(false, std::memory_order_relaxed);
      kswapd_idle_.notify_all();
      kswapd_wait_.wait(lk, [&] { return kswapd_stop_ || kswapd_should_run_; });
      if (kswapd_stop_) return;
      kswapd_should_run_ = false;
      kswapd_running_ = true;
      kswapd_awake_.store(true, std::memory_order_relaxed);
    }
    // balance_pgdat: reclaim until the high watermark is met, or give up after
    // MAX_RECLAIM_RETRIES passes without progress (kswapd_failures) and sleep until an
    // allocation wakes us again.
    const uint64_t high = mem_->wmark().high;
    int failures = 0;
    while (!kswapd_stop_flag_.load(std::memory_order_relaxed)) {
      const uint64_t nr_free = mem_->nr_free();
      if (nr_free >= high) break;
      const uint64_t want = std::min<uint64_t>(high - nr_free, 4 * SWAP_CLUSTER_MAX);
      if (try_to_free_pages(want, /*kswapd=*/true) == 0) {
        if (++failures >= MAX_RECLAIM_RETRIES) break;
        std::this_thread::yield();
      } else {
        failures = 0;
      }
    }
  }
}

void machine::kswapd_quiesce() {
  if (!opts_.kswapd) return;
  std::unique_lock lk(kswapd_lock_);
  kswapd_idle_.wait(lk, [&] { return !kswapd_should_run_ && !kswapd_running_; });
}

}  // namespace uswap
