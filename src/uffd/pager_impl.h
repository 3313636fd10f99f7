// The pager's state (pager.h) and the functions its fault paths share: the arena's mapping
// records, the page state words, the clock, the charge against the limit, and the entry points
// the SIGBUS handler and the handler threads call. The design, with the arguments behind the
// rules below, is docs/design/uffd.md.
//
// The arena (vma.cc): every page is in exactly one mapping (a `vma`), free extent (PROT_NONE,
// registered) or foreign range (the program's own mapping, not registered), kept as maps keyed by
// first page. map_lock is the arena's mmap_lock: faults, pins, discards and reclaim hold it for
// reading, so the records cannot change under them; map, map_fixed, unmap, protect, remap,
// adopt_foreign and fork hold it for writing, and so run with no fault, reclaim or pin in
// progress and may change page states directly. Functions below that say "(read held)", "(write
// held)", "page lock held" or "_locked" assert it in DCHECK builds (sync/lockdep.h).
//
// Page state: one 64-bit word per arena page (the PTE plus the struct page flags the pager needs):
//   bits 0-1   PS_NONE (reads as zeros: no memory, no slot), PS_MAPPED (a PTE exists: a private
//              page or the zero page), PS_SWAPPED (no PTE; handles[i] is the swap entry that
//              holds the contents in the swap backend)
//   bits 2-10  PG_unevictable, PG_referenced, PG_uffd_wp, PG_swapcache (MAPPED and handles[i]
//              still holds identical contents; implies PG_uffd_wp), PG_lru, PG_isolated,
//              PG_active, PG_stamp_exact (below), PG_shared (below)
//   bits 16-31 pin count
//   bits 32-61 SWAPPED / NONE after eviction: the eviction's nonresident_age (mod 2^30, the
//              workingset shadow); MAPPED: the write stamp (below)
//   bits 62-63 page lock (held, waiters): uswap::bit_lock
// Who may change what: the state, PG_uffd_wp, PG_swapcache, PG_shared, the pin count, bits 32-61
// and handles[i]: the page lock's holder (or map_lock's writer); PG_lru and the clock links: under
// lru_lock; PG_isolated: set under lru_lock, cleared under it or by the page lock's holder that
// owns the isolation; PG_referenced and PG_active: set by the page lock's holder, cleared under
// lru_lock or by that holder. Every change is an atomic read-modify-write of the bits it names,
// never a blind store of the word, so holders and non-holders never overwrite each other's bits.
//
// Write-protect sweeps (the argument: docs/design/uffd.md, "Write-protect sweeps"): twice per lap
// of the clock, reclaim write-protects every unpinned resident page with one UFFDIO_WRITEPROTECT
// per mapping. sweep_started (S) is incremented before a sweep's first ioctl, sweep_done (D) set
// to its number after all its ioctls succeeded, sweep_finished (F) after it ended; sweeps are
// serialised by sweep_mu, so S - F <= 1. Every access to S is a read-modify-write (acq_rel; no
// fences: GCC's TSan does not support them). Every writable event (UFFDIO_COPY without MODE_WP,
// UFFDIO_ZEROPAGE, an unprotecting UFFDIO_WRITEPROTECT, an adopted PTE) is followed, under the page
// lock, by stamp = RMW(S) in bits 32-61; PG_stamp_exact says F already equalled the stamp before
// the event (no sweep overlapped it). pin and unpin RMW S after changing the pin count. Holding the
// page lock, eviction treats a PTE as write-protected when PG_uffd_wp is set or D > stamp
// (1 <= (D - stamp) mod 2^30 < 2^29, and S - D < 2^28).
//
// Fork-shared pages (docs/design/uffd.md, "Fork"): in a job, a forked child's pages are the
// frames its parent charged, shared copy-on-write. They carry PG_shared: not charged here, not on
// the clock (evicting one frees no memory while the parent maps it), counted in shared_pages.
// One becomes this process's own, charged and on the clock, when it or a shared page of its
// aligned window of shared_write_around is written here (the kernel copies it; unshare_around)
// or when /proc/self/pagemap says it is mapped here alone (the parent wrote, dropped or exited:
// reconcile_shared). The parent's reclaim passes over victims a child still maps
// (spare_shared).
//
// Invariants (quiescent; check_invariants verifies them): resident == pages in PS_MAPPED without
// PG_shared (+ charges in flight); shared_pages == pages with PG_shared, all PS_MAPPED; PG_lru
// <=> on the clock <=> counted in lru_nr; PG_lru => PS_MAPPED; no PG_isolated; PS_MAPPED =>
// PG_lru or (PG_unevictable or PG_shared), not both; a handle is held exactly by
// PS_SWAPPED pages and PS_MAPPED pages with PG_swapcache, and the swap backend stores exactly that
// many pages; a page outside every mapping has the word 0; mappings, free extents and foreign
// ranges are disjoint and cover the arena.
//
// Lock order: map_lock -> sweep_mu (try-lock only) -> page locks (ascending index when more than
// one is taken blocking) -> lru_lock -> the swap backend's locks (swap, zram, zsmalloc). Reclaim
// takes page locks only with try_lock, so it may run while its caller holds none; fault paths
// charge (and so reclaim) before taking any page lock. map_lock is not recursive: no path holding
// it takes it again, and the SIGBUS handler is never entered from pager code but for the copying
// page, which it resolves without the lock. The whole stack's order: docs/ARCHITECTURE.md.
#pragma once

#include <pthread.h>
#include <signal.h>
#include <sys/types.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "free_extents.h"
#include "record_nodes.h"
#include "sigbus.h"
#include "uffd_file.h"
#include "uswap/backend/swap_backend.h"
#include "uswap/base/page.h"
#include "uswap/sync/bit_lock.h"
#include "uswap/sync/lockdep.h"
#include "uswap/sync/lockstat.h"
#include "uswap/base/zeroed_array.h"
#include "uswap/sync/mutex.h"
#include "uswap/sync/rw_semaphore.h"
#include "uswap/uffd/job.h"
#include "uswap/uffd/pager.h"

