// The machine: creation (swapon), page allocation with its reclaim policy and freeing, the LRU
// lists and the per-thread lru_add pagevecs (mm/swap.c). Reclaim itself is vmscan.cc, the swap
// paths swap_state.cc.
#include "uswap/mm/machine.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <unordered_map>

#include "uswap/mm/rmap.h"
#include "uswap/swap/swap_cache.h"
#include "uswap/swap/swap_system.h"

namespace uswap {

// A per-thread batch of new pages on their way to the LRU (the kernel's per-CPU lru_add
// pagevec). Each holds a reference on its pages. Its lock is taken by its owner thread and by
// lru_add_drain_all, so it is almost never contended.
struct machine::pagevec {
  mutex lock;
  unsigned nr = 0;
  page* pages[PAGEVEC_SIZE] = {};
};

namespace {

std::atomic<uint64_t> next_machine_id{1};

// Which pagevec this thread uses on which machine. A small cache in front of the machine's
// registry; ids are never reused, so an entry of a destroyed machine is never matched again.
struct pagevec_cache_entry {
  uint64_t machine_id = 0;
  void* pv = nullptr;
};
thread_local pagevec_cache_entry tl_pagevec_cache[4];
thread_local unsigned tl_pagevec_victim = 0;

}  // namespace

result<std::unique_ptr<machine>> machine::create(const machine_options& opts) {
  const uint64_t pages = bytes_to_pages(opts.ram);
  if (pages < 16) return error(EINVAL, "machine: RAM must be at least 16 pages (64 KiB)");
  auto mem = phys_mem::create(pages, opts.wmark);
  if (!mem) return mem.error();
  std::unique_ptr<machine> m(new machine(opts, std::move(*mem)));
  if (opts.swap) {
    if (status st = m->swapon(); !st.ok()) return st;
  }
  if (opts.kswapd) m->kswapd_ = std::thread([p = m.get()] { p->kswapd_main(); });
  return m;
}

machine::machine(const machine_options& opts, std::unique_ptr<phys_mem> mem)
    : opts_(opts), id_(next_machine_id.fetch_add(1)), mem_(std::move(mem)) {}

// swapon: one swap area of `swap` bytes on a zram or RAM device (swap_backend).
status machine::swapon() {
  swap_backend_options bo;
  bo.slots = bytes_to_pages(opts_.swap);
  if (bo.slots < 1) return error(EINVAL, "machine: swap must be at least one page");
  bo.device = opts_.swap_dev;
  bo.zram = opts_.zram;
  bo.swap.lock_mode = opts_.swap_lock;
  bo.swap.slot_cache = opts_.slot_cache;
  auto b = swap_backend::create(bo);
  if (!b) return b.error();
  backend_ = std::move(*b);
  swap_ = &backend_->swap();
  cache_ = std::make_unique<swap_cache<page>>(*swap_, 64, &cls_swap_cache_);
  return {};
}

swap_usage machine::swap_stats() const {
  swap_usage u;
  if (!swap_) return u;
  u.write_errors = backend_->write_errors();
  u.total = swap_->total_swap_pages();
  u.free = swap_->nr_swap_pages();
  for (unsigned t = 0; t < swap_->nr_areas(); ++t)
    if (swap_area* a = swap_->area(t)) u.inuse += a->inuse_pages();
  u.cached = cache_->size();
  return u;
}

machine::~machine() {
  if (kswapd_.joinable()) {
    {
      std::lock_guard lk(kswapd_lock_);
      kswapd_stop_ = true;
      kswapd_stop_flag_.store(true, std::memory_order_relaxed);
    }
    kswapd_wait_.notify_all();
    kswapd_.join();
  }
  // Every mm is gone, so pagevecs hold the last references of the pages in them.
  lru_add_drain_all();
}

std::unique_ptr<mm_struct> machine::mm_alloc() {
  return std::unique_ptr<mm_struct>(new mm_struct(*this));
}

uint64_t machine::lru_size(lru_list l) const { return lru_nr_[l].load(std::memory_order_relaxed); }

// ---------------------------------------------------------------------------------------------
// Allocation and freeing.

result<page*> machine::alloc_page() {
  const watermarks& wm = mem_->wmark();
  if (mem_->nr_free() > wm.min) {
    if (page* p = mem_->alloc_page()) {
      events_.count(PGALLOC);
      if (mem_->nr_free() < wm.low) wakeup_kswapd();
      return p;
    }
  }
  // __alloc_pages_slowpath: wake kswapd, then reclaim in this thread until a frame is free.
  // Frames freed by our own reclaim may be taken down to zero: this thread paid for them.
  wakeup_kswapd();
  events_.count(ALLOCSTALL);
  int no_progress = 0;
  unsigned waits = 0;
  bool drained = false;
  for (;;) {
    const uint64_t before = reclaim_progress_.load(std::memory_order_acquire);
    uint64_t scanned = 0;
    const uint64_t got = try_to_free_pages(SWAP_CLUSTER_MAX, /*kswapd=*/false, &scanned);
    if (page* p = mem_->alloc_page()) {
      events_.count(PGALLOC);
      return p;
    }
    if (got > 0 || reclaim_progress_.load(std::memory_order_acquire) != before) {
      no_progress = waits = 0;
      continue;
    }
    // Pages parked in other threads' pagevecs are invisible to reclaim: bring them in once.
    if (!drained) {
      drained = true;
      lru_add_drain_all();
      continue;
    }
    // should_reclaim_retry: a round counts against us only if it could have found something,
    // i.e. it scanned pages and freed none, or nothing is reclaimable at all (no free swap, no
    // page on the LRU or isolated). A round that found the LRU emptied by other reclaimers,
    // who hold the pages isolated right now, says nothing: wait for them, so that a slow or
    // descheduled reclaimer does not make this allocation fail while it is still freeing.
    const bool none_isolated = nr_isolated_.load(std::memory_order_relaxed) == 0;
    const bool nothing_to_scan =
        (!can_reclaim_anon() ||
         (lru_size(LRU_INACTIVE_ANON) + lru_size(LRU_ACTIVE_ANON) == 0 && none_isolated)) &&
        lru_size(LRU_INACTIVE_FILE) + lru_size(LRU_ACTIVE_FILE) == 0 && none_isolated;
    if (scanned > 0 || nothing_to_scan) {
      if (++no_progress >= MAX_RECLAIM_RETRIES) {
        events_.count(OOM_KILL);
        return error(ENOMEM, "out of memory: all " + std::to_string(mem_->nr_pages()) +
                                 " page frames are in use and reclaim freed none" +
                                 (swap_ ? (can_reclaim_anon() ? " (the swap device refused writes)"
                                                              : " (swap is full)")
                                        : " (no swap)"));
      }
      // Others may be in the middle of freeing (writes to swap): let them run.
      std::this_thread::sleep_for(std::chrono::microseconds(50 << std::min(no_progress, 6)));
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20 << std::min(++waits, 6u)));
    }
  }
}

