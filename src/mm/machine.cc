// The machine: page allocation and freeing, the LRU lists and the per-thread lru_add pagevecs
// (mm/swap.c).
#include "uswap/mm/machine.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "uswap/mm/rmap.h"

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
  return std::unique_ptr<machine>(new machine(opts, std::move(*mem)));
}

machine::machine(const machine_options& opts, std::unique_ptr<phys_mem> mem)
    : opts_(opts), id_(next_machine_id.fetch_add(1)), mem_(std::move(mem)) {}

machine::~machine() {
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
  if (page* p = mem_->alloc_page()) {
    events_.count(PGALLOC);
    return p;
  }
  events_.count(OOM_KILL);
  return error(ENOMEM, "out of memory: all " + std::to_string(mem_->nr_pages()) +
                           " page frames are in use and there is no swap to reclaim to");
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
