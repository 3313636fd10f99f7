// swap_area: one swap device, after the kernel's swap_info_struct and mm/swapfile.c. The design
// (the cluster life cycle, the allocator's order, the freer tag, the initial free-list order) is
// docs/design/swap.md; the lock order of the whole stack is in docs/ARCHITECTURE.md.
//
// An area of N page-sized slots keeps swap_map (one byte per slot, format in swap.h; slot 0 is
// the header, SWAP_MAP_BAD), cluster_info (one 64-bit word per SWAPFILE_CLUSTER slots), the
// cluster lists free / nonfull / frag / full / discard (links in a separate array, so a
// cluster_info word stays 8 bytes, 8 to a cache line, as in the seed), a current cluster per
// thread slot (swap_system's stand-in for a CPU), inuse_pages, lowest_bit, highest_bit and the
// swap count continuation table. Every lock mode runs the same allocator; the modes differ only
// in which lock is held.
//
// cluster_info word layout:
//   bits 0..1   unused
//   bit  2      cluster lock held (the seed's CLUSTER_FLAG_LOCK_BIT)
//   bit  3      cluster lock waiters (uswap's bit_lock parks instead of spinning)
//   bits 4..7   cluster_flag: the list the cluster is on, stored XOR CLUSTER_FLAG_FREE so that an
//               all-zero word is a free, empty, unlocked cluster (cluster_info is lazily zeroed
//               memory: a swap area costs memory only for the clusters it uses)
//   bits 8..16  usage count: slots in use, bad slots and the slots past the end of the area
//   bits 32..47 freer tag: 1 + the thread slot that last freed a slot here (mod 0xffff), 0 none;
//               a hint for the allocator, which passes over a nonfull cluster another thread slot
//               is freeing into; written under the cluster lock (global: device lock) and
//               cleared by an allocator that passes the cluster over
//
// Locking, by swap_lock_mode:
//   global   the device lock (lock_, the kernel's si->lock) is held around every operation; the
//            cluster locks are never taken.
//   cluster  swap_duplicate / swapcache_prepare / swap_free and put_swap_page that leave a count
//            take only the cluster lock. Allocation and the release of a slot whose last
//            reference went take the device lock, then the cluster lock (si->lock -> ci->lock).
//            The release is deferred as in 4.11: under the cluster lock the byte becomes
//            SWAP_HAS_CACHE (still reserved), and swapcache_free_entries frees it under both.
//   percpu   the cluster lock first; the device lock only nested inside it to move a cluster
//            between lists (ci->lock -> si->lock), and when picking a new cluster, where the
//            device lock is taken first and cluster locks only try-locked (as the kernel's
//            isolate_lock_cluster), so there is no lock-order cycle.
// The lists and their links are changed only under the device lock; a cluster's flag only
// under its cluster lock (global: the device lock); a swap_map byte only under its cluster's lock
// (global: the device lock). inuse_pages, lowest_bit, highest_bit are atomics in every mode.
// slot_free_notify is called under the freed slot's cluster lock (global: the device lock),
// discard_fn with no swap lock held.
//
// Thread-safety: every public member may be called from any thread, except check_invariants()
// and cluster_list(), which are for quiescent states (no operation in flight); the callbacks in
// swap_area_options are called from the threads doing swap operations.
//
// Invariants (checked by check_invariants):
//   - a cluster's count == its slots whose byte is non-zero + its slots past the area's end;
//   - inuse_pages == slots whose byte is non-zero and not SWAP_MAP_BAD;
//   - each list is a well-formed chain whose members carry its flag; free and discard clusters
//     have count 0, full ones 256, nonfull and frag ones in between;
//   - lowest_bit <= every free slot <= highest_bit (they are bounds, as in the kernel, not exact);
//   - COUNT_CONTINUED is set exactly on the slots with a continuation entry.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "uswap/base/page.h"
#include "uswap/base/status.h"
#include "uswap/base/zeroed_array.h"
#include "uswap/swap/swap.h"
#include "uswap/sync/bit_lock.h"
#include "uswap/sync/lockstat.h"
#include "uswap/sync/mutex.h"