void machine::put_page(page* p) noexcept {
  if (p->put_testzero()) free_unref_page(p);
}

void machine::free_unref_page(page* p) noexcept {
  // Nobody can take a reference any more (get_unless_zero fails at 0), and isolation needs a
  // reference, so PG_lru cannot change under us except by our own clearing.
  if (p->test(PG_lru)) {
    lru_lock_.lock();
    if (p->test_and_clear(PG_lru)) del_page_from_lru_list(p, page_lru(p));
    lru_lock_.unlock();
  }
  free_frozen_page(p);
}

void machine::free_frozen_page(page* p) noexcept {
  if (anon_vma* av = p->anon_vma_of()) {
    p->mapping.store(0, std::memory_order_relaxed);
    put_anon_vma(av);
  } else {
    p->mapping.store(0, std::memory_order_relaxed);  // a page cache page removed from its file
  }
  p->flags.store(0, std::memory_order_relaxed);
  events_.count(PGFREE);
  mem_->free_page(p);
}

// ---------------------------------------------------------------------------------------------
// LRU lists (under lru_lock_).

lru_list machine::page_lru(const page* p) {
  const bool file = !p->test(PG_swapbacked);
  const bool active = p->test(PG_active);
  return static_cast<lru_list>((file ? LRU_INACTIVE_FILE : LRU_INACTIVE_ANON) + (active ? 1 : 0));
}

