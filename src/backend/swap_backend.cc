// swapon and page I/O over one swap device. See include/uswap/backend/swap_backend.h.
#include "uswap/backend/swap_backend.h"

#include <algorithm>
#include <cerrno>
#include <string>

#include "uswap/base/page.h"

namespace uswap {

result<std::unique_ptr<swap_backend>> swap_backend::create(const swap_backend_options& opts) {
  if (opts.slots == 0) return error(EINVAL, "swap back end: no swap slots (set a swap size)");
  // Slot 0 of a swap area is its header: the device and the area have one page more than the
  // swap space they offer.
  const uint64_t pages = opts.slots + 1;
  std::unique_ptr<swap_backend> b(new swap_backend());
  auto dev = opts.device == swap_dev_kind::zram ? make_zram_swap_device(pages, opts.zram)
                                                : make_ram_swap_device(pages);
  if (!dev) return dev.error();
  b->dev_ = std::move(*dev);
  b->swap_ = std::make_unique<swap_system>(opts.swap);

  swap_area_options ao;
  ao.size_pages = pages;
  ao.name = opts.name.empty() ? std::string(to_string(opts.device)) : opts.name;
  swap_device* d = b->dev_.get();
  ao.slot_free_notify = [d](uint64_t offset) { d->slot_free_notify(offset); };
  ao.discard = opts.discard.value_or(opts.device == swap_dev_kind::zram);
  if (ao.discard) ao.discard_fn = [d](uint64_t offset, uint64_t nr) { d->discard(offset, nr); };
  if (auto type = b->swap_->swapon(std::move(ao)); !type) return type.error();
  return b;
}

swap_backend::~swap_backend() = default;

status swap_backend::swap_writepage(swap_entry e, const void* src) {
  status st = dev_->write_page(swp_offset(e), src);
  if (!st.ok()) write_errors_.fetch_add(1, std::memory_order_relaxed);
  return st;
}

int swap_backend::store(const void* page, swap_entry* out, uint32_t* stored_bytes) noexcept {
  const swap_entry e = swap_->get_swap_page();
  if (e.empty()) return ENOSPC;
  if (status st = swap_writepage(e, page); !st.ok()) {
    (void)swap_->put_swap_page(e);
    return st.code() == ENOSPC || st.code() == ENOMEM ? st.code() : EIO;
  }
  if (!swap_->swap_duplicate(e).ok()) {
    (void)swap_->put_swap_page(e);
    return ENOMEM;
  }
  (void)swap_->put_swap_page(e);
  *stored_bytes = dev_->stored_size(swp_offset(e));
  *out = e;
  return 0;
}

int swap_backend::load(swap_entry e, void* dst) noexcept {
  return swap_read_folio(e, dst).ok() ? 0 : EIO;
}

unsigned swap_backend::load_run(const swap_entry* e, unsigned n, void* dst) noexcept {
  if (n == 0) return 0;
  if (n == 1 || n > max_load_run) {
    unsigned k = 0;
    while (k < n && load(e[k], static_cast<uint8_t*>(dst) + size_t{k} * page_size) == 0) ++k;
    return k;
  }
  // The device takes its slots in ascending order (a run's slots were handed out in eviction
  // order, not address order); results go back to the run's order.
  unsigned order[max_load_run];
  for (unsigned i = 0; i < n; ++i) order[i] = i;
  std::sort(order, order + n,
            [&](unsigned a, unsigned b) { return swp_offset(e[a]) < swp_offset(e[b]); });
  uint64_t offset[max_load_run];
  void* page[max_load_run];
  status result[max_load_run];
  for (unsigned i = 0; i < n; ++i) {
    offset[i] = swp_offset(e[order[i]]);
    page[i] = static_cast<uint8_t*>(dst) + size_t{order[i]} * page_size;
  }
  dev_->read_pages({offset, n}, {page, n}, {result, n});
  bool ok[max_load_run];
  for (unsigned i = 0; i < n; ++i) ok[order[i]] = result[i].ok();
  unsigned k = 0;
  while (k < n && ok[k]) ++k;
  return k;
}

void swap_backend::release(swap_entry e) noexcept { (void)swap_->swap_free(e); }

swap_backend_stats swap_backend::stats() const {
  swap_backend_stats s;
  s.total_slots = swap_->total_swap_pages();
  s.free_slots = swap_->nr_swap_pages();
  s.used_slots = s.total_slots - s.free_slots;
  s.write_errors = write_errors_.load(std::memory_order_relaxed);
  s.device = dev_->stats();
  return s;
}

status swap_backend::check_invariants() const {
  if (status st = swap_->check_invariants(); !st.ok()) return st;
  const swap_area* a = swap_->area(0);
  if (!a) return error(EIO, "swap back end: no swap area");
  for (uint64_t off = 0; off < dev_->nr_pages(); ++off) {
    if (!dev_->holds(off)) continue;
    if (off == 0) return error(EIO, "swap back end: the header slot holds a page");
    if (swap_->swap_map_byte(swp_entry(0, off)) == 0)
      return error(EIO, "swap back end: free slot " + std::to_string(off) +
                            " still holds a page on the " + to_string(dev_->kind()) + " device");
  }
  const swap_backend_stats s = stats();
  if (s.device.stored_pages > s.used_slots)
    return error(EIO, "swap back end: the device stores " + std::to_string(s.device.stored_pages) +
                          " pages but only " + std::to_string(s.used_slots) + " slots are in use");
  return {};
}

}  // namespace uswap
