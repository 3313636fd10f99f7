// The pager's state (pager.h) and the functions its fault paths share: the page state words,
// the clock, the charge against the limit, and the entry points the SIGBUS handler and the
// handler threads call.
//
// Page state: one 64-bit word per arena page (the kernel's PTE plus the struct page flags the
// pager needs), with the page lock in its top two bits:
//   bits 0-1   PS_NONE (never written or discarded: reads as zeros, no memory, no slot)
//              PS_MAPPED (a PTE exists: a private page, or the zero page)
//              PS_SWAPPED (no PTE; the contents are in the page store under handles[i])
//   PS_VALID        the page lies in a live mapping (map() .. unmap())
//   PG_referenced   faulted or written since the clock hand last passed
//   PG_active       referenced again while PG_referenced was set, or refaulted soon after its
//                   eviction: the hand takes it down to PG_referenced before it can be evicted
//   PG_uffd_wp      the PTE carries the uffd-wp bit (set by eviction, by the clock's write
//                   tracking, or by a read refault with UFFDIO_COPY_MODE_WP)
//   PG_swapcache    MAPPED and handles[i] still holds identical contents (implies PG_uffd_wp)
//   PG_lru          on the clock list
//   PG_isolated     taken off the clock list by a reclaimer that has not finished with it
//   bits 16-31      pin count
//   bits 32-61      PS_SWAPPED / PS_NONE after eviction: the eviction's nonresident_age (mod
//                   2^30), the kernel's workingset shadow entry
//   bits 62-63      page lock (held, waiters): uswap::bit_lock
// Who may change what:
//   - the state, PS_VALID, PG_uffd_wp, PG_swapcache, the pin count and handles[i]: the page
//     lock's holder;
//   - PG_lru and the list links: under lru_lock; PG_isolated: set under lru_lock, cleared under
//     lru_lock or by the page lock's holder that owns the isolation (it is the reclaimer's claim);
//   - PG_referenced, PG_active: set by the page lock's holder, cleared under lru_lock or by the
//     page lock's holder.
// Every change is an atomic read-modify-write of the bits it names (never a blind store of the
// word), so holders and non-holders never overwrite each other's bits.
//
// Invariants (quiescent; check_invariants verifies them):
//   - resident == pages in PS_MAPPED (+ charges in flight, 0 when quiescent);
//   - PG_lru <=> on the clock list <=> lru_nr counts it; PG_lru => PS_MAPPED; no PG_isolated;
//   - a handle is held exactly by PS_SWAPPED pages and PS_MAPPED pages with PG_swapcache, and
//     the store holds exactly that many pages;
//   - a page outside every mapping has the word 0.
//
// Lock order: map_mu -> page locks (ascending index when more than one is taken blocking) ->
// lru_lock -> the page store's locks. Reclaim takes page locks only with try_lock, so it may run
// while its caller holds none; fault paths charge (and so reclaim) before taking any page lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "page_store.h"
#include "sigbus.h"
#include "uffd_file.h"
#include "uswap/base/page.h"
#include "uswap/sync/bit_lock.h"
#include "uswap/sync/lockstat.h"
#include "uswap/sync/mutex.h"
#include "uswap/uffd/pager.h"

