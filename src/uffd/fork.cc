// fork() with a pager: the child gets a pager of its own over a copy of the arena (pager.h,
// "Fork"). What the kernel does for the parent's private memory (dup_mmap under mmap_lock,
// copying page tables, sharing pages copy-on-write) it also does for the arena, if the arena may
// be inherited; what it cannot do is carry the userfaultfd over (without
// UFFD_FEATURE_EVENT_FORK, which would make the parent serve the child's faults, the child's
// copy of a registered range is plain anonymous memory: swapped-out pages would read as zeros).
// So the pager, driven by pthread_atfork:
//   prepare  (parent)  takes map_lock for writing, which waits for every fault, pin, reclaim and
//                      arena change in flight and holds off new ones, and lets the arena be
//                      inherited (MADV_DOFORK);
//   parent             MADV_DONTFORK again, releases map_lock;
//   child              has a consistent copy of every pager structure (nothing was in flight) but
//                      only the forking thread: it rebuilds what belongs to a process rather than
//                      to memory: a fresh map_lock (other threads may have been queued on the
//                      copied one), a new userfaultfd registered over the arena, a write-protect
//                      sweep (the copied PTEs lost their uffd-wp bits), the handler threads, a
//                      pidfd; pins of the parent's system calls in flight are dropped; dontfork
//                      mappings are holes to reserve again, wipeonfork ones are discarded.
// The pages swapped out at fork are in the child's copy of the zram device (copy-on-write like
// the rest), so the child reads back exactly what the parent had.
//
// The arena stays MADV_DONTFORK outside a fork: a child made by a raw clone() system call, which
// no pthread_atfork handler sees, gets no arena at all, so its accesses are SIGSEGV, never zeros.
// Unless the clone is trapped (kernel_access.h, "Raw forks"): then the same handlers run around
// it, through pager_fork_prepare/parent/child.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <mutex>
#include <new>
#include <vector>

#include "pager_impl.h"
#include "sigbus.h"
#include "sys.h"
#include "uswap/base/atomic_max.h"
#include "uswap/base/own_fd.h"
#include "uswap/base/raw_syscall.h"
#include "uswap/sync/tsan.h"

