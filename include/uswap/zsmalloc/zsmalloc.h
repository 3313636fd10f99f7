// zsmalloc: the allocator zram stores compressed pages in, after the kernel's mm/zsmalloc.c.
//
// Objects of 1..page_size bytes are packed into zspages: runs of 1..max_pages_per_zspage pages
// (default 8, the kernel's CONFIG_ZSMALLOC_CHAIN_SIZE) divided into equal slots. There is one size
// class per 16 bytes (ZS_SIZE_CLASS_DELTA) from 32 to page_size; each class picks the number of
// pages per zspage that wastes the least at the zspage's end, and neighbouring classes whose
// geometry (pages per zspage, objects per zspage) comes out identical are merged into one, as in
// the kernel. Every slot of a non-huge class starts with an 8-byte header (ZS_HANDLE_SIZE) naming
// its handle, which compaction uses to find whose object it is moving; classes whose zspage holds
// a single one-page object are "huge" and keep the handle in the zspage descriptor instead, so a
// whole incompressible page fits (zs_huge_class_size() tells zram where that starts).
//
// Handles. zs_malloc() returns an opaque zs_handle (never 0). A handle names a word in its class's
// handle table that records where the object is (zspage, slot); compaction moves objects and
// rewrites that word, so callers never notice. A handle carries its class and is validated on
// every use: a handle that was never allocated, or was freed, gets EINVAL, not a crash (a handle
// freed and reused by another allocation cannot be told apart, as with any allocator).
//
// Fullness groups: each class keeps its zspages on 12 lists by the share of slots in use (0, 1-10%,
// ..., 91-99%, 100%). Allocation fills the fullest non-full zspage first; compact() moves objects
// from the emptiest zspages into the fullest ones and frees the pages emptied, reporting the pages
// freed (added to pages_compacted).
//
// Locking (no pool-wide lock on the allocation, free or read paths):
//   - size_class lock (uswap::mutex): alloc, free and compaction of that class; the fullness lists,
//     slot free lists, handle table and statistics of the class.
//   - zspage lock (uswap::rw_semaphore): a read pin. zs_obj_read_begin() and zs_obj_write() take it
//     for read on the zspage that holds the object, so the object cannot be moved while it is
//     accessed; compaction takes it for write, with trylock only, on the zspage it empties, and
//     skips a zspage that someone is reading. Readers never take the class lock: a read runs while
//     other objects of the same zspage are allocated, freed, or moved into it by compaction.
//   - Reading a handle without the class lock is safe because zspage descriptors are never freed
//     before the pool (a descriptor emptied by a free is recycled within its class): a reader
//     loads the handle word, pins the zspage it names, and re-reads the word; if it changed, the
//     object moved in between, so it unpins and follows the new word.
//   - Lock order: class lock, then zspage lock (write, trylock). Readers hold only a zspage lock.
//
// Memory. A zspage is one allocation of pages_per_zspage * page_size bytes from the pool's
// zs_page_allocator (by default, host memory through malloc). The kernel chains order-0 pages and
// copies objects that straddle two of them, because it must not ask for contiguous physical pages
// under memory pressure; in userspace a zspage is contiguous virtual memory, so an object is
// always one span and zs_obj_read_begin() never copies. get_total_pages() (mem_used_total in
// zram's mm_stat) counts the pages of live zspages, as zs_get_total_pages() does; descriptors and
// handle tables are metadata outside it (the kernel's zspage and handle slab caches likewise).
//
// Failure: zs_malloc() returns EINVAL for size 0 or above page_size, ENOSPC when a new zspage would
// take the pool past mem_limit_pages, ENOMEM when the page allocator refuses. A failed call
// changes nothing: every existing object stays as it was.
//
// Thread-safety: every zs_pool member may be called concurrently from any number of threads,
// except that one object must not be freed while it is being read or written, or written while it
// is being read (the caller's own per-object lock, zram's slot lock, guarantees that). A
// zs_obj_ref is released once, on the thread that took it, before its object is freed.
//
// Invariants: get_total_pages() == sum over classes of zspages * pages_per_zspage; a class's
// obj_used <= obj_allocated; a zspage with no object in use is freed at once (its descriptor
// recycled); after every object is freed, get_total_pages() == 0.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "uswap/base/page.h"
#include "uswap/base/status.h"
#include "uswap/sync/lockstat.h"
#include "uswap/sync/rw_semaphore.h"