namespace uswap {

// Fault latency histogram buckets: 0-3 ns exactly, then four per power of two (about 19% wide),
// up to 2^64 ns. latency_bucket_floor is the smallest latency of a bucket.
inline constexpr unsigned latency_buckets = 4 + 62 * 4;
constexpr unsigned latency_bucket(uint64_t ns) noexcept {
  if (ns < 4) return static_cast<unsigned>(ns);
  const unsigned lg = 63 - static_cast<unsigned>(__builtin_clzll(ns));  // >= 2
  return (lg - 1) * 4 + static_cast<unsigned>((ns >> (lg - 2)) & 3);
}
constexpr uint64_t latency_bucket_floor(unsigned b) noexcept {
  if (b < 4) return b;
  const unsigned lg = b / 4 + 1;
  return (uint64_t{4} + b % 4) << (lg - 2);
}
static_assert(latency_bucket(1000) == latency_bucket(latency_bucket_floor(latency_bucket(1000))));
static_assert(latency_bucket((uint64_t{1} << 63) + 1) < latency_buckets);


// Blocks the asynchronous signals in the calling thread while it lives, so that a pager thread
// created meanwhile inherits the mask: the program's signals are not a pager thread's to take.
// A process-directed SIGTERM taken by one would run the program's handler on a thread the
// program does not know, or never reach the thread that waits for it in sigwait (MariaDB's
// signal thread; its shutdown then hangs). The synchronous ones stay open: the kernel kills a
// thread that traps with them blocked.
class async_signals_blocked {
 public:
  async_signals_blocked() noexcept {
    sigset_t all;
    sigfillset(&all);
    for (int sig : {SIGBUS, SIGSEGV, SIGSYS, SIGILL, SIGFPE, SIGABRT, SIGTRAP})
      sigdelset(&all, sig);
    pthread_sigmask(SIG_BLOCK, &all, &old_);
  }
  ~async_signals_blocked() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  async_signals_blocked(const async_signals_blocked&) = delete;
  async_signals_blocked& operator=(const async_signals_blocked&) = delete;

 private:
  sigset_t old_;
};

// The page state word's bits (the layout above). A namespace of their own: the mm layer's PG_*
// (uswap/mm/page.h) are bit numbers of struct page's flags, these are masks of a different word.
// The pager's sources say `using namespace uffd_pte;`.
namespace uffd_pte {

inline constexpr uint64_t PS_MASK = 0x3;
inline constexpr uint64_t PS_NONE = 0;
inline constexpr uint64_t PS_MAPPED = 1;
inline constexpr uint64_t PS_SWAPPED = 2;
inline constexpr uint64_t PG_unevictable = uint64_t{1} << 2;
inline constexpr uint64_t PG_referenced = uint64_t{1} << 3;
inline constexpr uint64_t PG_uffd_wp = uint64_t{1} << 4;
inline constexpr uint64_t PG_swapcache = uint64_t{1} << 5;
inline constexpr uint64_t PG_lru = uint64_t{1} << 6;
inline constexpr uint64_t PG_isolated = uint64_t{1} << 7;
inline constexpr uint64_t PG_active = uint64_t{1} << 8;
// PS_MAPPED: the write stamp is exact, no sweep ran during the page's last writable event (all
// sweeps up to the stamp had finished before it began), so with stamp == sweep_started no sweep
// has touched the PTE since. Lets pin(write) skip the unprotecting ioctl.
inline constexpr uint64_t PG_stamp_exact = uint64_t{1} << 9;
// PS_MAPPED: a frame another member of the job charged, shared copy-on-write since a fork (see
// "Fork-shared pages" above).
inline constexpr uint64_t PG_shared = uint64_t{1} << 10;
inline constexpr unsigned SHADOW_SHIFT = 32;
inline constexpr uint64_t SHADOW_MAX = (uint64_t{1} << 30) - 1;
inline constexpr uint64_t SHADOW_MASK = SHADOW_MAX << SHADOW_SHIFT;
inline constexpr uint64_t STAMP_MASK = SHADOW_MASK | PG_stamp_exact;  // a write stamp's bits
inline constexpr unsigned PIN_SHIFT = 16;
inline constexpr uint64_t PIN_MASK = uint64_t{0xffff} << PIN_SHIFT;
inline constexpr uint64_t PIN_ONE = uint64_t{1} << PIN_SHIFT;
using page_lock = bit_lock<62, 63>;

constexpr uint64_t ps_state(uint64_t w) noexcept { return w & PS_MASK; }
constexpr uint64_t ps_shadow(uint64_t w) noexcept { return (w & SHADOW_MASK) >> SHADOW_SHIFT; }
constexpr unsigned ps_pins(uint64_t w) noexcept {
  return static_cast<unsigned>((w & PIN_MASK) >> PIN_SHIFT);
}

}  // namespace uffd_pte

inline constexpr uint32_t lru_nil = UINT32_MAX;
// Pages per bit of the touched-chunk bitmap: scans over large ranges (unmap, protect, fork's pin
// reset, check_invariants) skip 2 MiB chunks no page of which ever had a state.
inline constexpr unsigned chunk_shift = 9;
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
static_assert(max_readahead <= swap_backend::max_load_run);  // a run is read with one load_run
inline constexpr unsigned max_reclaim_cluster = 64;
// The most non-resident pages eviction locks at once to write-protect the victims on both sides
// of them with one ioctl (evict_write_protect); with a pass's victims within TSan's 64 locks.
#if defined(USWAP_TSAN)
inline constexpr unsigned max_wp_hole_pages = 24;
#else
inline constexpr unsigned max_wp_hole_pages = 64;
#endif
// Write-protect sweeps per lap of the clock hand (lru_nr steps). One would do for eviction;
// two make sure that between two visits of the hand to a page at least one sweep falls well
// before the second visit, so that a page written all the time is seen written (one fault per
// sweep) whatever its place on the clock relative to where the sweeps happen.
inline constexpr unsigned sweeps_per_lap = 2;
// Write tracking must pay for itself: a sweep costs one write-protect fault for every resident
// page written before the hand reaches it, and buys second chances for pages written since.
// A write-protect fault costs about what a swap-in does (a signal or a round trip, and an ioctl
// whose TLB flush is an IPI to every other CPU running the program), and a second chance saves
// at most one refault, so most of them must save one. When the write-protect faults since the
// last sweep pass 1/wp_fault_share of the missing-page faults (the paging itself), the working
// set does not fit well enough for references to save that many (a program writing all of its
// memory at random, as xz's match finder or Python's reference counts do): the next sweep waits
// twice as long, up to max_sweep_interval half-laps. When they fall below a quarter of that,
// the interval halves again, down to half a lap.
inline constexpr unsigned max_sweep_interval = 64;
inline constexpr uint64_t wp_fault_share = 16;

// Fault flags, from the x86 page-fault error code (SIGBUS mode) or the uffd message.
inline constexpr unsigned FAULT_FLAG_WRITE = 1;
inline constexpr unsigned FAULT_FLAG_WP = 2;  // a write-protect fault on a present page

// One stream of faults for readahead: the page a stream going up would fault next, the first
// page of the last run (one going down faults the page before it), the window the stream has
// earned and its direction (the kernel's per-VMA swap readahead state, swap_ra_info, which
// reads backwards too; kept per thread here).
struct readahead_state {
  const void* owner = nullptr;
  uint64_t next = UINT64_MAX;
  uint64_t first = UINT64_MAX;
  unsigned window = 1;
  bool down = false;
  bool around = false;  // this fault reads its swap cluster around the page (fault_around)
  uint64_t around_lo = 0;  // and that run's lowest page
};

// Swap-in fault-around: a swap-in fault outside any stream on a page whose aligned cluster of
// fault_around_pages (at most readahead_max) took two other swap-in faults, each within
// fault_around_recent swap-in faults of the process before the next, reads the cluster's
// swapped pages next to it with the same ioctl. A program whose accesses scatter within
// clusters (GNU sort comparing lines) faults each cluster about three times instead of once
// per page; one whose accesses scatter over the whole heap seldom meets a recent cluster and
// reads ahead nothing. One recent fault is not enough: a program with a random working set a
// little larger than its limit (a Python dict) meets it often, and the pages read ahead then
// push out as many useful ones as they bring. The kernel reads swap around a fault the same way
// (swap_vma_readahead's window, sized by its readahead hits, which uswap cannot see on mapped
// pages: the recent fault stands in for the hit).
inline constexpr unsigned fault_around_pages = 8;
inline constexpr uint64_t fault_around_recent = 256;
inline constexpr uint64_t fault_around_faults = 3;  // this fault and two recent ones before it
inline constexpr unsigned fault_around_slots = 512;  // the table of recent clusters

// The pager whose map_lock this thread holds for writing across a fork (prepare_fork to
// after_fork_*), or nullptr. glibc's fork touches the program's memory between the prepare
// handlers and the clone (its NSS state, stdio's FILE list): a fault there, on the forking thread,
// must be resolved without taking map_lock again, which it already holds exclusively.
extern thread_local const pager::impl* tls_map_writer;

// map_lock for reading, or nothing on the thread that holds it for writing across a fork. A
// handler thread resolving the forking thread's own fault (handler_thread mode: that thread
// waits in the kernel until it is resolved, and changes nothing meanwhile) acts for it:
// `for_writer` takes nothing either, and only tells lockdep that the lock is held.
class map_read_guard {
 public:
  map_read_guard(const rw_semaphore& l, const pager::impl* owner,
                 bool for_writer = false) noexcept;
  ~map_read_guard() { unlock(); }
  void unlock() noexcept {
    if (locked_) l_.up_read();
    if (borrowed_) lockdep::release(&l_);
    locked_ = borrowed_ = false;
  }
  map_read_guard(const map_read_guard&) = delete;
  map_read_guard& operator=(const map_read_guard&) = delete;

