// struct zram, the device's state, after drivers/block/zram/zram_drv.h, and what the driver's
// files share: zram_drv.cc (slots: reading, writing, freeing; the device's I/O entry points),
// zram_pp.cc (post-processing: mark_idle, writeback, recompress, compact) and zram_stats.cc
// (mm_stat, io_stat, bd_stat, debug_stat). The slot word's layout is in include/uswap/zram/zram.h,
// the lock modes in slot_lock.h.
//
// Thread-safety: the device's contract (zram.h) and the lock discipline at the top of
// zram_drv.cc. A member whose comment says "with the slot locked" asserts it in DCHECK builds
// (assert_slot_locked, through sync/lockdep.h).
// Invariants: a slot's handle and data bits change only under its lock taken for write; the
// statistics count what the table holds (pages_stored = slots holding a page, same_pages,
// huge_pages, compr_data_size = bytes of the objects in the pool, bd_count = blocks in use).
#pragma once

#include <xxhash.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "backing_dev.h"
#include "slot_lock.h"
#include "uswap/base/atomic_max.h"
#include "uswap/base/page.h"
#include "uswap/base/status.h"
#include "uswap/base/zeroed_array.h"
#include "uswap/compress/zcomp.h"
#include "uswap/sync/lockstat.h"
#include "uswap/sync/mutex.h"
#include "uswap/zram/zram.h"
#include "uswap/zsmalloc/zsmalloc.h"
#include "zspage_arena.h"

namespace uswap {

namespace zram_detail {

constexpr uint64_t bit(unsigned b) { return uint64_t{1} << b; }
constexpr uint64_t size_mask = bit(ZRAM_FLAG_SHIFT) - 1;
constexpr uint64_t prio_mask = uint64_t{ZRAM_COMP_PRIORITY_MASK} << ZRAM_COMP_PRIORITY_BIT1;
constexpr uint64_t ac_time_mask = ~uint64_t{0} << ZRAM_AC_TIME_SHIFT;
// Every data bit of the low half: what a slot holds, as opposed to the lock bits and ac_time.
constexpr uint64_t state_mask = (bit(ZRAM_AC_TIME_SHIFT) - 1) & ~lock_bits;
// The bits that say what is stored: two slots with equal kind bits and equal stored bytes hold
// the same page.
constexpr uint64_t kind_mask =
    size_mask | bit(ZRAM_SAME) | bit(ZRAM_WB) | bit(ZRAM_HUGE) | prio_mask;
constexpr size_t csum_size = sizeof(uint32_t);
constexpr uint64_t wb_block_mask = 0xffffffffu;

inline uint32_t obj_checksum(const void* data, size_t len) noexcept {
  const uint64_t h = XXH3_64bits(data, len);
  return static_cast<uint32_t>(h ^ (h >> 32));
}

// A counter bumped on hot paths from every thread: one cache line per shard, a thread sticks to
// its shard, so counting does not become a shared line bouncing between cores (the kernel keeps
// the block layer's request counts per CPU for the same reason).
class sharded_counter {
 public:
  void add(uint64_t n = 1) noexcept {
    cells_[my_shard()].v.fetch_add(n, std::memory_order_relaxed);
  }
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

}  // namespace zram_detail

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
  using slot_access = zram_detail::slot_access;

  zram_options opts;
  uint64_t disksize = 0;
  uint64_t nr_pages = 0;
  zram_lock_mode mode = zram_lock_mode::slot_bitlock;
  uint32_t (*clock)() = nullptr;

  // Zero-filled on demand (zram_meta_alloc's vzalloc): a slot is all zeros until first written,
  // so a device sized far beyond what it stores costs only the table pages in use.
  zeroed_array<zram_table_entry> table;
  // One past the highest slot ever installed. The table past it was never written, so walks of
  // the whole device (post-processing's scans, the writeback cursor's laps, teardown) stop there
  // and never touch, or read into existence, a sparse table's untouched pages. Never lowered.
  std::atomic<uint64_t> slots_end{0};
  zeroed_array<uint32_t> huge_csum;  // checksums of ZRAM_HUGE objects (raw pages), by slot
  std::unique_ptr<zram_detail::zspage_arena> arena;  // zspage memory; outlives mem_pool
  std::unique_ptr<zs_pool> mem_pool;
  std::array<std::unique_ptr<zcomp>, ZRAM_MAX_COMPS> comps;
  unsigned num_comps = 0;
  size_t huge_class_size = 0;
  size_t csum_len = 0;  // csum_size with checksums, else 0
  std::atomic<uint64_t> limit_pages{0};
  std::unique_ptr<zram_detail::backing_dev> bdev;

  lock_class slot_lock_class;
  zram_detail::slot_locks locks;  // the slot locks of the device's mode (slot_lock.h)
  mutex pp_lock;                  // one post-processing call (writeback, recompress) at a time
  // Set by the destructor (zram_meta_free), which frees slots with no call in progress and so
  // without their locks.
  bool tearing_down = false;

  alignas(cache_line_size) zram_stats stats;
  zram_detail::sharded_counter nr_reads, nr_writes, nr_discards, nr_rmw_retries;

  explicit zram(const zram_options& o, std::string lock_name)
      : opts(o), slot_lock_class(std::move(lock_name)), locks(o.lock_mode, &slot_lock_class) {}

