// Reclaim: the clock over mapped pages (shrink_inactive_list / folio_check_references),
// write-protect sweeps (write tracking in bulk, cf. MGLRU's walk_mm), and eviction
// (shrink_folio_list: try_to_unmap + swap_writepage), in passes of up to max_reclaim_pass pages.
// A victim that a completed sweep write-protected needs no system call of its own before its
// copy; the others are write-protected by runs of consecutive pages; MADV_DONTNEED costs one
// call per pass. The race argument is in pager_impl.h ("Write-protect sweeps").
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "pager_impl.h"
#include "sys.h"

namespace uswap {

using namespace uffd_pte;

namespace {

// Calls f(first, len) for each run of consecutive values in sorted v[0, n) whose keep[i] is
// true.
template <class Keep, class F>
void for_each_run(const uint32_t* v, unsigned n, Keep keep, F f) {
  unsigned i = 0;
  while (i < n) {
    if (!keep(i)) {
      ++i;
      continue;
    }
    unsigned j = i + 1;
    while (j < n && keep(j) && v[j] == v[j - 1] + 1) ++j;
    f(i, j - i);
    i = j;
  }
}

}  // namespace

void pager::impl::lru_add_locked(uint64_t idx) noexcept {
  USWAP_ASSERT_HELD(lru_lock);
  const auto i = static_cast<uint32_t>(idx);
  if (lru_head == lru_nil) {
    lru_prev[i] = lru_next[i] = i;
    lru_head = i;
  } else {
    // The tail (the newest) is just behind the hand.
    const uint32_t tail = lru_prev[lru_head];
    lru_next[tail] = i;
    lru_prev[i] = tail;
    lru_next[i] = lru_head;
    lru_prev[lru_head] = i;
  }
  ++lru_nr;
  ptes[idx].fetch_or(PG_lru, std::memory_order_relaxed);
}

void pager::impl::lru_del_locked(uint64_t idx) noexcept {
  USWAP_ASSERT_HELD(lru_lock);
  const auto i = static_cast<uint32_t>(idx);
  if (lru_next[i] == i) {
    lru_head = lru_nil;
  } else {
    const uint32_t p = lru_prev[i], n = lru_next[i];
    lru_next[p] = n;
    lru_prev[n] = p;
    if (lru_head == i) lru_head = n;
  }
  --lru_nr;
  ptes[idx].fetch_and(~PG_lru, std::memory_order_relaxed);
}

void pager::impl::lru_add(const uint64_t* idx, unsigned n) noexcept {
  std::lock_guard g(lru_lock);
  for (unsigned i = 0; i < n; ++i) {
    const uint64_t st = ptes[idx[i]].load(std::memory_order_relaxed);
    if (!(st & (PG_lru | PG_isolated))) lru_add_locked(idx[i]);
  }
}

uint64_t pager::impl::lap_pages() noexcept {
  std::lock_guard g(lru_lock);
  return lru_nr;
}

uint64_t pager::impl::shrink(uint64_t nr_min, uint64_t nr_max) noexcept {
  USWAP_ASSERT_HELD(map_lock);  // reclaim runs under it: the mappings cannot change
  c.reclaim_passes.fetch_add(1, std::memory_order_relaxed);
  if (job_ref jr(*this); jr && jr->pool_limit_bytes()) balance_pool(*jr);
  uint64_t total = 0;
  // Each pass scans at most one lap of the clock and evicts up to a batch. A pass that stops
  // short (it met the first page it spared) is accepted once the minimum is reached: starting
  // another lap at once would evict the pages just spared before they could be used again.
  // Passes that evict nothing are allowed for a little more than a lap (which clears every
  // reference), then reclaim gives up: what is left is pinned, locked or isolated by others.
  // A pass scans at most four times what it wants: the budget counts passes of the first size
  // asked for (a small ask, a few pages short of a fork's share, scans as far as a large one).
  const uint64_t first_want = std::max<uint64_t>(1, std::min<uint64_t>(reclaim_pass, nr_max));
  uint64_t fruitless_budget = lap_pages() / (4 * first_want) + 2;
  // A parent that forked into the job passes over victims its children still map
  // (spare_shared), and a pass that put back such pages is not fruitless: the hand moved past
  // them. spare_run counts the pages put back since a pass last found others; once that is a
  // lap of the clock, passes take them all the same for a lap of scanning, then look again.
  while (total < nr_min) {
    const auto want = static_cast<unsigned>(std::min<uint64_t>(reclaim_pass, nr_max - total));
    const uint64_t lap = spare_shared_victims ? lap_pages() : 0;
    const uint64_t run = spare_run.load(std::memory_order_relaxed);
    const bool spare = spare_shared_victims && run < lap;
    const uint64_t scanned = c.scanned.load(std::memory_order_relaxed);
    unsigned spared = 0;
    const unsigned got = shrink_batch(want, spare, &spared);
    total += got;
    if (spare) {
      spare_run.store(got != 0 ? 0 : run + spared, std::memory_order_relaxed);
    } else if (spare_shared_victims) {
      const uint64_t now = run + c.scanned.load(std::memory_order_relaxed) - scanned;
      spare_run.store(now >= 2 * lap ? 0 : now, std::memory_order_relaxed);
    }
    if (spared == 0 && got == 0 && fruitless_budget-- == 0) break;
  }
  if (opts.reclaim_hook)
    opts.reclaim_hook(opts.reclaim_hook_arg,
                      resident.load(std::memory_order_relaxed) +
                          shared_pages.load(std::memory_order_relaxed),
                      store->device().stats().mem_used);
  if (job_ref jr(*this); jr) {
    // What this pass stored may have taken the pools past the pool worker's high watermark:
    // kicked now, it writes back while the program runs on, not at the next pass.
    if (total != 0 && jr->pool_limit_bytes() && pool_worker_on.load(std::memory_order_relaxed))
      balance_pool(*jr);
    publish_job_stats(*jr);
  }
  return total;
}

bool pager::impl::sweep() noexcept {
  // try_lock only: reclaim runs inside faults and must not wait. Busy means another reclaimer
  // is sweeping, and its sweep will do. The caller holds map_lock (reclaim runs under it), so
  // the mappings cannot change under the walk.
  USWAP_ASSERT_HELD(map_lock);
  std::unique_lock s(sweep_mu, std::try_to_lock);
  if (!s.owns_lock()) return false;
  sweep_wanted.store(false, std::memory_order_relaxed);
  scanned_since_sweep.store(0, std::memory_order_relaxed);
  {
    // Does write tracking pay for itself? (pager_impl.h, max_sweep_interval.)
    const uint64_t wp = c.wp_faults.load(std::memory_order_relaxed);
    const uint64_t f = c.faults.load(std::memory_order_relaxed);
    const uint64_t dwp = wp - wp_faults_at_sweep, df = f - faults_at_sweep;
    wp_faults_at_sweep = wp;
    faults_at_sweep = f;
    const unsigned iv = sweep_interval.load(std::memory_order_relaxed);
    if (wp_fault_share * dwp > df && iv < max_sweep_interval)
      sweep_interval.store(iv * 2, std::memory_order_relaxed);
    else if (4 * wp_fault_share * dwp < df && iv > 1)
      sweep_interval.store(iv / 2, std::memory_order_relaxed);
  }
  // acq_rel: a pin or unpin whose own RMW of sweep_started came first is seen below
  // (pager_impl.h, "Write-protect sweeps").
  const uint64_t k = sweep_started.fetch_add(1, std::memory_order_acq_rel) + 1;
  const bool any_pinned = pinned.load(std::memory_order_relaxed) != 0;
  bool ok = true;
  auto protect = [&](uint64_t first, uint64_t n) {
    if (n && uffd->writeprotect(page_addr(first), n << page_shift, true) != 0) ok = false;
  };
  for (const auto& [first, v] : mappings) {
    // Nothing in a PROT_NONE mapping can be written or evicted.
    if (v.prot == PROT_NONE) continue;
    if (!any_pinned) {
      protect(first, v.pages);  // one ioctl, one TLB flush for the whole mapping
      continue;
    }
    // Pinned pages stay writable for the system calls they were pinned for: protect around them.
    uint64_t run = first;
    for_each_touched(first, first + v.pages, [&](uint64_t i) {
      if (!ps_pins(ptes[i].load(std::memory_order_relaxed))) return;
      protect(run, i - run);
      run = i + 1;
    });
    protect(run, first + v.pages - run);
  }
  // A failed ioctl (cannot happen while the arena's VMAs stay registered) leaves sweep_done
  // behind: nothing this sweep may have missed is treated as protected.
  if (ok)
    sweep_done.store(k, std::memory_order_release);
  else
    c.wp_sweep_failures.fetch_add(1, std::memory_order_relaxed);
  sweep_finished.store(k, std::memory_order_release);
  c.wp_sweeps.fetch_add(1, std::memory_order_relaxed);
  return true;
}

unsigned pager::impl::shrink_batch(unsigned batch, bool spare, unsigned* nspared) noexcept {
  // With write tracking, a sweep twice per lap of the hand: it gives every page written since
  // the last one a write-protect fault on its next write (a reference), and makes this and the
  // following passes' victims write-protected already.
  if (opts.track_writes && sweep_wanted.load(std::memory_order_relaxed)) sweep();
  uint32_t victims[max_reclaim_pass];
  unsigned nv = 0;
  const unsigned cluster = opts.reclaim_cluster;
  spared_filter spared;
  {
    std::lock_guard g(lru_lock);
    // At most one lap: a page spared in this scan must not come round again in it, so the scan
    // stops when the hand returns to the first page it spared.
    const uint64_t max_scan = std::min<uint64_t>(4 * batch, lru_nr);
    uint64_t scanned = 0, neighbours = 0;
    uint32_t first_spared = lru_nil;
    while (nv < batch && scanned < max_scan && lru_head != lru_nil && lru_head != first_spared) {
      const uint32_t idx = lru_head;
      ++scanned;
      const uint64_t st = ptes[idx].load(std::memory_order_relaxed);
      if ((st & (PG_referenced | PG_active)) || ps_pins(st) || page_lock::is_locked(ptes[idx])) {
        // A second chance: the hand takes one step of credit (active -> referenced ->
        // nothing) and moves on; the page becomes the newest. With write tracking, the next
        // sweep write-protects it, so its next write after that is seen (reads cannot be:
        // this kernel has no accessed bit for userspace).
        if (st & (PG_referenced | PG_active))
          ptes[idx].fetch_and(~((st & PG_active) ? PG_active : PG_referenced),
                              std::memory_order_relaxed);
        if (cluster > 1) spared.add(idx);
        if (first_spared == lru_nil) first_spared = idx;
        lru_head = lru_next[idx];
        c.rotated.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      lru_del_locked(idx);
      ptes[idx].fetch_or(PG_isolated, std::memory_order_relaxed);
      victims[nv++] = idx;
      if (cluster > 1) {
        const unsigned before = nv;
        nv = isolate_cluster(idx, victims, nv, batch, spared);
        neighbours += nv - before;
      }
    }
    c.scanned.fetch_add(scanned, std::memory_order_relaxed);
    if (opts.track_writes) {
      // A lap of the clock is lru_nr pages past the hand or off the clock: neighbours taken
      // with a victim count, or a lap would take more sweeps to come round than the hand.
      scanned += neighbours;
      const uint64_t since = scanned_since_sweep.fetch_add(scanned, std::memory_order_relaxed);
      const uint64_t interval = lru_nr * sweep_interval.load(std::memory_order_relaxed) /
                                sweeps_per_lap;
      if (since + scanned >= std::max<uint64_t>(interval, reclaim_pass))
        sweep_wanted.store(true, std::memory_order_relaxed);
    }
  }
  if (nv == 0) return 0;

  // Lock the victims without waiting: a page whose lock is taken is being faulted or unmapped,
  // and is not a good victim anyway.
  uint32_t busy[max_reclaim_pass];
  unsigned nb = 0, nl = 0;
  for (unsigned i = 0; i < nv; ++i) {
    const uint32_t idx = victims[i];
    if (!page_lock::try_lock(ptes[idx], &page_class)) {
      busy[nb++] = idx;
      continue;
    }
    const uint64_t st = page_lock::load_data(ptes[idx]);
    if (!(st & PG_isolated)) {
      // Unmapped or discarded since it was isolated: no longer this reclaimer's.
      page_lock::unlock(ptes[idx]);
      continue;
    }
    if (ps_state(st) != PS_MAPPED || ps_pins(st)) {
      putback(&idx, 1);
      page_lock::unlock(ptes[idx]);
      continue;
    }
    victims[nl++] = idx;
  }
  if (nb) putback(busy, nb);
  if (nl == 0) return 0;
  std::sort(victims, victims + nl);
  if (spare) {
    const unsigned kept = spare_shared(victims, nl);
    *nspared = nl - kept;
    if ((nl = kept) == 0) return 0;
  }
  return evict(victims, nl);
}

// The victim's neighbours in its aligned window of opts.reclaim_cluster pages go with it, as the
// kernel reclaims a large folio whole, unless they are active (referenced twice, or refaulted
// soon after an eviction: a page used often is active most of the time, and one taken all the
// same refaults active), pinned, locked, isolated, or were spared earlier in this scan
// (`spared` may say yes for a page that was not, which only leaves it). A neighbour referenced
// once goes: the window's protection and drop are then one ioctl each instead of one per page
// (an IPI each), which pays for the odd early eviction. Returns the new victim count, at most
// `batch`.
unsigned pager::impl::isolate_cluster(uint32_t idx, uint32_t* victims, unsigned nv,
                                      unsigned batch, const spared_filter& spared) noexcept {
  USWAP_ASSERT_HELD(lru_lock);
  const uint64_t cluster = opts.reclaim_cluster;
  const uint64_t first = idx & ~(cluster - 1);
  const uint64_t last = std::min<uint64_t>(first + cluster, nr_pages);
  for (uint64_t j = first; j < last && nv < batch; ++j) {
    if (j == idx) continue;
    const uint64_t st = ptes[j].load(std::memory_order_relaxed);
    if (!(st & PG_lru) || (st & (PG_active | PG_isolated)) || ps_pins(st) ||
        page_lock::is_locked(ptes[j]) || spared.may_contain(static_cast<uint32_t>(j)))
      continue;
    lru_del_locked(j);
    ptes[j].fetch_or(PG_isolated, std::memory_order_relaxed);
    victims[nv++] = static_cast<uint32_t>(j);
  }
  return nv;
}

void pager::impl::putback(const uint32_t* v, unsigned n) noexcept {
  std::lock_guard g(lru_lock);
  for (unsigned i = 0; i < n; ++i) {
    const uint64_t st = ptes[v[i]].load(std::memory_order_relaxed);
    if (!(st & PG_isolated)) continue;  // unmapped meanwhile
    ptes[v[i]].fetch_and(~PG_isolated, std::memory_order_relaxed);
    if (ps_state(st) == PS_MAPPED) lru_add_locked(v[i]);
  }
}

// One eviction pass: the victims (sorted; each page-locked and isolated by this reclaimer) and
// what has become of each so far.
struct pager::impl::eviction_pass {
  enum fate : uint8_t { failed, stored, zero, clean };
  uint32_t* v;
  unsigned n;
  uint8_t kind[max_reclaim_pass];   // a fate
  uint64_t newh[max_reclaim_pass];  // for `stored`: the handle of the copy in the page store
};

unsigned pager::impl::evict(uint32_t* v, unsigned n) noexcept {
  eviction_pass p;
  p.v = v;
  p.n = n;
  for (unsigned i = 0; i < n; ++i) {
    USWAP_ASSERT_HELD(ptes[v[i]]);
    p.kind[i] = eviction_pass::stored;
  }
  c.eviction_batches.fetch_add(1, std::memory_order_relaxed);
  evict_write_protect(p);
  evict_copy_out(p);
  if (opts.evict_hook)
    for (unsigned i = 0; i < n; ++i)
      if (p.kind[i] != eviction_pass::failed)
        opts.evict_hook(opts.evict_hook_arg, reinterpret_cast<void*>(page_addr(v[i])));
  evict_drop(p);
  return evict_commit(p);
}

// 1. Write-protect first, so that from here on a write to a victim faults and waits for its page
//    lock instead of landing in a page that is being copied out. A victim not made writable
//    since a completed sweep is protected already (pager_impl.h): we hold its page lock, so no
//    writable event can come between this check and its drop. Only the others, written since the
//    last sweep, cost an ioctl (and a TLB flush) per run.
void pager::impl::evict_write_protect(eviction_pass& p) noexcept {
  const uint32_t* v = p.v;
  const unsigned n = p.n;
  const uint64_t done = sweep_done.load(std::memory_order_acquire);
  const uint64_t started = sweep_started.load(std::memory_order_relaxed);
  bool needs_wp[max_reclaim_pass];
  unsigned nwp = 0;
  for (unsigned i = 0; i < n; ++i) {
    const uint64_t st = page_lock::load_data(ptes[v[i]]);
    needs_wp[i] = !known_write_protected(st, done, started);
    if (needs_wp[i])
      ++nwp;
    else if (!(st & PG_uffd_wp))
      page_lock::set_bits(ptes[v[i]], PG_uffd_wp);  // a failed victim goes back protected
  }
  if (nwp) c.evict_wp_pages.fetch_add(nwp, std::memory_order_relaxed);
  // One ioctl per run of victims, a run spanning the holes between them: pages with no PTE
  // (none or swapped out), which the kernel's walk skips, locked for the call so that no fault
  // maps one meanwhile (a pinned page there would be protected against the system call it was
  // pinned for). A run stays inside one mapping: the range must be registered throughout.
  uint32_t holes[max_wp_hole_pages];
  unsigned i = 0;
  while (i < n) {
    if (!needs_wp[i]) {
      ++i;
      continue;
    }
    auto m = find_mapping(v[i]);
    const uint64_t mapping_end = m == mappings.end() ? v[i] + 1 : m->first + m->second.pages;
    // Victims [i, end) are covered so far, with holes[0, nh_end) between them; holes[nh_end,
    // nh) lie past v[end - 1], taken while looking for a further victim that needs protecting.
    unsigned nh = 0, nh_end = 0, end = i + 1;
    for (unsigned j = i + 1; j < n && v[j] < mapping_end; ++j) {
      const uint32_t gap = v[j] - v[j - 1] - 1;
      if (nh + gap > max_wp_hole_pages) break;
      unsigned taken = 0;
      for (uint32_t h = v[j - 1] + 1; h < v[j]; ++h) {
        if (!page_lock::try_lock(ptes[h], &page_class)) break;
        if (ps_state(page_lock::load_data(ptes[h])) == PS_MAPPED) {
          page_lock::unlock(ptes[h]);
          break;
        }
        holes[nh + taken++] = h;
      }
      if (taken != gap) {
        for (unsigned k = 0; k < taken; ++k) page_lock::unlock(ptes[holes[nh + k]]);
        break;
      }
      nh += gap;
      // Victims that need no protection extend a run only to reach one that does.
      if (needs_wp[j]) {
        end = j + 1;
        nh_end = nh;
      }
    }
    // Holes past the run are not in the call's range: let them go before it.
    for (unsigned k = nh_end; k < nh; ++k) page_lock::unlock(ptes[holes[k]]);
    const uint64_t span = uint64_t{v[end - 1] - v[i] + 1} << page_shift;
    const int r = uffd->writeprotect(page_addr(v[i]), span, true);
    for (unsigned k = 0; k < nh_end; ++k) page_lock::unlock(ptes[holes[k]]);
    for (unsigned j = i; j < end; ++j) {
      if (!needs_wp[j]) continue;
      if (r == 0)
        page_lock::set_bits(ptes[v[j]], PG_uffd_wp);
      else
        p.kind[j] = eviction_pass::failed;
    }
    c.evict_wp_calls.fetch_add(1, std::memory_order_relaxed);
    i = end;
  }
}

// 2. Copy out, compress, store. A clean swap-cache page already has its copy. Once the device
//    refuses a store for want of room (its mem_limit, or no swap slot), the batch's other pages
//    are not compressed only to be refused too (zswap's pool_reached_full, for one batch): they
//    stay, as a refused page would; zero pages, which need no room, still go.
void pager::impl::evict_copy_out(eviction_pass& p) noexcept {
  staging_buffer buf;
  bool pool_full = false;
  for (unsigned i = 0; i < p.n; ++i) {
    if (p.kind[i] == eviction_pass::failed) continue;
    const uint64_t st = page_lock::load_data(ptes[p.v[i]]);
    if (st & PG_swapcache) {
      p.kind[i] = eviction_pass::clean;
      continue;
    }
    if (!buf) {
      p.kind[i] = eviction_pass::failed;
      continue;
    }
    set_copying_page(page_addr(p.v[i]));
    copy_page_out(buf.data, reinterpret_cast<const void*>(page_addr(p.v[i])));
    set_copying_page(0);
    if (page_is_zero(buf.data)) {
      p.kind[i] = eviction_pass::zero;
      continue;
    }
    if (pool_full) {
      p.kind[i] = eviction_pass::failed;
      c.swap_out_failures.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    uint32_t csize = 0;
    swap_entry e;
    if (const int err = store->store(buf.data, &e, &csize); err != 0) {
      p.kind[i] = eviction_pass::failed;
      c.swap_out_failures.fetch_add(1, std::memory_order_relaxed);
      last_store_error.store(err, std::memory_order_relaxed);
      if (err == ENOSPC) {
        c.store_refusals.fetch_add(1, std::memory_order_relaxed);
        pool_full = true;
      }
      continue;
    }
    if (last_store_error.load(std::memory_order_relaxed) != 0)
      last_store_error.store(0, std::memory_order_relaxed);
    p.newh[i] = e.val;
    c.compressed_bytes.fetch_add(csize, std::memory_order_relaxed);
  }
}

// 3. Drop the pages: their PTEs go, the next access is a missing-page fault. All runs in one
//    process_madvise call when the kernel has it, so that the whole pass costs one TLB flush.
void pager::impl::evict_drop(eviction_pass& p) noexcept {
  const uint32_t* v = p.v;
  const unsigned n = p.n;
  auto going = [&](unsigned i) { return p.kind[i] != eviction_pass::failed; };
  iovec iov[max_reclaim_pass];  // IOV_MAX is 1024
  unsigned nio = 0;
  for_each_run(v, n, going, [&](unsigned i, unsigned len) {
    iov[nio++] = {reinterpret_cast<void*>(page_addr(v[i])), size_t{len} << page_shift};
  });
  size_t want = 0;
  for (unsigned i = 0; i < nio; ++i) want += iov[i].iov_len;
  const bool vectored =
      nio > 1 && self_pidfd >= 0 && vectored_evict.load(std::memory_order_relaxed) &&
      ::syscall(SYS_process_madvise, self_pidfd, iov, nio, MADV_DONTNEED, 0) ==
          static_cast<long>(want);
  if (vectored) return;
  for_each_run(v, n, going, [&](unsigned i, unsigned len) {
    if (sys::madvise(reinterpret_cast<void*>(page_addr(v[i])), uint64_t{len} << page_shift,
                     MADV_DONTNEED) == 0)
      return;
    for (unsigned j = i; j < i + len; ++j) {
      if (p.kind[j] == eviction_pass::stored) store->release(swap_entry{p.newh[j]});
      p.kind[j] = eviction_pass::failed;
    }
  });
}

// 4. New states, and the page locks let go. A failed victim stays mapped (and write-protected if
//    it got that far: its next write faults and unprotects it) and goes back on the clock.
unsigned pager::impl::evict_commit(eviction_pass& p) noexcept {
  const uint32_t* v = p.v;
  const unsigned n = p.n;
  unsigned evicted = 0, nstored = 0, nzero = 0, nclean = 0, ngone = 0;
  for (unsigned i = 0; i < n; ++i) ngone += p.kind[i] != eviction_pass::failed;
  // The eviction's age goes into the page's word (the shadow entry) for refault detection.
  const uint64_t age = nonresident_age.fetch_add(ngone, std::memory_order_relaxed) & SHADOW_MAX;
  for (unsigned i = 0; i < n; ++i) {
    std::atomic<uint64_t>& w = ptes[v[i]];
    if (p.kind[i] == eviction_pass::failed) {
      putback(&v[i], 1);
      page_lock::unlock(w);
      continue;
    }
    uint64_t next;
    if (p.kind[i] == eviction_pass::zero) {
      next = PS_NONE;
      ++nzero;
    } else {
      if (p.kind[i] == eviction_pass::stored) {
        handles[v[i]] = p.newh[i];
        ++nstored;
      } else {
        ++nclean;
      }
      next = PS_SWAPPED;
    }
    page_lock::update(w,
                      PS_MASK | PG_referenced | PG_active | PG_uffd_wp | PG_swapcache |
                          PG_isolated | STAMP_MASK,
                      next | (age << SHADOW_SHIFT));
    page_lock::unlock(w);
    ++evicted;
  }
  uncharge(evicted);
  c.swap_outs.fetch_add(nstored, std::memory_order_relaxed);
  c.zero_evictions.fetch_add(nzero, std::memory_order_relaxed);
  c.clean_evictions.fetch_add(nclean, std::memory_order_relaxed);
  if (nclean) swapcache_clean.fetch_add(nclean, std::memory_order_relaxed);
  return evicted;
}

}  // namespace uswap