 private:
  rw_semaphore& l_;
  bool locked_;
  bool borrowed_;
};

// The pager's job for the duration of one operation (see pager::impl::jlink), or nothing.
class job_ref {
 public:
  explicit job_ref(const pager::impl& m) noexcept;
  ~job_ref();
  job_ref(const job_ref&) = delete;
  job_ref& operator=(const job_ref&) = delete;
  explicit operator bool() const noexcept { return j_ != nullptr; }
  job* operator->() const noexcept { return j_; }
  job& operator*() const noexcept { return *j_; }

 private:
  const pager::impl& m_;
  job* j_ = nullptr;
};

// A mapping record (the arena's vm_area_struct): protection and fork advice of a run of pages.
struct vma {
  uint64_t pages = 0;
  int prot = 0;
  pager::fork_advice on_fork = pager::fork_advice::copy;
  bool same_kind(const vma& o) const noexcept { return prot == o.prot && on_fork == o.on_fork; }
};

struct pager::impl {
  pager_options opts;
  std::unique_ptr<uffd_file> uffd;
  std::unique_ptr<swap_backend> store;  // the swap area and zram device pages go to
  uintptr_t base = 0;
  uint64_t nr_pages = 0;
  uint64_t limit_pages = 0;
  // Pages per eviction pass: 1/32 of the limit, at least opts.reclaim_batch, at most
  // max_reclaim_pass. A fault over the limit evicts a whole pass, so the charge falls to a low
  // watermark (limit - pass) and the next faults find room without reclaiming.
  unsigned reclaim_pass = 0;
  unsigned fork_generation = 0;  // the process generation that owns the pager
  bool in_fork = false;          // between prepare_fork and after_fork_* (map_lock held)
  bool base_lost = false;        // a child whose rebuild failed unmapped the arena
  pid_t owner_pid = 0;           // getpid() of that process: a raw clone() child differs
  int registry_slot = -1;        // SIGBUS registry slot (sigbus mode)

  // Per-page metadata, zero-filled on demand: untouched pages cost nothing.
  zeroed_array<std::atomic<uint64_t>> ptes;
  zeroed_array<uint64_t> handles;
  zeroed_array<uint32_t> lru_prev, lru_next;
  // One bit per 2^chunk_shift pages: set once any page there has had a state.
  zeroed_array<std::atomic<uint64_t>> chunk_touched;
  std::atomic<uint64_t> touched_chunks{0};      // bits set in chunk_touched (metadata_bytes)
  mutable std::atomic<uint64_t> peak_slots{0};  // the most swap slots metadata_bytes saw used