namespace uswap {

inline constexpr uint64_t PS_MASK = 0x3;
inline constexpr uint64_t PS_NONE = 0;
inline constexpr uint64_t PS_MAPPED = 1;
inline constexpr uint64_t PS_SWAPPED = 2;
inline constexpr uint64_t PS_VALID = uint64_t{1} << 2;
inline constexpr uint64_t PG_referenced = uint64_t{1} << 3;
inline constexpr uint64_t PG_uffd_wp = uint64_t{1} << 4;
inline constexpr uint64_t PG_swapcache = uint64_t{1} << 5;
inline constexpr uint64_t PG_lru = uint64_t{1} << 6;
inline constexpr uint64_t PG_isolated = uint64_t{1} << 7;
inline constexpr uint64_t PG_active = uint64_t{1} << 8;
inline constexpr unsigned SHADOW_SHIFT = 32;
inline constexpr uint64_t SHADOW_MAX = (uint64_t{1} << 30) - 1;
inline constexpr uint64_t SHADOW_MASK = SHADOW_MAX << SHADOW_SHIFT;
inline constexpr unsigned PIN_SHIFT = 16;
inline constexpr uint64_t PIN_MASK = uint64_t{0xffff} << PIN_SHIFT;
inline constexpr uint64_t PIN_ONE = uint64_t{1} << PIN_SHIFT;
using page_lock = bit_lock<62, 63>;

constexpr uint64_t ps_state(uint64_t w) noexcept { return w & PS_MASK; }
constexpr uint64_t ps_shadow(uint64_t w) noexcept { return (w & SHADOW_MASK) >> SHADOW_SHIFT; }
constexpr unsigned ps_pins(uint64_t w) noexcept {
  return static_cast<unsigned>((w & PIN_MASK) >> PIN_SHIFT);
}

inline constexpr uint32_t lru_nil = UINT32_MAX;
inline constexpr unsigned max_reclaim_batch = 32;  // the option's bound (SWAP_CLUSTER_MAX)
// The most pages one eviction pass takes. A pass write-protects its victims with one ioctl per
// run of consecutive pages and drops them all with one (process_)madvise: on this VM every such
// call costs a TLB flush, an IPI to the other CPU and in a PVM guest a hypervisor exit, so a pass
// of 256 pages pays those once where eight passes of 32 paid them eight times. A pass holds
// the page locks of all its victims at once; ThreadSanitizer's deadlock detector tracks at most
// 64 held locks per thread, so the TSan build keeps passes at 32 pages.
#if defined(USWAP_TSAN)
inline constexpr unsigned max_reclaim_pass = 32;
#else
inline constexpr unsigned max_reclaim_pass = 256;
#endif
static_assert(max_reclaim_pass >= max_reclaim_batch);
inline constexpr unsigned max_readahead = 16;

// Fault flags, from the x86 page-fault error code (SIGBUS mode) or the uffd message.
inline constexpr unsigned FAULT_FLAG_WRITE = 1;
inline constexpr unsigned FAULT_FLAG_WP = 2;  // a write-protect fault on a present page

// One stream of faults for readahead: the next page a sequential stream would fault and the
// window it has earned (the kernel's per-VMA swap readahead state, kept per thread here).
struct readahead_state {
  const void* owner = nullptr;
  uint64_t next = UINT64_MAX;
  unsigned window = 1;
};

struct pager::impl {
  pager_options opts;
  std::unique_ptr<uffd_file> uffd;
  std::unique_ptr<page_store> store;
  uintptr_t base = 0;
  uint64_t nr_pages = 0;
  uint64_t limit_pages = 0;
  // Pages per eviction pass: 1/32 of the limit, at least opts.reclaim_batch, at most
  // max_reclaim_pass. A fault over the limit evicts a whole pass, so the charge falls to a low
  // watermark (limit - pass) and the next faults find room without reclaiming.
  unsigned reclaim_pass = 0;
  unsigned fork_generation = 0;  // the process generation that created the pager
  int registry_slot = -1;        // SIGBUS registry slot (sigbus mode)

  // Per-page metadata, each an anonymous MAP_NORESERVE array: untouched pages cost nothing.
  std::atomic<uint64_t>* ptes = nullptr;
  uint64_t* handles = nullptr;
  uint32_t* lru_prev = nullptr;
  uint32_t* lru_next = nullptr;
  uint64_t meta_bytes = 0;  // bytes of each of the four mappings above (ptes and handles: 8/page)

  // The charge against the limit: pages mapped plus pages reserved by faults in progress.
  alignas(cache_line_size) std::atomic<uint64_t> resident{0};
  std::atomic<uint64_t> peak_resident{0};
  std::atomic<uint64_t> pinned{0};
  // Evictions so far (the kernel's lruvec->nonresident_age): a refault's distance is how many
  // pages were evicted between its eviction and its refault.
  std::atomic<uint64_t> nonresident_age{0};

  // The clock: a circular list through lru_prev/lru_next; lru_head is the hand (the oldest).
  lock_class lru_class{"uffd lru_lock"};
  lock_class page_class{"uffd page_lock"};
  alignas(cache_line_size) mutable mutex lru_lock{&lru_class};
  uint32_t lru_head = lru_nil;
  uint64_t lru_nr = 0;