namespace uswap {

// What swapon is given for one area.
struct swap_area_options {
  // Size of the area in pages, header slot included (the kernel's maxpages). At least 2.
  // Default 0: must be set.
  uint64_t size_pages = 0;
  // swapon -p: areas of higher priority are used first, equal priorities in turn. 0..32767.
  // Default: none, which gives -1, -2, ... in swapon order, as the kernel does.
  std::optional<int> priority;
  // Slots that must never be used (the swap header's bad-block list). Default: none.
  std::vector<uint64_t> bad_pages;
  // SWP_PAGE_DISCARD: a cluster whose last slot is freed goes through discard_fn before it can
  // be allocated again. Default false.
  bool discard = false;
  // discard_fn(offset, nr): the backing store may drop slots [offset, offset + nr) (zram frees
  // their objects). Called with no swap lock held, once per freed cluster. Required if discard.
  std::function<void(uint64_t offset, uint64_t nr)> discard_fn;
  // slot_free_notify(offset): the kernel's swap_slot_free_notify, called when a slot becomes
  // free, while the slot's cluster lock (global: the device lock) is held, so it must not call
  // back into the swap layer. Default: none.
  std::function<void(uint64_t offset)> slot_free_notify;
  // Counts above SWAP_MAP_MAX continue in a table (the kernel's swap count continuation); when
  // false, swap_duplicate past SWAP_MAP_MAX fails with ENOMEM. Default true.
  bool count_continuation = true;
  // For messages and listings. Default "" (shown as "swap<type>").
  std::string name;
};

// How the owning swap_system wants the area locked. Not user-facing: see swap_options.
struct swap_area_locking {
  swap_lock_mode mode = swap_lock_mode::cluster;
  lock_class* device_lock_class = nullptr;   // si->lock
  lock_class* cluster_lock_class = nullptr;  // every ci->lock
  unsigned nr_cpu_slots = 64;                // current clusters, one per thread slot
  // percpu mode: count inuse_pages per thread slot and fold into the shared counter
  // SWAP_BATCH at a time (a percpu_counter), instead of one atomic that every allocation and
  // free writes (the kernel's si->inuse_pages). No effect in the other modes, where the
  // counter changes under si->lock.
  bool percpu_inuse_counter = true;
  // The freer tag (header comment): when picking a new cluster, pass over NONFULL clusters
  // another thread slot is freeing into while a FREE one is left. false: the kernel's order,
  // any NONFULL cluster first.
  bool freer_tag = true;
};

// Which list a cluster is on (the kernel's enum swap_cluster_flags).
enum cluster_flag : uint8_t {
  CLUSTER_FLAG_NONE = 0,  // on no list: taken by an allocator, or being discarded
  CLUSTER_FLAG_FREE = 1,
  CLUSTER_FLAG_NONFULL = 2,
  CLUSTER_FLAG_FRAG = 3,
  CLUSTER_FLAG_USABLE = CLUSTER_FLAG_FRAG,  // flags up to this one may be allocated from
  CLUSTER_FLAG_FULL = 4,
  CLUSTER_FLAG_DISCARD = 5,
  CLUSTER_FLAG_MAX = 6,
};
const char* to_string(cluster_flag flag) noexcept;

// struct swap_cluster_info: 8 bytes, lock and count in one word (layout above).
struct swap_cluster_info {
  std::atomic<uint64_t> data{0};
};
static_assert(sizeof(swap_cluster_info) == 8);

// The cluster lock inside swap_cluster_info::data; bit 2 as the seed's CLUSTER_FLAG_LOCK_BIT.
inline constexpr unsigned CLUSTER_FLAG_LOCK_BIT = 2;
using cluster_lock = bit_lock<CLUSTER_FLAG_LOCK_BIT, CLUSTER_FLAG_LOCK_BIT + 1>;
inline constexpr unsigned CLUSTER_LIST_SHIFT = 4;
inline constexpr uint64_t CLUSTER_LIST_MASK = uint64_t{0xf} << CLUSTER_LIST_SHIFT;
// The list bits for `flag` (stored XOR CLUSTER_FLAG_FREE: layout above).
constexpr uint64_t cluster_list_bits(unsigned flag) noexcept {
  return uint64_t{flag ^ 1u} << CLUSTER_LIST_SHIFT;
}
inline constexpr unsigned CLUSTER_COUNT_SHIFT = 8;
inline constexpr uint64_t CLUSTER_COUNT_MASK = uint64_t{0x1ff} << CLUSTER_COUNT_SHIFT;
// In the upper 32-bit half, away from the futex half that holds the lock bits, so that setting
// a tag never wakes or misleads a parked waiter.
inline constexpr unsigned CLUSTER_FREER_SHIFT = 32;
inline constexpr uint64_t CLUSTER_FREER_MASK = uint64_t{0xffff} << CLUSTER_FREER_SHIFT;
// How many NONFULL clusters one allocation looks at for an untagged one before it takes a FREE
// cluster; each one passed over is untagged and rotated, so later allocations see others.
inline constexpr unsigned SWAP_NONFULL_SCAN = 8;
// Clusters whose cluster_info share one cache line.
inline constexpr unsigned SWAP_CLUSTER_COLS =
    static_cast<unsigned>(cache_line_size / sizeof(swap_cluster_info));

struct swap_area_stats {
  unsigned type = 0;
  int priority = 0;
  uint64_t max = 0;          // slots, header included
  uint64_t pages = 0;        // usable slots
  uint64_t inuse_pages = 0;
  uint64_t lowest_bit = 0;
  uint64_t highest_bit = 0;
  uint32_t nr_clusters = 0;
  uint32_t free_clusters = 0;
  uint32_t nonfull_clusters = 0;
  uint32_t frag_clusters = 0;
  uint32_t full_clusters = 0;
  uint32_t discard_clusters = 0;
  uint64_t clusters_freed = 0;      // times a cluster's count dropped to 0
  uint64_t clusters_discarded = 0;  // discard_fn calls
  uint64_t continued_slots = 0;     // slots with a count continuation
};

// What dropping a reference left.
struct swap_put_result {
  unsigned char usage = 0;  // the slot's swap_map byte afterwards (0: the slot was freed)
  bool deferred = false;    // the last reference went and the slot is reserved as
                            // SWAP_HAS_CACHE: the caller must pass it to swapcache_free_entries
};

class swap_area {
 public:
  // Validates `opts` (EINVAL naming the bad field) and builds the area with every cluster free.
  static result<std::unique_ptr<swap_area>> create(unsigned type, int priority,
                                                   swap_area_options opts,
                                                   const swap_area_locking& locking);
  ~swap_area();
  swap_area(const swap_area&) = delete;
  swap_area& operator=(const swap_area&) = delete;