namespace uswap {

// An allocated object, as returned by zs_malloc. 0 is never a valid handle.
using zs_handle = uint64_t;

inline constexpr size_t ZS_ALIGN = 8;
inline constexpr size_t ZS_HANDLE_SIZE = sizeof(uint64_t);
inline constexpr size_t ZS_MIN_ALLOC_SIZE = 32;
inline constexpr size_t ZS_MAX_ALLOC_SIZE = page_size;
inline constexpr size_t ZS_SIZE_CLASS_DELTA = page_size >> 8;  // 16 bytes
inline constexpr unsigned ZS_SIZE_CLASSES =
    (ZS_MAX_ALLOC_SIZE - ZS_MIN_ALLOC_SIZE + ZS_SIZE_CLASS_DELTA - 1) / ZS_SIZE_CLASS_DELTA + 1;
// The largest chain the kernel's CONFIG_ZSMALLOC_CHAIN_SIZE allows.
inline constexpr unsigned ZS_MAX_PAGES_PER_ZSPAGE = 16;

// Fullness groups, by the share of a zspage's slots in use.
enum zs_fullness_group : unsigned {
  ZS_INUSE_RATIO_0 = 0,
  ZS_INUSE_RATIO_10 = 1,  // 1..10% (and 20%, 30%... up to 90% follow)
  ZS_INUSE_RATIO_99 = 10,
  ZS_INUSE_RATIO_100 = 11,
  NR_FULLNESS_GROUPS = 12,
};

// Where zspage memory comes from. Implementations must be thread-safe.
class zs_page_allocator {
 public:
  virtual ~zs_page_allocator() = default;
  // nr_pages * page_size bytes, 16-byte aligned at least, or nullptr when memory is refused.
  virtual void* alloc_pages(unsigned nr_pages) noexcept = 0;
  virtual void free_pages(void* pages, unsigned nr_pages) noexcept = 0;
};

// The default allocator: host memory (malloc / free).
zs_page_allocator& zs_host_page_allocator() noexcept;

struct zs_pool_options {
  // Largest zspage, in pages (CONFIG_ZSMALLOC_CHAIN_SIZE), 1..ZS_MAX_PAGES_PER_ZSPAGE. Default 8.
  unsigned max_pages_per_zspage = 8;
  // Pages the pool may hold; 0 (default) is unlimited. zs_malloc fails with ENOSPC beyond it.
  uint64_t mem_limit_pages = 0;
  // Source of zspage memory; nullptr (default) is zs_host_page_allocator(). Must outlive the pool.
  zs_page_allocator* page_allocator = nullptr;
};

// One row of the per-class statistics (the kernel's debugfs zsmalloc/<pool>/classes).
struct zs_class_stats {
  unsigned index = 0;             // class index (the largest size index merged into it)
  unsigned size = 0;              // slot size in bytes, header included
  unsigned pages_per_zspage = 0;
  unsigned objs_per_zspage = 0;
  bool huge = false;
  std::array<uint64_t, NR_FULLNESS_GROUPS> zspages{};  // zspages per fullness group
  uint64_t obj_allocated = 0;  // slots in this class's zspages
  uint64_t obj_used = 0;       // objects in use
  uint64_t pages_used = 0;
  uint64_t freeable = 0;       // pages compaction could free now (zs_can_compact)
};

struct zs_pool_stats {
  uint64_t pages_compacted = 0;  // pages freed by compaction since the pool was created
};

// Where an object is: for tests and diagnostics.
struct zs_obj_location {
  unsigned class_index = 0;
  uint64_t zspage = 0;  // descriptor number within the class
  unsigned obj_idx = 0;
};

class zs_pool;

// A read pin on one object: zs_obj_read_begin() returns it, its destruction (or release()) is
// zs_obj_read_end(). While it lives the object does not move and data() stays valid. Movable.
class zs_obj_ref {
 public:
  zs_obj_ref() noexcept = default;
  zs_obj_ref(zs_obj_ref&& o) noexcept { *this = std::move(o); }
  zs_obj_ref& operator=(zs_obj_ref&& o) noexcept {
    if (this != &o) {
      release();
      pin_ = o.pin_;
      data_ = o.data_;
      capacity_ = o.capacity_;
      o.pin_ = nullptr;
      o.data_ = nullptr;
    }
    return *this;
  }
  zs_obj_ref(const zs_obj_ref&) = delete;
  zs_obj_ref& operator=(const zs_obj_ref&) = delete;
  ~zs_obj_ref() { release(); }

  const uint8_t* data() const noexcept { return data_; }
  // Bytes readable at data(): the slot's payload, at least the size given to zs_malloc.
  size_t capacity() const noexcept { return capacity_; }
  explicit operator bool() const noexcept { return pin_ != nullptr; }

  void release() noexcept {
    if (pin_) pin_->up_read();
    pin_ = nullptr;
    data_ = nullptr;
  }

 private:
  friend class zs_pool;
  zs_obj_ref(rw_semaphore* pin, const uint8_t* data, size_t capacity) noexcept
      : pin_(pin), data_(data), capacity_(capacity) {}
  rw_semaphore* pin_ = nullptr;
  const uint8_t* data_ = nullptr;
  size_t capacity_ = 0;
};

class zs_pool {
 public:
  // zs_create_pool(): EINVAL for options out of range.
  static result<std::unique_ptr<zs_pool>> create(std::string name,
                                                 const zs_pool_options& options = {});
  // zs_destroy_pool(): frees every zspage, live objects included.
  ~zs_pool();
  zs_pool(const zs_pool&) = delete;
  zs_pool& operator=(const zs_pool&) = delete;

