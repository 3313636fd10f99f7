// zram after drivers/block/zram/zram_drv.c. The contract is in include/uswap/zram/zram.h; this
// file keeps the kernel's structure and names (slot_free, zram_write_page, write_same_filled_page,
// write_incompressible_page, zram_read_page, read_from_zspool, mark_idle, scan_slots_for_writeback,
// zram_writeback_slots, recompress_slot, mm_stat_show...) so the two read side by side.
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
#include "uswap/zram/zram.h"

#include <time.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>
#include <thread>

#include "backing_dev.h"
#include "slot_lock.h"
#include "uswap/base/atomic_max.h"
#include "uswap/base/zeroed_array.h"
#include "zspage_arena.h"
#include "uswap/compress/zcomp.h"
#include "uswap/sync/mutex.h"
#include "uswap/sync/std_locks.h"
#include "uswap/zsmalloc/zsmalloc.h"

namespace uswap {

using zram_detail::backing_dev;
using zram_detail::cas_slot_lock;
using zram_detail::flags_update;
using zram_detail::slot_bit_lock;

namespace {

constexpr uint64_t bit(unsigned b) { return uint64_t{1} << b; }
constexpr uint64_t size_mask = bit(ZRAM_FLAG_SHIFT) - 1;
constexpr uint64_t prio_mask = uint64_t{ZRAM_COMP_PRIORITY_MASK} << ZRAM_COMP_PRIORITY_BIT1;
constexpr uint64_t ac_time_mask = ~uint64_t{0} << ZRAM_AC_TIME_SHIFT;
// Every data bit of the low half: what a slot holds, as opposed to the lock bits and ac_time.
constexpr uint64_t state_mask = (bit(ZRAM_AC_TIME_SHIFT) - 1) & ~zram_detail::lock_bits;
// The bits that say what is stored: two slots with equal kind bits and equal stored bytes hold
// the same page.
constexpr uint64_t kind_mask =
    size_mask | bit(ZRAM_SAME) | bit(ZRAM_WB) | bit(ZRAM_HUGE) | prio_mask;
constexpr size_t csum_size = sizeof(uint32_t);
constexpr uint64_t wb_block_mask = 0xffffffffu;

uint32_t obj_checksum(const void* data, size_t len) noexcept {
  const uint64_t h = XXH3_64bits(data, len);
  return static_cast<uint32_t>(h ^ (h >> 32));
}

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

// A counter bumped on hot paths from every thread: one cache line per shard, a thread sticks to
// its shard, so counting does not become a shared line bouncing between cores (the kernel keeps
// the block layer's request counts per CPU for the same reason).
class sharded_counter {
 public:
  void add(uint64_t n = 1) noexcept { cells_[my_shard()].v.fetch_add(n, std::memory_order_relaxed); }
  uint64_t sum() const noexcept {
    uint64_t s = 0;
    for (const auto& c : cells_) s += c.v.load(std::memory_order_relaxed);
    return s;
  }

 private:
  static constexpr unsigned nr_shards = 16;
  struct alignas(cache_line_size) cell {
    std::atomic<uint64_t> v{0};
  };
  static unsigned my_shard() noexcept {
    static std::atomic<unsigned> next{0};
    thread_local const unsigned shard = next.fetch_add(1, std::memory_order_relaxed) % nr_shards;
    return shard;
  }
  std::array<cell, nr_shards> cells_;
};

enum class slot_access { read, write };

}  // namespace

// struct zram_stats, field for field (atomic64_t -> std::atomic<uint64_t>).
struct zram_stats {
  std::atomic<uint64_t> compr_data_size{0};
  std::atomic<uint64_t> failed_reads{0};
  std::atomic<uint64_t> failed_writes{0};
  std::atomic<uint64_t> invalid_io{0};
  std::atomic<uint64_t> notify_free{0};
  std::atomic<uint64_t> same_pages{0};
  std::atomic<uint64_t> huge_pages{0};
  std::atomic<uint64_t> huge_pages_since{0};
  std::atomic<uint64_t> pages_stored{0};
  std::atomic<uint64_t> max_used_pages{0};
  std::atomic<uint64_t> miss_free{0};
  std::atomic<uint64_t> bd_count{0};
  std::atomic<uint64_t> bd_reads{0};
  std::atomic<uint64_t> bd_writes{0};
};

// struct zram.
struct zram {
  zram_options opts;
  uint64_t disksize = 0;
  uint64_t nr_pages = 0;
  zram_lock_mode mode = zram_lock_mode::slot_bitlock;
  uint32_t (*clock)() = nullptr;