  unsigned type() const noexcept { return type_; }
  int priority() const noexcept { return prio_; }
  const std::string& name() const noexcept { return name_; }
  swap_lock_mode lock_mode() const noexcept { return mode_; }
  uint64_t max() const noexcept { return max_; }
  uint64_t pages() const noexcept { return pages_; }
  // Exact: the shared counter plus what the thread slots have not folded in yet.
  uint64_t inuse_pages() const noexcept;
  uint64_t lowest_bit() const noexcept { return lowest_bit_.load(std::memory_order_relaxed); }
  uint64_t highest_bit() const noexcept { return highest_bit_.load(std::memory_order_relaxed); }
  // Whether every usable slot is in use; reads only the shared counter unless it is within the
  // thread slots' possible unfolded counts of the limit.
  bool full() const noexcept;
  uint32_t nr_clusters() const noexcept { return nr_clusters_; }

  // scan_swap_map_slots: allocates up to n free slots, each with SWAP_HAS_CACHE (the allocator's
  // reference, dropped by put_swap_page once the page is written), from the current cluster of
  // thread slot `cpu`, then from other clusters. Returns how many it wrote to out; fewer than n
  // (possibly 0) only when the area has no more free slots it can reach.
  int scan_swap_map_slots(unsigned cpu, int n, swap_entry* out);