  const std::string& name() const noexcept { return name_; }

  // zs_malloc(): room for `size` bytes (1..page_size).
  result<zs_handle> malloc(size_t size);
  // zs_free(): 0 is ignored as the kernel does; an invalid handle is EINVAL.
  status free(zs_handle handle);

  // zs_obj_read_begin() / zs_obj_read_end() (the reference's destruction).
  result<zs_obj_ref> obj_read_begin(zs_handle handle);
  // zs_obj_write(): copies len bytes (at most the object's capacity) into the object.
  status obj_write(zs_handle handle, const void* src, size_t len);

  // zs_compact(): pages freed by this call. Concurrent calls do not wait: all but one return 0.
  uint64_t compact();

  // zs_get_total_pages(): pages held by the pool (zram's mem_used_total, in pages).
  uint64_t get_total_pages() const noexcept {
    return pages_allocated_.load(std::memory_order_relaxed);
  }
  // zs_huge_class_size(): objects of this size or larger get a page of their own.
  size_t huge_class_size() const noexcept { return huge_class_size_; }
  // zs_lookup_class_index(): the class that holds objects of `size` bytes.
  unsigned lookup_class_index(size_t size) const noexcept;
  // zs_pool_stats().
  zs_pool_stats pool_stats() const noexcept {
    return {pages_compacted_.load(std::memory_order_relaxed)};
  }
  // One row per class (merged classes once), smallest first.
  std::vector<zs_class_stats> class_stats() const;
  // Objects in use, over all classes.
  uint64_t objects_in_use() const;
  uint64_t mem_limit_pages() const noexcept {
    return mem_limit_pages_.load(std::memory_order_relaxed);
  }
  // Changes the limit at run time (zram's mem_limit file); 0 removes it. Pages already held stay
  // held even above a lowered limit: only zspages allocated from now on are refused.
  void set_mem_limit_pages(uint64_t pages) noexcept {
    mem_limit_pages_.store(pages, std::memory_order_relaxed);
  }
  unsigned max_pages_per_zspage() const noexcept { return max_pages_per_zspage_; }

  result<zs_obj_location> obj_location(zs_handle handle) const;

  // Lock statistics of this pool (lockstat::enable() turns collection on).
  lock_class& class_lock_stats() noexcept { return class_lock_class_; }
  lock_class& zspage_lock_stats() noexcept { return zspage_lock_class_; }

  struct size_class;  // zsmalloc.cc
  struct zspage;

 private:
  zs_pool(std::string name, const zs_pool_options& options);

  size_class* class_of_handle(zs_handle handle, std::atomic<uint64_t>** word) const noexcept;
  status bad_handle(const char* op, zs_handle handle) const;
  void* alloc_zspage_memory(unsigned nr_pages, status* why);
  void free_zspage_memory(void* mem, unsigned nr_pages) noexcept;
  uint64_t compact_class(size_class& c);

  std::string name_;
  unsigned max_pages_per_zspage_;
  std::atomic<uint64_t> mem_limit_pages_;
  zs_page_allocator* page_allocator_;
  size_t huge_class_size_ = 0;
  lock_class class_lock_class_;
  lock_class zspage_lock_class_;
  std::array<size_class*, ZS_SIZE_CLASSES> size_class_{};  // by size index; merged ones shared
  std::vector<std::unique_ptr<size_class>> classes_;        // the distinct classes
  alignas(cache_line_size) std::atomic<uint64_t> pages_allocated_{0};
  alignas(cache_line_size) std::atomic<uint64_t> pages_compacted_{0};
  std::atomic<bool> compaction_in_progress_{false};
};

// The kernel's names, for grep and for callers written against include/linux/zsmalloc.h.
inline result<std::unique_ptr<zs_pool>> zs_create_pool(std::string name,
                                                       const zs_pool_options& options = {}) {
  return zs_pool::create(std::move(name), options);
}
inline result<zs_handle> zs_malloc(zs_pool& pool, size_t size) { return pool.malloc(size); }
inline status zs_free(zs_pool& pool, zs_handle handle) { return pool.free(handle); }
inline result<zs_obj_ref> zs_obj_read_begin(zs_pool& pool, zs_handle handle) {
  return pool.obj_read_begin(handle);
}
inline void zs_obj_read_end(zs_obj_ref& ref) { ref.release(); }
inline status zs_obj_write(zs_pool& pool, zs_handle handle, const void* src, size_t len) {
  return pool.obj_write(handle, src, len);
}
inline uint64_t zs_compact(zs_pool& pool) { return pool.compact(); }
inline uint64_t zs_get_total_pages(const zs_pool& pool) { return pool.get_total_pages(); }
inline size_t zs_huge_class_size(const zs_pool& pool) { return pool.huge_class_size(); }
inline unsigned zs_lookup_class_index(const zs_pool& pool, size_t size) {
  return pool.lookup_class_index(size);
}

}  // namespace uswap