namespace uswap {

using namespace uffd_pte;

namespace {

std::atomic<unsigned> fork_gen{0};

// The pagers a fork must carry over (fork_policy::copy). fork_mu is held from the prepare
// handler to the parent or child handler, so no pager is created or destroyed during a fork.
std::mutex fork_mu;
// The thread between prepare and parent/child (0: none): a raw fork trapped inside fork() itself
// (an argument in the arena) must not run the handlers a second time.
std::atomic<pid_t> fork_holder{0};
std::vector<pager::impl*>& registry() {
  static auto* r = new std::vector<pager::impl*>();  // never destroyed: atfork may run at exit
  return *r;
}

// The handlers run as pager code (pager_scope): what they allocate (the child's new descriptor,
// its thread objects) must not be routed into the arena they are rebuilding.
void prepare_all() {
  pager_scope in_pager;
  fork_mu.lock();
  fork_holder.store(static_cast<pid_t>(::syscall(SYS_gettid)), std::memory_order_relaxed);
  for (pager::impl* p : registry()) p->prepare_fork();
}

void parent_all() {
  pager_scope in_pager;
  for (pager::impl* p : registry()) p->after_fork_parent();
  fork_holder.store(0, std::memory_order_relaxed);
  fork_mu.unlock();
}

void child_all() {
  pager_scope in_pager;
  fork_gen.fetch_add(1, std::memory_order_relaxed);
  for (pager::impl* p : registry()) (void)p->after_fork_child();
  fork_holder.store(0, std::memory_order_relaxed);
  fork_mu.unlock();
}

}  // namespace

bool pager_fork_prepare() noexcept {
  if (fork_holder.load(std::memory_order_relaxed) == static_cast<pid_t>(::syscall(SYS_gettid)))
    return false;
  prepare_all();
  return true;
}

void pager_fork_parent() noexcept { parent_all(); }

void pager_fork_child() noexcept { child_all(); }

thread_local const pager::impl* tls_map_writer [[gnu::tls_model("initial-exec")]] = nullptr;

unsigned current_fork_generation() noexcept { return fork_gen.load(std::memory_order_relaxed); }

bool fork_in_progress() noexcept { return fork_holder.load(std::memory_order_relaxed) != 0; }

void note_fork_handlers() {
  // A static's guarded initialisation, not std::call_once, whose state is libstdc++'s TLS in the
  // default model (cmake/uswap_layer.cmake says why the pager reaches TLS only directly).
  [[maybe_unused]] static const int registered = pthread_atfork(prepare_all, parent_all, child_all);
}

void fork_register(pager::impl* p) {
  std::lock_guard g(fork_mu);
  registry().push_back(p);
}

void fork_unregister(pager::impl* p) noexcept {
  std::lock_guard g(fork_mu);
  auto& r = registry();
  r.erase(std::remove(r.begin(), r.end(), p), r.end());
}

void pager::impl::set_arena_fork_flag(bool dofork) noexcept {
  USWAP_ASSERT_HELD_WRITE(map_lock);
  for_each_own_segment([&](uint64_t s, uint64_t n) {
    sys::madvise(reinterpret_cast<void*>(page_addr(s)), n << page_shift,
                 dofork ? MADV_DOFORK : MADV_DONTFORK);
  });
  if (!dofork) return;
  for (const auto& [s, v] : mappings)
    if (v.on_fork == fork_advice::dontfork)
      sys::madvise(reinterpret_cast<void*>(page_addr(s)), v.pages << page_shift, MADV_DONTFORK);
}

void pager::impl::prepare_fork() noexcept {
  if (detached()) return;  // a copy in a child that does not own it: nothing to carry over
  map_lock.down_write();
  tls_map_writer = this;
  map_writer_tid.store(static_cast<pid_t>(::syscall(SYS_gettid)), std::memory_order_release);
  in_fork = true;
  // The pool worker's round in flight ends first: the child's copy of the device has no
  // writeback half done, and the backing blocks held for it below stay what it refers to.
  pool_mu.lock();
  job_make_room_for_fork();
  set_arena_fork_flag(true);
}

void pager::impl::after_fork_parent() noexcept {
  if (!in_fork) return;
  // The child's now, unless fork() says it failed (fork_returned).
  fork_child_slot = child_slot;
  child_slot = -1;
  // A child in the job shares this process's frames from now on (spare_shared). The
  // descriptor is opened after the fork, so the child does not inherit it.
  if (fork_child_slot >= 0 && vectored_evict.load(std::memory_order_relaxed)) {
    spare_shared_victims = true;
    open_pagemap();
  }
  set_arena_fork_flag(false);
  in_fork = false;
  pool_mu.unlock();
  c.forks.fetch_add(1, std::memory_order_relaxed);
  tls_map_writer = nullptr;
  map_writer_tid.store(0, std::memory_order_release);
  map_lock.up_write();
}

status pager::impl::after_fork_child() noexcept {
  if (!in_fork) return {};
  in_fork = false;
  // A remote backing device's connections are the parent's sockets: made anew here.
  store->device().after_fork_child();
  // The parent's pagemap descriptor reads the parent's page tables (mark_fork_shared opens one).
  own_fd_release(pagemap_fd);
  if (pagemap_fd >= 0) ::close(pagemap_fd);
  pagemap_fd = -1;
  spare_shared_victims = false;
  // The swap cache's verdict is the parent's: a child's accesses are its own (redis-server's
  // BGSAVE child only reads what its parent wrote).
  swapcache_written.store(0, std::memory_order_relaxed);
  swapcache_clean.store(0, std::memory_order_relaxed);
  // Every lock of the pager was free at the fork but map_lock, which the parent's forking thread
  // holds and other threads may be queued on: their waiters live on stacks this process does
  // not run. A fresh lock, taken by this thread (the child's only one) for the rebuild.
  // This thread is the copy of the one that took it for writing in prepare_fork: release it as
  // that thread (for lockdep's and ThreadSanitizer's view of who holds what), then start from a
  // fresh lock.
  lockdep::release(&map_lock);
  tsan::pre_unlock(&map_lock);
  tsan::post_unlock(&map_lock);
  map_lock.~rw_semaphore();
  new (&map_lock) rw_semaphore(&map_class);
  std::unique_lock g(map_lock);
  // While g holds it, a fault on this thread (none is expected) resolves without it, by this
  // thread in sigbus mode, by the handler threads started below otherwise.
  tls_map_writer = this;
  map_writer_tid.store(static_cast<pid_t>(::syscall(SYS_gettid)), std::memory_order_release);
  struct clear_writer {
    pager::impl* m;
    ~clear_writer() {
      tls_map_writer = nullptr;
      m->map_writer_tid.store(0, std::memory_order_release);
    }
  } clear_on_return{this};
  fork_generation = current_fork_generation();
  owner_pid = ::getpid();
  forget_handlers();  // and the pool worker and kswapd
  kswapd_kick.store(0, std::memory_order_relaxed);
  // pool_mu was copied held by this thread's parent (prepare_fork), with no waiter here.
  pool_mu.~mutex();
  new (&pool_mu) std::mutex();
  pool_kick.store(0, std::memory_order_relaxed);
  pool_round.store(0, std::memory_order_relaxed);
  pool_rounds.store(0, std::memory_order_relaxed);
  pool_waits.store(0, std::memory_order_relaxed);
  own_fd_release(stop_fd);
  if (stop_fd >= 0) ::close(stop_fd);
  stop_fd = -1;
  own_fd_release(self_pidfd);
  if (self_pidfd >= 0) ::close(self_pidfd);
  self_pidfd = own_fd_take(static_cast<int>(::syscall(SYS_pidfd_open, ::getpid(), 0)));

  auto fail = [&](int err, const std::string& what) -> status {
    // Without a registered userfaultfd a swapped-out page would read as zeros: take the whole
    // arena away instead, so that any access is a SIGSEGV, and refuse to work.
    sys::munmap(reinterpret_cast<void*>(base), nr_pages << page_shift);
    base_lost = true;
    fork_generation = ~0u;
    return error(err, "uffd: the forked child's pager could not be rebuilt: " + what);
  };

  // The parent's descriptor names the parent's address space: a new one for this one.
  uffd.reset();
  auto f = uffd_file::open(opts.mode == fault_mode::sigbus, opts.access);
  if (!f) return fail(f.error().code(), std::string(f.error().message()));
  uffd = std::move(f).value();

  // dontfork mappings were not inherited: their range is a hole. Their pages' states (and
  // slots) go; the range becomes free, reserved again below.
  std::vector<std::pair<uint64_t, uint64_t>> holes, wiped;
  for (const auto& [s, v] : mappings) {
    if (v.on_fork == fork_advice::dontfork) holes.emplace_back(s, v.pages);
    if (v.on_fork == fork_advice::wipeonfork) wiped.emplace_back(s, v.pages);
  }
  for (const auto& [s, n] : holes) {
    release_pages(s, n, true);
    mappings.erase(s);
    mapped_pages.fetch_sub(n, std::memory_order_relaxed);
    void* a = reinterpret_cast<void*>(page_addr(s));
    if (sys::mmap(a, n << page_shift, PROT_NONE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) == MAP_FAILED)
      return fail(errno, "cannot reserve a dontfork range again");
    free_extents.insert(s, n);
  }
  nr_mappings.store(mappings.size(), std::memory_order_relaxed);
  set_arena_fork_flag(false);
  int reg_err = 0;
  for_each_own_segment([&](uint64_t s, uint64_t n) {
    sys::madvise(reinterpret_cast<void*>(page_addr(s)), n << page_shift, MADV_NOHUGEPAGE);
    if (reg_err == 0)
      if (auto st = uffd->register_range(page_addr(s), n << page_shift); !st.ok())
        reg_err = st.code();
  });
  if (reg_err != 0) return fail(reg_err, "UFFDIO_REGISTER of the arena");
  for (const auto& [s, n] : wiped) release_pages(s, n, false);

  // Pins belonged to the parent's system calls in flight; none runs here.
  if (pinned.load(std::memory_order_relaxed) != 0) {
    for_each_touched(0, nr_pages, [&](uint64_t i) {
      const uint64_t st = ptes[i].load(std::memory_order_relaxed);
      if (ps_pins(st)) ptes[i].fetch_and(~PIN_MASK, std::memory_order_relaxed);
    });
    pinned.store(0, std::memory_order_relaxed);
  }
  // The copied PTEs lost their uffd-wp bits (the child's VMAs were not registered when they were
  // copied). A sweep protects every resident page again, so that PG_uffd_wp ("this PTE is
  // protected") and the write stamps hold; protecting more than the states say is always safe.
  sweep_wanted.store(true, std::memory_order_relaxed);
  if (!sweep()) return fail(EAGAIN, "the write-protect sweep could not start");
  if (sweep_done.load(std::memory_order_relaxed) != sweep_started.load(std::memory_order_relaxed))
    return fail(EIO, "the write-protect sweep failed");

  // The child's own statistics start now.
  for (std::atomic<uint64_t>* ctr :
       {&c.faults, &c.wp_faults, &c.zero_fills, &c.swap_ins, &c.readahead, &c.swap_outs,
        &c.clean_evictions, &c.zero_evictions, &c.reclaim_passes, &c.scanned, &c.rotated,
        &c.shared_spared, &c.shared_write_around, &c.overcharges, &c.swap_out_failures,
        &c.eviction_batches, &c.store_refusals, &c.fault_ns, &c.compressed_bytes, &c.wp_sweeps,
        &c.wp_sweep_failures, &c.evict_wp_pages, &c.evict_wp_calls, &c.forks, &c.major_faults,
        &c.pgsteal_kswapd, &c.pgsteal_direct, &c.kswapd_wakeups})
    ctr->store(0, std::memory_order_relaxed);
  for (std::atomic<uint64_t>& b : c.fault_hist) b.store(0, std::memory_order_relaxed);
  peak_resident.store(resident.load(std::memory_order_relaxed), std::memory_order_relaxed);
  // The backing blocks the parent retained for this copy of the device are this child's own.
  fork_blocks.clear();
  fork_child_slot = -1;
  job_after_fork_child();

  if (auto st = start_handlers(); !st.ok()) return fail(st.code(), std::string(st.message()));
  map_writer_tid.store(0, std::memory_order_release);  // before the lock is let go
  g.unlock();
  // No longer the writer: starting a thread pins the locale data it reads (the shim's
  // pthread_create), and that pin must take map_lock like any other.
  tls_map_writer = nullptr;
  start_pool_worker();
  start_kswapd();
  return {};
}

// --- Fork-shared pages (pager_impl.h). The kernel's memcg charges a frame once, to whoever
// allocated it, however many processes map it copy-on-write after a fork; its swap cache lets a
// reclaim unmap the frame from all of them. Here every process has a pager of its own, so a
// child would otherwise charge again every page it inherited, and its parent evict half of its
// own before every fork to make room for that (a fork-and-exec included). Instead the child
// charges nothing for what it inherits: a page becomes its own when it writes it (a
// write-protect fault: the sweep after the fork protected every page) or when pagemap shows that
// nobody else maps it any more.

void pager::impl::mark_fork_shared() noexcept {
  USWAP_ASSERT_HELD_WRITE(map_lock);  // nothing faults, pins or reclaims meanwhile
  uint64_t n = 0;
  {
    std::lock_guard l(lru_lock);
    for_each_touched(0, nr_pages, [&](uint64_t i) {
      const uint64_t st = ptes[i].load(std::memory_order_relaxed);
      if (ps_state(st) != PS_MAPPED || (st & PG_shared)) return;
      ptes[i].fetch_or(PG_shared, std::memory_order_relaxed);
      ++n;
      if (st & PG_lru) lru_del_locked(i);
    });
  }
  shared_pages.fetch_add(n, std::memory_order_relaxed);
  USWAP_DCHECK(resident.load(std::memory_order_relaxed) == n);  // no charge is in flight
  resident.fetch_sub(n, std::memory_order_relaxed);
  peak_resident.store(resident.load(std::memory_order_relaxed), std::memory_order_relaxed);
  // This process's own descriptor (after_fork_child closed the parent's), opened now, while it
  // has a /proc (a sandbox may chroot it away later). Without one, a shared page becomes this
  // process's own only when it writes it.
  // Not in a program that installed a seccomp filter of its own (vectored_evict is false
  // there): its policy may kill for the calls this needs.
  if (n != 0 && vectored_evict.load(std::memory_order_relaxed)) open_pagemap();
}

void pager::impl::open_pagemap() noexcept {
  USWAP_ASSERT_HELD_WRITE(map_lock);  // readers use pagemap_fd under map_lock
  if (pagemap_fd >= 0) return;
  const long fd = raw_syscall(SYS_openat, AT_FDCWD, "/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  pagemap_fd = fd >= 0 ? own_fd_take(static_cast<int>(fd)) : -1;
}

void pager::impl::own_all_shared() noexcept {
  USWAP_ASSERT_HELD_WRITE(map_lock);
  uint64_t n = 0;
  {
    std::lock_guard l(lru_lock);
    for_each_touched(0, nr_pages, [&](uint64_t i) {
      const uint64_t st = ptes[i].load(std::memory_order_relaxed);
      if (!(st & PG_shared)) return;
      ptes[i].fetch_and(~PG_shared, std::memory_order_relaxed);
      ++n;
      if (!(st & PG_unevictable)) lru_add_locked(i);
    });
  }
  shared_pages.fetch_sub(n, std::memory_order_relaxed);
  fetch_max(peak_resident, resident.fetch_add(n, std::memory_order_relaxed) + n);
}

void pager::impl::unshare_locked(uint64_t idx, uint64_t st, bool charged) noexcept {
  USWAP_ASSERT_HELD(ptes[idx]);  // the page lock
  USWAP_DCHECK(ps_state(st) == PS_MAPPED && (st & PG_shared));
  page_lock::clear_bits(ptes[idx], PG_shared);
  shared_pages.fetch_sub(1, std::memory_order_relaxed);
  if (!charged) fetch_max(peak_resident, resident.fetch_add(1, std::memory_order_relaxed) + 1);
  if (!(st & PG_unevictable)) lru_add(&idx, 1);
}

void pager::impl::reconcile_shared() noexcept {
  USWAP_ASSERT_HELD(map_lock);  // the records and the page states' mappings stay
  if (pagemap_fd < 0 || !vectored_evict.load(std::memory_order_relaxed)) return;
  const uint64_t now = coarse_clock_ns();
  uint64_t next = shared_next_ns.load(std::memory_order_relaxed);
  if (now < next || !shared_next_ns.compare_exchange_strong(next, now + shared_check_ns,
                                                           std::memory_order_relaxed))
    return;

  // pagemap: one 64-bit entry per page; bit 63 present, bit 56 mapped exclusively (only this
  // process maps the frame). Read a chunk's entries where the chunk holds shared pages.
  constexpr uint64_t present = uint64_t{1} << 63, exclusive = uint64_t{1} << 56;
  constexpr unsigned per_read = 1u << chunk_shift;
  const uint64_t started = clock_ns();  // the coarse clock's tick would read as 4 ms spent
  staging_buffer buf;
  if (!buf) return;
  auto* entries = reinterpret_cast<uint64_t*>(buf.data);
  auto* found = reinterpret_cast<uint32_t*>(buf.data + per_read * sizeof(uint64_t));
  const unsigned max_found =
      static_cast<unsigned>((staging_buffer::pages * page_size - per_read * sizeof(uint64_t)) /
                            sizeof(uint32_t));
  unsigned nf = 0;
  static_assert(per_read == uint64_t{1} << chunk_shift, "a read is one chunk");
  for (uint64_t first = next_touched_word(0, nr_pages); first < nr_pages && nf < max_found;
       first = next_touched_word(first + per_read, nr_pages)) {
    if (!chunk_was_touched(first)) continue;
    const uint64_t n = std::min<uint64_t>(per_read, nr_pages - first);
    bool any = false;
    for (uint64_t i = first; i < first + n && !any; ++i)
      any = ptes[i].load(std::memory_order_relaxed) & PG_shared;
    if (!any) continue;
    const long got = raw_syscall(SYS_pread64, pagemap_fd, entries, n * sizeof(uint64_t),
                                 static_cast<off_t>((page_addr(first) >> page_shift) * 8));
    if (got != static_cast<long>(n * sizeof(uint64_t))) return;
    for (uint64_t i = 0; i < n && nf < max_found; ++i)
      if ((ptes[first + i].load(std::memory_order_relaxed) & PG_shared) &&
          (entries[i] & (present | exclusive)) == (present | exclusive))
        found[nf++] = static_cast<uint32_t>(first + i);
  }
  // A look reads the page tables under every chunk holding shared pages (some milliseconds for
  // a few hundred MiB): the next one waits long enough to keep looking under 1/20 of the time.
  if (const uint64_t spent = clock_ns() - started; spent * shared_check_share > shared_check_ns)
    shared_next_ns.store(now + spent * shared_check_share, std::memory_order_relaxed);
  // A reclaim pass at a time: made this process's own (on the clock, counted over the
  // allowance), then charged: the charge of nothing more reserves what it can and reclaims the
  // rest, the pages just made evictable among its victims. (Charged first, a large batch found
  // a clock with nothing on it and could only map above the limit; made its own all at once,
  // the process held a whole limit over it until reclaim caught up.)
  for (unsigned k = 0; k < nf;) {
    const unsigned end = std::min(nf, k + reclaim_pass);
    for (; k < end; ++k) {
      std::atomic<uint64_t>& w = ptes[found[k]];
      page_lock::lock(w, &page_class);
      const uint64_t st = page_lock::load_data(w);
      if (ps_state(st) == PS_MAPPED && (st & PG_shared)) unshare_locked(found[k], st, false);
      page_lock::unlock(w);
    }
    charge(0);
  }
}

// A child writes what it inherited in runs (an interpreter's reference counts, a heap being
// rebuilt): one write-protect fault per page would cost a signal and an ioctl on top of the
// kernel's copy each. The write faults in the page's window: its shared neighbours become this
// process's own and writable at once [the fault-around of do_read_fault, for copies]. A
// neighbour never written is then charged here and in its parent both, which errs towards
// reclaiming more, never towards passing the limit.
namespace {
// idx's aligned window of pager::impl::shared_write_around pages, within [start, end).
std::pair<uint64_t, uint64_t> write_window(uint64_t idx, uint64_t start, uint64_t end) {
  constexpr uint64_t w = pager::impl::shared_write_around;
  return {std::max<uint64_t>(start, idx & ~(w - 1)), std::min<uint64_t>(end, (idx | (w - 1)) + 1)};
}
}  // namespace

unsigned pager::impl::shared_write_window(uint64_t idx, uint64_t start,
                                          uint64_t end) const noexcept {
  const auto [lo, hi] = write_window(idx, start, end);
  unsigned n = 0;
  for (uint64_t j = lo; j < hi; ++j) {
    const uint64_t st = ptes[j].load(std::memory_order_relaxed);
    n += ps_state(st) == PS_MAPPED && (st & PG_shared);
  }
  return std::max(n, 1u);
}

unsigned pager::impl::unshare_around(uint64_t idx, uint64_t start, uint64_t end,
                                     unsigned budget) noexcept {
  USWAP_ASSERT_HELD(map_lock);
  const auto [lo, hi] = write_window(idx, start, end);
  uint64_t run[shared_write_around];
  unsigned k = 0;
  // Opportunistic, as readahead: pages whose lock is taken are left to their own faults.
  for (uint64_t j = lo; j < hi && k < budget; ++j) {
    if (j == idx) continue;
    std::atomic<uint64_t>& wj = ptes[j];
    uint64_t sj = wj.load(std::memory_order_relaxed);
    if (ps_state(sj) != PS_MAPPED || !(sj & PG_shared) || ps_pins(sj)) continue;
    if (!page_lock::try_lock(wj, &page_class)) continue;
    sj = page_lock::load_data(wj);
    if (ps_state(sj) != PS_MAPPED || !(sj & PG_shared) || ps_pins(sj)) {
      page_lock::unlock(wj);
      continue;
    }
    run[k++] = j;
  }
  const uint64_t f = finished_before();  // for the write stamps, as any unprotecting event
  unsigned done = 0;
  for (unsigned i = 0; i < k;) {
    unsigned m = 1;  // a run of consecutive pages: one ioctl
    while (i + m < k && run[i + m] == run[i] + m) ++m;
    const bool ok = uffd->writeprotect(page_addr(run[i]), m * page_size, false) == 0;
    for (unsigned e = i + m; i < e; ++i) {
      std::atomic<uint64_t>& wj = ptes[run[i]];
      if (ok) {
        const uint64_t sj = page_lock::load_data(wj);
        unshare_locked(run[i], sj, true);
        // Writable from now on, unseen: a kept swap copy would go stale.
        if (sj & PG_swapcache) {
          store->release(swap_entry{handles[run[i]]});
          handles[run[i]] = 0;
        }
        page_lock::update(wj, PG_uffd_wp | PG_swapcache | STAMP_MASK, write_stamp(f));
        ++done;
      }
      page_lock::unlock(wj);
    }
  }
  c.shared_write_around.fetch_add(done, std::memory_order_relaxed);
  return done;
}

// The kernel's reclaim unmaps a shared frame from every process that maps it (try_to_unmap
// through the anon_vma) and frees it. A parent here can only drop its own mapping: while a child
// still maps the frame that frees nothing, and the child then charges the frame as its own
// (reconcile_shared), so the job is no further below its limit and the parent refaults the page
// later. Such victims go back on the clock (shrink takes them all the same after a lap that
// found nothing else: a charge must be able to make progress).
unsigned pager::impl::spare_shared(uint32_t* v, unsigned n) noexcept {
  USWAP_ASSERT_HELD(map_lock);  // pagemap_fd stays
  if (pagemap_fd < 0 || !vectored_evict.load(std::memory_order_relaxed)) return n;
  constexpr uint64_t present = uint64_t{1} << 63, exclusive = uint64_t{1} << 56;
  constexpr unsigned window = 64;  // entries per read: a reclaim cluster or two
  uint64_t entries[window];
  bool shared[max_reclaim_pass];
  unsigned nshared = 0;
  for (unsigned i = 0; i < n;) {
    const uint64_t base = v[i];
    const uint64_t len = std::min<uint64_t>(window, v[n - 1] - base + 1);
    const long got = raw_syscall(SYS_pread64, pagemap_fd, entries, len * sizeof(uint64_t),
                                 static_cast<off_t>((page_addr(base) >> page_shift) * 8));
    if (got != static_cast<long>(len * sizeof(uint64_t))) return n;  // unknown: evict them all
    for (; i < n && v[i] < base + len; ++i) {
      shared[i] = (entries[v[i] - base] & (present | exclusive)) == present;
      nshared += shared[i];
    }
  }
  if (nshared == 0) return n;
  unsigned kept = 0;
  for (unsigned i = 0; i < n; ++i) {
    USWAP_ASSERT_HELD(ptes[v[i]]);
    if (shared[i]) {
      putback(&v[i], 1);
      page_lock::unlock(ptes[v[i]]);
    } else {
      v[kept++] = v[i];
    }
  }
  c.shared_spared.fetch_add(nshared, std::memory_order_relaxed);
  return kept;
}

void pager::prepare_fork() noexcept { impl_->prepare_fork(); }

void pager::fork_returned(pid_t child) noexcept {
  impl& m = *impl_;
  const bool child_created = child > 0;
  // A guest's child's pid is of its namespace: not named to the supervisor, which would look
  // it up in its own (the slot is reaped by age if the child never adopts it).
  if (child_created && m.fork_child_slot >= 0)
    if (job_ref jr(m); jr && !jr->guest())
      jr->child_forked(static_cast<unsigned>(m.fork_child_slot), child);
  if (!child_created) {
    if (zram_block_allocator* a = m.store->device().backing_allocator())
      for (uint64_t b : m.fork_blocks) a->release(b);
    if (m.fork_child_slot >= 0)
      if (job_ref jr(m); jr) jr->leave(static_cast<unsigned>(m.fork_child_slot));
  }
  m.fork_blocks.clear();
  m.fork_child_slot = -1;
  // A member that grew alone has company now (its child, in the job from its first
  // instruction): it may be asked for room from here on, idle or not.
  if (child_created)
    if (job_ref jr(m); jr) m.want_kswapd(*jr, true);
}
void pager::after_fork_parent() noexcept { impl_->after_fork_parent(); }
void pager::program_sandboxed() noexcept {
  impl_->vectored_evict.store(false, std::memory_order_relaxed);
}
status pager::after_fork_child() noexcept { return impl_->after_fork_child(); }

}  // namespace uswap