  // __swap_duplicate: usage 1 adds a swap count (a page table references the slot; fork);
  // usage SWAP_HAS_CACHE claims the cache reference (swapcache_prepare). Errors, data intact:
  // EINVAL bad offset or SWAP_MAP_BAD slot; ENOENT slot not in use (or, for SWAP_HAS_CACHE, no
  // count left); EEXIST SWAP_HAS_CACHE already held; ENOMEM count past SWAP_MAP_MAX without
  // continuation; EOVERFLOW count continuation exhausted.
  status swap_duplicate(uint64_t offset, unsigned char usage);

  // Drops a reference: usage 1 one swap count (swap_free), SWAP_HAS_CACHE the cache reference
  // (put_swap_page / swapcache_clear). When no reference is left the slot is freed at once, or,
  // if `defer_free` or the mode is `cluster`, reserved and reported as deferred. Errors, data
  // intact: EINVAL bad offset or bad slot; ENOENT the reference is not held.
  result<swap_put_result> swap_entry_put(uint64_t offset, unsigned char usage, bool defer_free);

  // Frees slots reserved by a deferred swap_entry_put (byte SWAP_HAS_CACHE), as the kernel's
  // swapcache_free_entries: one device-lock acquisition (modes global, cluster) and one
  // cluster-lock acquisition per run of slots in the same cluster. Sorts `offsets` in place.
  void swapcache_free_entries(uint64_t* offsets, size_t n);

  // The exact swap count (continuation included, SWAP_HAS_CACHE excluded); EINVAL bad offset.
  result<uint64_t> swap_count(uint64_t offset) const;
  // The swap_map byte, read without a lock (a snapshot for tests and statistics).
  unsigned char swap_map_byte(uint64_t offset) const noexcept {
    return offset < max_ ? swap_map_[offset].load(std::memory_order_relaxed) : 0;
  }

  // Runs the discards scheduled by frees (normally done by the freeing thread right after it
  // drops its locks); returns how many clusters it discarded.
  unsigned swap_do_scheduled_discard();

  swap_area_stats stats() const;
  // Quiescent only: the clusters on one list, in list order.
  std::vector<uint32_t> cluster_list(cluster_flag list) const;
  // Quiescent only: every invariant in the header comment; the error (EIO) lists what is wrong.
  status check_invariants() const;

 private:
  struct cluster_list_head {
    uint32_t head = nil;
    uint32_t tail = nil;
    uint32_t nr = 0;
  };
  struct alignas(cache_line_size) percpu_cluster {
    // Where the thread slot's next allocation looks first (the kernel's percpu_cluster->next
    // / percpu_swap_cluster.offset). 0 = none: slot 0 is the header and never allocatable.
    // A hint: the cluster is re-checked under its lock, so racing writers are harmless.
    std::atomic<uint64_t> next{0};
    // Allocations minus frees by this thread slot not yet folded into inuse_pages_
    // (percpu_inuse_counter); |inuse_delta| < SWAP_BATCH between operations.
    std::atomic<int64_t> inuse_delta{0};
  };
  static constexpr uint32_t nil = UINT32_MAX;

  friend struct swap_area_test_access;  // tests corrupt an area to see the checker object

  swap_area(unsigned type, int priority, swap_area_options&& opts,
            const swap_area_locking& locking);

  // Locks. lock_cluster is a no-op in global mode, where the caller holds the device lock.
  void dev_lock() noexcept { lock_.lock(); }
  void dev_unlock() noexcept { lock_.unlock(); }
  swap_cluster_info* cluster_of(uint64_t offset) noexcept {
    return &cluster_info_[offset / SWAPFILE_CLUSTER];
  }
  uint32_t cluster_index(const swap_cluster_info* ci) const noexcept {
    return static_cast<uint32_t>(ci - cluster_info_.data());
  }
  swap_cluster_info* lock_cluster(uint64_t offset) noexcept;
  void unlock_cluster(swap_cluster_info* ci) noexcept;
  // lock_cluster_or_swap_info: the device lock in global mode, the cluster lock otherwise.
  swap_cluster_info* lock_cluster_or_swap_info(uint64_t offset) noexcept;
  void unlock_cluster_or_swap_info(swap_cluster_info* ci) noexcept;
  // DCHECK builds (sync/lockdep.h): the calling thread holds what a cluster's fields need, its
  // cluster lock (global: the device lock); or what the lists need, the device lock (percpu
  // mode: it is taken where the lists change, so only the other modes check it in callers).
  void assert_cluster_locked(const swap_cluster_info* ci) const noexcept;
  void assert_lists_locked_by_caller() const noexcept;