  // --- Locking -------------------------------------------------------------------------------

  void slot_lock(uint64_t index, slot_access a) noexcept { locks.lock(table[index].flags, a); }
  bool slot_trylock(uint64_t index, slot_access a) noexcept {
    return locks.trylock(table[index].flags, a);
  }
  void slot_unlock(uint64_t index, slot_access a) noexcept { locks.unlock(table[index].flags, a); }
  // "With the slot locked" (for `write`: exclusively), checked in DCHECK builds.
  void assert_slot_locked(uint64_t index, slot_access a) const noexcept {
    locks.assert_held(table[index].flags, a);
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
    using zram_detail::bit;
    return (w & zram_detail::size_mask) || (w & (bit(ZRAM_SAME) | bit(ZRAM_WB)));
  }
  static uint32_t comp_priority(uint64_t w) noexcept {
    return static_cast<uint32_t>((w >> ZRAM_COMP_PRIORITY_BIT1) & ZRAM_COMP_PRIORITY_MASK);
  }
  uint32_t now() const noexcept { return clock(); }
  // The end of a walk over [.., last): the slots at or past slots_end were never installed. A
  // slot installed after the walk read it is missed, as one written just after the walk.
  uint64_t walk_end(uint64_t last) const noexcept {
    return std::min(last, slots_end.load(std::memory_order_acquire));
  }

  // mark_slot_accessed(): with the slot locked (either access). Not idle, not selected for
  // post-processing, accessed now. Writes the word only when something changes (once a second
  // per slot at most for a hot slot).
  void mark_slot_accessed(uint64_t index) noexcept;

  void update_used_max(uint64_t pages) noexcept { fetch_max(stats.max_used_pages, pages); }

  status bad_range(const char* op, uint64_t offset, uint64_t len);
  status bad_index(const char* op, uint64_t index, uint64_t count = 1);

  // --- Freeing ---------------------------------------------------------------------------------

  // slot_free(): with the slot locked for write. Frees whatever the slot holds and clears every
  // data bit (ac_time too, as the kernel zeroes it).
  void slot_free(uint64_t index);

  // --- Reading ---------------------------------------------------------------------------------

  // What a slot held when it was read, so that a partial-page write can check, when it comes to
  // install, that the page it merged into is still the page stored.
  struct snapshot {
    uint64_t kind = 0;    // the word's kind_mask bits
    uint64_t handle = 0;  // fill word (same) or block | checksum (written back)
    size_t len = 0;       // bytes in `stored`
    alignas(8) uint8_t stored[page_size + zram_detail::csum_size];
  };

  status corrupt(uint64_t index, const char* what);

  // read_from_zspool() and read_from_bdev(): with the slot locked (either access). Leaves the
  // page in dst, or zeroes dst and returns the error. With `snap`, also copies the stored bytes.
  status read_slot(uint64_t index, uint8_t* dst, snapshot* snap);

  status read_slot_unchecked(uint64_t index, uint64_t w, uint64_t handle, uint8_t* dst,
                             snapshot* snap);

  // zram_read_page().
  status read_page(uint64_t index, uint8_t* dst);

  // --- Writing ---------------------------------------------------------------------------------

  // A page made ready for a slot without holding its lock.
  struct prepared {
    enum class kind : uint8_t { same, compressed, huge } k = kind::same;
    uint64_t handle = 0;  // zs_handle, or the fill word
    uint32_t size = 0;    // compressed length (page_size for huge)
    uint32_t prio = 0;
    uint32_t csum = 0;  // huge objects' checksum (compressed ones carry theirs inside)
  };

  void drop(const prepared& p);

  status alloc_failed(uint64_t index, const status& why);

  // Allocates an object of `len` bytes and copies `data` into it.
  result<zs_handle> store_object(uint64_t index, const void* data, size_t len);

  // The compress-and-allocate half of zram_write_page() / write_incompressible_page(): no lock.
  result<prepared> prepare_page(uint64_t index, const uint8_t* src);

  // The object for a page compressed into strm.buffer (len bytes) by the codec of `prio`; a page
  // that compressed to huge_class_size or more is stored raw.
  result<prepared> prepare_compressed(uint64_t index, const uint8_t* page, zcomp_strm& strm,
                                      size_t len, uint32_t prio);

  // Installs p into the slot, which must be locked for write: frees the old contents and sets
  // the new in the same section.
  void install(uint64_t index, const prepared& p);

  // zram_write_page().
  status write_page(uint64_t index, const uint8_t* src);

  // Is the slot (locked for write) still holding what `snap` recorded? Compared by content, so
  // a slot rewritten with the same page in between still counts as unchanged - which is exactly
  // the condition under which merging into the snapshot's page is correct.
  bool unchanged_since(uint64_t index, const snapshot& snap);

  // zram_bvec_write_partial(): bytes [offset, offset + len) of one page. The page is read and
  // snapshotted under the lock, merged and compressed outside it, and installed only if the slot
  // still holds the snapshotted page; otherwise the work is redone on the new page.
  status write_partial(uint64_t index, size_t offset, const uint8_t* src, size_t len);

  // zram_bio_discard() for one page.
  void discard_page(uint64_t index);
};

}  // namespace uswap