  // The charge against the limit: pages mapped plus pages reserved by faults in progress.
  alignas(cache_line_size) std::atomic<uint64_t> resident{0};
  std::atomic<uint64_t> peak_resident{0};
  std::atomic<uint64_t> pinned{0};
  // Pages with PG_shared, and their reconciliation with /proc/self/pagemap (reconcile_shared):
  // this process's descriptor of it (-1: none, or not opened yet) and when it may run next.
  std::atomic<uint64_t> shared_pages{0};
  int pagemap_fd = -1;
  std::atomic<uint64_t> shared_next_ns{0};  // coarse_clock_ns: the earliest next look
  // Set (map_lock held for writing) once this process forked a child into its job: its victims
  // may be frames that child still maps, which evicting here would not free (spare_shared).
  bool spare_shared_victims = false;
  std::atomic<uint64_t> spare_run{0};  // shrink: pages put back since others were found
  // Evictions so far (the kernel's lruvec->nonresident_age): a refault's distance is how many
  // pages were evicted between its eviction and its refault.
  std::atomic<uint64_t> nonresident_age{0};
  // Clusters of recent swap-in faults (fault_around): direct-mapped by cluster, each entry
  // (cluster + 1) << 22 | its recent faults (1..3) << 20 | the low 20 bits of swapin_seq at
  // the last of them. Racy by design: a lost or stale entry only changes one readahead decision.
  mutable std::atomic<uint64_t> recent_clusters[fault_around_slots]{};
  mutable std::atomic<uint64_t> swapin_seq{0};

  // Write-protect sweeps (see above). sweep_mu is only try-locked by a sweep: reclaim never waits
  // for it, so it may run in any fault.
  std::mutex sweep_mu;
  std::atomic<uint64_t> sweep_started{0}, sweep_done{0}, sweep_finished{0};
  std::atomic<uint64_t> scanned_since_sweep{0};  // clock steps since the last sweep
  // Half-laps between sweeps (1..max_sweep_interval), and the fault counters at the last sweep
  // (written by the sweeper, under sweep_mu).
  std::atomic<unsigned> sweep_interval{1};
  // Whether read refaults keep their slots (fault.cc, swapcache_pays): writes that found a
  // swap-cache copy stale, evictions a kept copy made free, and read refaults that kept no slot
  // because it did not pay (every swapcache_fade of them halve the other two).
  std::atomic<uint64_t> swapcache_written{0}, swapcache_clean{0}, swapcache_skipped{0};
  static constexpr uint64_t swapcache_fade = 4096;
  bool swapcache_pays() noexcept;
  void note_swapcache_written() noexcept;
  void halve_swapcache_counters() noexcept;
  uint64_t wp_faults_at_sweep = 0, faults_at_sweep = 0;
  std::atomic<bool> sweep_wanted{true};          // the first reclaim sweeps first

  // The clock: a circular list through lru_prev/lru_next; lru_head is the hand (the oldest).
  lock_class lru_class{"uffd lru_lock"};
  lock_class page_class{"uffd page_lock"};
  alignas(cache_line_size) mutable mutex lru_lock{&lru_class};
  uint32_t lru_head = lru_nil;
  uint64_t lru_nr = 0;

  // The arena's records, in pages, keyed by first page (see the top of this file).
  lock_class map_class{"uffd map_lock"};
  mutable rw_semaphore map_lock{&map_class};
  std::map<uint64_t, vma> mappings;
  free_extent_map free_extents;
  std::map<uint64_t, uint64_t> foreign;
  // Their spare nodes (record_nodes.h): reserve_records before an operation changes anything.
  record_nodes<std::map<uint64_t, vma>> mapping_nodes;
  record_nodes<std::map<uint64_t, uint64_t>> foreign_nodes;
  std::atomic<uint64_t> mapped_pages{0};
  std::atomic<uint64_t> nr_mappings{0};  // mappings.size(), for lock-free statistics
  std::atomic<uint64_t> foreign_pages{0};
  std::atomic<uint64_t> unevictable{0};

  struct alignas(cache_line_size) counters {
    std::atomic<uint64_t> faults{0}, wp_faults{0}, zero_fills{0}, swap_ins{0}, readahead{0};
    std::atomic<uint64_t> swap_outs{0}, clean_evictions{0}, zero_evictions{0};
    std::atomic<uint64_t> reclaim_passes{0}, scanned{0}, rotated{0}, overcharges{0};
    std::atomic<uint64_t> shared_spared{0}, shared_write_around{0};
    std::atomic<uint64_t> swap_out_failures{0}, fault_ns{0}, compressed_bytes{0};
    std::atomic<uint64_t> eviction_batches{0}, store_refusals{0};
    std::atomic<uint64_t> wp_sweeps{0}, wp_sweep_failures{0}, evict_wp_pages{0}, evict_wp_calls{0};
    std::atomic<uint64_t> forks{0};
    std::atomic<uint64_t> pgsteal_kswapd{0}, pgsteal_direct{0}, kswapd_wakeups{0};
    std::atomic<uint64_t> major_faults{0};  // faults that read their page back (pgmajfault)
    // Fault latency, four buckets per power of two of nanoseconds (latency_bucket).
    std::atomic<uint64_t> fault_hist[latency_buckets] = {};
  } c;
  // A resolved fault's time: its sum and its latency bucket.
  void note_fault_ns(uint64_t ns) noexcept {
    c.fault_ns.fetch_add(ns, std::memory_order_relaxed);
    c.fault_hist[latency_bucket(ns)].fetch_add(1, std::memory_order_relaxed);
  }