  // cluster_info fields (callers hold the cluster lock, or the device lock in global mode).
  static unsigned ci_count(uint64_t data) noexcept {
    return static_cast<unsigned>((data & CLUSTER_COUNT_MASK) >> CLUSTER_COUNT_SHIFT);
  }
  static cluster_flag ci_flag(uint64_t data) noexcept {
    return static_cast<cluster_flag>(((data & CLUSTER_LIST_MASK) >> CLUSTER_LIST_SHIFT) ^
                                     CLUSTER_FLAG_FREE);
  }
  unsigned cluster_count(const swap_cluster_info* ci) const noexcept {
    return ci_count(ci->data.load(std::memory_order_relaxed));
  }
  cluster_flag cluster_flags(const swap_cluster_info* ci) const noexcept {
    return ci_flag(ci->data.load(std::memory_order_relaxed));
  }
  // Adds delta to the count; returns the new count.
  unsigned add_cluster_count(swap_cluster_info* ci, int delta) noexcept;
  void set_cluster_flag(swap_cluster_info* ci, cluster_flag flag) noexcept;
  bool cluster_is_usable(const swap_cluster_info* ci) const noexcept {
    return cluster_flags(ci) <= CLUSTER_FLAG_USABLE;
  }

  // Lists (device lock held).
  void list_add_tail(cluster_flag list, uint32_t idx) noexcept;
  void list_del(cluster_flag list, uint32_t idx) noexcept;
  // A cluster's links. Swapon's free list is not written out: a link never stored (0 in the
  // lazily zeroed arrays) is the cluster's neighbour in that initial order; a stored one is the
  // index + 1, or link_nil. Every process of `uswap run` makes a swap area sized at twice the
  // RAM, and most never use more than a few of its clusters.
  static constexpr uint32_t link_nil = UINT32_MAX;
  uint32_t next_of(uint32_t idx) const noexcept {
    const uint32_t s = list_next_[idx];
    return s == 0 ? initial_free_neighbour(idx, +1) : s == link_nil ? nil : s - 1;
  }
  uint32_t prev_of(uint32_t idx) const noexcept {
    const uint32_t s = list_prev_[idx];
    return s == 0 ? initial_free_neighbour(idx, -1) : s == link_nil ? nil : s - 1;
  }
  static uint32_t encode_link(uint32_t v) noexcept { return v == nil ? link_nil : v + 1; }
  // The seed's free-list order (the constructor says why): position p is cluster
  // (p % rows) * SWAP_CLUSTER_COLS + p / rows.
  uint32_t order_position(uint32_t idx) const noexcept;
  uint32_t order_cluster(uint64_t p) const noexcept;
  bool initially_free(uint32_t idx) const noexcept;
  // The next (dir +1) or previous (-1) initially free cluster in that order, or nil.
  uint32_t initial_free_neighbour(uint32_t idx, int dir) const noexcept;
  // Moves a locked cluster to `list` and sets its flag; takes the device lock in percpu mode.
  void move_cluster(swap_cluster_info* ci, cluster_flag list) noexcept;
  // Takes the first cluster of `list` that can be locked off the list, returning it locked
  // (global: unlocked, under the device lock). *contended: a member was skipped as locked.
  // With `freer` set (the NONFULL list's first look), only a cluster whose freer tag is clear or
  // equal to *freer is taken; others among the first SWAP_NONFULL_SCAN are untagged and rotated
  // to the tail.
  swap_cluster_info* isolate_lock_cluster(cluster_flag list, bool* contended,
                                          const uint64_t* freer = nullptr) noexcept;
  // Lock a list member for isolation in each mode's order; false if a percpu try-lock failed.
  bool lock_for_isolation(swap_cluster_info* ci, bool* contended) noexcept;
  // The freer tag of thread slot `cpu`, in cluster_info position.
  uint64_t freer_tag(unsigned cpu) const noexcept {
    return uint64_t{(cpu % nr_cpu_slots_) % 0xffff + 1} << CLUSTER_FREER_SHIFT;
  }
  // After allocation: to FRAG or FULL (or FREE when empty).
  void relocate_cluster(swap_cluster_info* ci) noexcept;
  // After a free: to FREE/DISCARD when empty, else to NONFULL.
  void free_cluster(swap_cluster_info* ci) noexcept;
  void partial_free_cluster(swap_cluster_info* ci) noexcept;

