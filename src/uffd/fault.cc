// Fault resolution: the pager's do_anonymous_page / do_swap_page / do_wp_page, and the charge
// against the limit that runs reclaim first (the memcg's try_charge). Called from the SIGBUS
// handler of the faulting thread, from the handler threads, and from pin().
#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <shared_mutex>

#include "pager_impl.h"
#include "uswap/base/atomic_max.h"

namespace uswap {

using namespace uffd_pte;

namespace {

// Source of UFFDIO_COPY for first writes: zero pages, never written.
alignas(4096) uint8_t zero_pages[max_readahead * page_size];

}  // namespace

// The swap cache pays when clean evictions (a kept slot spared a compression) outnumber writes
// to swap-cache pages (each a write-protect fault that found the copy stale) four to one: a
// write-protect fault costs several compressions (a signal or a wake-up, an ioctl, a TLB
// flush). Python writes a reference count into every object it reads, so nearly every read
// refault used to cost a write-protect fault for nothing. The counters halve once their sum
// passes 64k, so the choice follows the program's current phase. While it does not pay, no page
// keeps a slot, so neither counter moves: the verdict would stand for the rest of the process's
// life (redis-server's BGSAVE child, which only reads, inherited it from its writing parent and
// compressed every page it read again). So every swapcache_fade read refaults made without the
// cache halve the counters too. The verdict turns at the boundary, so one halving turns the cache
// back on: in a phase that still writes, that costs some tens of write-protect faults per
// swapcache_fade read refaults; in one that only reads, the cache is back within swapcache_fade.
// A forked child starts with none of its parent's verdict (fork.cc).
bool pager::impl::swapcache_pays() noexcept {
  if (4 * swapcache_written.load(std::memory_order_relaxed) <=
      swapcache_clean.load(std::memory_order_relaxed) + 64)
    return true;
  if (swapcache_skipped.fetch_add(1, std::memory_order_relaxed) % swapcache_fade ==
      swapcache_fade - 1)
    halve_swapcache_counters();
  return false;
}

void pager::impl::note_swapcache_written() noexcept {
  if (swapcache_written.fetch_add(1, std::memory_order_relaxed) +
          swapcache_clean.load(std::memory_order_relaxed) > (uint64_t{1} << 16))
    halve_swapcache_counters();
}

void pager::impl::halve_swapcache_counters() noexcept {
  // Racy (a concurrent increment may be lost): they only steer a heuristic.
  swapcache_written.store(swapcache_written.load(std::memory_order_relaxed) / 2,
                          std::memory_order_relaxed);
  swapcache_clean.store(swapcache_clean.load(std::memory_order_relaxed) / 2,
                        std::memory_order_relaxed);
}

uint64_t pager::impl::write_stamp(uint64_t finished_before) noexcept {
  // A read-modify-write, not a load: it orders the writable event's ioctl (and, in unpin, the
  // pin count's decrement) against a sweep's increment of sweep_started (pager_impl.h,
  // "Write-protect sweeps").
  const uint64_t started = sweep_started.fetch_add(0, std::memory_order_acq_rel);
  return ((started & SHADOW_MAX) << SHADOW_SHIFT) |
         (finished_before == started ? PG_stamp_exact : 0);
}

bool pager::impl::known_write_protected(uint64_t st, uint64_t done, uint64_t started) noexcept {
  if (st & PG_uffd_wp) return true;
  if (done == 0 || started - done >= (uint64_t{1} << 28)) return false;
  const uint64_t age = (done - ps_shadow(st)) & SHADOW_MAX;
  return age >= 1 && age < (SHADOW_MAX + 1) / 2;
}

int pager::impl::settle_pin(uint64_t idx, bool write) noexcept {
  // The pin count was raised (and `pinned`) by fault_page; the RMW orders that against sweeps.
  const uint64_t s0 = sweep_started.fetch_add(0, std::memory_order_acq_rel);
  if (!write) return 0;  // a read pin only needs the page resident, protected or not
  // A sweep that started before the pin was seen may not have seen it: let it finish (one
  // ioctl per mapping), after which no sweep will touch the page while it stays pinned.
  while (sweep_finished.load(std::memory_order_acquire) < s0) sched_yield();
  std::atomic<uint64_t>& w = ptes[idx];
  page_lock::lock(w, &page_class);
  const uint64_t st = page_lock::load_data(w);
  int r = 0;
  // An exact stamp equal to s0: no sweep overlapped the page's last writable event and none
  // started after it up to s0 (later ones skip the pinned page), so nothing protected it
  // since. Anything else is treated as possibly protected: unprotecting is always safe.
  const bool untouched = (st & PG_stamp_exact) && ps_shadow(st) == (s0 & SHADOW_MAX);
  if (ps_state(st) == PS_MAPPED && ((st & PG_uffd_wp) || !untouched)) {
    const uint64_t f = finished_before();
    r = uffd->writeprotect(page_addr(idx), page_size, false);
    if (r == 0) {
      if (st & PG_swapcache) {
        store->release(swap_entry{handles[idx]});
        handles[idx] = 0;
      }
      page_lock::update(w, PG_uffd_wp | PG_swapcache | STAMP_MASK, write_stamp(f));
    }
  }
  page_lock::unlock(w);
  return r;
}

void pager::impl::charge(uint64_t n) noexcept {
  unsigned fruitless = 0, pool_stalls = 0;
  // The streak of stalls: the backing device's connection losses at its first, and whether the
  // device was unreachable or lost a connection during it.
  uint64_t stall_losses = 0;
  bool stall_unreachable = false;
  bool waited = false;
  for (;;) {
    job_ref jr(*this);
    if (jr) {
      jr->note_active(jslot, coarse_clock_ns());
      if (jr->has_reclaim_request(jslot) || job_request_noted.load(std::memory_order_relaxed))
        serve_job_request_locked(*jr);
      if (charges_since_publish.fetch_add(1, std::memory_order_relaxed) % 256 == 255)
        publish_job_stats(*jr);
    }
    // The most this pager may have mapped now: its reservation in a job, else its limit.
    const uint64_t allowance = jr ? reserved.load(std::memory_order_relaxed) : limit_pages;
    uint64_t cur = resident.load(std::memory_order_relaxed);
    while (cur + n <= allowance) {
      // seq_cst: one side of background reclaim's Dekker (pager_impl.h).
      if (resident.compare_exchange_weak(cur, cur + n, std::memory_order_seq_cst,
                                         std::memory_order_relaxed)) {
        fetch_max(peak_resident, cur + n);
        // Close to the limit: background reclaim makes room before the next faults need it.
        uint64_t room = allowance - (cur + n);
        if (jr && room < kswapd_low_room()) {
          const uint64_t limit = jr->limit_pages(), all = jr->charge();
          room += limit > all ? limit - all : 0;
          if (cur + n < job_fair_pages.load(std::memory_order_relaxed)) room = UINT64_MAX;
        }
        note_room(room);
        return;
      }
    }
    const uint64_t excess = cur + n - std::min(cur + n, allowance);
    if (jr) {
      // Room in the job: what is missing and a batch more (memcg's charge stock), so that the
      // next faults do not take the job lock.
      if (const uint64_t got = jr->try_reserve(jslot, excess, excess + job_charge_batch)) {
        reserved.fetch_add(got, std::memory_order_relaxed);
        want_kswapd(*jr);
        continue;
      }
      // The job is full. A member under its fair share asks the largest one for room and waits
      // a while, rather than evict the little it has (once per charge). Members killed since
      // the supervisor last looked give their share back first.
      if (!waited) {
        waited = true;
        if (jr->reap_ended_members(jslot) != 0) continue;
        if (wait_for_job_room(*jr, excess)) continue;
      }
    }
    // Over the limit: reclaim what is missing, and up to a pass (down to the low watermark
    // limit - reclaim_pass), so that the next faults find room without reclaiming one page
    // each and a pass's system calls are shared by many pages.
    if (const uint64_t got = shrink(excess, std::max<uint64_t>(excess, reclaim_pass))) {
      c.pgsteal_direct.fetch_add(got, std::memory_order_relaxed);
      fruitless = 0;
      continue;
    }
    // The job's compressed pool is at its limit and nothing more could be written back, three
    // balances in a row (each a whole lap of the device: the first lap may only mark pages
    // idle, for the next to write back): the job cannot be held at its limits. The supervisor
    // stops it and says which limit; this fault waits for that rather than map above the limit.
    const bool stalled = jr && jr->pool_limit_bytes() &&
                         last_store_error.load(std::memory_order_relaxed) == ENOSPC &&
                         !balance_pool(*jr, UINT64_MAX, pool_balance::when_full);
    if (!stalled) {
      pool_stalls = 0;
    } else {
      const zram_backing_stat bs = store->device().backing_stat();
      if (pool_stalls++ == 0) {
        stall_losses = bs.connection_losses;
        stall_unreachable = false;
      }
      stall_unreachable |=
          !bs.kind.empty() && (!bs.connected || bs.connection_losses != stall_losses);
    }
    if (pool_stalls >= 3) {
      // A backing server that cannot be reached may come back (restarted over its storage, a
      // network that heals): the fault waits for writeback to resume as long as a read would
      // wait for it, then the job stops. So too when it was unreachable at any balance of the
      // three, though a connection is up again now: they failed for the server, not for the
      // pool, and the writer may not have written through the new connection yet.
      if (stall_unreachable && wait_for_backing(*jr)) {
        pool_stalls = 0;
        continue;
      }
      const zram_backing_stat bs = store->device().backing_stat();
      const bool lost = !bs.kind.empty() && !bs.connected;
      jr->set_stop_reason(lost ? job_stop_backing_lost : job_stop_pool_full);
      for (int i = 0; i < 1000 && jr->stop_reason() != job_stop_none; ++i) {
        const timespec ten_ms{0, 10 * 1000 * 1000};
        ::nanosleep(&ten_ms, nullptr);
      }
    }
    // Nothing evictable right now: every mapped page is pinned, locked by a fault, or isolated
    // by another reclaimer that has not finished. Let those finish; if they never free
    // anything, map above the limit rather than fail the fault (a fault cannot fail).
    if (++fruitless >= 16) {
      // charge(0) settles pages already counted (fork-shared pages become this process's own
      // over the allowance): the job is told of what is mapped above the reservation.
      if (jr) {
        const uint64_t over = n ? n : excess;
        jr->force_reserve(jslot, over);
        reserved.fetch_add(over, std::memory_order_relaxed);
      }
      const uint64_t now = resident.fetch_add(n, std::memory_order_relaxed) + n;
      fetch_max(peak_resident, now);
      c.overcharges.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    sched_yield();
  }
}

unsigned pager::impl::fault_around_window(uint64_t idx, uint64_t start, uint64_t end,
                                          uint64_t* lowest) const noexcept {
  const uint64_t size = std::min<uint64_t>(fault_around_pages, std::bit_floor(opts.readahead_max));
  if (size < 2) return 1;
  const uint64_t cluster = idx / size;
  // An entry: (cluster + 1) << 22 | the cluster's recent faults (1..3) << 20 | their last
  // fault's swapin_seq, low 20 bits.
  constexpr uint64_t seq_mask = (uint64_t{1} << 20) - 1;
  const uint64_t seq = swapin_seq.fetch_add(1, std::memory_order_relaxed);
  std::atomic<uint64_t>& e = recent_clusters[cluster % fault_around_slots];
  const uint64_t was = e.load(std::memory_order_relaxed);
  const bool recent = (was >> 22) == cluster + 1 && ((seq - was) & seq_mask) <= fault_around_recent;
  const uint64_t faults = recent ? std::min<uint64_t>(((was >> 20) & 3) + 1, 3) : 1;
  e.store(((cluster + 1) << 22) | (faults << 20) | (seq & seq_mask), std::memory_order_relaxed);
  if (faults < fault_around_faults) return 1;
  // The swapped pages on both sides of idx, up to the cluster's and the mapping's bounds (read
  // without their locks: resolve_missing takes the ones it can and checks them again).
  const uint64_t lo = std::max(start, cluster * size);
  const uint64_t hi = std::min(end, cluster * size + size);
  uint64_t a = idx;
  uint64_t b = idx + 1;
  while (a > lo && ps_state(page_lock::load_data(ptes[a - 1])) == PS_SWAPPED) --a;
  while (b < hi && ps_state(page_lock::load_data(ptes[b])) == PS_SWAPPED) ++b;
  *lowest = a;
  return static_cast<unsigned>(b - a);
}

unsigned pager::impl::readahead_window(uint64_t idx, uint64_t start, uint64_t end, uint64_t kind,
                                       readahead_state& ra) const noexcept {
  // A fault on the page right after the last run continues a stream going up, one on the page
  // right before it a stream going down (a list freed from its end, as CPython's list_dealloc
  // does): double its window up to readahead_max. Anything else starts over with one page, or
  // for a swap-in with its cluster's swapped pages around it when that cluster is recent
  // (fault_around_window).
  const bool ours = ra.owner == this;
  ra.around = false;
  if (ours && idx == ra.next) {
    ra.window = ra.down ? 2 : std::min(ra.window * 2, opts.readahead_max);
    ra.down = false;
  } else if (ours && ra.first != UINT64_MAX && idx + 1 == ra.first) {
    ra.window = ra.down ? std::min(ra.window * 2, opts.readahead_max) : 2;
    ra.down = true;
  } else {
    ra.window = 1;
    ra.down = false;
    if (kind == PS_SWAPPED) {
      if (const unsigned n = fault_around_window(idx, start, end, &ra.around_lo); n > 1) {
        ra.owner = this;
        ra.around = true;
        return n;
      }
    }
  }
  ra.owner = this;
  return static_cast<unsigned>(
      std::min<uint64_t>(ra.window, ra.down ? idx - start + 1 : end - idx));
}

int pager::impl::handle_fault(uintptr_t addr, unsigned flags, readahead_state& ra, bool* woke,
                              pid_t tid) noexcept {
  if (addr < base || addr >= base + (nr_pages << page_shift)) return EFAULT;
  const uint64_t idx = (addr - base) >> page_shift;
  map_read_guard g(map_lock, this,
                   tid != 0 && tid == map_writer_tid.load(std::memory_order_acquire));
  const auto it = find_mapping(idx);
  if (it == mappings.end()) {
    // Not mapped any more: the fault raced an munmap of its page (a bug of the program, which
    // the kernel answers with SIGSEGV). Free arena space is PROT_NONE, so the access retried
    // gets that SIGSEGV. Anywhere else the records and the page tables disagree: SIGBUS.
    if (free_extents.run_at(idx) != 0) return 0;
    return EFAULT;
  }
  return fault_page(idx, it->first, it->first + it->second.pages, flags, ra, false, woke);
}

int pager::impl::fault_page(uint64_t idx, uint64_t start, uint64_t end, unsigned flags,
                            readahead_state& ra, bool pin, bool* woke) noexcept {
  USWAP_ASSERT_HELD(map_lock);
  if (shared_pages.load(std::memory_order_relaxed) != 0) reconcile_shared();
  std::atomic<uint64_t>& w = ptes[idx];
  unsigned charged = 0;
  bool readahead_charged = false;  // `charged` is a readahead window (else a shared write's)
  for (;;) {
    uint64_t st = page_lock::load_data(w, std::memory_order_acquire);
    // Charge before taking the page lock: the charge may reclaim, and reclaim must never wait
    // for a page lock while holding one. A write to a fork-shared page charges too: the kernel
    // gives it a frame of this process's own.
    if (ps_state(st) != PS_MAPPED && charged == 0) {
      charged = readahead_window(idx, start, end, ps_state(st), ra);
      readahead_charged = true;
      charge(charged);
    } else if (ps_state(st) == PS_MAPPED && (st & PG_shared) && charged == 0 &&
               (flags & (FAULT_FLAG_WRITE | FAULT_FLAG_WP))) {
      charged = pin ? 1 : shared_write_window(idx, start, end);
      charge(charged);
    }
    page_lock::lock(w, &page_class);
    st = page_lock::load_data(w);
    if (ps_state(st) == PS_MAPPED) {
      bool used = false;
      const bool shared_write =
          (st & PG_shared) && (flags & (FAULT_FLAG_WRITE | FAULT_FLAG_WP)) && !pin;
      const int r = resolve_mapped(idx, st, flags, pin, woke, charged ? &used : nullptr);
      page_lock::unlock(w);
      unsigned spent = used ? 1 : 0;
      if (r == 0 && used && shared_write && charged > spent)
        spent += unshare_around(idx, start, end, charged - spent);
      uncharge(charged - spent);
      return r;
    }
    if (charged != 0 && readahead_charged) {
      return resolve_missing(idx, st, flags & FAULT_FLAG_WRITE, charged, pin, ra, woke);
    }
    // It was mapped when we looked and is not any more (evicted meanwhile): charge and retry,
    // for a readahead window (a shared write's charge covers pages that may lie past the
    // mapping's end).
    page_lock::unlock(w);
    uncharge(charged);
    charged = 0;
  }
}

int pager::impl::resolve_mapped(uint64_t idx, uint64_t st, unsigned flags, bool pin,
                                bool* woke, bool* charged) noexcept {
  std::atomic<uint64_t>& w = ptes[idx];
  USWAP_ASSERT_HELD(w);  // the page lock
  const bool write = flags & FAULT_FLAG_WRITE;
  // A write to a fork-shared page (a write pin's included: the system call writes it): the
  // kernel copies the frame for this process, which is charged here from now on.
  if ((st & PG_shared) && (write || (flags & FAULT_FLAG_WP))) {
    unshare_locked(idx, st, charged != nullptr);
    if (charged) *charged = true;
    st = page_lock::load_data(w);
  }
  // A write to a write-protected page: one a sweep protected (write tracking), a clean
  // swap-cache page, or a victim whose eviction failed. Its zram copy, if any, is about to be
  // stale: free it, then let the write through (the ioctl also wakes a sleeping faulter).
  auto unprotect = [&]() -> int {
    const uint64_t f = finished_before();
    if (const int r = uffd->writeprotect(page_addr(idx), page_size, false); r != 0) return r;
    *woke = true;
    if (st & PG_swapcache) {
      store->release(swap_entry{handles[idx]});
      handles[idx] = 0;
      note_swapcache_written();
    }
    // mark_page_accessed: a reference while already referenced activates the page.
    const uint64_t ref = (st & PG_referenced) ? PG_active | PG_referenced : PG_referenced;
    page_lock::update(w, PG_uffd_wp | PG_swapcache | PG_referenced | PG_active | STAMP_MASK,
                      ref | write_stamp(f));
    return 0;
  };
  if ((flags & FAULT_FLAG_WP) || (write && (st & PG_uffd_wp))) {
    if (const int r = unprotect(); r != 0) return r;
    if (flags & FAULT_FLAG_WP) c.wp_faults.fetch_add(1, std::memory_order_relaxed);
  } else if (!pin) {
    // A missing-page fault on a mapped page: another thread mapped it first (the zero page
    // probe fails with EEXIST), or the program dropped it behind the pager's back with a raw
    // MADV_DONTNEED, after which it must read as zeros, which is what the probe maps.
    uint64_t done = 0;
    const uint64_t f = finished_before();
    const int zr = uffd->zeropage(page_addr(idx), page_size, &done);
    if (zr == 0) {
      *woke = true;
      if (st & PG_swapcache) {
        store->release(swap_entry{handles[idx]});
        handles[idx] = 0;
      }
      page_lock::update(w, PG_uffd_wp | PG_swapcache | STAMP_MASK, write_stamp(f));
    } else if (zr == EEXIST && write) {
      // The page is present. Where the fault cannot be told to be a write-protect fault (no
      // page-fault error code on this architecture, sigbus.cc), a sweep may have protected it
      // without PG_uffd_wp: unprotect, or the write would fault here forever. On a writable
      // page that is a harmless no-op.
      if (const int r = unprotect(); r != 0) return r;
    }
    page_lock::set_bits(w, PG_referenced);
  }
  if (pin) {
    if (ps_pins(st) == PIN_MASK >> PIN_SHIFT) return EBUSY;
    page_lock::update(w, PIN_MASK, (st & PIN_MASK) + PIN_ONE);
    pinned.fetch_add(1, std::memory_order_relaxed);
  }
  return 0;
}

int pager::impl::resolve_missing(uint64_t idx, uint64_t st, bool write, unsigned charged,
                                 bool pin, readahead_state& ra, bool* woke) noexcept {
  USWAP_ASSERT_HELD(ptes[idx]);  // the page lock
  const uint64_t kind = ps_state(st);  // PS_NONE or PS_SWAPPED
  // The run: this page and the following ones of the same kind (the preceding ones for a
  // stream going down), as far as the window reaches and their locks can be had without
  // waiting (readahead is opportunistic). run[0, k) ascends and is locked from here to the end.
  // A fault-around run (ra.around) is [ra.around_lo, ra.around_lo + charged), idx within it:
  // the pages below idx are taken going down, then those above it going up.
  const bool down = ra.down && charged > 1;
  const bool around = ra.around && charged > 1;
  uint64_t run[max_readahead];
  run[0] = idx;
  unsigned k = 1;
  auto take = [&](uint64_t j) {
    std::atomic<uint64_t>& wj = ptes[j];
    if (ps_state(page_lock::load_data(wj)) != kind) return false;
    if (!page_lock::try_lock(wj, &page_class)) return false;
    if (ps_state(page_lock::load_data(wj)) != kind) {
      page_lock::unlock(wj);
      return false;
    }
    run[k++] = j;
    return true;
  };
  if (around) {
    for (uint64_t j = idx; j > ra.around_lo && k < charged && take(j - 1); --j) {
    }
    for (uint64_t j = idx + 1; j < ra.around_lo + charged && k < charged && take(j); ++j) {
    }
    std::sort(run, run + k);
  } else {
    while (k < charged && take(down ? idx - k : idx + k)) {
    }
    if (down) std::reverse(run, run + k);  // the faulting page last
  }
  // Back to the faulting page alone (its lock kept, the others' let go).
  auto fault_page_only = [&] {
    for (unsigned i = 0; i < k; ++i)
      if (run[i] != idx) page_lock::unlock(ptes[run[i]]);
    run[0] = idx;
    k = 1;
  };

  uintptr_t addr = page_addr(run[0]);
  int err = 0;
  uint64_t done = 0;
  bool keep = false;  // the pages keep their slots (mapped write-protected: the swap cache)
  const uint64_t finished = finished_before();  // for the write stamp
  // UFFDIO_COPY and UFFDIO_ZEROPAGE work within one VMA. Adjacent mappings are often separate
  // VMAs (the kernel cannot merge VMAs with different anon_vmas), and the kernel then refuses
  // the whole run with ENOENT: the run shrinks to the faulting page and is tried again.
  auto shrink_run_on_enoent = [&](int e) {
    if (e != ENOENT || done != 0 || k == 1) return false;
    fault_page_only();
    addr = page_addr(idx);
    return true;
  };
  if (kind == PS_NONE) {
    // First touch: a read maps the shared zero page, a write a private zeroed page.
    do {
      err = write ? uffd->copy(addr, zero_pages, k * page_size, false, &done)
                  : uffd->zeropage(addr, k * page_size, &done);
    } while (shrink_run_on_enoent(err));
  } else {
    staging_buffer buf;
    unsigned loaded = 0;
    if (buf) {
      // Read together: a run's pages on a remote backing device cost one round trip, not k.
      swap_entry entries[max_readahead];
      for (unsigned i = 0; i < k; ++i) entries[i] = swap_entry{handles[run[i]]};
      loaded = store->load_run(entries, k, buf.data);
      if (loaded < k && run[0] != idx) {
        // A page before the faulting one failed to load (a stream going down): that one alone.
        fault_page_only();
        addr = page_addr(idx);
        loaded = store->load(swap_entry{handles[idx]}, buf.data) == 0 ? 1 : 0;
      }
    }
    if (!buf) {
      err = ENOMEM;
    } else if (loaded == 0) {
      err = EIO;  // the faulting page's contents are lost: its fault gets a real SIGBUS
      // Which kills the process before it publishes again: the job's summary must still count
      // the page and name where it was.
      if (job_ref jr(*this); jr) publish_job_stats(*jr);
    } else {
      for (unsigned i = loaded; i < k; ++i) page_lock::unlock(ptes[run[i]]);
      k = loaded;
      // A read fault maps the pages write-protected and keeps their slots: while nobody
      // writes them, evicting them again costs nothing (the swap cache). A write fault maps
      // them writable: the write makes the copies stale. So does a read fault when the swap
      // cache does not pay (swapcache_pays).
      keep = !write && swapcache_pays();
      do {
        err = uffd->copy(addr, buf.data, k * page_size, keep, &done);
      } while (shrink_run_on_enoent(err));
    }
  }
  unsigned mapped = static_cast<unsigned>(done >> page_shift);
  bool adopted = false;
  if (err == EEXIST && mapped < k) {
    // The page at `mapped` has a PTE although the pager thought it had none; it can only have
    // come from outside the pager. Adopt it as mapped, with whatever it holds.
    err = 0;
    adopted = true;
    const uint64_t j = run[mapped];
    if (kind == PS_SWAPPED) {
      store->release(swap_entry{handles[j]});
      handles[j] = 0;
    }
    page_lock::update(ptes[j], PS_MASK | PG_uffd_wp | PG_swapcache | STAMP_MASK,
                      PS_MAPPED | write_stamp(UINT64_MAX));
    ++mapped;
  }

  const uint64_t age = nonresident_age.load(std::memory_order_relaxed) & SHADOW_MAX;
  // The mapped pages' write stamp (the shadow bits are reused for it once a page is mapped).
  const uint64_t stamp = mapped > 0 ? write_stamp(finished) : 0;
  for (unsigned i = 0; i < mapped - (adopted ? 1 : 0); ++i) {
    uint64_t flags = PS_MAPPED;
    // workingset_refault: a page evicted fewer than `limit` evictions ago would have stayed
    // resident with a little more room: it is part of the working set, activate it.
    const uint64_t st_i = page_lock::load_data(ptes[run[i]]);
    if (kind == PS_SWAPPED && ((age - ps_shadow(st_i)) & SHADOW_MAX) <= limit_pages)
      flags |= PG_active;
    if (kind == PS_SWAPPED) {
      if (!keep) {
        store->release(swap_entry{handles[run[i]]});
        handles[run[i]] = 0;
      } else {
        flags |= PG_uffd_wp | PG_swapcache;
      }
    }
    // The whole run counts as referenced, not just the faulting page: a run is touched
    // together (that is why it was read ahead), and keeping its pages alike keeps reclaim's
    // victims contiguous, so that write-protecting and dropping them costs one system call
    // (and one TLB flush) per run rather than per page.
    flags |= PG_referenced | stamp;
    page_lock::update(ptes[run[i]],
                      PS_MASK | PG_uffd_wp | PG_swapcache | PG_referenced | PG_active |
                          STAMP_MASK,
                      flags);
  }
  // The stream's position: a run going down mapped from its lowest page, so a short one may
  // have stopped before the faulting page (whose access then faults again).
  ra.first = mapped > 0 ? run[0] : UINT64_MAX;
  ra.next = run[0] + mapped;
  for (unsigned i = 0; i < mapped; ++i) touch_chunk(run[i]);
  if (mapped > 0) {
    *woke = true;
    if (kind == PS_NONE) {
      c.zero_fills.fetch_add(mapped, std::memory_order_relaxed);
    } else {
      c.swap_ins.fetch_add(mapped, std::memory_order_relaxed);
      c.major_faults.fetch_add(1, std::memory_order_relaxed);
    }
    if (mapped > 1) c.readahead.fetch_add(mapped - 1, std::memory_order_relaxed);
    c.faults.fetch_add(1, std::memory_order_relaxed);
    if (pin) {
      page_lock::update(ptes[idx], PIN_MASK, PIN_ONE);
      pinned.fetch_add(1, std::memory_order_relaxed);
    }
    lru_add(run, mapped);
  }
  for (unsigned i = 0; i < k; ++i) page_lock::unlock(ptes[run[i]]);
  uncharge(charged - mapped);
  return mapped > 0 ? 0 : err;
}

}  // namespace uswap