void machine::add_page_to_lru_list(page* p, lru_list l) {
  lru_head& h = lists_[l];
  p->lru_prev = no_pfn;
  p->lru_next = h.head;
  if (h.head != no_pfn)
    mem_->pfn_to_page(h.head)->lru_prev = p->pfn;
  else
    h.tail = p->pfn;
  h.head = p->pfn;
  h.nr++;
  lru_nr_[l].store(h.nr, std::memory_order_relaxed);
}

void machine::del_page_from_lru_list(page* p, lru_list l) {
  lru_head& h = lists_[l];
  if (p->lru_prev != no_pfn)
    mem_->pfn_to_page(p->lru_prev)->lru_next = p->lru_next;
  else
    h.head = p->lru_next;
  if (p->lru_next != no_pfn)
    mem_->pfn_to_page(p->lru_next)->lru_prev = p->lru_prev;
  else
    h.tail = p->lru_prev;
  p->lru_prev = p->lru_next = no_pfn;
  h.nr--;
  lru_nr_[l].store(h.nr, std::memory_order_relaxed);
}

// ---------------------------------------------------------------------------------------------
// Per-thread pagevecs (mm/swap.c: lru_cache_add, lru_add_drain, lru_add_drain_all).

machine::pagevec* machine::my_pagevec() {
  for (auto& e : tl_pagevec_cache)
    if (e.machine_id == id_) return static_cast<pagevec*>(e.pv);
  pagevec* pv;
  {
    // A thread gets one pagevec per machine; pagevecs live as long as the machine.
    thread_local std::unordered_map<uint64_t, void*> owned;
    auto it = owned.find(id_);
    if (it != owned.end()) {
      pv = static_cast<pagevec*>(it->second);
    } else {
      std::lock_guard lk(pagevecs_lock_);
      pagevecs_.push_back(std::make_unique<pagevec>());
      pv = pagevecs_.back().get();
      owned.emplace(id_, pv);
    }
  }
  tl_pagevec_cache[tl_pagevec_victim++ % 4] = {id_, pv};
  return pv;
}

void machine::lru_cache_add(page* p) {
  p->get();
  pagevec* pv = my_pagevec();
  pv->lock.lock();
  pv->pages[pv->nr++] = p;
  if (pv->nr == PAGEVEC_SIZE) drain_pagevec(*pv);
  pv->lock.unlock();
}

void machine::drain_pagevec(pagevec& pv) {
  if (pv.nr == 0) return;
  page* to_free[PAGEVEC_SIZE];
  unsigned nr_free = 0;
  lru_lock_.lock();
  for (unsigned i = 0; i < pv.nr; ++i) {
    page* p = pv.pages[i];
    p->set(PG_lru);
    const lru_list l = page_lru(p);
    add_page_to_lru_list(p, l);
    // Drop the pagevec's reference; if it was the last (the page was unmapped meanwhile), take
    // the page straight back off the list and free it once the lock is released.
    if (p->put_testzero()) {
      p->clear(PG_lru);
      del_page_from_lru_list(p, l);
      to_free[nr_free++] = p;
    }
  }
  lru_lock_.unlock();
  pv.nr = 0;
  for (unsigned i = 0; i < nr_free; ++i) free_frozen_page(to_free[i]);
}

void machine::lru_add_drain_all() {
  std::vector<pagevec*> all;
  {
    std::lock_guard lk(pagevecs_lock_);
    all.reserve(pagevecs_.size());
    for (auto& pv : pagevecs_) all.push_back(pv.get());
  }
  for (pagevec* pv : all) {
    pv->lock.lock();
    drain_pagevec(*pv);
    pv->lock.unlock();
  }
}

}  // namespace uswap
