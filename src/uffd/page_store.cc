#include "page_store.h"

#include <cerrno>
#include <string>

namespace uswap {

result<std::unique_ptr<page_store>> page_store::create(const page_store_options& opts) {
  if (opts.max_pages == 0) return error(EINVAL, "page_store: max_pages must be positive");
  std::unique_ptr<page_store> ps(new page_store());
  // Slot 0 of a swap area is its header: the device has one page more than the slots.
  zram_options zo;
  zo.disksize = (opts.max_pages + 1) * page_size;
  zo.name = "uffd-zram";
  zo.comp_algorithm = opts.comp_algorithm;
  // The pager's pool grows with what it swaps out and is counted beside the limit: no huge-page
  // chunks, whose untouched rest would be resident from their first zspage.
  zo.huge_page_chunks = false;
  auto z = zram_device::create(zo);
  if (!z) return z.error();
  ps->zram_ = std::move(z).value();

  swap_options so;
  so.lock_mode = swap_lock_mode::percpu;
  // The kernel without swap_slots.c (6.15 on), not by_mode's 6.14 allocation cache: no slot is
  // reserved beyond those the pager holds, and the SIGBUS path takes no slot cache lock.
  so.slot_cache = slot_cache_policy::off;
  ps->swap_ = std::make_unique<swap_system>(so);
  swap_area_options ao;
  ao.size_pages = opts.max_pages + 1;
  ao.name = "uffd-zram";
  zram_device* zram = ps->zram_.get();
  ao.slot_free_notify = [zram](uint64_t offset) {
    // Under the slot's cluster lock, so zram's trylock-style notify is all that may run here;
    // it cannot miss: nobody else holds the zram slot of a slot being freed.
    zram->slot_free_notify(offset);
  };
  if (auto t = ps->swap_->swapon(std::move(ao)); !t) return t.error();
  return ps;
}

page_store::~page_store() = default;

int page_store::store(const void* page, uint64_t* handle, uint32_t* compressed_size) noexcept {
  const swap_entry e = swap_->get_swap_page();
  if (e.empty()) return ENOSPC;
  const uint64_t off = swp_offset(e);
  if (status st = zram_->write_page(off, page); !st.ok()) {
    (void)swap_->put_swap_page(e);
    return st.code() == ENOSPC ? ENOSPC : st.code() == ENOMEM ? ENOMEM : EIO;
  }
  if (!swap_->swap_duplicate(e).ok()) {
    (void)swap_->put_swap_page(e);
    return ENOMEM;
  }
  (void)swap_->put_swap_page(e);
  auto info = zram_->slot_info(off);
  *compressed_size = info ? (info->kind == zram_slot_kind::same ? 0 : info->size) : page_size;
  *handle = e.val;
  return 0;
}

int page_store::load(uint64_t handle, void* dst) noexcept {
  const status st = zram_->read_page(swp_offset(swap_entry{handle}), dst);
  return st.ok() ? 0 : EIO;
}

void page_store::release(uint64_t handle) noexcept { (void)swap_->swap_free(swap_entry{handle}); }

page_store_stats page_store::stats() const noexcept {
  page_store_stats s;
  s.pages = swap_->total_swap_pages() - swap_->nr_swap_pages();
  s.mm = zram_->mm_stat();
  return s;
}

status page_store::check_invariants() const {
  if (auto st = swap_->check_invariants(); !st.ok()) return st;
  const uint64_t slots = swap_->total_swap_pages() - swap_->nr_swap_pages();
  const uint64_t stored = zram_->mm_stat().orig_data_size / page_size;
  if (slots != stored)
    return error(EIO, "page_store: " + std::to_string(slots) + " swap slots in use but zram holds " +
                          std::to_string(stored) + " pages");
  return {};
}

}  // namespace uswap