  // Zero-filled on demand (zram_meta_alloc's vzalloc): a slot is all zeros until first written,
  // so a device sized far beyond what it stores costs only the table pages in use.
  zeroed_array<zram_table_entry> table;
  zeroed_array<uint32_t> huge_csum;  // checksums of ZRAM_HUGE objects (raw pages), by slot
  std::unique_ptr<zram_detail::zspage_arena> arena;  // zspage memory; outlives mem_pool
  std::unique_ptr<zs_pool> mem_pool;
  std::array<std::unique_ptr<zcomp>, ZRAM_MAX_COMPS> comps;
  unsigned num_comps = 0;
  size_t huge_class_size = 0;
  size_t csum_len = 0;  // csum_size with checksums, else 0
  std::atomic<uint64_t> limit_pages{0};
  std::unique_ptr<backing_dev> bdev;

  lock_class slot_lock_class;
  // global_rwlock mode only: 3.15's meta->tb_lock was an rwlock_t, which (before qrwlock, 3.16)
  // let readers in while a writer waited. std::shared_mutex is glibc's pthread_rwlock, reader-
  // preferring by default: the same policy, sleeping instead of spinning as userspace must.
  std_shared_mutex_lock tb_lock;
  mutex pp_lock;         // one post-processing call (writeback, recompress) at a time

  alignas(cache_line_size) zram_stats stats;
  sharded_counter nr_reads, nr_writes, nr_discards, nr_rmw_retries;

  explicit zram(const zram_options& o, std::string lock_name)
      : opts(o), slot_lock_class(std::move(lock_name)), tb_lock(&slot_lock_class) {}

  // --- Locking -------------------------------------------------------------------------------

  void slot_lock(uint64_t index, slot_access a) noexcept {
    std::atomic<uint64_t>& w = table[index].flags;
    switch (mode) {
      case zram_lock_mode::global_rwlock:
        if (a == slot_access::read)
          tb_lock.down_read();
        else
          tb_lock.down_write();
        return;
      case zram_lock_mode::slot_cas:
        cas_slot_lock::lock(w, &slot_lock_class);
        return;
      case zram_lock_mode::slot_bitlock:
        slot_bit_lock::lock(w, &slot_lock_class);
        return;
    }
  }
  bool slot_trylock(uint64_t index, slot_access a) noexcept {
    std::atomic<uint64_t>& w = table[index].flags;
    switch (mode) {
      case zram_lock_mode::global_rwlock:
        return a == slot_access::read ? tb_lock.down_read_trylock() : tb_lock.down_write_trylock();
      case zram_lock_mode::slot_cas:
        return cas_slot_lock::try_lock(w, &slot_lock_class);
      case zram_lock_mode::slot_bitlock:
        return slot_bit_lock::try_lock(w, &slot_lock_class);
    }
    return false;
  }
  void slot_unlock(uint64_t index, slot_access a) noexcept {
    std::atomic<uint64_t>& w = table[index].flags;
    switch (mode) {
      case zram_lock_mode::global_rwlock:
        if (a == slot_access::read)
          tb_lock.up_read();
        else
          tb_lock.up_write();
        return;
      case zram_lock_mode::slot_cas:
        cas_slot_lock::unlock(w);
        return;
      case zram_lock_mode::slot_bitlock:
        slot_bit_lock::unlock(w);
        return;
    }
  }

