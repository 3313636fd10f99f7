// zram's post-processing (drivers/block/zram/zram_drv.c: idle_store, writeback_store,
// recompress_store, compact_store): mark_idle, writeback to the backing file, recompression with
// secondary codecs, compaction. Writeback and recompress select their slots with one scan
// (scan_pp_slots, the kernel's scan_slots_for_writeback / scan_slots_for_recompress), which
// marks them ZRAM_PP_SLOT under their locks; any access clears the mark, so a slot written, read
// or freed after the scan is skipped when its turn comes.
//
// Thread-safety: one post-processing call at a time (pp_lock), concurrently with I/O (zram.h).
#include <algorithm>
#include <mutex>
#include <new>
#include <optional>
#include <vector>

#include "uswap/base/fault_inject.h"
#include "zram_drv.h"

namespace uswap {

using namespace zram_detail;

namespace {

// A slot chosen by a scan, with the size it had then (larger objects are processed first: they
// free the most memory, as the kernel's pp buckets order them).
struct pp_slot {
  uint64_t index;
  uint32_t size;
};

// place_pp_slot(), with the slot locked for write. false, with the slot left unmarked, when the
// list cannot grow.
bool place_pp_slot(zram& z, std::vector<pp_slot>& ctl, uint64_t index, uint64_t w) noexcept {
  z.assert_slot_locked(index, slot_access::write);
  if (ctl.size() == ctl.capacity() && should_fail(fault_point::zram_pp)) return false;
  try {
    ctl.push_back({index, static_cast<uint32_t>(w & size_mask)});
  } catch (const std::bad_alloc&) {
    return false;
  }
  flags_update(z.table[index].flags, 0, bit(ZRAM_PP_SLOT));
  return true;
}

// release_pp_slot() for the slots not processed.
void release_pp_slots(zram& z, const std::vector<pp_slot>& ctl, size_t from) {
  for (size_t i = from; i < ctl.size(); ++i) {
    zram::slot_guard g(z, ctl[i].index, slot_access::write);
    flags_update(z.table[ctl[i].index].flags, bit(ZRAM_PP_SLOT), 0);
  }
}

// scan_slots_for_writeback() and scan_slots_for_recompress(): the slots of [first, last) whose
// word `wanted` accepts (looked at with the slot locked for write), marked ZRAM_PP_SLOT, largest
// first. Free slots are never wanted. ENOMEM, with every mark taken back, when the list cannot
// grow (the kernel's pp_ctl allocation failing).
template <class Wanted>
result<std::vector<pp_slot>> scan_pp_slots(zram& z, uint64_t first, uint64_t last, Wanted wanted,
                                           uint64_t max = 0) {
  std::vector<pp_slot> ctl;
  bool refused = false;
  last = z.walk_end(last);
  for (uint64_t i = first; i < last && (max == 0 || ctl.size() < max); ++i) {
    // A free slot is passed by without its lock: its word is not written, and one allocated
    // after this look is one written after the scan.
    if (!zram::slot_allocated(z.word(i))) continue;
    zram::slot_guard g(z, i, slot_access::write);
    const uint64_t w = z.word(i);
    if (!zram::slot_allocated(w) || !wanted(w)) continue;
    if (!place_pp_slot(z, ctl, i, w)) {
      refused = true;
      break;
    }
  }
  if (refused) {
    release_pp_slots(z, ctl, 0);  // no slot lock held here: it takes each slot's in turn
    return error(ENOMEM, z.opts.name + ": no memory for the list of slots to post-process");
  }
  std::stable_sort(ctl.begin(), ctl.end(),
                   [](const pp_slot& a, const pp_slot& b) { return a.size > b.size; });
  return ctl;
}

}  // namespace

uint64_t zram_device::mark_idle(std::optional<uint32_t> min_age_seconds) {
  return mark_idle_range(0, z_->nr_pages, min_age_seconds);
}

uint64_t zram_device::mark_idle_range(uint64_t first_page, uint64_t nr_pages,
                                      std::optional<uint32_t> min_age_seconds) {
  zram& z = *z_;
  const uint32_t t = z.now();
  uint64_t marked = 0;
  const uint64_t end = first_page < z.nr_pages ? first_page + std::min(nr_pages, z.nr_pages - first_page)
                                               : first_page;
  const uint64_t walked = z.walk_end(end);
  for (uint64_t i = first_page; i < walked; ++i) {
    if (!zram::slot_allocated(z.word(i))) continue;  // as in scan_pp_slots
    zram::slot_guard g(z, i, slot_access::write);
    const uint64_t w = z.word(i);
    // ZRAM_SAME slots are never post-processed and ZRAM_WB ones cannot be idle (kernel too).
    if (!zram::slot_allocated(w) || (w & (bit(ZRAM_WB) | bit(ZRAM_SAME)))) continue;
    const uint32_t ac = static_cast<uint32_t>(w >> ZRAM_AC_TIME_SHIFT);
    // "echo SECONDS > idle": idle when cutoff = now - SECONDS is after the access time.
    const bool idle = !min_age_seconds || (t >= *min_age_seconds && t - *min_age_seconds > ac);
    flags_update(z.table[i].flags, bit(ZRAM_IDLE), idle ? bit(ZRAM_IDLE) : 0);
    marked += idle;
  }
  return marked;
}

result<uint64_t> zram_device::writeback(const zram_writeback_params& params) {
  zram& z = *z_;
  if (!z.bdev) return error(EINVAL, z.opts.name + ": writeback: no backing device configured");
  if (params.first_page >= z.nr_pages ||
      (params.nr_pages && params.nr_pages > z.nr_pages - params.first_page))
    return z.bad_index("writeback", params.first_page, params.nr_pages ? params.nr_pages : 1);
  const uint64_t hi = params.nr_pages ? params.first_page + params.nr_pages : z.nr_pages;
  const bool want_idle = params.type == zram_writeback_type::idle ||
                         params.type == zram_writeback_type::huge_idle;
  const bool want_huge = params.type == zram_writeback_type::huge ||
                         params.type == zram_writeback_type::huge_idle;
  const bool want_incompressible = params.type == zram_writeback_type::incompressible;

  std::lock_guard<mutex> pp(z.pp_lock);
  auto scanned = scan_pp_slots(z, params.first_page, hi, [&](uint64_t w) {
    if (w & (bit(ZRAM_WB) | bit(ZRAM_SAME))) return false;
    if (want_idle && !(w & bit(ZRAM_IDLE))) return false;
    if (want_huge && !(w & bit(ZRAM_HUGE))) return false;
    if (want_incompressible && !(w & bit(ZRAM_INCOMPRESSIBLE))) return false;
    return true;
  }, params.max_pages);
  if (!scanned.ok()) return scanned.error();
  const std::vector<pp_slot>& ctl = *scanned;

  // zram_writeback_slots(), in batches of the backing device's batch_size() (the kernel's
  // writeback_batch_size): each page of a batch is read under its slot lock into the batch,
  // the batch is written with no slot locked (a slow target delays writeback, not I/O), and each
  // slot whose write succeeded and that was not touched meanwhile becomes ZRAM_WB.
  uint64_t written = 0;
  status failure;
  backing_dev& bdev = *z.bdev;
  const size_t batch_max = std::max<size_t>(1, bdev.batch_size());
  std::vector<uint8_t> pages;
  std::vector<backing_write> batch;
  std::vector<uint64_t> batch_index;
  // The batch's buffers, before anything moves: refused, every selected slot is let go (ENOMEM,
  // never bad_alloc across the layer's API).
  try {
    if (should_fail(fault_point::zram_pp)) throw std::bad_alloc();
    pages.resize(batch_max * page_size);
    batch.reserve(batch_max);
    batch_index.reserve(batch_max);
  } catch (const std::bad_alloc&) {
    release_pp_slots(z, ctl, 0);
    return error(ENOMEM, z.opts.name + ": writeback: no memory for a batch of " +
                             std::to_string(batch_max) + " pages");
  }
  auto give_back = [&](uint64_t blk) {
    bdev.release(blk);
    z.stats.bd_count.fetch_sub(1, std::memory_order_relaxed);
  };
  size_t k = 0;
  bool full = false;
  while (k < ctl.size() && !full) {
    batch.clear();
    batch_index.clear();
    for (; k < ctl.size() && batch.size() < batch_max; ++k) {
      const uint64_t index = ctl[k].index;
      const uint64_t blk = bdev.reserve();
      if (blk == backing_dev::invalid_block) {
        failure = error(ENOSPC, z.opts.name + ": writeback: backing device " + bdev.path() +
                                    " is full after " + std::to_string(written) + " pages");
        full = true;
        break;
      }
      z.stats.bd_count.fetch_add(1, std::memory_order_relaxed);
      uint8_t* page = pages.data() + batch.size() * page_size;
      status st;
      {
        zram::slot_guard g(z, index, slot_access::read);
        // Accessed, rewritten or freed since the scan: the slot lost ZRAM_PP_SLOT; skip it.
        if (!(z.word(index) & bit(ZRAM_PP_SLOT))) {
          give_back(blk);
          continue;
        }
        st = z.read_slot(index, page, nullptr);
      }
      if (!st.ok()) {
        give_back(blk);
        zram::slot_guard g(z, index, slot_access::write);
        flags_update(z.table[index].flags, bit(ZRAM_PP_SLOT), 0);
        failure = st;
        continue;
      }
      batch.push_back({blk, page, {}});
      batch_index.push_back(index);
    }
    if (batch.empty()) continue;
    bdev.write_blocks(batch);
    for (size_t i = 0; i < batch.size(); ++i) {
      const uint64_t index = batch_index[i];
      const uint64_t blk = batch[i].block;
      zram::slot_guard g(z, index, slot_access::write);
      const uint64_t w = z.word(index);
      if (!batch[i].result.ok()) {
        // As the kernel: an I/O error is reported, the remaining slots are still tried; the
        // page stays where it was.
        give_back(blk);
        flags_update(z.table[index].flags, bit(ZRAM_PP_SLOT), 0);
        failure = batch[i].result;
        continue;
      }
      z.stats.bd_writes.fetch_add(1, std::memory_order_relaxed);
      // zram_writeback_complete(): the slot was accessed or freed while its page was out.
      if (!(w & bit(ZRAM_PP_SLOT))) {
        give_back(blk);
        continue;
      }
      const uint8_t* page = static_cast<const uint8_t*>(batch[i].page);
      const uint64_t wb_handle =
          blk | (z.csum_len ? uint64_t{obj_checksum(page, page_size)} << 32 : 0);
      zram_table_entry& e = z.table[index];
      if (w & bit(ZRAM_HUGE)) z.stats.huge_pages.fetch_sub(1, std::memory_order_relaxed);
      z.stats.compr_data_size.fetch_sub(w & size_mask, std::memory_order_relaxed);
      (void)z.mem_pool->free(e.handle);
      e.handle = wb_handle;
      flags_update(e.flags, state_mask, bit(ZRAM_WB));  // keeps ac_time
      ++written;
    }
  }
  if (k < ctl.size()) release_pp_slots(z, ctl, k);
  if (!failure.ok()) return failure;
  return written;
}

result<uint64_t> zram_device::recompress(const zram_recompress_params& params) {
  zram& z = *z_;
  if (z.num_comps < 2)
    return error(EINVAL, z.opts.name + ": recompress: no recompression algorithm configured");
  if (params.priority >= z.num_comps)
    return error(EINVAL, z.opts.name + ": recompress: no algorithm at priority " +
                             std::to_string(params.priority));
  if (params.threshold >= z.huge_class_size)
    return error(EINVAL, z.opts.name + ": recompress: threshold " +
                             std::to_string(params.threshold) + " not below huge_class_size " +
                             std::to_string(z.huge_class_size));
  const bool want_idle = params.type == zram_recompress_type::idle ||
                         params.type == zram_recompress_type::huge_idle;
  const bool want_huge = params.type == zram_recompress_type::huge ||
                         params.type == zram_recompress_type::huge_idle;
  // Priorities to try: the one asked for, or every secondary codec in order.
  const uint32_t prio_lo = params.priority ? params.priority : 1;
  const uint32_t prio_hi = params.priority ? params.priority + 1 : z.num_comps;  // exclusive

  std::lock_guard<mutex> pp(z.pp_lock);
  auto scanned = scan_pp_slots(z, 0, z.nr_pages, [&](uint64_t w) {
    if (want_idle && !(w & bit(ZRAM_IDLE))) return false;
    if (want_huge && !(w & bit(ZRAM_HUGE))) return false;
    if (w & (bit(ZRAM_WB) | bit(ZRAM_SAME) | bit(ZRAM_INCOMPRESSIBLE))) return false;
    // Already compressed with the same or a higher priority codec.
    return zram::comp_priority(w) + 1 < prio_hi;
  });
  if (!scanned.ok()) return scanned.error();
  const std::vector<pp_slot>& ctl = *scanned;

  uint64_t recompressed = 0, tried = 0;
  status failure;
  alignas(8) uint8_t page[page_size];
  size_t k = 0;
  for (; k < ctl.size(); ++k) {
    if (params.max_pages && tried == params.max_pages) break;
    const uint64_t index = ctl[k].index;
    uint64_t w;
    {
      zram::slot_guard g(z, index, slot_access::read);
      w = z.word(index);
      if (!(w & bit(ZRAM_PP_SLOT))) continue;
      const size_t old_len = w & size_mask;
      // Objects already "small enough" are left alone.
      if (params.threshold && old_len < params.threshold) {
        flags_update(z.table[index].flags, bit(ZRAM_PP_SLOT), 0);
        continue;
      }
      if (status st = z.read_slot(index, page, nullptr); !st.ok()) {
        flags_update(z.table[index].flags, bit(ZRAM_PP_SLOT), 0);
        failure = st;
        break;
      }
      // Touched: not idle any more, so another post-processing does not pick it for that.
      flags_update(z.table[index].flags, bit(ZRAM_IDLE), 0);
    }
    ++tried;
    // recompress_slot(), with the compression outside the slot lock: the result is installed
    // below only if the slot still carries ZRAM_PP_SLOT, i.e. nothing changed it meanwhile.
    const size_t old_alloc =
        (w & bit(ZRAM_HUGE)) ? page_size : (w & size_mask) + z.csum_len;
    const unsigned class_old = z.mem_pool->lookup_class_index(old_alloc);
    const uint32_t first = std::max(prio_lo, zram::comp_priority(w) + 1);
    std::optional<zram::prepared> better;
    uint32_t last_tried = 0;
    for (uint32_t prio = first; prio < prio_hi && !better; ++prio) {
      zcomp& comp = *z.comps[prio];
      auto strm = comp.stream_get();
      if (!strm.ok()) {
        failure = strm.error();
        break;
      }
      auto len = comp.compress(**strm, page);
      last_tried = prio;
      if (!len.ok()) continue;
      const size_t new_alloc = *len + z.csum_len;
      // Kept only if it lands in a smaller size class (it saves memory) and under threshold.
      if (new_alloc >= z.huge_class_size ||
          z.mem_pool->lookup_class_index(new_alloc) >= class_old ||
          (params.threshold && *len >= params.threshold))
        continue;
      auto p = z.prepare_compressed(index, page, **strm, *len, prio);
      if (!p.ok()) {
        // The slot keeps its old object; recompression stops and reports why (the kernel too).
        failure = p.error();
        break;
      }
      better = *p;
    }
    zram::slot_guard g(z, index, slot_access::write);
    const bool still_selected = z.word(index) & bit(ZRAM_PP_SLOT);
    if (better && still_selected) {
      z.install(index, *better);
      ++recompressed;
    } else {
      if (better) z.drop(*better);
      if (still_selected) {
        // The highest-priority codec could not shrink it either: never try again.
        const bool give_up = !better && failure.ok() && last_tried + 1 == z.num_comps;
        flags_update(z.table[index].flags, bit(ZRAM_PP_SLOT),
                     give_up ? bit(ZRAM_INCOMPRESSIBLE) : 0);
      }
    }
    if (!failure.ok()) {
      ++k;
      break;
    }
  }
  if (k < ctl.size()) release_pp_slots(z, ctl, k);
  if (!failure.ok()) return failure;
  return recompressed;
}

std::vector<uint64_t> zram_device::backing_blocks() const {
  zram& z = *z_;
  std::vector<uint64_t> blocks;
  if (!z.bdev || z.stats.bd_count.load(std::memory_order_relaxed) == 0) return blocks;
  const uint64_t walked = z.walk_end(z.nr_pages);
  for (uint64_t i = 0; i < walked; ++i) {
    if (!(z.word(i) & bit(ZRAM_WB))) continue;  // ZRAM_WB is set and cleared under the lock
    zram::slot_guard g(z, i, slot_access::read);
    if (z.word(i) & bit(ZRAM_WB)) blocks.push_back(z.table[i].handle & wb_block_mask);
  }
  return blocks;
}

zram_block_allocator* zram_device::backing_allocator() const noexcept {
  return z_->bdev ? z_->bdev->shared() : nullptr;
}

void zram_device::after_fork_child() noexcept {
  if (z_->bdev) z_->bdev->after_fork_child();
}

uint64_t zram_device::compact() {
  const uint64_t freed = z_->mem_pool->compact();
  // Compaction is how memory is given back: return the emptied zspages' pages to the host too.
  z_->arena->release_free();
  return freed;
}

}  // namespace uswap