  // The job (job.h, uswap run's shared limit) or none. jlink is read by every charge; leave
  // clears it and waits until job_users (threads between job_ref's load and its end) is 0, so no
  // thread touches the slot after it was given back. reserved mirrors the slot's usage:
  // resident <= reserved but for counted overcharges and a racing trim (at most one fault).
  std::shared_ptr<job> job_owner;   // keeps the segment mapped (set by join, kept after leave)
  std::atomic<job*> jlink{nullptr};
  unsigned jslot = 0;
  std::atomic<unsigned> job_users{0};
  std::atomic<uint64_t> reserved{0};
  std::atomic<bool> job_request_noted{false};  // a request arrived while in pager code
  std::atomic<uint64_t> charges_since_publish{0};
  // The job's fair share when this member last published (job::fair_share): a charge wakes
  // background reclaim only at or above it.
  std::atomic<uint64_t> job_fair_pages{0};
  std::atomic<uint64_t> job_requests_served{0}, job_signals{0}, job_signals_deferred{0}, job_waits{0};
  std::atomic<uint64_t> member_faults_served{0}, member_faults_asked{0};
  // When a wait for room last came back empty-handed (coarse ns): for a second after, a full job
  // means evicting this pager's own pages, not waiting again at every fault.
  std::atomic<uint64_t> job_wait_failed_ns{0};
  // The job's pool limit: one balancer at a time (it keeps the device's writeback cursor), and
  // the errno of the last store that failed (ENOSPC at the device's share of the pool). A fork
  // holds pool_mu from prepare to parent/child, so that the copied device has no writeback in
  // flight. Lock order: map_lock, then pool_mu.
  std::mutex pool_mu;
  std::atomic<int> last_store_error{0};
  // The pool worker (zswap's shrink_worker): with a backing device and a pool limit, one thread
  // writes cold pages back and compacts, so that no fault waits on the backing device's round
  // trips. Faults kick it (pool_kick, a futex word, counts requests) when the pools pass the high
  // watermark; it balances down to the low one. A fault whose store the device refused (the
  // pool at its limit) waits for the end of a round (pool_round, a futex word; its outcome in
  // pool_round_shrank). pool_worker_on: the thread runs in this process.
  std::thread pool_worker;
  std::atomic<bool> pool_worker_on{false};
  std::atomic<bool> pool_worker_stop{false};
  std::atomic<bool> pool_worker_idle{true};
  std::atomic<uint32_t> pool_kick{0};
  std::atomic<uint32_t> pool_round{0};
  std::atomic<bool> pool_round_shrank{false};
  std::atomic<uint64_t> pool_rounds{0}, pool_waits{0};
  // Background reclaim (kswapd.cc; the kernel's kswapd and its watermarks). A charge that
  // leaves less than kswapd_low_room() pages of room wakes the thread (kswapd_kick, a futex word,
  // counts wake-ups); it evicts until kswapd_high_room() pages are free and sleeps again. The
  // Dekker between a charge (resident, then kswapd_idle) and the thread going to sleep
  // (kswapd_idle, then resident), every access sequentially consistent (the charge's update of
  // resident included: on x86 a lock cmpxchg either way; TSan has no fences), means no charge
  // that leaves the room low is missed. kswapd_on: the thread runs in this process. In a job the
  // thread runs without background reclaim too, to serve the others' requests for room only.
  std::thread kswapd;
  std::atomic<bool> kswapd_on{false};
  // The thread holding map_lock for writing across a fork (prepare_fork to after_fork_*), 0 when
  // none: a handler thread resolves that thread's faults without the lock (map_read_guard).
  std::atomic<pid_t> map_writer_tid{0};
  // Serialises restart_threads (two program threads changing their capabilities at once).
  std::mutex restart_mu;
  // A thread of this process claimed the start (start_kswapd_thread): set before kswapd_on, and
  // cleared only if no thread could be made, or for a forked child.
  std::atomic<bool> kswapd_claimed{false};
  std::atomic<bool> kswapd_stop{false};
  std::atomic<bool> kswapd_idle{true};
  // stop_background_reclaim() ran: neither this thread nor the pool worker starts again here.
  std::atomic<bool> background_ended{false};
  std::atomic<uint32_t> kswapd_kick{0};
  // In a job the thread also listens on its slot's word for requests (kswapd.cc); false once
  // futex_waitv failed here, and requests then come by signal.
  std::atomic<bool> kswapd_listens{true};
  // A member without the thread now holds enough to be asked for room (want_kswapd): the shim
  // starts it at its next safe point (pager::start_wanted_threads).
  std::atomic<bool> kswapd_wanted{false};
  // Backing blocks retained for the child of the last fork, and the job slot reserved for it,
  // until fork() returned (fork_returned): released if the fork failed.
  std::vector<uint64_t> fork_blocks;
  int fork_child_slot = -1;
  // The slot a fork in progress reserved for its child (job_make_room_for_fork), or -1: the
  // child adopts it (job_after_fork_child); the parent only forgets it.
  int child_slot = -1;

  // A pidfd of this process, for process_madvise(MADV_DONTNEED) of a whole eviction pass with one
  // TLB flush; -1 when the kernel lacks it (per-run madvise then).
  int self_pidfd = -1;
  // False once the program sandboxed itself (pager::program_sandboxed): per-run madvise then,
  // and no pagemap reads (reconcile_shared).
  std::atomic<bool> vectored_evict{true};

  // handler_thread mode.
  int stop_fd = -1;
  std::vector<std::thread> handlers;

  ~impl();

  uintptr_t page_addr(uint64_t idx) const noexcept { return base + (idx << page_shift); }
  // True in a child that does not own this pager: fork_policy::detach, a raw clone(), or a
  // child whose rebuild failed.
  bool detached() const noexcept;
  void touch_chunk(uint64_t idx) noexcept {
    std::atomic<uint64_t>& w = chunk_touched[idx >> (chunk_shift + 6)];
    const uint64_t bit = uint64_t{1} << ((idx >> chunk_shift) & 63);
    if (!(w.load(std::memory_order_relaxed) & bit) &&
        !(w.fetch_or(bit, std::memory_order_relaxed) & bit))
      touched_chunks.fetch_add(1, std::memory_order_relaxed);
  }
  bool chunk_was_touched(uint64_t idx) const noexcept {
    return chunk_touched[idx >> (chunk_shift + 6)].load(std::memory_order_relaxed) &
           (uint64_t{1} << ((idx >> chunk_shift) & 63));
  }
  // The first page at or after idx (below last) whose bitmap word has a chunk touched, or last:
  // a word at 0 skips its 64 chunks at once. Chunk by chunk, a walk over a 4 TiB arena's 2^21
  // chunks took 3 ms, at every fork of a member (each of a shell's subshells).
  uint64_t next_touched_word(uint64_t idx, uint64_t last) const noexcept {
    constexpr unsigned word_shift = chunk_shift + 6;
    while (idx < last && chunk_touched[idx >> word_shift].load(std::memory_order_relaxed) == 0)
      idx = ((idx >> word_shift) + 1) << word_shift;
    return std::min(idx, last);
  }
  // Calls f(idx) for every page of [first, last) in a touched chunk (a superset of the pages
  // whose word is not 0).
  template <class F>
  void for_each_touched(uint64_t first, uint64_t last, F f) const {
    uint64_t i = first;
    while ((i = next_touched_word(i, last)) < last) {
      const uint64_t chunk_end = std::min(last, ((i >> chunk_shift) + 1) << chunk_shift);
      if (chunk_was_touched(i))
        for (; i < chunk_end; ++i) f(i);
      i = chunk_end;
    }
  }