  // Allocates from a locked, usable cluster starting at `offset`; relocates and unlocks it and
  // updates the thread slot's next offset.
  int alloc_swap_scan_cluster(swap_cluster_info* ci, uint64_t offset, int n, swap_entry* out,
                              percpu_cluster& pc) noexcept;
  // The slot's last reference went: byte to 0, counts, freer tag, lists (cluster lock held).
  void swap_entry_free_locked(swap_cluster_info* ci, uint64_t offset) noexcept;
  void swap_range_alloc(uint64_t offset) noexcept;
  void inuse_add(percpu_cluster& pc, int64_t delta) noexcept;
  void swap_range_free(uint64_t offset, unsigned cpu) noexcept;

  // Count arithmetic with continuation (the byte's lock held).
  result<unsigned char> count_get(uint64_t offset, unsigned char count);
  unsigned char count_put(uint64_t offset, unsigned char count);

  void maybe_discard() {
    if (discard_nr_.load(std::memory_order_relaxed)) swap_do_scheduled_discard();
  }
  status check_offset(uint64_t offset, const char* op) const;

  const unsigned type_;
  const int prio_;
  const swap_lock_mode mode_;
  std::string name_;
  uint64_t max_ = 0;    // slots, header included
  uint64_t pages_ = 0;  // usable slots
  uint32_t nr_clusters_ = 0;
  const bool discard_;
  const bool count_continuation_;
  const bool percpu_inuse_;
  const bool freer_tag_;
  std::function<void(uint64_t, uint64_t)> discard_fn_;
  std::function<void(uint64_t)> slot_free_notify_;
  lock_class* cluster_lock_class_;
  std::vector<uint64_t> bad_pages_;

  zeroed_array<std::atomic<unsigned char>> swap_map_;
  // Page aligned (so SWAP_CLUSTER_COLS neighbours really share a cache line) and lazily zeroed.
  zeroed_array<swap_cluster_info> cluster_info_;
  std::unique_ptr<percpu_cluster[]> percpu_;
  unsigned nr_cpu_slots_;

  // The device lock and what only it protects: the lists and their links.
  alignas(cache_line_size) mutex lock_;
  cluster_list_head lists_[CLUSTER_FLAG_MAX];  // indexed by cluster_flag; [NONE] unused
  zeroed_array<uint32_t> list_next_;           // encoded links (next_of says how)
  zeroed_array<uint32_t> list_prev_;
  uint32_t order_rows_ = 0;
  std::vector<uint32_t> reserved_clusters_;  // sorted: not free at swapon (header, bad, padding)
  std::atomic<uint32_t> discard_nr_{0};  // clusters on the discard list, readable without lock

  // Written by every allocation and free (every SWAP_BATCH with percpu_inuse_): its own line.
  alignas(cache_line_size) std::atomic<uint64_t> inuse_pages_{0};
  alignas(cache_line_size) std::atomic<uint64_t> lowest_bit_{0};
  std::atomic<uint64_t> highest_bit_{0};
  std::atomic<uint64_t> clusters_freed_{0};
  std::atomic<uint64_t> clusters_discarded_{0};

  // Swap count continuation (the kernel's continuation pages): the count's higher part per
  // slot whose byte has COUNT_CONTINUED. total = low digit + higher * (SWAP_MAP_MAX + 1).
  mutable mutex cont_lock_;
  std::unordered_map<uint64_t, uint32_t> cont_;
};

}  // namespace uswap
