// zram after drivers/block/zram/zram_drv.c. The contract is in include/uswap/zram/zram.h, struct
// zram in zram_drv.h; this file keeps the kernel's structure and names (slot_free,
// zram_write_page, write_same_filled_page, write_incompressible_page, zram_read_page,
// read_from_zspool...) so the two read side by side. Post-processing (mark_idle, writeback,
// recompress) is in zram_pp.cc, the statistics (mm_stat_show...) in zram_stats.cc.
//
// Lock discipline (every mode; slot_lock.h maps `read` / `write` access to the mode's lock):
//   - a slot's handle and data bits change only under its lock taken for `write`;
//   - `read` access (shared only in global_rwlock mode) may change ac_time, ZRAM_IDLE and
//     ZRAM_PP_SLOT, always with atomic read-modify-writes of the word;
//   - compression, zs_malloc and zs_obj_write of a new object happen before the lock is taken;
//     freeing the old object and installing the new one happen in one `write` section;
//   - nested inside a slot lock: zsmalloc's zspage pin (reads) and class lock (zs_free), the
//     backing file's bitmap lock. Nothing takes a slot lock while holding any of those, and no
//     code holds two slot locks.
#include "zram_drv.h"

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>

#include "uswap/base/fault_inject.h"

namespace uswap {

using namespace zram_detail;

namespace {

uint32_t coarse_seconds() {
  struct timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<uint32_t>(ts.tv_sec);
}

// page_same_filled(): the page is one 8-byte word repeated (checks the last word first, as the
// kernel does, to reject most pages after two loads).
bool page_same_filled(const uint8_t* page, uint64_t* element) noexcept {
  constexpr size_t words = page_size / sizeof(uint64_t);
  uint64_t first, last;
  std::memcpy(&first, page, 8);
  std::memcpy(&last, page + page_size - 8, 8);
  if (first != last) return false;
  for (size_t i = 1; i < words - 1; ++i) {
    uint64_t v;
    std::memcpy(&v, page + i * 8, 8);
    if (v != first) return false;
  }
  *element = first;
  return true;
}

// zram_fill_page().
void zram_fill_page(uint8_t* page, uint64_t value) noexcept {
  if (value == 0) {
    std::memset(page, 0, page_size);
    return;
  }
  for (size_t i = 0; i < page_size; i += 8) std::memcpy(page + i, &value, 8);
}

}  // namespace

// --- struct zram -------------------------------------------------------------------------------

void zram::mark_slot_accessed(uint64_t index) noexcept {
  assert_slot_locked(index, slot_access::read);
  std::atomic<uint64_t>& w = table[index].flags;
  const uint64_t v = w.load(std::memory_order_relaxed);
  if (!slot_allocated(v)) return;
  const uint64_t t = uint64_t{now()} << ZRAM_AC_TIME_SHIFT;
  if (!(v & (bit(ZRAM_IDLE) | bit(ZRAM_PP_SLOT))) && (v & ac_time_mask) == t) return;
  flags_update(w, bit(ZRAM_IDLE) | bit(ZRAM_PP_SLOT) | ac_time_mask, t);
}

status zram::bad_range(const char* op, uint64_t offset, uint64_t len) {
  stats.invalid_io.fetch_add(1, std::memory_order_relaxed);
  return error(EINVAL, opts.name + ": " + op + ": range [" + std::to_string(offset) + ", +" +
                           std::to_string(len) + ") is empty or outside the device of " +
                           std::to_string(disksize) + " bytes");
}

status zram::bad_index(const char* op, uint64_t index, uint64_t count) {
  stats.invalid_io.fetch_add(1, std::memory_order_relaxed);
  return error(EINVAL, opts.name + ": " + op + ": page " + std::to_string(index) +
                           (count == 1 ? "" : " (+" + std::to_string(count) + ")") +
                           " outside the device of " + std::to_string(nr_pages) + " pages" +
                           (count == 0 ? " (count 0)" : ""));
}

void zram::slot_free(uint64_t index) {
  if (!tearing_down) assert_slot_locked(index, slot_access::write);
  zram_table_entry& e = table[index];
  const uint64_t w = e.flags.load(std::memory_order_relaxed);
  const uint64_t handle = e.handle;
  if (w & bit(ZRAM_WB)) {
    bdev->release(handle & wb_block_mask);
    stats.bd_count.fetch_sub(1, std::memory_order_relaxed);
    stats.pages_stored.fetch_sub(1, std::memory_order_relaxed);
  } else if (w & bit(ZRAM_SAME)) {
    stats.same_pages.fetch_sub(1, std::memory_order_relaxed);
    stats.pages_stored.fetch_sub(1, std::memory_order_relaxed);
  } else if (handle) {
    // zs_free cannot fail for a handle zram installed; a failure here would be a zram bug and
    // is not hidden: the pool keeps the object and objects_in_use() disagrees with the table.
    (void)mem_pool->free(handle);
    stats.compr_data_size.fetch_sub(w & size_mask, std::memory_order_relaxed);
    if (w & bit(ZRAM_HUGE)) stats.huge_pages.fetch_sub(1, std::memory_order_relaxed);
    stats.pages_stored.fetch_sub(1, std::memory_order_relaxed);
  }
  e.handle = 0;
  flags_update(e.flags, state_mask | ac_time_mask, 0);
}

status zram::corrupt(uint64_t index, const char* what) {
  return error(EIO, opts.name + ": page " + std::to_string(index) + ": " + what);
}

status zram::read_slot(uint64_t index, uint8_t* dst, snapshot* snap) {
  assert_slot_locked(index, slot_access::read);
  const uint64_t w = word(index);
  const uint64_t handle = table[index].handle;
  if (snap) {
    snap->kind = w & kind_mask;
    snap->handle = handle;
    snap->len = 0;
  }
  status st = read_slot_unchecked(index, w, handle, dst, snap);
  if (!st.ok()) std::memset(dst, 0, page_size);
  return st;
}

status zram::read_slot_unchecked(uint64_t index, uint64_t w, uint64_t handle, uint8_t* dst,
                                 snapshot* snap) {
  if (w & bit(ZRAM_WB)) {
    // Unlike the kernel, which must drop its lock before block I/O, the read runs under the
    // slot lock (it sleeps, so it may): a concurrent free cannot hand the block to another
    // slot's writeback while this read is still copying it.
    stats.bd_reads.fetch_add(1, std::memory_order_relaxed);
    if (status st = bdev->read_block(handle & wb_block_mask, dst); !st.ok()) return st;
    if (csum_len && obj_checksum(dst, page_size) != static_cast<uint32_t>(handle >> 32))
      return corrupt(index, "checksum mismatch in the backing file block");
    if (snap) {
      std::memcpy(snap->stored, dst, page_size);
      snap->len = page_size;
    }
    return {};
  }
  if ((w & bit(ZRAM_SAME)) || !handle) {
    zram_fill_page(dst, handle);  // an empty slot has handle 0: zeros
    return {};
  }
  auto ref = mem_pool->obj_read_begin(handle);
  if (!ref.ok()) return corrupt(index, "the slot's zsmalloc handle is invalid");
  const uint8_t* src = ref->data();
  if (w & bit(ZRAM_HUGE)) {
    // read_incompressible_page()
    if (csum_len && obj_checksum(src, page_size) != huge_csum[index])
      return corrupt(index, "checksum mismatch in a huge (uncompressed) object");
    std::memcpy(dst, src, page_size);
    if (snap) {
      std::memcpy(snap->stored, src, page_size);
      snap->len = page_size;
    }
    return {};
  }
  // read_compressed_page()
  const size_t size = w & size_mask;
  if (csum_len) {
    uint32_t stored;
    std::memcpy(&stored, src + size, csum_size);
    if (obj_checksum(src, size) != stored)
      return corrupt(index, "checksum mismatch in a compressed object");
  }
  if (snap) {
    std::memcpy(snap->stored, src, size + csum_len);
    snap->len = size + csum_len;
  }
  zcomp& comp = *comps[comp_priority(w)];
  auto strm = comp.stream_get();
  if (!strm.ok()) return strm.error();
  if (status st = comp.decompress(**strm, src, size, dst); !st.ok())
    return corrupt(index, "decompression failed (corrupt object)");
  return {};
}

status zram::read_page(uint64_t index, uint8_t* dst) {
  status st;
  {
    slot_guard g(*this, index, slot_access::read);
    st = read_slot(index, dst, nullptr);
    if (st.ok()) mark_slot_accessed(index);
  }
  nr_reads.add();
  if (!st.ok()) stats.failed_reads.fetch_add(1, std::memory_order_relaxed);
  return st;
}

void zram::drop(const prepared& p) {
  if (p.k != prepared::kind::same) (void)mem_pool->free(p.handle);
}

status zram::alloc_failed(uint64_t index, const status& why) {
  if (why.code() == ENOSPC)
    return error(ENOSPC, opts.name + ": page " + std::to_string(index) + ": mem_limit of " +
                             std::to_string(limit_pages.load(std::memory_order_relaxed)) +
                             " pages reached (" + std::string(why.message()) + ")");
  return error(why.code(), opts.name + ": page " + std::to_string(index) + ": " +
                               std::string(why.message()));
}

result<zs_handle> zram::store_object(uint64_t index, const void* data, size_t len) {
  auto h = mem_pool->malloc(len);
  if (!h.ok()) return alloc_failed(index, h.error());
  if (status st = mem_pool->obj_write(*h, data, len); !st.ok()) {
    (void)mem_pool->free(*h);
    return st;
  }
  update_used_max(mem_pool->get_total_pages());
  return *h;
}

result<zram::prepared> zram::prepare_page(uint64_t index, const uint8_t* src) {
  prepared p;
  uint64_t element;
  if (page_same_filled(src, &element)) {
    p.k = prepared::kind::same;
    p.handle = element;
    return p;
  }
  zcomp& comp = *comps[0];
  auto strm = comp.stream_get();
  if (!strm.ok()) return strm.error();
  auto len = comp.compress(**strm, src);
  if (!len.ok()) return error(EIO, opts.name + ": page " + std::to_string(index) +
                                       ": compression failed: " + len.error().to_string());
  return prepare_compressed(index, src, **strm, *len, 0);
}

result<zram::prepared> zram::prepare_compressed(uint64_t index, const uint8_t* page,
                                                zcomp_strm& strm, size_t len, uint32_t prio) {
  prepared p;
  if (len + csum_len >= huge_class_size) {
    auto h = store_object(index, page, page_size);
    if (!h.ok()) return h.error();
    p.k = prepared::kind::huge;
    p.handle = *h;
    p.size = page_size;
    p.csum = csum_len ? obj_checksum(page, page_size) : 0;
    return p;
  }
  if (csum_len) {
    const uint32_t c = obj_checksum(strm.buffer, len);
    std::memcpy(strm.buffer + len, &c, csum_size);  // the buffer holds 2 pages
  }
  auto h = store_object(index, strm.buffer, len + csum_len);
  if (!h.ok()) return h.error();
  p.k = prepared::kind::compressed;
  p.handle = *h;
  p.size = static_cast<uint32_t>(len);
  p.prio = prio;
  return p;
}

void zram::install(uint64_t index, const prepared& p) {
  assert_slot_locked(index, slot_access::write);
  slot_free(index);
  zram_table_entry& e = table[index];
  uint64_t set = uint64_t{now()} << ZRAM_AC_TIME_SHIFT;
  switch (p.k) {
    case prepared::kind::same:
      set |= bit(ZRAM_SAME);
      stats.same_pages.fetch_add(1, std::memory_order_relaxed);
      break;
    case prepared::kind::huge:
      set |= bit(ZRAM_HUGE) | page_size;
      if (csum_len) huge_csum[index] = p.csum;
      stats.compr_data_size.fetch_add(page_size, std::memory_order_relaxed);
      stats.huge_pages.fetch_add(1, std::memory_order_relaxed);
      stats.huge_pages_since.fetch_add(1, std::memory_order_relaxed);
      break;
    case prepared::kind::compressed:
      set |= p.size | (uint64_t{p.prio} << ZRAM_COMP_PRIORITY_BIT1);
      stats.compr_data_size.fetch_add(p.size, std::memory_order_relaxed);
      break;
  }
  e.handle = p.handle;
  flags_update(e.flags, state_mask | ac_time_mask, set);
  fetch_max(slots_end, index + 1, std::memory_order_release);
  stats.pages_stored.fetch_add(1, std::memory_order_relaxed);
}

status zram::write_page(uint64_t index, const uint8_t* src) {
  nr_writes.add();
  auto p = prepare_page(index, src);
  if (!p.ok()) {
    stats.failed_writes.fetch_add(1, std::memory_order_relaxed);
    return p.error();
  }
  slot_guard g(*this, index, slot_access::write);
  install(index, *p);
  return {};
}

bool zram::unchanged_since(uint64_t index, const snapshot& snap) {
  assert_slot_locked(index, slot_access::write);
  const uint64_t w = word(index);
  if ((w & kind_mask) != snap.kind) return false;
  const uint64_t handle = table[index].handle;
  if (w & bit(ZRAM_WB)) {
    if (handle != snap.handle) return false;
    alignas(8) uint8_t page[page_size];
    if (!bdev->read_block(handle & wb_block_mask, page).ok()) return false;
    return std::memcmp(page, snap.stored, page_size) == 0;
  }
  if ((w & bit(ZRAM_SAME)) || !slot_allocated(w)) return handle == snap.handle;
  auto ref = mem_pool->obj_read_begin(handle);
  if (!ref.ok()) return false;
  return std::memcmp(ref->data(), snap.stored, snap.len) == 0;
}

status zram::write_partial(uint64_t index, size_t offset, const uint8_t* src, size_t len) {
  nr_writes.add();
  snapshot snap_storage;
  snapshot* const snap = &snap_storage;
  alignas(8) uint8_t page[page_size];
  for (;;) {
    {
      slot_guard g(*this, index, slot_access::read);
      if (status st = read_slot(index, page, snap); !st.ok()) {
        stats.failed_writes.fetch_add(1, std::memory_order_relaxed);
        return st;
      }
    }
    std::memcpy(page + offset, src, len);
    auto p = prepare_page(index, page);
    if (!p.ok()) {
      stats.failed_writes.fetch_add(1, std::memory_order_relaxed);
      return p.error();
    }
    {
      slot_guard g(*this, index, slot_access::write);
      if (unchanged_since(index, *snap)) {
        install(index, *p);
        return {};
      }
    }
    drop(*p);
    nr_rmw_retries.add();
  }
}

void zram::discard_page(uint64_t index) {
  {
    slot_guard g(*this, index, slot_access::write);
    slot_free(index);
  }
  stats.notify_free.fetch_add(1, std::memory_order_relaxed);
  nr_discards.add();
}

namespace {

status invalid_option(const std::string& what) { return error(EINVAL, "zram: " + what); }

}  // namespace

// ---------------------------------------------------------------------------------------------

std::string_view to_string(zram_lock_mode mode) noexcept { return name_of(zram_lock_mode_names, mode); }

result<zram_lock_mode> parse_zram_lock_mode(std::string_view name) {
  return parse_enum(zram_lock_mode_names, name, "zram lock mode");
}

zram_device::zram_device(std::unique_ptr<zram> z) noexcept : z_(std::move(z)) {}

zram_device::~zram_device() {
  if (!z_) return;
  // zram_meta_free(): free every slot so that the backing file's blocks and the statistics end
  // consistent; the pool then frees its zspages.
  z_->tearing_down = true;
  const uint64_t walked = z_->walk_end(z_->nr_pages);
  for (uint64_t i = 0; i < walked; ++i)
    if (zram::slot_allocated(z_->word(i))) z_->slot_free(i);
}

result<std::unique_ptr<zram_device>> zram_device::create(const zram_options& o) {
  if (o.disksize == 0) return invalid_option("disksize 0 (set a size, e.g. 1G)");
  if (o.backing_timeout_ms == 0) return invalid_option("backing_timeout_ms 0 (e.g. 30000)");
  const uint64_t nr_pages = round_up_to_page(o.disksize) >> page_shift;
  if (o.disksize > (uint64_t{1} << 44) || nr_pages > (uint64_t{1} << 32))
    return invalid_option("disksize " + std::to_string(o.disksize) +
                          " above 16 TiB (slot indexes are 32-bit, as the kernel's)");
  if (o.recomp_algorithms.size() > ZRAM_MAX_COMPS - 1)
    return invalid_option("at most " + std::to_string(ZRAM_MAX_COMPS - 1) +
                          " recompression algorithms, got " +
                          std::to_string(o.recomp_algorithms.size()));
  if (o.lock_mode != zram_lock_mode::global_rwlock && o.lock_mode != zram_lock_mode::slot_cas &&
      o.lock_mode != zram_lock_mode::slot_bitlock)
    return invalid_option("unknown lock mode");

  const std::string lock_name = o.lock_mode == zram_lock_mode::global_rwlock
                                    ? o.name + ":meta->tb_lock"
                                    : o.name + ":table[index].lock";
  std::unique_ptr<zram> z;
  try {
    z = std::make_unique<zram>(o, lock_name);
  } catch (const std::bad_alloc&) {
    return error(ENOMEM, "zram: out of memory");
  }
  z->disksize = nr_pages << page_shift;
  z->nr_pages = nr_pages;
  z->mode = o.lock_mode;
  z->clock = o.clock ? o.clock : coarse_seconds;
  z->csum_len = o.checksum ? csum_size : 0;
  z->limit_pages.store(round_up_to_page(o.mem_limit) >> page_shift);

  // zram_meta_alloc()
  if (!should_fail(fault_point::zram_table)) z->table = zeroed_array<zram_table_entry>(nr_pages);
  if (!z->table)
    return error(ENOMEM, "zram: no memory for a table of " + std::to_string(nr_pages) + " slots");
  if (o.checksum) {
    if (!should_fail(fault_point::zram_table)) z->huge_csum = zeroed_array<uint32_t>(nr_pages);
    if (!z->huge_csum) return error(ENOMEM, "zram: no memory for the huge-page checksums");
  }
  z->arena.reset(new (std::nothrow) zram_detail::zspage_arena(
      zram_detail::zspage_arena::default_max_cached_free_pages, o.huge_page_chunks));
  if (!z->arena) return error(ENOMEM, "zram: out of memory");
  zs_pool_options po;
  po.max_pages_per_zspage = o.max_pages_per_zspage;
  po.page_allocator = z->arena.get();
  po.mem_limit_pages = z->limit_pages.load();
  auto pool = zs_create_pool(o.name, po);
  if (!pool.ok()) return pool.error();
  z->mem_pool = std::move(*pool);
  z->huge_class_size = z->mem_pool->huge_class_size();

  // The codecs: comp_algorithm at priority 0, recomp_algorithm at 1..3.
  std::vector<std::pair<std::string, int>> algs{{o.comp_algorithm, o.comp_level}};
  for (const auto& a : o.recomp_algorithms) algs.emplace_back(a, zcomp_param_no_level);
  for (size_t prio = 0; prio < algs.size(); ++prio) {
    zcomp_params params;
    params.level = algs[prio].second;
    auto comp = zcomp::create(algs[prio].first, params);
    if (!comp.ok())
      return error(comp.error().code(), std::string("zram: ") +
                                            (prio ? "recomp_algorithm: " : "comp_algorithm: ") +
                                            std::string(comp.error().message()));
    z->comps[prio] = std::move(*comp);
  }
  z->num_comps = static_cast<unsigned>(algs.size());

  if (!o.backing_dev.empty()) {
    auto bd = backing_dev::open(o.backing_dev, o.backing_dev_size, o.backing_allocator,
                                o.backing_timeout_ms);
    if (!bd.ok()) return bd.error();
    z->bdev = std::move(*bd);
  }
  return std::unique_ptr<zram_device>(new zram_device(std::move(z)));
}

const zram_options& zram_device::options() const noexcept { return z_->opts; }
uint64_t zram_device::disksize() const noexcept { return z_->disksize; }
uint64_t zram_device::nr_pages() const noexcept { return z_->nr_pages; }
uint64_t zram_device::slots_end() const noexcept { return z_->walk_end(z_->nr_pages); }
zram_lock_mode zram_device::lock_mode() const noexcept { return z_->mode; }
size_t zram_device::huge_class_size() const noexcept { return z_->huge_class_size; }
zs_pool& zram_device::mem_pool() noexcept { return *z_->mem_pool; }
lock_class& zram_device::lock_stats() noexcept { return z_->slot_lock_class; }

// --- Page I/O ----------------------------------------------------------------------------------

status zram_device::write_page(uint64_t index, const void* src) {
  if (index >= z_->nr_pages) return z_->bad_index("write_page", index);
  return z_->write_page(index, static_cast<const uint8_t*>(src));
}

status zram_device::read_page(uint64_t index, void* dst) {
  if (index >= z_->nr_pages) return z_->bad_index("read_page", index);
  return z_->read_page(index, static_cast<uint8_t*>(dst));
}

void zram_device::read_pages(std::span<const uint64_t> index, std::span<void* const> dst,
                             std::span<status> result) {
  zram& z = *z_;
  const size_t n = index.size();
  bool batch = z.bdev && z.mode != zram_lock_mode::global_rwlock && n >= 2 &&
               n <= max_read_batch && dst.size() == n && result.size() == n;
  for (size_t i = 0; batch && i < n; ++i)
    batch = index[i] < z.nr_pages && (i == 0 || index[i] > index[i - 1]);
  if (!batch) {
    for (size_t i = 0; i < std::min({n, dst.size(), result.size()}); ++i)
      result[i] = read_page(index[i], dst[i]);
    return;
  }
  // The slots locked in ascending order, as every batch takes them (no cycle; writers hold one
  // slot at a time). Each is read at once unless it was written back; those go in one batch,
  // still locked (a free cannot hand the block on mid-read, as in read_slot_unchecked), then
  // are checked as read_slot checks one.
  backing_read wb[max_read_batch];
  size_t wb_page[max_read_batch];
  size_t nwb = 0;
  for (size_t i = 0; i < n; ++i) {
    z.slot_lock(index[i], slot_access::read);
    if (z.word(index[i]) & bit(ZRAM_WB)) {
      wb[nwb].block = z.table[index[i]].handle & wb_block_mask;
      wb[nwb].page = dst[i];
      wb_page[nwb++] = i;
    } else {
      result[i] = z.read_slot(index[i], static_cast<uint8_t*>(dst[i]), nullptr);
    }
  }
  if (nwb) {
    z.stats.bd_reads.fetch_add(nwb, std::memory_order_relaxed);
    z.bdev->read_blocks({wb, nwb});
    for (size_t k = 0; k < nwb; ++k) {
      const size_t i = wb_page[k];
      z.assert_slot_locked(index[i], slot_access::read);
      status st = wb[k].result;
      if (st.ok() && z.csum_len &&
          obj_checksum(dst[i], page_size) != static_cast<uint32_t>(z.table[index[i]].handle >> 32))
        st = z.corrupt(index[i], "checksum mismatch in the backing file block");
      if (!st.ok()) std::memset(dst[i], 0, page_size);
      result[i] = st;
    }
  }
  for (size_t i = n; i-- > 0;) {
    if (result[i].ok()) z.mark_slot_accessed(index[i]);
    z.slot_unlock(index[i], slot_access::read);
    z.nr_reads.add();
    if (!result[i].ok()) z.stats.failed_reads.fetch_add(1, std::memory_order_relaxed);
  }
}

status zram_device::discard(uint64_t index, uint64_t nr_pages) {
  if (nr_pages == 0 || index >= z_->nr_pages || nr_pages > z_->nr_pages - index)
    return z_->bad_index("discard", index, nr_pages);
  for (uint64_t i = index; i < index + nr_pages; ++i) z_->discard_page(i);
  return {};
}

bool zram_device::slot_free_notify(uint64_t index) {
  if (index >= z_->nr_pages) {
    z_->stats.invalid_io.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  z_->stats.notify_free.fetch_add(1, std::memory_order_relaxed);
  if (!z_->slot_trylock(index, slot_access::write)) {
    z_->stats.miss_free.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  z_->slot_free(index);
  z_->slot_unlock(index, slot_access::write);
  return true;
}

// --- Byte I/O ----------------------------------------------------------------------------------

namespace {

bool range_ok(uint64_t offset, uint64_t len, uint64_t size) {
  return len != 0 && offset < size && len <= size - offset;
}

}  // namespace

status zram_device::read(uint64_t offset, void* dst, uint64_t len) {
  if (!range_ok(offset, len, z_->disksize)) return z_->bad_range("read", offset, len);
  auto* out = static_cast<uint8_t*>(dst);
  while (len) {
    const uint64_t index = offset >> page_shift;
    const size_t in_page = offset & (page_size - 1);
    const size_t n = static_cast<size_t>(std::min<uint64_t>(len, page_size - in_page));
    if (n == page_size) {
      if (status st = z_->read_page(index, out); !st.ok()) return st;
    } else {
      // zram_bvec_read_partial(): the decompressor always produces a whole page.
      alignas(8) uint8_t page[page_size];
      if (status st = z_->read_page(index, page); !st.ok()) return st;
      std::memcpy(out, page + in_page, n);
    }
    out += n;
    offset += n;
    len -= n;
  }
  return {};
}

status zram_device::write(uint64_t offset, const void* src, uint64_t len) {
  if (!range_ok(offset, len, z_->disksize)) return z_->bad_range("write", offset, len);
  const auto* in = static_cast<const uint8_t*>(src);
  while (len) {
    const uint64_t index = offset >> page_shift;
    const size_t in_page = offset & (page_size - 1);
    const size_t n = static_cast<size_t>(std::min<uint64_t>(len, page_size - in_page));
    status st = n == page_size ? z_->write_page(index, in) : z_->write_partial(index, in_page, in, n);
    if (!st.ok()) return st;
    in += n;
    offset += n;
    len -= n;
  }
  return {};
}

status zram_device::write_zeroes(uint64_t offset, uint64_t len) {
  if (!range_ok(offset, len, z_->disksize)) return z_->bad_range("write_zeroes", offset, len);
  static const uint8_t zeros[page_size] = {};
  while (len) {
    const uint64_t index = offset >> page_shift;
    const size_t in_page = offset & (page_size - 1);
    const size_t n = static_cast<size_t>(std::min<uint64_t>(len, page_size - in_page));
    if (n == page_size) {
      z_->discard_page(index);  // an empty slot reads as zeros and holds no memory
    } else if (status st = z_->write_partial(index, in_page, zeros, n); !st.ok()) {
      return st;
    }
    offset += n;
    len -= n;
  }
  return {};
}

status zram_device::discard_range(uint64_t offset, uint64_t len) {
  if (!range_ok(offset, len, z_->disksize)) return z_->bad_range("discard_range", offset, len);
  // zram_bio_discard(): only whole pages; discarding part of one would cost a read-modify-write,
  // which is not what a discard is for.
  const uint64_t first = (offset + page_size - 1) >> page_shift;
  const uint64_t end = (offset + len) >> page_shift;
  for (uint64_t i = first; i < end; ++i) z_->discard_page(i);
  return {};
}

result<zram_slot_info> zram_device::slot_info(uint64_t index) const {
  if (index >= z_->nr_pages) return z_->bad_index("slot_info", index);
  zram_slot_info info;
  zram::slot_guard g(*z_, index, slot_access::read);
  const uint64_t w = z_->word(index);
  const uint64_t handle = z_->table[index].handle;
  info.size = static_cast<uint32_t>(w & size_mask);
  info.comp_priority = zram::comp_priority(w);
  info.ac_time = static_cast<uint32_t>(w >> ZRAM_AC_TIME_SHIFT);
  info.idle = w & bit(ZRAM_IDLE);
  info.incompressible = w & bit(ZRAM_INCOMPRESSIBLE);
  info.huge = w & bit(ZRAM_HUGE);
  info.handle = handle;
  if (w & bit(ZRAM_WB)) {
    info.kind = zram_slot_kind::written_back;
    info.handle = handle & wb_block_mask;
  } else if (w & bit(ZRAM_SAME)) {
    info.kind = zram_slot_kind::same;
    info.fill = handle;
    info.handle = 0;
  } else if (handle) {
    info.kind = (w & bit(ZRAM_HUGE)) ? zram_slot_kind::huge : zram_slot_kind::compressed;
  }
  return info;
}

result<zram_extent> zram_device::extent_at(uint64_t index, uint64_t max_pages) const {
  zram& z = *z_;
  if (index >= z.nr_pages || max_pages == 0) return z.bad_index("extent_at", index, max_pages);
  const uint64_t end = index + std::min(max_pages, z.nr_pages - index);
  auto type_of = [&z](uint64_t i) {
    const uint64_t w = z.word(i);
    if (!zram::slot_allocated(w)) return zram_extent_type::hole;
    if (!(w & bit(ZRAM_SAME))) return zram_extent_type::data;
    // The fill word is an ordinary field written under the lock: read it under the lock too, and
    // look at the word again there, since the slot may have changed in between.
    zram::slot_guard g(z, i, slot_access::read);
    const uint64_t locked = z.word(i);
    if (!zram::slot_allocated(locked)) return zram_extent_type::hole;
    if (!(locked & bit(ZRAM_SAME))) return zram_extent_type::data;
    return z.table[i].handle == 0 ? zram_extent_type::zero : zram_extent_type::data;
  };
  zram_extent e;
  e.type = type_of(index);
  e.nr_pages = 1;
  for (uint64_t i = index + 1; i < end && type_of(i) == e.type; ++i) ++e.nr_pages;
  return e;
}

// --- Limits ------------------------------------------------------------------------------------

void zram_device::set_mem_limit(uint64_t bytes) {
  const uint64_t pages = round_up_to_page(bytes) >> page_shift;
  z_->limit_pages.store(pages, std::memory_order_relaxed);
  z_->mem_pool->set_mem_limit_pages(pages);
}

void zram_device::reset_mem_used_max() {
  z_->stats.max_used_pages.store(z_->mem_pool->get_total_pages(), std::memory_order_relaxed);
}

}  // namespace uswap