  // --- The arena's records (vma.cc); map_lock held as each says.
  // The mapping containing page idx (read or write held), or mappings.end().
  std::map<uint64_t, vma>::const_iterator find_mapping(uint64_t idx) const noexcept;
  // Takes [first, last) out of every record (write held), splitting records at the edges; the
  // mapping pieces' pages are released (unmap) and foreign pieces are reserved and registered
  // again. Returns 0 or the errno of the first system call that failed (the range is then
  // partly foreign still: the records say which).
  int carve(uint64_t first, uint64_t last) noexcept;
  void insert_mapping(uint64_t first, const vma& v) noexcept;
  // Spare record nodes for an operation on [first, last) that carves and inserts at most
  // `carves` times (write held): what splitting, inserting and re-inserting every record there
  // may take, so that the noexcept updates above never allocate. ENOMEM (nothing changed) when
  // the host refuses.
  status reserve_records(uint64_t first, uint64_t last, unsigned carves) noexcept;
  // Whether [first, last) is covered by mappings (read or write held).
  bool all_mapped(uint64_t first, uint64_t last) const noexcept;
  // Re-reserves [first, first + n) as PROT_NONE anonymous memory registered with the userfaultfd
  // (after a foreign mapping held it). 0 or errno.
  int reserve(uint64_t first, uint64_t n) noexcept;
  // Makes resident pages of [first, last) unevictable (off the clock) or evictable again, as a
  // mapping loses or gains PROT_READ (write held).
  void set_unevictable(uint64_t first, uint64_t last, bool on) noexcept;
  // Calls f(first, n) for each maximal run of arena pages that is not foreign (write held).
  template <class F>
  void for_each_own_segment(F f) const {
    USWAP_ASSERT_HELD_WRITE(map_lock);
    uint64_t at = 0;
    for (const auto& [s, n] : foreign) {
      if (s > at) f(at, s - at);
      at = s + n;
    }
    if (at < nr_pages) f(at, nr_pages - at);
  }

  // --- Faults (fault.cc). Entry points return 0 when the access may be retried, EFAULT when
  // the address is not in a mapping, EIO when its stored contents are corrupt.
  // handle_fault takes map_lock for reading; fault_page and below run with it held, and `end`
  // is the end of the page's mapping (readahead stays inside it).
  // `tid`: the faulting thread, for a handler thread (0 when the faulting thread resolves it).
  int handle_fault(uintptr_t addr, unsigned flags, readahead_state& ra, bool* woke,
                   pid_t tid = 0) noexcept;
  // [start, end): the mapping around idx, as far as readahead may reach.
  int fault_page(uint64_t idx, uint64_t start, uint64_t end, unsigned flags, readahead_state& ra,
                 bool pin, bool* woke) noexcept;
  // `charged`: the caller charged one page for a shared page's write (set true when it was used).
  int resolve_mapped(uint64_t idx, uint64_t st, unsigned flags, bool pin, bool* woke,
                     bool* charged = nullptr) noexcept;
  int resolve_missing(uint64_t idx, uint64_t st, bool write, unsigned charged, bool pin,
                      readahead_state& ra, bool* woke) noexcept;
  // --- Fork-shared pages (fork.cc; see the top of this file). mark_fork_shared: a forked
  // child staying in its parent's job (write held) takes every mapped page as shared.
  // unshare_locked: page st (lock held, PG_shared) becomes this process's own; `charged`: the
  // caller charged it, else it is counted over the allowance until the next charge reserves
  // it. reconcile_shared (read held, no page lock): the shared pages pagemap shows mapped here
  // alone become this process's own, at most every shared_check_ns, and further apart when a
  // look takes more than 1/shared_check_share of that.
  void mark_fork_shared() noexcept;
  // A child leaving its parent's job (limited alone from now on): every shared page it
  // inherited is charged here (write held).
  void own_all_shared() noexcept;
  void unshare_locked(uint64_t idx, uint64_t st, bool charged) noexcept;
  void reconcile_shared() noexcept;
  // This process's /proc/self/pagemap descriptor, opened once (write held; -1 if it cannot be).
  void open_pagemap() noexcept;
  // A write to a shared page: the shared pages of its aligned window of shared_write_around
  // (within [start, end)), to charge, at least 1. unshare_around (map_lock held, no page lock,
  // idx's write resolved): up to `budget` of them become this process's own, charged (the
  // caller charged them) and writable, so that writing them costs the kernel's copy alone;
  // returns how many.
  unsigned shared_write_window(uint64_t idx, uint64_t start, uint64_t end) const noexcept;
  unsigned unshare_around(uint64_t idx, uint64_t start, uint64_t end, unsigned budget) noexcept;
  static constexpr unsigned shared_write_around = 16;
  // A job's request is served in steps of this many pages, each returned to the job at once.
  static constexpr uint64_t job_serve_step = 1024;
  // The parent's side (map_lock held, the victims v[0, n) sorted, locked and isolated): puts
  // back the victims that pagemap shows another process maps too (a child that inherited
  // them); returns how many are left, compacted in v (all of them when pagemap cannot be read).
  unsigned spare_shared(uint32_t* v, unsigned n) noexcept;
  static constexpr uint64_t shared_check_ns = 20 * 1000 * 1000;
  static constexpr uint64_t shared_check_share = 20;  // looks take at most 1/20 of the time
  unsigned readahead_window(uint64_t idx, uint64_t start, uint64_t end, uint64_t kind,
                            readahead_state& ra) const noexcept;
  // fault_around for a swap-in fault on idx outside a stream: the run of swapped pages around
  // idx within its cluster and [start, end), its length returned and its lowest page in
  // *lowest; 1 (and *lowest untouched) when the cluster took no recent swap-in fault.
  unsigned fault_around_window(uint64_t idx, uint64_t start, uint64_t end,
                               uint64_t* lowest) const noexcept;

  // --- Write stamps (fault.cc). The stamp bits to store after a writable event on a page
  // whose lock the caller holds.
  // `finished_before` is sweep_finished loaded (acquire) before the event's ioctl, or
  // UINT64_MAX when the event's time is unknown (a PTE adopted from outside).
  uint64_t write_stamp(uint64_t finished_before) noexcept;
  uint64_t finished_before() const noexcept {
    return sweep_finished.load(std::memory_order_acquire);
  }
  // Whether the PTE of a mapped page with state st (page lock held) is write-protected for
  // certain, given done = sweep_done and started = sweep_started loaded after taking the lock.
  static bool known_write_protected(uint64_t st, uint64_t done, uint64_t started) noexcept;
  // pin(): after fault_page pinned the page, makes a write pin's page writable against sweeps
  // (see above). Returns 0 or the errno of the unprotecting ioctl.
  int settle_pin(uint64_t idx, bool write) noexcept;