  class slot_guard {
   public:
    slot_guard(zram& z, uint64_t index, slot_access a) noexcept : z_(z), index_(index), a_(a) {
      z_.slot_lock(index_, a_);
    }
    ~slot_guard() { z_.slot_unlock(index_, a_); }
    slot_guard(const slot_guard&) = delete;
    slot_guard& operator=(const slot_guard&) = delete;

   private:
    zram& z_;
    uint64_t index_;
    slot_access a_;
  };

  // --- Slot word helpers ---------------------------------------------------------------------

  uint64_t word(uint64_t index) const noexcept {
    return table[index].flags.load(std::memory_order_relaxed);
  }
  static bool slot_allocated(uint64_t w) noexcept {
    return (w & size_mask) || (w & (bit(ZRAM_SAME) | bit(ZRAM_WB)));
  }
  static uint32_t comp_priority(uint64_t w) noexcept {
    return static_cast<uint32_t>((w >> ZRAM_COMP_PRIORITY_BIT1) & ZRAM_COMP_PRIORITY_MASK);
  }
  uint32_t now() const noexcept { return clock(); }

  // mark_slot_accessed(): not idle, not selected for post-processing, accessed now. Writes the
  // word only when something changes (once a second per slot at most for a hot slot).
  void mark_slot_accessed(uint64_t index) noexcept {
    std::atomic<uint64_t>& w = table[index].flags;
    const uint64_t v = w.load(std::memory_order_relaxed);
    if (!slot_allocated(v)) return;
    const uint64_t t = uint64_t{now()} << ZRAM_AC_TIME_SHIFT;
    if (!(v & (bit(ZRAM_IDLE) | bit(ZRAM_PP_SLOT))) && (v & ac_time_mask) == t) return;
    flags_update(w, bit(ZRAM_IDLE) | bit(ZRAM_PP_SLOT) | ac_time_mask, t);
  }

  void update_used_max(uint64_t pages) noexcept { fetch_max(stats.max_used_pages, pages); }

  status bad_range(const char* op, uint64_t offset, uint64_t len) {
    stats.invalid_io.fetch_add(1, std::memory_order_relaxed);
    return error(EINVAL, opts.name + ": " + op + ": range [" + std::to_string(offset) + ", +" +
                             std::to_string(len) + ") is empty or outside the device of " +
                             std::to_string(disksize) + " bytes");
  }
  status bad_index(const char* op, uint64_t index, uint64_t count = 1) {
    stats.invalid_io.fetch_add(1, std::memory_order_relaxed);
    return error(EINVAL, opts.name + ": " + op + ": page " + std::to_string(index) +
                             (count == 1 ? "" : " (+" + std::to_string(count) + ")") +
                             " outside the device of " + std::to_string(nr_pages) + " pages" +
                             (count == 0 ? " (count 0)" : ""));
  }

  // --- Freeing ---------------------------------------------------------------------------------

