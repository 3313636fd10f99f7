// swap_area: see include/uswap/swap/swap_area.h for the data layout and the locking rules.
// The functions keep the names of their mm/swapfile.c counterparts.
#include "uswap/swap/swap_area.h"

#include "thread_slot.h"
#include "uswap/base/atomic_max.h"
#include "uswap/base/fault_inject.h"
#include "uswap/sync/lockdep.h"

#include <algorithm>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <new>
#include <thread>

namespace uswap {

namespace {

std::string fmt(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string fmt(const char* format, ...) {
  char buf[256];
  va_list ap;
  va_start(ap, format);
  std::vsnprintf(buf, sizeof buf, format, ap);
  va_end(ap);
  return buf;
}

}  // namespace

const char* to_string(cluster_flag flag) noexcept {
  switch (flag) {
    case CLUSTER_FLAG_NONE: return "none";
    case CLUSTER_FLAG_FREE: return "free";
    case CLUSTER_FLAG_NONFULL: return "nonfull";
    case CLUSTER_FLAG_FRAG: return "frag";
    case CLUSTER_FLAG_FULL: return "full";
    case CLUSTER_FLAG_DISCARD: return "discard";
    default: return "?";
  }
}

// ---------------------------------------------------------------------------------------------
// Construction (swapon's setup_swap_map_and_extents).

result<std::unique_ptr<swap_area>> swap_area::create(unsigned type, int priority,
                                                     swap_area_options opts,
                                                     const swap_area_locking& locking) {
  const std::string who = opts.name.empty() ? "swap" + std::to_string(type) : opts.name;
  if (opts.size_pages < 2)
    return error(EINVAL, "swapon " + who + ": size_pages " + std::to_string(opts.size_pages) +
                             " is too small (slot 0 is the header; at least 2 pages)");
  if (opts.size_pages > swp_offset_mask)
    return error(EINVAL, "swapon " + who + ": size_pages " + std::to_string(opts.size_pages) +
                             " does not fit a swap entry's offset");
  if (opts.size_pages / SWAPFILE_CLUSTER >= UINT32_MAX - 1)
    return error(EINVAL, "swapon " + who + ": too many clusters");
  if (opts.discard && !opts.discard_fn)
    return error(EINVAL, "swapon " + who + ": discard is on but discard_fn is not set");
  if (locking.nr_cpu_slots == 0)
    return error(EINVAL, "swapon " + who + ": nr_cpu_slots must be at least 1");
  std::vector<uint64_t> bad = opts.bad_pages;
  std::sort(bad.begin(), bad.end());
  for (size_t i = 0; i < bad.size(); ++i) {
    if (bad[i] == 0 || bad[i] >= opts.size_pages)
      return error(EINVAL, "swapon " + who + ": bad page " + std::to_string(bad[i]) +
                               " is outside 1.." + std::to_string(opts.size_pages - 1));
    if (i && bad[i] == bad[i - 1])
      return error(EINVAL, "swapon " + who + ": bad page " + std::to_string(bad[i]) +
                               " listed twice");
  }
  if (bad.size() + 1 >= opts.size_pages)
    return error(EINVAL, "swapon " + who + ": no usable slot (every slot is the header or bad)");
  opts.bad_pages = std::move(bad);
  opts.name = who;
  try {
    return std::unique_ptr<swap_area>(new swap_area(type, priority, std::move(opts), locking));
  } catch (const std::bad_alloc&) {
    return error(ENOMEM, "swapon " + who + ": no memory for swap_map and cluster_info");
  }
}

swap_area::swap_area(unsigned type, int priority, swap_area_options&& opts,
                     const swap_area_locking& locking)
    : type_(type),
      prio_(priority),
      mode_(locking.mode),
      name_(std::move(opts.name)),
      discard_(opts.discard),
      count_continuation_(opts.count_continuation),
      percpu_inuse_(locking.percpu_inuse_counter && locking.mode == swap_lock_mode::percpu),
      freer_tag_(locking.freer_tag),
      discard_fn_(std::move(opts.discard_fn)),
      slot_free_notify_(std::move(opts.slot_free_notify)),
      cluster_lock_class_(locking.cluster_lock_class),
      bad_pages_(std::move(opts.bad_pages)),
      nr_cpu_slots_(locking.nr_cpu_slots),
      lock_(locking.device_lock_class) {
  max_ = opts.size_pages;
  nr_clusters_ = static_cast<uint32_t>((max_ + SWAPFILE_CLUSTER - 1) / SWAPFILE_CLUSTER);
  // Zero-filled on demand (swapon's vzalloc of swap_map): a free slot is 0.
  if (!should_fail(fault_point::swap_map))
    swap_map_ = zeroed_array<std::atomic<unsigned char>>(max_);
  if (!swap_map_) throw std::bad_alloc();
  // An injected refusal of cluster_info (or of the lists after it) unwinds as a real one would.
  if (should_fail(fault_point::cluster_info)) throw std::bad_alloc();
  // An all-zero word is a free, empty cluster (the layout's flag encoding): nothing to write for
  // the clusters this area never uses, which in a pager's swap area sized at twice the RAM is
  // nearly all of them.
  cluster_info_ = zeroed_array<swap_cluster_info>(nr_clusters_);
  if (!cluster_info_) throw std::bad_alloc();
  percpu_.reset(new percpu_cluster[nr_cpu_slots_]);
  // Links never stored read as the free list swapon makes (next_of): only the clusters that
  // start on another list are linked here.
  list_next_ = zeroed_array<uint32_t>(nr_clusters_);
  list_prev_ = zeroed_array<uint32_t>(nr_clusters_);
  if (!list_next_ || !list_prev_) throw std::bad_alloc();

  // Slots that are never allocated count in their cluster (inc_cluster_info_page at swapon):
  // the header, the bad pages, and the slots past the end of the last cluster.
  auto reserve = [&](uint32_t idx, uint64_t n) {
    std::atomic<uint64_t>& d = cluster_info_[idx].data;
    const uint64_t count = ci_count(d.load(std::memory_order_relaxed)) + n;
    const cluster_flag f = count == SWAPFILE_CLUSTER ? CLUSTER_FLAG_FULL : CLUSTER_FLAG_NONFULL;
    d.store((count << CLUSTER_COUNT_SHIFT) | cluster_list_bits(f), std::memory_order_relaxed);
    reserved_clusters_.push_back(idx);
  };
  swap_map_[0].store(SWAP_MAP_BAD, std::memory_order_relaxed);
  reserve(0, 1);
  for (uint64_t b : bad_pages_) {
    swap_map_[b].store(SWAP_MAP_BAD, std::memory_order_relaxed);
    reserve(static_cast<uint32_t>(b / SWAPFILE_CLUSTER), 1);
  }
  const uint64_t rounded = uint64_t{nr_clusters_} * SWAPFILE_CLUSTER;
  if (rounded > max_) reserve(nr_clusters_ - 1, rounded - max_);
  pages_ = max_ - 1 - bad_pages_.size();
  std::sort(reserved_clusters_.begin(), reserved_clusters_.end());
  reserved_clusters_.erase(std::unique(reserved_clusters_.begin(), reserved_clusters_.end()),
                           reserved_clusters_.end());

  // The seed's free list order: column by column (0, 8, 16, ..., 1, 9, 17, ...), so that the
  // SWAP_CLUSTER_COLS clusters whose cluster_info share a cache line are a whole column
  // (nr_clusters / SWAP_CLUSTER_COLS clusters) apart in allocation order. Clusters already
  // holding header or bad slots go to the list matching their count instead, so every cluster
  // is on exactly one list. The free list is implicit (next_of); the others are written out.
  order_rows_ = (nr_clusters_ + SWAP_CLUSTER_COLS - 1) / SWAP_CLUSTER_COLS;
  const uint64_t positions = uint64_t{order_rows_} * SWAP_CLUSTER_COLS;
  cluster_list_head& free_list = lists_[CLUSTER_FLAG_FREE];
  for (uint64_t p = 0; p < positions && free_list.head == nil; ++p)
    if (const uint32_t idx = order_cluster(p); idx < nr_clusters_ && initially_free(idx))
      free_list.head = idx;
  for (uint64_t p = positions; p-- > 0 && free_list.tail == nil;)
    if (const uint32_t idx = order_cluster(p); idx < nr_clusters_ && initially_free(idx))
      free_list.tail = idx;
  free_list.nr = nr_clusters_ - static_cast<uint32_t>(reserved_clusters_.size());
  std::vector<std::pair<uint32_t, uint32_t>> others;  // (order position, cluster)
  for (uint32_t idx : reserved_clusters_) others.emplace_back(order_position(idx), idx);
  std::sort(others.begin(), others.end());
  for (const auto& [pos, idx] : others)
    list_add_tail(ci_flag(cluster_info_[idx].data.load(std::memory_order_relaxed)), idx);
  // lowest_bit / highest_bit bound the free slots.
  uint64_t lo = 1, hi = max_ - 1;
  while (lo < max_ && swap_map_[lo].load(std::memory_order_relaxed)) ++lo;
  while (hi > 0 && swap_map_[hi].load(std::memory_order_relaxed)) --hi;
  lowest_bit_.store(lo, std::memory_order_relaxed);
  highest_bit_.store(hi, std::memory_order_relaxed);
}

swap_area::~swap_area() = default;

// ---------------------------------------------------------------------------------------------
// Locks and cluster_info fields.

swap_cluster_info* swap_area::lock_cluster(uint64_t offset) noexcept {
  swap_cluster_info* ci = cluster_of(offset);
  if (mode_ != swap_lock_mode::global) cluster_lock::lock(ci->data, cluster_lock_class_);
  return ci;
}

void swap_area::unlock_cluster(swap_cluster_info* ci) noexcept {
  if (mode_ != swap_lock_mode::global) cluster_lock::unlock(ci->data);
}

swap_cluster_info* swap_area::lock_cluster_or_swap_info(uint64_t offset) noexcept {
  if (mode_ == swap_lock_mode::global) {
    dev_lock();
    return cluster_of(offset);
  }
  return lock_cluster(offset);
}

void swap_area::unlock_cluster_or_swap_info(swap_cluster_info* ci) noexcept {
  if (mode_ == swap_lock_mode::global)
    dev_unlock();
  else
    unlock_cluster(ci);
}

void swap_area::assert_cluster_locked(const swap_cluster_info* ci) const noexcept {
  if (mode_ == swap_lock_mode::global)
    USWAP_ASSERT_HELD(lock_);
  else
    USWAP_ASSERT_HELD(ci->data);
}

void swap_area::assert_lists_locked_by_caller() const noexcept {
  if (mode_ != swap_lock_mode::percpu) USWAP_ASSERT_HELD(lock_);
}

// The word is changed with atomic read-modify-writes that preserve the lock bits, so a waiter
// setting the waiters bit concurrently is never lost (bit_lock's contract). The count moves by
// one fetch_add: it stays within 0..SWAPFILE_CLUSTER, so the addition never carries out of its
// field.
unsigned swap_area::add_cluster_count(swap_cluster_info* ci, int delta) noexcept {
  const uint64_t d = static_cast<uint64_t>(static_cast<int64_t>(delta)) << CLUSTER_COUNT_SHIFT;
  return ci_count(ci->data.fetch_add(d, std::memory_order_relaxed) + d);
}

void swap_area::set_cluster_flag(swap_cluster_info* ci, cluster_flag flag) noexcept {
  cluster_lock::update(ci->data, CLUSTER_LIST_MASK, cluster_list_bits(flag));
}

// ---------------------------------------------------------------------------------------------
// Cluster lists (device lock held).

uint32_t swap_area::order_position(uint32_t idx) const noexcept {
  return (idx % SWAP_CLUSTER_COLS) * order_rows_ + idx / SWAP_CLUSTER_COLS;
}

uint32_t swap_area::order_cluster(uint64_t p) const noexcept {
  return static_cast<uint32_t>((p % order_rows_) * SWAP_CLUSTER_COLS + p / order_rows_);
}

bool swap_area::initially_free(uint32_t idx) const noexcept {
  return !std::binary_search(reserved_clusters_.begin(), reserved_clusters_.end(), idx);
}

uint32_t swap_area::initial_free_neighbour(uint32_t idx, int dir) const noexcept {
  const int64_t positions = int64_t{order_rows_} * SWAP_CLUSTER_COLS;
  for (int64_t p = int64_t{order_position(idx)} + dir; p >= 0 && p < positions; p += dir)
    if (const uint32_t n = order_cluster(static_cast<uint64_t>(p));
        n < nr_clusters_ && initially_free(n))
      return n;
  return nil;
}

void swap_area::list_add_tail(cluster_flag list, uint32_t idx) noexcept {
  cluster_list_head& l = lists_[list];
  list_next_[idx] = encode_link(nil);
  list_prev_[idx] = encode_link(l.tail);
  if (l.tail == nil)
    l.head = idx;
  else
    list_next_[l.tail] = encode_link(idx);
  l.tail = idx;
  l.nr++;
  if (list == CLUSTER_FLAG_DISCARD) discard_nr_.store(l.nr, std::memory_order_relaxed);
}

void swap_area::list_del(cluster_flag list, uint32_t idx) noexcept {
  cluster_list_head& l = lists_[list];
  const uint32_t prev = prev_of(idx), next = next_of(idx);
  if (prev == nil)
    l.head = next;
  else
    list_next_[prev] = encode_link(next);
  if (next == nil)
    l.tail = prev;
  else
    list_prev_[next] = encode_link(prev);
  list_next_[idx] = list_prev_[idx] = encode_link(nil);
  l.nr--;
  if (list == CLUSTER_FLAG_DISCARD) discard_nr_.store(l.nr, std::memory_order_relaxed);
}

void swap_area::move_cluster(swap_cluster_info* ci, cluster_flag list) noexcept {
  assert_cluster_locked(ci);
  assert_lists_locked_by_caller();
  const uint32_t idx = cluster_index(ci);
  const cluster_flag old = cluster_flags(ci);
  // Only the percpu mode reaches here without the device lock: it nests it in the cluster lock.
  if (mode_ == swap_lock_mode::percpu) dev_lock();
  if (old != CLUSTER_FLAG_NONE) list_del(old, idx);
  list_add_tail(list, idx);
  if (mode_ == swap_lock_mode::percpu) dev_unlock();
  set_cluster_flag(ci, list);
}

bool swap_area::lock_for_isolation(swap_cluster_info* ci, bool* contended) noexcept {
  if (mode_ == swap_lock_mode::percpu) {
    // Cluster locks are taken before the device lock elsewhere in this mode: only a try-lock
    // is safe here. A locked cluster is busy with its owner; skip it.
    if (!cluster_lock::try_lock(ci->data, cluster_lock_class_)) {
      *contended = true;
      return false;
    }
  } else if (mode_ == swap_lock_mode::cluster) {
    cluster_lock::lock(ci->data, cluster_lock_class_);  // si->lock -> ci->lock
  }
  return true;
}

swap_cluster_info* swap_area::isolate_lock_cluster(cluster_flag list, bool* contended,
                                                   const uint64_t* freer) noexcept {
  assert_lists_locked_by_caller();
  swap_cluster_info* found = nullptr;
  if (mode_ == swap_lock_mode::percpu) dev_lock();
  // Rotating a passed-over cluster to the tail would bring it round again within one call:
  // look at no more members than the list had when we started.
  uint32_t budget = freer ? std::min<uint32_t>(lists_[list].nr, SWAP_NONFULL_SCAN) : UINT32_MAX;
  for (uint32_t idx = lists_[list].head, next; idx != nil && budget; idx = next, --budget) {
    next = next_of(idx);
    swap_cluster_info* ci = &cluster_info_[idx];
    if (!lock_for_isolation(ci, contended)) continue;
    if (freer) {
      const uint64_t tag = ci->data.load(std::memory_order_relaxed) & CLUSTER_FREER_MASK;
      if (tag != 0 && tag != *freer) {
        // Another thread slot freed into it since the last look: pass it over this once.
        cluster_lock::update(ci->data, CLUSTER_FREER_MASK, 0);
        list_del(list, idx);
        list_add_tail(list, idx);
        unlock_cluster(ci);
        continue;
      }
    }
    list_del(list, idx);
    set_cluster_flag(ci, CLUSTER_FLAG_NONE);
    found = ci;
    break;
  }
  if (mode_ == swap_lock_mode::percpu) dev_unlock();
  return found;
}

void swap_area::relocate_cluster(swap_cluster_info* ci) noexcept {
  assert_cluster_locked(ci);
  const cluster_flag f = cluster_flags(ci);
  if (f == CLUSTER_FLAG_DISCARD) return;  // off-list or on the discard list until discarded
  const unsigned count = cluster_count(ci);
  if (count == 0) {
    if (f != CLUSTER_FLAG_FREE) free_cluster(ci);
  } else if (count != SWAPFILE_CLUSTER) {
    if (f != CLUSTER_FLAG_FRAG) move_cluster(ci, CLUSTER_FLAG_FRAG);
  } else if (f != CLUSTER_FLAG_FULL) {
    move_cluster(ci, CLUSTER_FLAG_FULL);
  }
}

void swap_area::free_cluster(swap_cluster_info* ci) noexcept {
  assert_cluster_locked(ci);
  clusters_freed_.fetch_add(1, std::memory_order_relaxed);
  // With discard, the cluster may not be allocated again before the backing store dropped it.
  move_cluster(ci, discard_ ? CLUSTER_FLAG_DISCARD : CLUSTER_FLAG_FREE);
}

void swap_area::partial_free_cluster(swap_cluster_info* ci) noexcept {
  assert_cluster_locked(ci);
  if (cluster_flags(ci) != CLUSTER_FLAG_NONFULL) move_cluster(ci, CLUSTER_FLAG_NONFULL);
}

// ---------------------------------------------------------------------------------------------
// Allocation.

void swap_area::swap_range_alloc(uint64_t offset) noexcept {
  // The bounds only move past a slot that sat exactly on them (as the kernel's
  // swap_range_alloc); a concurrent free that lowers them makes the compare-exchange fail.
  uint64_t lo = lowest_bit_.load(std::memory_order_relaxed);
  if (lo == offset) lowest_bit_.compare_exchange_strong(lo, offset + 1, std::memory_order_relaxed);
  uint64_t hi = highest_bit_.load(std::memory_order_relaxed);
  if (hi == offset) highest_bit_.compare_exchange_strong(hi, offset - 1, std::memory_order_relaxed);
}

uint64_t swap_area::inuse_pages() const noexcept {
  int64_t n = static_cast<int64_t>(inuse_pages_.load(std::memory_order_relaxed));
  if (percpu_inuse_)
    for (unsigned i = 0; i < nr_cpu_slots_; ++i)
      n += percpu_[i].inuse_delta.load(std::memory_order_relaxed);
  return n > 0 ? static_cast<uint64_t>(n) : 0;
}

bool swap_area::full() const noexcept {
  const uint64_t shared = inuse_pages_.load(std::memory_order_relaxed);
  // Unfolded deltas are below SWAP_BATCH in size per thread slot.
  const uint64_t slack = percpu_inuse_ ? uint64_t{nr_cpu_slots_} * SWAP_BATCH : 0;
  if (shared + slack < pages_) return false;
  return inuse_pages() >= pages_;
}

// percpu_counter_add with batch SWAP_BATCH: the shared line is written once per SWAP_BATCH
// allocations or frees of a thread slot rather than by every one.
void swap_area::inuse_add(percpu_cluster& pc, int64_t delta) noexcept {
  if (!percpu_inuse_) {
    inuse_pages_.fetch_add(static_cast<uint64_t>(delta), std::memory_order_relaxed);
    return;
  }
  const int64_t v = pc.inuse_delta.fetch_add(delta, std::memory_order_relaxed) + delta;
  if (v >= static_cast<int64_t>(SWAP_BATCH) || v <= -static_cast<int64_t>(SWAP_BATCH)) {
    const int64_t folded = pc.inuse_delta.exchange(0, std::memory_order_relaxed);
    inuse_pages_.fetch_add(static_cast<uint64_t>(folded), std::memory_order_relaxed);
  }
}

void swap_area::swap_range_free(uint64_t offset, unsigned cpu) noexcept {
  fetch_min(lowest_bit_, offset);
  fetch_max(highest_bit_, offset);
  inuse_add(percpu_[cpu % nr_cpu_slots_], -1);
  if (slot_free_notify_) slot_free_notify_(offset);
}

int swap_area::alloc_swap_scan_cluster(swap_cluster_info* ci, uint64_t offset, int n,
                                       swap_entry* out, percpu_cluster& pc) noexcept {
  // A locked cluster, and in global and cluster modes the device lock (allocation runs under it).
  assert_cluster_locked(ci);
  assert_lists_locked_by_caller();
  const uint64_t start = uint64_t{cluster_index(ci)} * SWAPFILE_CLUSTER;
  const uint64_t end = std::min(start + SWAPFILE_CLUSTER, max_);
  int k = 0;
  uint64_t o = std::max(offset, start);
  for (; o < end && k < n; ++o) {
    if (swap_map_[o].load(std::memory_order_relaxed) != 0) continue;
    swap_map_[o].store(SWAP_HAS_CACHE, std::memory_order_relaxed);
    swap_range_alloc(o);
    out[k++] = swp_entry(type_, o);
  }
  const unsigned count = k ? add_cluster_count(ci, k) : cluster_count(ci);
  if (k) inuse_add(pc, k);
  pc.next.store(o < end && count < SWAPFILE_CLUSTER ? o : 0, std::memory_order_relaxed);
  relocate_cluster(ci);
  unlock_cluster(ci);
  return k;
}

int swap_area::scan_swap_map_slots(unsigned cpu, int n, swap_entry* out) {
  if (n <= 0) return 0;
  percpu_cluster& pc = percpu_[cpu % nr_cpu_slots_];
  // global and cluster: allocation runs under the device lock (4.11's scan_swap_map_slots).
  const bool hold_dev = mode_ != swap_lock_mode::percpu;
  int got = 0;
  int busy_retries = 0;
  if (hold_dev) dev_lock();
  while (got < n) {
    // Fast path: this thread slot's current cluster.
    uint64_t off = pc.next.load(std::memory_order_relaxed);
    if (off != 0 && off < max_) {
      swap_cluster_info* ci = lock_cluster(off);
      if (cluster_is_usable(ci)) {
        if (cluster_count(ci) == 0) off = uint64_t{cluster_index(ci)} * SWAPFILE_CLUSTER;
        got += alloc_swap_scan_cluster(ci, off, n - got, out + got, pc);
        continue;
      }
      unlock_cluster(ci);
      pc.next.store(0, std::memory_order_relaxed);
    }
    // A new cluster: partly used ones first, to keep free clusters whole, but not one another
    // thread slot is freeing into (the freer tag, header comment); then a free one; then any
    // partly used one.
    bool contended = false;
    const uint64_t me = freer_tag(cpu);
    swap_cluster_info* ci =
        isolate_lock_cluster(CLUSTER_FLAG_NONFULL, &contended, freer_tag_ ? &me : nullptr);
    if (!ci) ci = isolate_lock_cluster(CLUSTER_FLAG_FREE, &contended);
    // Without the tag the first look already took any nonfull cluster it could lock.
    if (!ci && freer_tag_) ci = isolate_lock_cluster(CLUSTER_FLAG_NONFULL, &contended);
    if (!ci) ci = isolate_lock_cluster(CLUSTER_FLAG_FRAG, &contended);
    if (ci) {
      got += alloc_swap_scan_cluster(ci, uint64_t{cluster_index(ci)} * SWAPFILE_CLUSTER,
                                     n - got, out + got, pc);
      continue;
    }
    // Clusters waiting for discard become free once discarded: do it now (the kernel's
    // swap_do_scheduled_discard from the allocator).
    if (discard_nr_.load(std::memory_order_relaxed)) {
      if (hold_dev) dev_unlock();
      swap_do_scheduled_discard();
      if (hold_dev) dev_lock();
      continue;
    }
    // percpu: every candidate was locked by its user for a moment; look again a few times
    // rather than report a full area that is not full.
    if (contended && ++busy_retries < 64) {
      std::this_thread::yield();
      continue;
    }
    break;
  }
  if (hold_dev) dev_unlock();
  return got;
}

// ---------------------------------------------------------------------------------------------
// Counts: __swap_duplicate, swap_entry_put (__swap_entry_free), swapcache_free_entries.

status swap_area::check_offset(uint64_t offset, const char* op) const {
  if (offset == 0 || offset >= max_)
    return error(EINVAL, fmt("%s: bad swap offset %" PRIu64 " in %s (valid 1..%" PRIu64 ")", op,
                             offset, name_.c_str(), max_ - 1));
  return {};
}

result<unsigned char> swap_area::count_get(uint64_t offset, unsigned char count) {
  assert_cluster_locked(&cluster_info_[offset / SWAPFILE_CLUSTER]);
  const unsigned char low = count & static_cast<unsigned char>(~COUNT_CONTINUED);
  if (low < SWAP_MAP_MAX) return static_cast<unsigned char>(count + 1);
  if (!count_continuation_)
    return error(ENOMEM, fmt("swap_duplicate: swap count of %s offset %" PRIu64
                             " would pass SWAP_MAP_MAX (%u) and count continuation is off",
                             name_.c_str(), offset, SWAP_MAP_MAX));
  // Carry into the continuation: the low digit wraps to 0.
  std::lock_guard g(cont_lock_);
  try {
    // The continuation is more of swap_map (the kernel allocates it a page at a time).
    if (should_fail(fault_point::swap_map)) throw std::bad_alloc();
    uint32_t& higher = cont_[offset];
    if (higher == UINT32_MAX)
      return error(EOVERFLOW, fmt("swap_duplicate: swap count of %s offset %" PRIu64
                                  " exhausted its continuation",
                                  name_.c_str(), offset));
    ++higher;
  } catch (const std::bad_alloc&) {
    return error(ENOMEM, fmt("swap_duplicate: no memory for the count continuation of %s "
                             "offset %" PRIu64,
                             name_.c_str(), offset));
  }
  return COUNT_CONTINUED;
}

unsigned char swap_area::count_put(uint64_t offset, unsigned char count) {
  assert_cluster_locked(&cluster_info_[offset / SWAPFILE_CLUSTER]);
  const unsigned char low = count & static_cast<unsigned char>(~COUNT_CONTINUED);
  const unsigned char cont = count & COUNT_CONTINUED;
  if (low > 0) return static_cast<unsigned char>((low - 1) | cont);
  // Borrow from the continuation (count == COUNT_CONTINUED, the caller checked it is set).
  std::lock_guard g(cont_lock_);
  auto it = cont_.find(offset);
  const uint32_t left = --it->second;
  if (left == 0) cont_.erase(it);
  return static_cast<unsigned char>(SWAP_MAP_MAX | (left ? COUNT_CONTINUED : 0));
}

status swap_area::swap_duplicate(uint64_t offset, unsigned char usage) {
  const char* op = usage == SWAP_HAS_CACHE ? "swapcache_prepare" : "swap_duplicate";
  if (status st = check_offset(offset, op); !st.ok()) return st;
  swap_cluster_info* ci = lock_cluster_or_swap_info(offset);
  const unsigned char v = swap_map_[offset].load(std::memory_order_relaxed);
  unsigned char has_cache = v & SWAP_HAS_CACHE;
  unsigned char count = uswap::swap_count(v);
  status st;
  if (count == SWAP_MAP_BAD) {
    st = error(EINVAL, fmt("%s: %s offset %" PRIu64 " is a bad slot", op, name_.c_str(), offset));
  } else if (usage == SWAP_HAS_CACHE) {
    if (!has_cache && count)
      has_cache = SWAP_HAS_CACHE;
    else if (has_cache)
      st = error(EEXIST, fmt("swapcache_prepare: %s offset %" PRIu64
                             " already has SWAP_HAS_CACHE",
                             name_.c_str(), offset));
    else
      st = error(ENOENT, fmt("swapcache_prepare: %s offset %" PRIu64 " has no users",
                             name_.c_str(), offset));
  } else if (count || has_cache) {
    result<unsigned char> c = count_get(offset, count);
    if (c.ok())
      count = *c;
    else
      st = c.error();
  } else {
    st = error(ENOENT, fmt("swap_duplicate: %s offset %" PRIu64 " is not in use",
                           name_.c_str(), offset));
  }
  if (st.ok()) swap_map_[offset].store(count | has_cache, std::memory_order_relaxed);
  unlock_cluster_or_swap_info(ci);
  return st;
}

void swap_area::swap_entry_free_locked(swap_cluster_info* ci, uint64_t offset) noexcept {
  assert_cluster_locked(ci);
  const unsigned cpu = swap_detail::this_thread_slot();
  swap_map_[offset].store(0, std::memory_order_relaxed);
  const unsigned count = add_cluster_count(ci, -1);
  // Re-tag only when the tag changes: a freer draining a cluster writes the word once.
  if (freer_tag_) {
    const uint64_t tag = freer_tag(cpu);
    if ((ci->data.load(std::memory_order_relaxed) & CLUSTER_FREER_MASK) != tag)
      cluster_lock::update(ci->data, CLUSTER_FREER_MASK, tag);
  }
  swap_range_free(offset, cpu);
  if (count == 0)
    free_cluster(ci);
  else
    partial_free_cluster(ci);
}

result<swap_put_result> swap_area::swap_entry_put(uint64_t offset, unsigned char usage,
                                                  bool defer_free) {
  const char* op = usage == SWAP_HAS_CACHE ? "put_swap_page" : "swap_free";
  if (status st = check_offset(offset, op); !st.ok()) return st;
  swap_cluster_info* ci = lock_cluster_or_swap_info(offset);
  const unsigned char v = swap_map_[offset].load(std::memory_order_relaxed);
  unsigned char has_cache = v & SWAP_HAS_CACHE;
  unsigned char count = uswap::swap_count(v);
  status st;
  if (v == 0) {
    st = error(ENOENT, fmt("%s: %s offset %" PRIu64 " is not in use", op, name_.c_str(), offset));
  } else if (count == SWAP_MAP_BAD) {
    st = error(EINVAL, fmt("%s: %s offset %" PRIu64 " is a bad slot", op, name_.c_str(), offset));
  } else if (usage == SWAP_HAS_CACHE) {
    if (!has_cache)
      st = error(ENOENT, fmt("put_swap_page: %s offset %" PRIu64 " has no SWAP_HAS_CACHE",
                             name_.c_str(), offset));
    has_cache = 0;
  } else if (count == 0) {
    st = error(ENOENT, fmt("swap_free: %s offset %" PRIu64 " has no swap count left",
                           name_.c_str(), offset));
  } else {
    count = count_put(offset, count);
  }
  if (!st.ok()) {
    unlock_cluster_or_swap_info(ci);
    return st;
  }
  swap_put_result r;
  r.usage = count | has_cache;
  if (r.usage) {
    swap_map_[offset].store(r.usage, std::memory_order_relaxed);
    unlock_cluster_or_swap_info(ci);
    return r;
  }
  // The last reference went. In cluster mode the release needs the device lock, which may not
  // be taken inside a cluster lock: keep the slot reserved and let swapcache_free_entries free
  // it under si->lock -> ci->lock, as 4.11 did through free_swap_slot.
  if (defer_free || mode_ == swap_lock_mode::cluster) {
    swap_map_[offset].store(SWAP_HAS_CACHE, std::memory_order_relaxed);
    unlock_cluster_or_swap_info(ci);
    r.deferred = true;
    return r;
  }
  swap_entry_free_locked(ci, offset);
  unlock_cluster_or_swap_info(ci);
  maybe_discard();
  return r;
}

void swap_area::swapcache_free_entries(uint64_t* offsets, size_t n) {
  if (n == 0) return;
  std::sort(offsets, offsets + n);
  const bool hold_dev = mode_ != swap_lock_mode::percpu;
  if (hold_dev) dev_lock();
  swap_cluster_info* ci = nullptr;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t off = offsets[i];
    if (off == 0 || off >= max_) std::abort();  // only offsets this area reserved come here
    if (cluster_of(off) != ci) {
      if (ci) unlock_cluster(ci);
      ci = lock_cluster(off);
    }
    // A reserved slot is SWAP_HAS_CACHE with no count: nobody can have taken a reference
    // since, because swapcache_prepare refuses SWAP_HAS_CACHE slots and swap_duplicate
    // requires a count or a cache reference owned by the caller.
    if (swap_map_[off].load(std::memory_order_relaxed) != SWAP_HAS_CACHE) std::abort();
    swap_entry_free_locked(ci, off);
  }
  if (ci) unlock_cluster(ci);
  if (hold_dev) dev_unlock();
  maybe_discard();
}

result<uint64_t> swap_area::swap_count(uint64_t offset) const {
  if (status st = check_offset(offset, "swap_count"); !st.ok()) return st;
  auto* self = const_cast<swap_area*>(this);  // locks are not logically part of the state
  swap_cluster_info* ci = self->lock_cluster_or_swap_info(offset);
  const unsigned char v = swap_map_[offset].load(std::memory_order_relaxed);
  uint64_t total = 0;
  if (uswap::swap_count(v) != SWAP_MAP_BAD) {
    total = v & SWAP_MAP_BAD;  // the low digit: bits 0..5
    if (v & COUNT_CONTINUED) {
      std::lock_guard g(cont_lock_);
      auto it = cont_.find(offset);
      if (it != cont_.end()) total += uint64_t{it->second} * (SWAP_MAP_MAX + 1);
    }
  }
  self->unlock_cluster_or_swap_info(ci);
  return total;
}

// ---------------------------------------------------------------------------------------------
// Discard.

unsigned swap_area::swap_do_scheduled_discard() {
  unsigned done = 0;
  for (;;) {
    // Take the cluster off the discard list under the device lock: whoever takes it is the only
    // one to discard it. It keeps CLUSTER_FLAG_DISCARD, so no allocator uses it meanwhile.
    dev_lock();
    const uint32_t idx = lists_[CLUSTER_FLAG_DISCARD].head;
    if (idx != nil) list_del(CLUSTER_FLAG_DISCARD, idx);
    dev_unlock();
    if (idx == nil) break;
    const uint64_t start = uint64_t{idx} * SWAPFILE_CLUSTER;
    discard_fn_(start, std::min<uint64_t>(SWAPFILE_CLUSTER, max_ - start));
    clusters_discarded_.fetch_add(1, std::memory_order_relaxed);
    ++done;
    // Back to the free list, with each mode's lock order.
    if (mode_ != swap_lock_mode::percpu) dev_lock();
    swap_cluster_info* ci = lock_cluster(start);
    set_cluster_flag(ci, CLUSTER_FLAG_NONE);
    move_cluster(ci, CLUSTER_FLAG_FREE);
    unlock_cluster(ci);
    if (mode_ != swap_lock_mode::percpu) dev_unlock();
  }
  return done;
}

// ---------------------------------------------------------------------------------------------
// Statistics and the invariant checker.

swap_area_stats swap_area::stats() const {
  swap_area_stats s;
  s.type = type_;
  s.priority = prio_;
  s.max = max_;
  s.pages = pages_;
  s.inuse_pages = inuse_pages();
  s.lowest_bit = lowest_bit();
  s.highest_bit = highest_bit();
  s.nr_clusters = nr_clusters_;
  s.clusters_freed = clusters_freed_.load(std::memory_order_relaxed);
  s.clusters_discarded = clusters_discarded_.load(std::memory_order_relaxed);
  auto* self = const_cast<swap_area*>(this);
  self->dev_lock();
  s.free_clusters = lists_[CLUSTER_FLAG_FREE].nr;
  s.nonfull_clusters = lists_[CLUSTER_FLAG_NONFULL].nr;
  s.frag_clusters = lists_[CLUSTER_FLAG_FRAG].nr;
  s.full_clusters = lists_[CLUSTER_FLAG_FULL].nr;
  s.discard_clusters = lists_[CLUSTER_FLAG_DISCARD].nr;
  self->dev_unlock();
  {
    std::lock_guard g(cont_lock_);
    s.continued_slots = cont_.size();
  }
  return s;
}

std::vector<uint32_t> swap_area::cluster_list(cluster_flag list) const {
  std::vector<uint32_t> out;
  if (list == CLUSTER_FLAG_NONE || list >= CLUSTER_FLAG_MAX) return out;
  auto* self = const_cast<swap_area*>(this);
  self->dev_lock();
  for (uint32_t idx = lists_[list].head; idx != nil && out.size() <= nr_clusters_;
       idx = next_of(idx))
    out.push_back(idx);
  self->dev_unlock();
  return out;
}

status swap_area::check_invariants() const {
  std::string problems;
  unsigned nproblems = 0;
  auto report = [&](const std::string& what) {
    if (++nproblems <= 12) problems += "\n  " + what;
  };
  auto* self = const_cast<swap_area*>(this);
  self->dev_lock();
  std::lock_guard cg(cont_lock_);

  // Lists: well-formed, flags match, counts match the kind of list.
  std::vector<uint8_t> on_list(nr_clusters_, CLUSTER_FLAG_NONE);
  for (int l = CLUSTER_FLAG_FREE; l < CLUSTER_FLAG_MAX; ++l) {
    const auto list = static_cast<cluster_flag>(l);
    uint32_t n = 0, prev = nil;
    for (uint32_t idx = lists_[l].head; idx != nil; idx = next_of(idx)) {
      if (idx >= nr_clusters_) {
        report(fmt("%s list: link to cluster %u past the end", to_string(list), idx));
        break;
      }
      if (on_list[idx] != CLUSTER_FLAG_NONE) {
        report(fmt("cluster %u is on the %s list and the %s list (or a cycle)", idx,
                   to_string(static_cast<cluster_flag>(on_list[idx])), to_string(list)));
        break;
      }
      on_list[idx] = static_cast<uint8_t>(l);
      if (prev_of(idx) != prev)
        report(fmt("%s list: cluster %u prev link %u, expected %u", to_string(list), idx,
                   prev_of(idx), prev));
      const uint64_t d = cluster_info_[idx].data.load(std::memory_order_relaxed);
      if (ci_flag(d) != list)
        report(fmt("cluster %u is on the %s list but flagged %s", idx, to_string(list),
                   to_string(ci_flag(d))));
      const unsigned c = ci_count(d);
      const bool count_ok = (list == CLUSTER_FLAG_FREE || list == CLUSTER_FLAG_DISCARD) ? c == 0
                            : list == CLUSTER_FLAG_FULL ? c == SWAPFILE_CLUSTER
                                                        : c > 0 && c < SWAPFILE_CLUSTER;
      if (!count_ok)
        report(fmt("cluster %u on the %s list has count %u", idx, to_string(list), c));
      prev = idx;
      ++n;
    }
    if (lists_[l].tail != prev)
      report(fmt("%s list: tail %u, last member %u", to_string(list), lists_[l].tail, prev));
    if (lists_[l].nr != n)
      report(fmt("%s list: nr %u, %u members", to_string(list), lists_[l].nr, n));
  }

  // Clusters and slots.
  uint64_t inuse = 0;
  uint64_t lo = lowest_bit(), hi = highest_bit();
  for (uint32_t idx = 0; idx < nr_clusters_; ++idx) {
    const uint64_t d = cluster_info_[idx].data.load(std::memory_order_relaxed);
    if (d & cluster_lock::lock_mask) report(fmt("cluster %u: lock bits set while quiescent", idx));
    if (ci_flag(d) != on_list[idx])
      report(fmt("cluster %u flagged %s but on the %s list", idx, to_string(ci_flag(d)),
                 to_string(static_cast<cluster_flag>(on_list[idx]))));
    const uint64_t start = uint64_t{idx} * SWAPFILE_CLUSTER;
    const uint64_t end = std::min(start + SWAPFILE_CLUSTER, max_);
    unsigned used = static_cast<unsigned>(start + SWAPFILE_CLUSTER - end);  // past the end
    for (uint64_t o = start; o < end; ++o) {
      const unsigned char v = swap_map_[o].load(std::memory_order_relaxed);
      if (v == 0) {
        if (o < lo || o > hi)
          report(fmt("free slot %" PRIu64 " outside lowest_bit %" PRIu64 " .. highest_bit %" PRIu64,
                     o, lo, hi));
        continue;
      }
      ++used;
      const bool bad =
          o == 0 || std::binary_search(bad_pages_.begin(), bad_pages_.end(), o);
      if (uswap::swap_count(v) == SWAP_MAP_BAD) {
        if (!bad || v != SWAP_MAP_BAD) report(fmt("slot %" PRIu64 ": unexpected byte 0x%02x", o, v));
        continue;
      }
      if (bad) report(fmt("bad slot %" PRIu64 " is in use (0x%02x)", o, v));
      ++inuse;
      const bool continued = v & COUNT_CONTINUED;
      const bool has_entry = cont_.count(o) != 0;
      if (continued != has_entry)
        report(fmt("slot %" PRIu64 ": COUNT_CONTINUED %d but continuation entry %d", o,
                   continued, has_entry));
      if ((v & SWAP_MAP_BAD) > SWAP_MAP_MAX)
        report(fmt("slot %" PRIu64 ": count digit 0x%02x past SWAP_MAP_MAX", o, v));
    }
    if (used != ci_count(d))
      report(fmt("cluster %u: count %u but %u slots in use", idx, ci_count(d), used));
  }
  if (inuse != inuse_pages())
    report(fmt("inuse_pages %" PRIu64 " but %" PRIu64 " slots in use", inuse_pages(), inuse));
  if (inuse > pages_) report(fmt("%" PRIu64 " slots in use of %" PRIu64, inuse, pages_));
  for (const auto& [off, higher] : cont_) {
    if (off >= max_ || !(swap_map_[off].load(std::memory_order_relaxed) & COUNT_CONTINUED))
      report(fmt("continuation entry for slot %" PRIu64 " without COUNT_CONTINUED", off));
    if (higher == 0) report(fmt("continuation entry for slot %" PRIu64 " is 0", off));
  }
  self->dev_unlock();
  if (nproblems == 0) return {};
  return error(EIO, fmt("%s (%s mode): %u invariant violation(s):", name_.c_str(),
                        to_string(mode_), nproblems) +
                        problems);
}

}  // namespace uswap