  // --- The charge (fault.cc). With a job, charge reserves from it in batches, and when the job
  // is full either evicts this pager's own pages or, under a fair share, asks the largest member
  // for room and waits for it a while. charge(0) brings pages already counted in resident
  // (fork-shared pages made this process's own) within the allowance.
  void charge(uint64_t n) noexcept;
  void uncharge(uint64_t n) noexcept {
    if (n) resident.fetch_sub(n, std::memory_order_relaxed);
  }

  // --- The job (job.cc's member side, in pager.cc). map_lock held (read) by the callers below.
  bool wait_for_job_room(job& j, uint64_t excess) noexcept;
  void serve_job_request_locked(job& j) noexcept;
  // Makes resident the range another member's copy asked for (job::take_fault), map_lock held.
  void serve_member_fault_locked(job& j) noexcept;
  // Gives the reservation above resident + keep back to the job.
  void trim_reservation(job& j, uint64_t keep) noexcept;
  void publish_job_stats(job& j) noexcept;
  // Before a fork (map_lock held for writing): evicts what the child's copy would put over the
  // job's limit and reserves the child's share in a slot of its own.
  void job_make_room_for_fork() noexcept;
  void reserve_child_share() noexcept;
  // The child of the fork adopts that slot as its own membership (after_fork_child).
  // The job's pool limit: when the members' pools together pass it, this pool shrinks in
  // proportion to its size (and to mine_cap at most), writing cold pages back (with a backing
  // device) and compacting, and the zram device refuses to grow past what the others leave.
  // Returns whether the pools have room for more, or over their share, whether this one shrank
  // or wrote pages back (room that the faults' stores may already have taken).
  //   on_reclaim  each reclaim pass (map_lock held): with the pool worker, only the device's
  //               limit is set and the worker kicked past the high watermark, nothing waits;
  //               without it, a balance here if no one else balances now;
  //   when_full   a store was refused (map_lock held): waits for a round of the worker (or
  //               balances here without one);
  //   locked      the caller holds pool_mu (a fork);
  //   worker      the pool worker's round, down to the low watermark.
  enum class pool_balance : uint8_t { on_reclaim, when_full, locked, worker };
  bool balance_pool(job& j, uint64_t mine_cap = UINT64_MAX,
                    pool_balance how = pool_balance::on_reclaim) noexcept;
  bool balance_pool_locked(job& j, uint64_t mine_cap, uint64_t headroom) noexcept;
  // Room for a reclaim pass of compressed pages (half a pass of pages): faults balance the pool
  // that far below its limit. The pool worker is kicked an eighth of the limit below it (and at
  // least that far).
  uint64_t pool_headroom() const noexcept { return uint64_t{reclaim_pass} * page_size / 2; }
  uint64_t pool_high_watermark(uint64_t limit) const noexcept {
    return std::max(pool_headroom(), limit / 8);
  }
  // The other members' pools as they last published them.
  uint64_t others_pool_bytes(job& j) const noexcept {
    const uint64_t published = j.pool_bytes();
    return published - std::min(published, j.published(jslot, JOB_POOL_BYTES));
  }
  // The zram device's mem_limit for a pool holding `mine` bytes beside the others' `others`.
  uint64_t pool_device_limit(uint64_t limit, uint64_t others, uint64_t mine) const noexcept;
  // The pool worker's life (job_member.cc): started by join_job and in a forked child, stopped
  // by the destructor; a child forgets the parent's.
  void start_pool_worker() noexcept;
  void stop_pool_worker() noexcept;
  void pool_worker_loop() noexcept;
  void kick_pool_worker() noexcept;
  // Background reclaim's life (kswapd.cc): started by create and in a forked child (without
  // background reclaim, by pager::start_wanted_threads), stopped by the destructor and
  // stop_background_reclaim; a child forgets the parent's thread.
  void start_kswapd() noexcept;
  // Starts `t` running `loop` with the program's asynchronous signals blocked, and returns once
  // it runs (false: no thread could be made). For kswapd and the pool worker.
  bool start_background_thread(std::thread& t, void (impl::*loop)() noexcept) noexcept;
  void stop_kswapd() noexcept;
  void kswapd_loop() noexcept;
  // Sleeps until kicked (kswapd_kick read as k) or, in a job, asked for room; serves a request
  // it finds first.
  void kswapd_sleep(uint32_t k) noexcept;
  // The slot no longer has a listener: requests for room come by signal.
  void kswapd_stop_listening() noexcept;
  // Starts the thread unless it runs or background reclaim ended (kswapd.cc).
  void start_kswapd_thread() noexcept;
  // In a job without background reclaim: asks for the thread once this member's reservation
  // passes a sixteenth of the job's limit (the short-lived processes of a build never do, and
  // save its creation) while it has company to ask it (its last published fair share is under
  // the limit, or `company`: it just forked; a job of one process never makes the thread), and
  // futex_waitv works here.
  void want_kswapd(const job& j, bool company = false) noexcept {
    if (!kswapd_may_be_wanted()) return;
    const uint64_t limit = j.limit_pages();
    if (reserved.load(std::memory_order_relaxed) > limit / 16 &&
        (company || job_fair_pages.load(std::memory_order_relaxed) < limit))
      kswapd_wanted.store(true, std::memory_order_relaxed);
  }
  // No thread runs, none is asked for yet, and one could listen on the slot's word.
  bool kswapd_may_be_wanted() const noexcept {
    return !opts.background_reclaim && !kswapd_claimed.load(std::memory_order_relaxed) &&
           !kswapd_wanted.load(std::memory_order_relaxed) &&
           kswapd_listens.load(std::memory_order_relaxed) &&
           !background_ended.load(std::memory_order_relaxed);
  }
  // The watermarks, in pages of room under the allowance (see background_reclaim).
  uint64_t kswapd_low_room() const noexcept {
    return std::min<uint64_t>(2 * uint64_t{reclaim_pass}, limit_pages / 32);
  }
  uint64_t kswapd_high_room() const noexcept {
    return std::min<uint64_t>(3 * uint64_t{reclaim_pass}, limit_pages / 16);
  }
  // Pages this pager may still map before a fault must reclaim: its limit, or in a job its
  // reservation and what the job has left, less what is resident. In a job, a member under its
  // fair share has room whatever the job has left: its faults ask the larger members for room
  // rather than evict their own (wait_for_job_room), and so does background reclaim.
  uint64_t reclaim_room() const noexcept;
  // After a charge that left `room` pages (fault.cc): wakes the thread if that is under the low
  // watermark and it sleeps.
  void note_room(uint64_t room) noexcept {
    if (room >= kswapd_low_room() || !opts.background_reclaim ||
        !kswapd_on.load(std::memory_order_relaxed))
      return;
    // After the charge's seq_cst update of resident (see above).
    if (kswapd_idle.load(std::memory_order_seq_cst)) wake_kswapd();
  }
  void wake_kswapd() noexcept;
  // A fault whose store a full pool refused while the backing server is unreachable (map_lock
  // held): waits up to opts.backing_timeout_ms for writeback to make room again. False when it
  // did not (or the job was stopped meanwhile).
  bool wait_for_backing(job& j) noexcept;
  void job_after_fork_child() noexcept;