  // slot_free(): with the slot locked for write. Frees whatever the slot holds and clears every
  // data bit (ac_time too, as the kernel zeroes it).
  void slot_free(uint64_t index) {
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

  // --- Reading ---------------------------------------------------------------------------------

  // What a slot held when it was read, so that a partial-page write can check, when it comes to
  // install, that the page it merged into is still the page stored.
  struct snapshot {
    uint64_t kind = 0;    // the word's kind_mask bits
    uint64_t handle = 0;  // fill word (same) or block | checksum (written back)
    size_t len = 0;       // bytes in `stored`
    alignas(8) uint8_t stored[page_size + csum_size];
  };

  status corrupt(uint64_t index, const char* what) {
    return error(EIO, opts.name + ": page " + std::to_string(index) + ": " + what);
  }

  // read_from_zspool() and read_from_bdev(): with the slot locked (either access). Leaves the
  // page in dst, or zeroes dst and returns the error. With `snap`, also copies the stored bytes.
  status read_slot(uint64_t index, uint8_t* dst, snapshot* snap) {
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

  status read_slot_unchecked(uint64_t index, uint64_t w, uint64_t handle, uint8_t* dst,
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

  // zram_read_page().
  status read_page(uint64_t index, uint8_t* dst) {
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

  // --- Writing ---------------------------------------------------------------------------------

  // A page made ready for a slot without holding its lock.
  struct prepared {
    enum class kind : uint8_t { same, compressed, huge } k = kind::same;
    uint64_t handle = 0;  // zs_handle, or the fill word
    uint32_t size = 0;    // compressed length (page_size for huge)
    uint32_t prio = 0;
    uint32_t csum = 0;    // huge objects' checksum (compressed ones carry theirs inside)
  };

  void drop(const prepared& p) {
    if (p.k != prepared::kind::same) (void)mem_pool->free(p.handle);
  }

  status alloc_failed(uint64_t index, const status& why) {
    if (why.code() == ENOSPC)
      return error(ENOSPC, opts.name + ": page " + std::to_string(index) + ": mem_limit of " +
                               std::to_string(limit_pages.load(std::memory_order_relaxed)) +
                               " pages reached (" + std::string(why.message()) + ")");
    return error(why.code(), opts.name + ": page " + std::to_string(index) + ": " +
                                 std::string(why.message()));
  }

  // Allocates an object of `len` bytes and copies `data` into it.
  result<zs_handle> store_object(uint64_t index, const void* data, size_t len) {
    auto h = mem_pool->malloc(len);
    if (!h.ok()) return alloc_failed(index, h.error());
    if (status st = mem_pool->obj_write(*h, data, len); !st.ok()) {
      (void)mem_pool->free(*h);
      return st;
    }
    update_used_max(mem_pool->get_total_pages());
    return *h;
  }

  // The compress-and-allocate half of zram_write_page() / write_incompressible_page(): no lock.
  result<prepared> prepare_page(uint64_t index, const uint8_t* src) {
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

  // The object for a page compressed into strm.buffer (len bytes) by the codec of `prio`; a page
  // that compressed to huge_class_size or more is stored raw.
  result<prepared> prepare_compressed(uint64_t index, const uint8_t* page, zcomp_strm& strm,
                                      size_t len, uint32_t prio) {
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

  // Installs p into the slot, which must be locked for write: frees the old contents and sets
  // the new in the same section.
  void install(uint64_t index, const prepared& p) {
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
    stats.pages_stored.fetch_add(1, std::memory_order_relaxed);
  }

  // zram_write_page().
  status write_page(uint64_t index, const uint8_t* src) {
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

  // Is the slot (locked for write) still holding what `snap` recorded? Compared by content, so
  // a slot rewritten with the same page in between still counts as unchanged - which is exactly
  // the condition under which merging into the snapshot's page is correct.
  bool unchanged_since(uint64_t index, const snapshot& snap) {
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

  // zram_bvec_write_partial(): bytes [offset, offset + len) of one page. The page is read and
  // snapshotted under the lock, merged and compressed outside it, and installed only if the slot
  // still holds the snapshotted page; otherwise the work is redone on the new page.
  status write_partial(uint64_t index, size_t offset, const uint8_t* src, size_t len) {
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

  // zram_bio_discard() for one page.
  void discard_page(uint64_t index) {
    {
      slot_guard g(*this, index, slot_access::write);
      slot_free(index);
    }
    stats.notify_free.fetch_add(1, std::memory_order_relaxed);
    nr_discards.add();
  }

  // --- Post-processing -------------------------------------------------------------------------

  // A slot chosen by a scan, with the size it had then (larger objects are processed first: they
  // free the most memory, as the kernel's pp buckets order them).
  struct pp_slot {
    uint64_t index;
    uint32_t size;
  };

  // place_pp_slot() under the slot's lock.
  void place_pp_slot(std::vector<pp_slot>& ctl, uint64_t index, uint64_t w) {
    ctl.push_back({index, static_cast<uint32_t>(w & size_mask)});
    flags_update(table[index].flags, 0, bit(ZRAM_PP_SLOT));
  }

  // release_pp_slot() for the slots not processed.
  void release_pp_slots(const std::vector<pp_slot>& ctl, size_t from) {
    for (size_t i = from; i < ctl.size(); ++i) {
      slot_guard g(*this, ctl[i].index, slot_access::write);
      flags_update(table[ctl[i].index].flags, bit(ZRAM_PP_SLOT), 0);
    }
  }

  static void order_pp_slots(std::vector<pp_slot>& ctl) {
    std::stable_sort(ctl.begin(), ctl.end(),
                     [](const pp_slot& a, const pp_slot& b) { return a.size > b.size; });
  }
};

namespace {

status invalid_option(const std::string& what) { return error(EINVAL, "zram: " + what); }

}  // namespace

// ---------------------------------------------------------------------------------------------

std::string_view to_string(zram_lock_mode mode) noexcept {
  switch (mode) {
    case zram_lock_mode::global_rwlock: return "global_rwlock";
    case zram_lock_mode::slot_cas: return "slot_cas";
    case zram_lock_mode::slot_bitlock: return "slot_bitlock";
  }
  return "?";
}

result<zram_lock_mode> parse_zram_lock_mode(std::string_view name) {
  for (zram_lock_mode m : all_zram_lock_modes)
    if (to_string(m) == name) return m;
  return error(EINVAL, "unknown zram lock mode '" + std::string(name) +
                           "' (expected global_rwlock, slot_cas or slot_bitlock)");
}

zram_device::zram_device(std::unique_ptr<zram> z) noexcept : z_(std::move(z)) {}

zram_device::~zram_device() {
  if (!z_) return;
  // zram_meta_free(): free every slot so that the backing file's blocks and the statistics end
  // consistent; the pool then frees its zspages.
  for (uint64_t i = 0; i < z_->nr_pages; ++i)
    if (zram::slot_allocated(z_->word(i))) z_->slot_free(i);
}

result<std::unique_ptr<zram_device>> zram_device::create(const zram_options& o) {
  if (o.disksize == 0) return invalid_option("disksize 0 (set a size, e.g. 1G)");
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
  z->table = zeroed_array<zram_table_entry>(nr_pages);
  if (!z->table)
    return error(ENOMEM, "zram: no memory for a table of " + std::to_string(nr_pages) + " slots");
  if (o.checksum) {
    z->huge_csum = zeroed_array<uint32_t>(nr_pages);
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
    auto bd = backing_dev::open(o.backing_dev, o.backing_dev_size);
    if (!bd.ok()) return bd.error();
    z->bdev = std::move(*bd);
  }
  return std::unique_ptr<zram_device>(new zram_device(std::move(z)));
}

const zram_options& zram_device::options() const noexcept { return z_->opts; }
uint64_t zram_device::disksize() const noexcept { return z_->disksize; }
uint64_t zram_device::nr_pages() const noexcept { return z_->nr_pages; }
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

// --- Post-processing ---------------------------------------------------------------------------

uint64_t zram_device::mark_idle(std::optional<uint32_t> min_age_seconds) {
  zram& z = *z_;
  const uint32_t t = z.now();
  uint64_t marked = 0;
  for (uint64_t i = 0; i < z.nr_pages; ++i) {
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
  // scan_slots_for_writeback()
  std::vector<zram::pp_slot> ctl;
  for (uint64_t i = params.first_page; i < hi; ++i) {
    zram::slot_guard g(z, i, slot_access::write);
    const uint64_t w = z.word(i);
    if (!zram::slot_allocated(w) || (w & (bit(ZRAM_WB) | bit(ZRAM_SAME)))) continue;
    if (want_idle && !(w & bit(ZRAM_IDLE))) continue;
    if (want_huge && !(w & bit(ZRAM_HUGE))) continue;
    if (want_incompressible && !(w & bit(ZRAM_INCOMPRESSIBLE))) continue;
    z.place_pp_slot(ctl, i, w);
  }
  zram::order_pp_slots(ctl);

  // zram_writeback_slots(): synchronous writes, one page at a time.
  uint64_t written = 0;
  status failure;
  alignas(8) uint8_t page[page_size];
  size_t k = 0;
  for (; k < ctl.size(); ++k) {
    const uint64_t index = ctl[k].index;
    const uint64_t blk = z.bdev->reserve();
    if (blk == backing_dev::invalid_block) {
      failure = error(ENOSPC, z.opts.name + ": writeback: backing device " + z.bdev->path() +
                                  " is full after " + std::to_string(written) + " pages");
      break;
    }
    z.stats.bd_count.fetch_add(1, std::memory_order_relaxed);
    auto give_back = [&] {
      z.bdev->release(blk);
      z.stats.bd_count.fetch_sub(1, std::memory_order_relaxed);
    };
    status st;
    {
      zram::slot_guard g(z, index, slot_access::read);
      // Accessed, rewritten or freed since the scan: the slot lost ZRAM_PP_SLOT; skip it.
      if (!(z.word(index) & bit(ZRAM_PP_SLOT))) {
        give_back();
        continue;
      }
      st = z.read_slot(index, page, nullptr);
    }
    if (st.ok()) st = z.bdev->write_block(blk, page);
    if (!st.ok()) {
      // As the kernel: an I/O error is reported, the remaining slots are still tried.
      give_back();
      zram::slot_guard g(z, index, slot_access::write);
      flags_update(z.table[index].flags, bit(ZRAM_PP_SLOT), 0);
      failure = st;
      continue;
    }
    z.stats.bd_writes.fetch_add(1, std::memory_order_relaxed);
    const uint64_t wb_handle = blk | (z.csum_len ? uint64_t{obj_checksum(page, page_size)} << 32 : 0);
    // zram_writeback_complete()
    zram::slot_guard g(z, index, slot_access::write);
    const uint64_t w = z.word(index);
    if (!(w & bit(ZRAM_PP_SLOT))) {
      give_back();
      continue;
    }
    zram_table_entry& e = z.table[index];
    if (w & bit(ZRAM_HUGE)) z.stats.huge_pages.fetch_sub(1, std::memory_order_relaxed);
    z.stats.compr_data_size.fetch_sub(w & size_mask, std::memory_order_relaxed);
    (void)z.mem_pool->free(e.handle);
    e.handle = wb_handle;
    flags_update(e.flags, state_mask, bit(ZRAM_WB));  // keeps ac_time
    ++written;
  }
  if (k < ctl.size()) z.release_pp_slots(ctl, k);
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
  // scan_slots_for_recompress()
  std::vector<zram::pp_slot> ctl;
  for (uint64_t i = 0; i < z.nr_pages; ++i) {
    zram::slot_guard g(z, i, slot_access::write);
    const uint64_t w = z.word(i);
    if (!zram::slot_allocated(w)) continue;
    if (want_idle && !(w & bit(ZRAM_IDLE))) continue;
    if (want_huge && !(w & bit(ZRAM_HUGE))) continue;
    if (w & (bit(ZRAM_WB) | bit(ZRAM_SAME) | bit(ZRAM_INCOMPRESSIBLE))) continue;
    // Already compressed with the same or a higher priority codec.
    if (zram::comp_priority(w) + 1 >= prio_hi) continue;
    z.place_pp_slot(ctl, i, w);
  }
  zram::order_pp_slots(ctl);

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
  if (k < ctl.size()) z.release_pp_slots(ctl, k);
  if (!failure.ok()) return failure;
  return recompressed;
}

uint64_t zram_device::compact() {
  const uint64_t freed = z_->mem_pool->compact();
  // Compaction is how memory is given back: return the emptied zspages' pages to the host too.
  z_->arena->release_free();
  return freed;
}

void zram_device::set_mem_limit(uint64_t bytes) {
  const uint64_t pages = round_up_to_page(bytes) >> page_shift;
  z_->limit_pages.store(pages, std::memory_order_relaxed);
  z_->mem_pool->set_mem_limit_pages(pages);
}

void zram_device::reset_mem_used_max() {
  z_->stats.max_used_pages.store(z_->mem_pool->get_total_pages(), std::memory_order_relaxed);
}

// --- Statistics --------------------------------------------------------------------------------

zram_mm_stat zram_device::mm_stat() const {
  const zram_stats& s = z_->stats;
  zram_mm_stat m;
  m.orig_data_size = s.pages_stored.load(std::memory_order_relaxed) << page_shift;
  m.compr_data_size = s.compr_data_size.load(std::memory_order_relaxed);
  m.mem_used_total = z_->mem_pool->get_total_pages() << page_shift;
  m.mem_limit = z_->limit_pages.load(std::memory_order_relaxed) << page_shift;
  m.mem_used_max = s.max_used_pages.load(std::memory_order_relaxed) << page_shift;
  m.same_pages = s.same_pages.load(std::memory_order_relaxed);
  m.pages_compacted = z_->mem_pool->pool_stats().pages_compacted;
  m.huge_pages = s.huge_pages.load(std::memory_order_relaxed);
  m.huge_pages_since = s.huge_pages_since.load(std::memory_order_relaxed);
  return m;
}

zram_io_stat zram_device::io_stat() const {
  const zram_stats& s = z_->stats;
  return {s.failed_reads.load(std::memory_order_relaxed),
          s.failed_writes.load(std::memory_order_relaxed),
          s.invalid_io.load(std::memory_order_relaxed),
          s.notify_free.load(std::memory_order_relaxed)};
}

zram_bd_stat zram_device::bd_stat() const {
  const zram_stats& s = z_->stats;
  return {s.bd_count.load(std::memory_order_relaxed), s.bd_reads.load(std::memory_order_relaxed),
          s.bd_writes.load(std::memory_order_relaxed)};
}

zram_request_stat zram_device::request_stat() const {
  return {z_->nr_reads.sum(), z_->nr_writes.sum(), z_->nr_discards.sum(),
          z_->stats.miss_free.load(std::memory_order_relaxed), z_->nr_rmw_retries.sum()};
}

namespace {

template <class... T>
std::string format(const char* fmt, T... args) {
  char buf[256];
  const int n = std::snprintf(buf, sizeof buf, fmt, args...);
  return std::string(buf, n > 0 ? static_cast<size_t>(n) : 0);
}

using ull = unsigned long long;

}  // namespace

std::string zram_device::mm_stat_text() const {
  const zram_mm_stat m = mm_stat();
  // mm_stat_show(): "%8llu %8llu %8llu %8lu %8ld %8llu %8lu %8llu %8llu\n"
  return format("%8llu %8llu %8llu %8lu %8ld %8llu %8lu %8llu %8llu\n", ull(m.orig_data_size),
                ull(m.compr_data_size), ull(m.mem_used_total), (unsigned long)m.mem_limit,
                (long)m.mem_used_max, ull(m.same_pages), (unsigned long)m.pages_compacted,
                ull(m.huge_pages), ull(m.huge_pages_since));
}

std::string zram_device::io_stat_text() const {
  const zram_io_stat s = io_stat();
  return format("%8llu %8llu %8llu %8llu\n", ull(s.failed_reads), ull(s.failed_writes),
                ull(s.invalid_io), ull(s.notify_free));
}

std::string zram_device::bd_stat_text() const {
  const zram_bd_stat s = bd_stat();
  return format("%8llu %8llu %8llu\n", ull(s.bd_count), ull(s.bd_reads), ull(s.bd_writes));
}

std::string zram_device::debug_stat_text() const {
  return format("version: %d\n0 %8llu\n", 1,
                ull(z_->stats.miss_free.load(std::memory_order_relaxed)));
}

}  // namespace uswap