  // The arena's allocation: mappings and free extents, in pages, keyed by first page.
  mutable std::mutex map_mu;
  std::map<uint64_t, uint64_t> mappings;
  std::map<uint64_t, uint64_t> free_extents;
  uint64_t mapped_pages = 0;

  struct alignas(cache_line_size) counters {
    std::atomic<uint64_t> faults{0}, wp_faults{0}, zero_fills{0}, swap_ins{0}, readahead{0};
    std::atomic<uint64_t> swap_outs{0}, clean_evictions{0}, zero_evictions{0};
    std::atomic<uint64_t> reclaim_passes{0}, scanned{0}, rotated{0}, overcharges{0};
    std::atomic<uint64_t> swap_out_failures{0}, fault_ns{0}, compressed_bytes{0};
  } c;

  // A pidfd of this process, for process_madvise(MADV_DONTNEED) of a whole eviction pass with one
  // TLB flush; -1 when the kernel lacks it (per-run madvise then).
  int self_pidfd = -1;

  // handler_thread mode.
  int stop_fd = -1;
  std::vector<std::thread> handlers;

  ~impl();

  uintptr_t page_addr(uint64_t idx) const noexcept { return base + (idx << page_shift); }
  bool detached() const noexcept;  // true in a forked child

  // --- Faults (fault.cc). Entry points return 0 when the access may be retried, EFAULT when
  // the address is not in a mapping, EIO when its stored contents are corrupt.
  int handle_fault(uintptr_t addr, unsigned flags, readahead_state& ra, bool* woke) noexcept;
  int fault_page(uint64_t idx, unsigned flags, readahead_state& ra, bool pin, bool* woke) noexcept;
  int resolve_mapped(uint64_t idx, uint64_t st, unsigned flags, bool pin, bool* woke) noexcept;
  int resolve_missing(uint64_t idx, uint64_t st, bool write, unsigned charged, bool pin,
                      readahead_state& ra, bool* woke) noexcept;
  unsigned readahead_window(uint64_t idx, readahead_state& ra) const noexcept;

  // --- The charge (fault.cc).
  void charge(uint64_t n) noexcept;
  void uncharge(uint64_t n) noexcept {
    if (n) resident.fetch_sub(n, std::memory_order_relaxed);
  }

  // --- The clock and eviction (reclaim.cc).
  void lru_add_locked(uint64_t idx) noexcept;
  void lru_del_locked(uint64_t idx) noexcept;
  void lru_add(const uint64_t* idx, unsigned n) noexcept;
  // Evicts at least nr_min pages (fewer only when nothing more is evictable), at most nr_max.
  uint64_t shrink(uint64_t nr_min, uint64_t nr_max) noexcept;
  unsigned shrink_batch(unsigned batch) noexcept;
  unsigned evict(uint32_t* victims, unsigned n) noexcept;
  void putback(const uint32_t* victims, unsigned n) noexcept;
  void protect_spared(uint32_t* spared, unsigned n) noexcept;

  // --- Releasing pages (pager.cc): unmap (valid -> 0) or discard (stays valid, NONE).
  void release_pages(uint64_t first, uint64_t n, bool invalidate) noexcept;

  void handler_loop() noexcept;
};

// Pages of `bytes` for the staging buffers of one fault or eviction pass: taken from a lock-free
// pool (a signal handler may not call malloc), mapped with mmap when the pool is empty.
struct staging_buffer {
  static constexpr size_t pages = max_readahead;
  staging_buffer() noexcept;
  ~staging_buffer();
  staging_buffer(const staging_buffer&) = delete;
  staging_buffer& operator=(const staging_buffer&) = delete;
  uint8_t* data = nullptr;
  explicit operator bool() const noexcept { return data != nullptr; }
};

// Copies one page out of program memory without ThreadSanitizer seeing the loads: the program's
// stores to it are ordered before by the write-protection the kernel installed (a TLB flush),
// which TSan cannot see.
void copy_page_out(void* dst, const void* src) noexcept;
bool page_is_zero(const void* p) noexcept;


}  // namespace uswap