  // --- The clock and eviction (reclaim.cc).
  void lru_add_locked(uint64_t idx) noexcept;
  void lru_del_locked(uint64_t idx) noexcept;
  void lru_add(const uint64_t* idx, unsigned n) noexcept;
  // Evicts at least nr_min pages (fewer only when nothing more is evictable), at most nr_max.
  uint64_t shrink(uint64_t nr_min, uint64_t nr_max) noexcept;
  // spare: put back victims a forked child still maps (spare_shared), counted in *spared.
  unsigned shrink_batch(unsigned batch, bool spare, unsigned* spared) noexcept;
  uint64_t lap_pages() noexcept;  // pages on the clock
  // Pages a scan gave a second chance, for isolate_cluster: a one-hash Bloom filter on the
  // stack (a false yes leaves a neighbour on the clock, nothing worse).
  struct spared_filter {
    static constexpr unsigned log2_bits = 14;
    static constexpr unsigned bits = 1u << log2_bits;
    uint64_t w[bits / 64] = {};
    static unsigned hash(uint32_t idx) noexcept {
      return (idx * 2654435761u) >> (32 - log2_bits);  // Fibonacci hashing: the top bits
    }
    void add(uint32_t idx) noexcept { w[hash(idx) / 64] |= uint64_t{1} << (hash(idx) % 64); }
    bool may_contain(uint32_t idx) const noexcept {
      return (w[hash(idx) / 64] >> (hash(idx) % 64)) & 1;
    }
  };
  unsigned isolate_cluster(uint32_t idx, uint32_t* victims, unsigned nv, unsigned batch,
                           const spared_filter& spared) noexcept;
  // Evicts victims[0, n): sorted, each page-locked and isolated by the caller; lets their page
  // locks go. Returns how many left memory. Its steps, in order (reclaim.cc):
  unsigned evict(uint32_t* victims, unsigned n) noexcept;
  struct eviction_pass;
  void evict_write_protect(eviction_pass& p) noexcept;  // write-protect what may be writable
  void evict_copy_out(eviction_pass& p) noexcept;       // copy out, compress, store
  void evict_drop(eviction_pass& p) noexcept;           // MADV_DONTNEED the pages
  unsigned evict_commit(eviction_pass& p) noexcept;     // new states; unlock
  void putback(const uint32_t* victims, unsigned n) noexcept;
  // Write-protects every unpinned resident page of every mapping (map_lock read held); false
  // when another sweep holds sweep_mu (the sweep stays wanted).
  bool sweep() noexcept;

  // --- Releasing pages (pager.cc): every page of the range goes to word 0 (NONE, no slot, no
  // PTE). `unmapping`: the range leaves its mapping (its metadata pages may be given back).
  void release_pages(uint64_t first, uint64_t n, bool unmapping) noexcept;

  // --- Moving pages for remap (vma.cc): the pages of [src, src + n) to [dst, dst + n), whose
  // mapping has protection `prot`; both ranges are readable and writable for the duration.
  // Write held. 0, or the errno of the first page that could not be copied (it reads as zeros).
  int move_pages(uint64_t src, uint64_t dst, uint64_t n, int prot) noexcept;

  // --- Fork (fork.cc).
  void prepare_fork() noexcept;
  void after_fork_parent() noexcept;
  status after_fork_child() noexcept;
  status start_handlers();
  // MADV_DOFORK (during a fork) or MADV_DONTFORK (otherwise) over the arena's own segments,
  // but dontfork mappings keep MADV_DONTFORK (write held).
  void set_arena_fork_flag(bool dofork) noexcept;

  // Serves faults until `stop` (the stop_fd of the set it was made with) is readable.
  void handler_loop(int stop) noexcept;
  // A forked child: forgets the std::thread objects of the parent's handler threads.
  void forget_handlers() noexcept;
};

inline job_ref::job_ref(const pager::impl& m) noexcept : m_(m) {
  // Dekker with leave_job: users before link here, link before users there (both seq_cst).
  const_cast<std::atomic<unsigned>&>(m.job_users).fetch_add(1, std::memory_order_seq_cst);
  j_ = m.jlink.load(std::memory_order_seq_cst);
}

inline job_ref::~job_ref() {
  const_cast<std::atomic<unsigned>&>(m_.job_users).fetch_sub(1, std::memory_order_release);
}

inline map_read_guard::map_read_guard(const rw_semaphore& l, const pager::impl* owner,
                                      bool for_writer) noexcept
    : l_(const_cast<rw_semaphore&>(l)),
      locked_(tls_map_writer != owner && !for_writer),
      borrowed_(tls_map_writer != owner && for_writer) {
  if (locked_) l_.down_read();
  if (borrowed_) lockdep::acquire(&l_, lockdep::mode::shared);
}

// Fork generations (fork.cc): counts fork()s in this process's ancestry, as seen by the
// pthread_atfork handlers note_fork_handlers() installs once. A pager made in another generation
// belongs to the parent unless its rebuild adopted it (fork_policy::copy).
unsigned current_fork_generation() noexcept;
// A thread is between the fork handlers' prepare and parent/child: it holds map_lock for
// writing, and inside glibc's fork every malloc arena is locked.
bool fork_in_progress() noexcept;
void note_fork_handlers();
void fork_register(pager::impl* p);
void fork_unregister(pager::impl* p) noexcept;

// CLOCK_MONOTONIC in ns (a vDSO read): fault latencies, the pagemap looks' cost.
inline uint64_t clock_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

// CLOCK_MONOTONIC_COARSE in ns (a vDSO read): the job's idleness test.
inline uint64_t coarse_clock_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

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
