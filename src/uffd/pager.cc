// The pager's life cycle, releasing pages, pinning, statistics and invariants, and the handler
// threads of handler_thread mode. The arena's records (map, unmap, protect, remap...) are in
// vma.cc, faults in fault.cc, reclaim in reclaim.cc, fork in fork.cc, the SIGBUS handler in
// sigbus.cc.
#include <linux/userfaultfd.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <system_error>
#include <vector>

#include "kernel_access.h"
#include "pager_impl.h"
#include "sys.h"
#include "uswap/base/fault_inject.h"
#include "uswap/base/own_fd.h"

namespace uswap {

using namespace uffd_pte;

namespace {

std::string mib(uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

// One of the per-page tables, or an empty one (which create reports as ENOMEM) when refused.
template <class T>
zeroed_array<T> meta_table(uint64_t n) {
  return should_fail(fault_point::pager_meta) ? zeroed_array<T>() : zeroed_array<T>(n);
}

constexpr int staging_pool_slots = 64;
constexpr size_t staging_bytes = staging_buffer::pages * page_size;
std::atomic<void*> staging_pool[staging_pool_slots];

}  // namespace

// ---------------------------------------------------------------------------------------------
// Names.

std::string_view to_string(fault_mode m) noexcept { return name_of(fault_mode_names, m); }

// "handler" and "user" are short forms USWAP_FAULT_MODE / USWAP_ACCESS have always taken.
result<fault_mode> parse_fault_mode(std::string_view text) {
  if (text == "handler") return fault_mode::handler_thread;
  return parse_enum(fault_mode_names, text, "fault mode");
}

std::string_view to_string(fork_policy p) noexcept { return name_of(fork_policy_names, p); }

std::string_view to_string(uffd_access a) noexcept { return name_of(uffd_access_names, a); }

result<uffd_access> parse_uffd_access(std::string_view text) {
  if (text == "user") return uffd_access::user_mode_only;
  return parse_enum(uffd_access_names, text, "userfaultfd access");
}

// ---------------------------------------------------------------------------------------------
// Helpers shared by the fault and reclaim paths.

staging_buffer::staging_buffer() noexcept {
  for (std::atomic<void*>& s : staging_pool) {
    void* p = s.load(std::memory_order_relaxed);
    if (p && s.compare_exchange_strong(p, nullptr, std::memory_order_acquire)) {
      data = static_cast<uint8_t*>(p);
      return;
    }
  }
  void* p =
      sys::mmap(nullptr, staging_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  data = p == MAP_FAILED ? nullptr : static_cast<uint8_t*>(p);
}

staging_buffer::~staging_buffer() {
  if (!data) return;
  for (std::atomic<void*>& s : staging_pool) {
    void* expected = nullptr;
    if (s.compare_exchange_strong(expected, data, std::memory_order_release)) return;
  }
  sys::munmap(data, staging_bytes);
}

void copy_page_out(void* dst, const void* src) noexcept {
#if defined(__x86_64__)
  // rep movsb: fast on every CPU with ERMS, and invisible to ThreadSanitizer's instrumentation
  // and to its memcpy interceptor alike.
  size_t n = page_size;
  asm volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(n) : : "memory");
#else
  auto* d = static_cast<volatile uint64_t*>(dst);
  auto* s = static_cast<const volatile uint64_t*>(src);
  for (size_t i = 0; i < page_size / 8; ++i) d[i] = s[i];
#endif
}

bool page_is_zero(const void* p) noexcept {
  const auto* w = static_cast<const uint64_t*>(p);
  for (size_t i = 0; i < page_size / 8; i += 8) {
    if (w[i] | w[i + 1] | w[i + 2] | w[i + 3] | w[i + 4] | w[i + 5] | w[i + 6] | w[i + 7])
      return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// Life cycle.

bool pager::impl::detached() const noexcept {
  // The generation catches fork() (pthread_atfork counts it), the pid a raw clone(), which no
  // handler sees: that child must not drive the parent's userfaultfd either.
  return fork_generation != current_fork_generation() || owner_pid != ::getpid();
}

void pager::impl::forget_handlers() noexcept {
  // In a forked child the threads these objects name live in the parent: nothing may be done
  // with them (join, detach, destroy would all touch a thread this process does not have).
  for (std::thread& t : handlers) new (&t) std::thread();
  handlers.clear();
  new (&pool_worker) std::thread();
  pool_worker_on.store(false, std::memory_order_relaxed);
  new (&kswapd) std::thread();
  kswapd_on.store(false, std::memory_order_relaxed);
  kswapd_claimed.store(false, std::memory_order_relaxed);
}

pager::impl::~impl() {
  fork_unregister(this);
  const bool child = detached();
  if (registry_slot >= 0) sigbus_unregister(registry_slot);
  if (child) {
    forget_handlers();
  } else {
    stop_kswapd();
    stop_pool_worker();
    if (!handlers.empty()) {
      const uint64_t one = 1;
      (void)!::write(stop_fd, &one, sizeof one);
      for (std::thread& t : handlers) t.join();
    }
  }
  own_fd_release(stop_fd);
  if (stop_fd >= 0) ::close(stop_fd);
  own_fd_release(self_pidfd);
  if (self_pidfd >= 0) ::close(self_pidfd);
  own_fd_release(pagemap_fd);
  if (pagemap_fd >= 0) ::close(pagemap_fd);
  // A child that does not own the pager may not have the arena (MADV_DONTFORK): its range may
  // hold something else by now.
  if (base && !child && !base_lost)
    sys::munmap(reinterpret_cast<void*>(base), nr_pages << page_shift);
}

pager::pager(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
pager::~pager() {
  // Background reclaim first: it charges and evicts through the job leave_job hands back.
  if (!impl_->detached()) impl_->stop_kswapd();
  leave_job();
}

namespace {

// The CPUs this process may run on, in order (sched_getaffinity); {} if that fails.
std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

}  // namespace

status pager::impl::start_handlers() {
  if (opts.mode != fault_mode::handler_thread) return {};
  // Once: a new set of handlers (restart_threads) starts while the old one reads it.
  if (!uffd->dontwake()) uffd->set_dontwake(true);
  stop_fd = own_fd_take(::eventfd(0, EFD_CLOEXEC));
  if (stop_fd < 0) return error(errno, "uffd: eventfd for the handler threads");
  // Default: one thread per allowed CPU, bound to it. The faulting thread sleeps on its CPU, so
  // the handler there runs next and resolves the fault without a cross-CPU wake-up (an IPI and,
  // in a VM, a hypervisor exit: 44-55 us against 7 us on the same CPU here).
  std::vector<int> cpus;
  if (opts.handler_threads == 0) cpus = allowed_cpus();
  const unsigned n = opts.handler_threads ? opts.handler_threads
                                          : static_cast<unsigned>(std::max<size_t>(cpus.size(), 1));
  // Returns once every thread runs its loop: a thread still starting allocates (the C library
  // and a sanitizer runtime do, before the thread's function runs), and a fork in that window
  // copies an allocator whose lock that thread holds into a child where nobody releases it.
  // The count is shared with the threads: one may still be in notify_one when this returns.
  auto started = std::make_shared<std::atomic<unsigned>>(0);
  unsigned created = 0;
  status st;
  async_signals_blocked inherited_by_the_threads;
  try {
    for (unsigned i = 0; i < n; ++i) {
      const int cpu = i < cpus.size() ? cpus[i] : -1;
      handlers.emplace_back([this, cpu, started, stop = stop_fd]() mutable {
        if (cpu >= 0) {
          cpu_set_t one;
          CPU_ZERO(&one);
          CPU_SET(cpu, &one);
          (void)::sched_setaffinity(0, sizeof one, &one);
        }
        started->fetch_add(1, std::memory_order_release);
        started->notify_one();
        started.reset();
        handler_loop(stop);
      });
      ++created;
    }
  } catch (const std::system_error& e) {
    st = error(e.code().value(), std::string("uffd: cannot start a handler thread: ") + e.what());
  }
  for (unsigned s; (s = started->load(std::memory_order_acquire)) != created;) started->wait(s);
  return st;
}

result<std::shared_ptr<pager>> pager::create(const pager_options& o) {
  const uint64_t limit_pages = o.limit >> page_shift;
  if (limit_pages < 64)
    return error(EINVAL, "uffd: limit must be at least 64 pages (256 KiB), not " +
                             std::to_string(o.limit) + " bytes");
  const uint64_t nr_pages = round_up_to_page(o.max_size) >> page_shift;
  if (nr_pages == 0 || nr_pages >= lru_nil)
    return error(EINVAL,
                 "uffd: max_size must be at least 4 KiB and below 16 TiB (32-bit page numbers)");
  if (o.arena_base & ~page_mask) return error(EINVAL, "uffd: arena_base must be page aligned");
  const uint64_t swap_pages = o.swap_size ? round_up_to_page(o.swap_size) >> page_shift : nr_pages;
  if (o.handler_threads > 64) return error(EINVAL, "uffd: handler_threads must be 0..64");
  if (o.reclaim_batch < 1 || o.reclaim_batch > max_reclaim_batch)
    return error(EINVAL, "uffd: reclaim_batch must be 1..32");
  if (o.reclaim_cluster < 1 || o.reclaim_cluster > max_reclaim_cluster ||
      (o.reclaim_cluster & (o.reclaim_cluster - 1)) != 0)
    return error(EINVAL, "uffd: reclaim_cluster must be a power of two, 1..64");
  if (o.readahead_max < 1 || o.readahead_max > max_readahead)
    return error(EINVAL, "uffd: readahead_max must be 1..16");

  auto m = std::make_unique<impl>();
  m->opts = o;
  m->opts.swap_size = swap_pages << page_shift;
  m->limit_pages = limit_pages;
  m->reclaim_pass = static_cast<unsigned>(
      std::clamp<uint64_t>(limit_pages / 32, o.reclaim_batch, max_reclaim_pass));
  m->nr_pages = nr_pages;
  note_fork_handlers();
  m->fork_generation = current_fork_generation();
  m->owner_pid = ::getpid();

  // The pager's swap: percpu clusters without a slot cache (the kernel's allocator since 6.15),
  // so a freed slot and its zram object go at once and nothing is reserved beyond what the
  // pager holds; a pool that grows with what it holds (no huge-page chunks), because a pager
  // counts its pool beside its limit.
  swap_backend_options bo;
  bo.slots = swap_pages;
  bo.name = "uffd-zram";
  bo.zram.name = "uffd-zram";
  bo.zram.comp_algorithm = o.comp_algorithm;
  bo.zram.huge_page_chunks = false;
  bo.zram.backing_dev = o.backing_dev;
  bo.zram.backing_allocator = o.backing_allocator;
  bo.zram.backing_timeout_ms = o.backing_timeout_ms;
  bo.swap.lock_mode = swap_lock_mode::percpu;
  bo.swap.slot_cache = slot_cache_policy::off;
  auto store = swap_backend::create(bo);
  if (!store) return store.error();
  m->store = std::move(store).value();

  auto f = uffd_file::open(o.mode == fault_mode::sigbus, o.access);
  if (!f) return f.error();
  m->uffd = std::move(f).value();

  const uint64_t arena_bytes = nr_pages << page_shift;
  int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
  if (o.arena_base) flags |= MAP_FIXED_NOREPLACE;
  void* a = MAP_FAILED;
  if (const int e = should_fail(fault_point::pager_arena))
    errno = e;
  else
    a = sys::mmap(reinterpret_cast<void*>(o.arena_base), arena_bytes, PROT_NONE, flags, -1, 0);
  if (a == MAP_FAILED) {
    const int err = errno;
    return error(err == EEXIST ? EEXIST : ENOMEM,
                 "uffd: cannot reserve an arena of " + mib(arena_bytes) +
                     (o.arena_base ? " at " + std::to_string(o.arena_base) : std::string()) + ": " +
                     std::strerror(err));
  }
  if (o.arena_base && reinterpret_cast<uintptr_t>(a) != o.arena_base) {
    // A kernel older than 4.17 takes MAP_FIXED_NOREPLACE for a hint.
    sys::munmap(a, arena_bytes);
    return error(EEXIST, "uffd: the arena's address range is taken");
  }
  m->base = reinterpret_cast<uintptr_t>(a);
  // No transparent huge pages: userfaultfd resolves 4 KiB pages, and khugepaged must not merge
  // them behind the pager. Not inherited by a fork the pager does not see (pager.h, "Fork").
  sys::madvise(a, arena_bytes, MADV_NOHUGEPAGE);
  sys::madvise(a, arena_bytes, MADV_DONTFORK);
  if (auto st = m->uffd->register_range(m->base, arena_bytes); !st.ok()) return st;

  m->ptes = meta_table<std::atomic<uint64_t>>(nr_pages);
  m->handles = meta_table<uint64_t>(nr_pages);
  m->lru_prev = meta_table<uint32_t>(nr_pages);
  m->lru_next = meta_table<uint32_t>(nr_pages);
  m->chunk_touched = meta_table<std::atomic<uint64_t>>(((nr_pages >> chunk_shift) >> 6) + 1);
  if (!m->ptes || !m->handles || !m->lru_prev || !m->lru_next || !m->chunk_touched)
    return error(ENOMEM, "uffd: cannot reserve page metadata for " + mib(arena_bytes));
  if (!m->free_extents.reserve(1)) return error(ENOMEM, "uffd: no memory for the arena's records");
  m->free_extents.insert(0, nr_pages);
  m->self_pidfd = own_fd_take(static_cast<int>(::syscall(SYS_pidfd_open, ::getpid(), 0)));

  if (o.mode == fault_mode::sigbus) {
    m->registry_slot = sigbus_register(m.get());
    if (m->registry_slot < 0) return error(ENOSPC, "uffd: 64 pagers in sigbus mode already exist");
  }
  if (auto st = m->start_handlers(); !st.ok()) return st;
  if (o.on_fork == fork_policy::copy) fork_register(m.get());
  m->start_kswapd();
  return std::shared_ptr<pager>(new pager(std::move(m)));
}

const pager_options& pager::options() const noexcept { return impl_->opts; }
fault_mode pager::mode() const noexcept { return impl_->opts.mode; }
bool pager::kernel_faults() const noexcept {
  return impl_->opts.mode == fault_mode::handler_thread && impl_->uffd->kernel_faults();
}
const char* pager::uffd_origin() const noexcept { return impl_->uffd->origin(); }
uintptr_t pager::arena_start() const noexcept { return impl_->base; }
uint64_t pager::arena_size() const noexcept { return impl_->nr_pages << page_shift; }
bool pager::contains(const void* addr) const noexcept {
  const auto a = reinterpret_cast<uintptr_t>(addr);
  return a >= impl_->base && a - impl_->base < (impl_->nr_pages << page_shift);
}

// ---------------------------------------------------------------------------------------------
// Handler threads.

void pager::impl::handler_loop(int stop) noexcept {
  pager_scope in_pager;  // everything this thread does is pager work
  // Readahead state per faulting thread, by thread id: the faults of several sequential
  // streams arrive interleaved on one descriptor.
  readahead_state streams[64];
  uffd_msg msgs[16];
  pollfd fds[2] = {{uffd->fd(), POLLIN, 0}, {stop, POLLIN, 0}};
  const pid_t pid = ::getpid();
  for (;;) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents) return;
    if (!(fds[0].revents & POLLIN)) {
      if (fds[0].revents & (POLLERR | POLLHUP | POLLNVAL)) return;
      continue;
    }
    const ssize_t n = ::read(uffd->fd(), msgs, sizeof msgs);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return;
    }
    for (size_t i = 0; i < static_cast<size_t>(n) / sizeof(uffd_msg); ++i) {
      if (msgs[i].event != UFFD_EVENT_PAGEFAULT) continue;
      const uintptr_t addr = msgs[i].arg.pagefault.address;
      const uint64_t mf = msgs[i].arg.pagefault.flags;
      const auto tid = static_cast<pid_t>(msgs[i].arg.pagefault.feat.ptid);
      unsigned flags = 0;
      if (mf & UFFD_PAGEFAULT_FLAG_WRITE) flags |= FAULT_FLAG_WRITE;
      if (mf & UFFD_PAGEFAULT_FLAG_WP) flags |= FAULT_FLAG_WP | FAULT_FLAG_WRITE;
      const uint64_t t0 = clock_ns();
      bool woke = false;
      const int r =
          handle_fault(addr, flags, streams[static_cast<unsigned>(tid) % 64], &woke, tid);
      // A fault that cannot be resolved (no mapping, lost contents) is the faulting thread's
      // SIGBUS, as the kernel would deliver it.
      if (r != 0) ::syscall(SYS_tgkill, pid, tid, SIGBUS);
      (void)uffd->wake(addr & page_mask, page_size);
      note_fault_ns(clock_ns() - t0);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Releasing pages.

void pager::impl::release_pages(uint64_t first, uint64_t n, bool unmapping) noexcept {
  USWAP_ASSERT_HELD(map_lock);
  constexpr unsigned chunk = 32;
  uint64_t slow[chunk];
  bool pins_gone = false;
  for (uint64_t s = first; s < first + n; s += chunk) {
    const auto m = static_cast<unsigned>(std::min<uint64_t>(chunk, first + n - s));
    if (!chunk_was_touched(s) && !chunk_was_touched(s + m - 1)) continue;
    // Pages whose word is 0 (never touched, or released before) need nothing.
    unsigned ns = 0;
    for (unsigned i = 0; i < m; ++i)
      if (ptes[s + i].load(std::memory_order_relaxed) != 0) slow[ns++] = s + i;
    if (ns == 0) continue;
    bool any_mapped = false, any_lru = false;
    for (unsigned i = 0; i < ns; ++i) {
      page_lock::lock(ptes[slow[i]], &page_class);
      const uint64_t st = page_lock::load_data(ptes[slow[i]]);
      any_mapped |= ps_state(st) == PS_MAPPED;
      any_lru |= (st & (PG_lru | PG_isolated)) != 0;
    }
    if (any_mapped)
      sys::madvise(reinterpret_cast<void*>(page_addr(s)), uint64_t{m} << page_shift, MADV_DONTNEED);
    if (any_lru) {
      std::lock_guard g(lru_lock);
      for (unsigned i = 0; i < ns; ++i) {
        const uint64_t st = page_lock::load_data(ptes[slow[i]]);
        if (st & PG_lru) lru_del_locked(slow[i]);
        if (st & PG_isolated) ptes[slow[i]].fetch_and(~PG_isolated, std::memory_order_relaxed);
      }
    }
    uint64_t unmapped = 0, unevictable_gone = 0, shared_gone = 0;
    for (unsigned i = 0; i < ns; ++i) {
      std::atomic<uint64_t>& w = ptes[slow[i]];
      const uint64_t st = page_lock::load_data(w);
      if (ps_state(st) == PS_SWAPPED || (ps_state(st) == PS_MAPPED && (st & PG_swapcache))) {
        store->release(swap_entry{handles[slow[i]]});
        handles[slow[i]] = 0;
      }
      if (ps_state(st) == PS_MAPPED) ++((st & PG_shared) ? shared_gone : unmapped);
      if (st & PG_unevictable) ++unevictable_gone;
      if (ps_pins(st)) {
        pinned.fetch_sub(ps_pins(st), std::memory_order_relaxed);
        pins_gone = true;
      }
      if (st != 0) page_lock::update(w, ~uint64_t{0}, 0);
      page_lock::unlock(w);
    }
    uncharge(unmapped);
    if (shared_gone) shared_pages.fetch_sub(shared_gone, std::memory_order_relaxed);
    if (unevictable_gone) unevictable.fetch_sub(unevictable_gone, std::memory_order_relaxed);
  }
  // Pins for good there went with the pages (kernel_access.h).
  if (pins_gone) kernel_access_forget_pins(page_addr(first), n << page_shift);
  // Memory the program gave back is the job's again, but for a little stock for the next faults.
  if (job_ref jr(*this); jr) trim_reservation(*jr, reclaim_pass + job_charge_batch);
  if (unmapping) {
    // Give back the metadata pages that lie wholly inside the released range: every word there
    // is 0 now.
    ptes.release_range(first, n);
    handles.release_range(first, n);
  }
}

// ---------------------------------------------------------------------------------------------
// Pinning.

status pager::pin(const void* addr, uint64_t len, bool write) {
  impl& m = *impl_;
  if (m.detached()) return error(EPERM, "uffd: the pager belongs to the parent process");
  const auto a = reinterpret_cast<uintptr_t>(addr);
  if (len == 0 || !contains(addr) || len > (m.nr_pages << page_shift) - (a - m.base))
    return error(EINVAL, "uffd: pin of a range outside the arena");
  const uint64_t first = (a - m.base) >> page_shift;
  const uint64_t last = (a + len - 1 - m.base) >> page_shift;
  const uint64_t n = last - first + 1;
  if (m.pinned.load(std::memory_order_relaxed) + n > m.limit_pages / 2)
    return error(ENOMEM, "uffd: pinning " + std::to_string(n) +
                             " pages would pin more than half "
                             "the limit");
  map_read_guard g(m.map_lock, &m);
  // Every page must lie in a mapping the access may reach: PROT_READ for a read pin, PROT_WRITE
  // for a write pin (the kernel would refuse anything else anyway, and a page without PROT_READ
  // could not be copied out later).
  const int need = write ? PROT_WRITE : PROT_READ;
  for (uint64_t at = first; at <= last;) {
    auto it = m.find_mapping(at);
    if (it == m.mappings.end() || !(it->second.prot & need) || !(it->second.prot & PROT_READ))
      return error(EINVAL, std::string("uffd: pin of a range that is not wholly mapped ") +
                               (write ? "writable" : "readable"));
    at = it->first + it->second.pages;
  }
  readahead_state ra;
  for (uint64_t idx = first; idx <= last; ++idx) {
    bool woke = false;
    int r = m.fault_page(idx, idx, idx + 1, write ? FAULT_FLAG_WRITE : 0, ra, true, &woke);
    if (r == 0) {
      // Keep write-protect sweeps off the page, or wait out one that may not have seen the pin.
      r = m.settle_pin(idx, write);
      if (r != 0) ++idx;  // this page is pinned too: unpin it with the others
    }
    if (r != 0) {
      g.unlock();
      if (idx > first)
        (void)unpin(reinterpret_cast<void*>(m.page_addr(first)), (idx - first) << page_shift);
      return error(r, "uffd: pin could not make a page resident and " +
                          std::string(write ? "writable: " : "readable: ") + std::strerror(r));
    }
  }
  return {};
}

status pager::unpin(const void* addr, uint64_t len) {
  impl& m = *impl_;
  const auto a = reinterpret_cast<uintptr_t>(addr);
  if (len == 0 || !contains(addr) || len > (m.nr_pages << page_shift) - (a - m.base))
    return error(EINVAL, "uffd: unpin of a range outside the arena");
  const uint64_t first = (a - m.base) >> page_shift;
  const uint64_t last = (a + len - 1 - m.base) >> page_shift;
  map_read_guard g(m.map_lock, &m);
  bool unpinned_all = true;
  for (uint64_t idx = first; idx <= last; ++idx) {
    std::atomic<uint64_t>& w = m.ptes[idx];
    page_lock::lock(w, &m.page_class);
    const uint64_t st = page_lock::load_data(w);
    if (ps_pins(st) == 0) {
      unpinned_all = false;
    } else {
      page_lock::update(w, PIN_MASK, st - PIN_ONE);
      m.pinned.fetch_sub(1, std::memory_order_relaxed);
      // A sweep may have skipped the page while it was pinned: restamp it as if it had just
      // been made writable, so that no sweep numbered before now counts as covering it
      // (pager_impl.h, "Write-protect sweeps"). write_stamp()'s read-modify-write of
      // sweep_started orders the pin count's decrement against a sweep's.
      if (ps_state(st) == PS_MAPPED) {
        uint64_t stamp = m.write_stamp(UINT64_MAX);
        if ((st & PG_stamp_exact) && (stamp & SHADOW_MASK) == (st & SHADOW_MASK))
          stamp |= PG_stamp_exact;  // no sweep started since: still exact
        page_lock::update(w, STAMP_MASK, stamp);
      }
    }
    page_lock::unlock(w);
  }
  if (!unpinned_all) return error(EINVAL, "uffd: unpin of pages that were not pinned");
  return {};
}

uint64_t pager::reclaim(uint64_t nr_pages) {
  if (impl_->detached() || nr_pages == 0) return 0;
  map_read_guard g(impl_->map_lock, impl_.get());
  return impl_->shrink(nr_pages, nr_pages);
}

// ---------------------------------------------------------------------------------------------
// Statistics and invariants.

zram_backing_stat pager::backing_stat() const { return impl_->store->device().backing_stat(); }

uint64_t pager::metadata_bytes() const noexcept {
  const impl& m = *impl_;
  // Per arena page: its state word, its swap handle and its two clock links; per swap slot:
  // zram's table entry and swap_map's count. Both tables fill from their start, a page at a time.
  constexpr uint64_t per_page =
      sizeof(std::atomic<uint64_t>) + sizeof(uint64_t) + 2 * sizeof(uint32_t);
  constexpr uint64_t per_slot = sizeof(zram_table_entry) + 1;
  const swap_system& swap = m.store->swap();
  const uint64_t slots = swap.total_swap_pages() - swap.nr_swap_pages();
  uint64_t peak = m.peak_slots.load(std::memory_order_relaxed);
  while (slots > peak &&
         !m.peak_slots.compare_exchange_weak(peak, slots, std::memory_order_relaxed)) {
  }
  return (m.touched_chunks.load(std::memory_order_relaxed) << chunk_shift) * per_page +
         std::max(peak, slots) * per_slot;
}

pager_stats pager::stats() const {
  const impl& m = *impl_;
  pager_stats s;
  s.limit_pages = m.limit_pages;
  s.resident_pages = m.resident.load(std::memory_order_relaxed);
  s.shared_pages = m.shared_pages.load(std::memory_order_relaxed);
  s.peak_resident_pages = m.peak_resident.load(std::memory_order_relaxed);
  s.mapped_bytes = m.mapped_pages.load(std::memory_order_relaxed) << page_shift;
  s.foreign_bytes = m.foreign_pages.load(std::memory_order_relaxed) << page_shift;
  s.unevictable_pages = m.unevictable.load(std::memory_order_relaxed);
  s.mappings = m.nr_mappings.load(std::memory_order_relaxed);
  auto ld = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  s.faults = ld(m.c.faults);
  s.wp_faults = ld(m.c.wp_faults);
  s.zero_fills = ld(m.c.zero_fills);
  s.swap_ins = ld(m.c.swap_ins);
  s.readahead_pages = ld(m.c.readahead);
  s.swap_outs = ld(m.c.swap_outs);
  s.clean_evictions = ld(m.c.clean_evictions);
  s.zero_evictions = ld(m.c.zero_evictions);
  s.reclaim_passes = ld(m.c.reclaim_passes);
  s.pages_scanned = ld(m.c.scanned);
  s.pages_rotated = ld(m.c.rotated);
  s.shared_spared = ld(m.c.shared_spared);
  s.shared_write_around = ld(m.c.shared_write_around);
  s.overcharges = ld(m.c.overcharges);
  s.pgsteal_kswapd = ld(m.c.pgsteal_kswapd);
  s.pgsteal_direct = ld(m.c.pgsteal_direct);
  s.kswapd_wakeups = ld(m.c.kswapd_wakeups);
  s.pool_worker_rounds = ld(m.pool_rounds);
  s.pool_full_waits = ld(m.pool_waits);
  s.swap_out_failures = ld(m.c.swap_out_failures);
  s.eviction_batches = ld(m.c.eviction_batches);
  s.store_refusals = ld(m.c.store_refusals);
  s.fault_ns = ld(m.c.fault_ns);
  {
    uint64_t hist[latency_buckets], total = 0;
    for (unsigned b = 0; b < latency_buckets; ++b) total += hist[b] = ld(m.c.fault_hist[b]);
    // The floor of the bucket holding the fraction's fault (0 without faults).
    auto percentile = [&](uint64_t per_mille) -> uint64_t {
      if (total == 0) return 0;
      const uint64_t rank = (total * per_mille + 999) / 1000;  // 1-based
      uint64_t seen = 0;
      for (unsigned b = 0; b < latency_buckets; ++b)
        if ((seen += hist[b]) >= rank) return latency_bucket_floor(b);
      return 0;
    };
    s.fault_p50_ns = percentile(500);
    s.fault_p99_ns = percentile(990);
  }
  s.swap_out_bytes = s.swap_outs << page_shift;
  s.compressed_bytes = ld(m.c.compressed_bytes);
  s.wp_sweeps = ld(m.c.wp_sweeps);
  s.evict_wp_pages = ld(m.c.evict_wp_pages);
  s.evict_wp_calls = ld(m.c.evict_wp_calls);
  s.forks = ld(m.c.forks);
  s.job_reserved_pages = m.jlink.load(std::memory_order_relaxed) ? ld(m.reserved) : 0;
  s.job_requests_served = ld(m.job_requests_served);
  s.job_signals = ld(m.job_signals);
  s.job_signals_deferred = ld(m.job_signals_deferred);
  s.job_waits = ld(m.job_waits);
  s.member_faults_served = ld(m.member_faults_served);
  s.member_faults_asked = ld(m.member_faults_asked);
  const swap_backend_stats ps = m.store->stats();
  s.swap_pages_used = ps.used_slots;
  if (const auto& mm = ps.device.mm_stat) {
    s.zram_orig_data_size = mm->orig_data_size;
    s.zram_compr_data_size = mm->compr_data_size;
    s.zram_mem_used_total = mm->mem_used_total;
    s.zram_mem_used_max = mm->mem_used_max;
  }
  s.bd_count = ps.device.bd_count;
  s.bd_writes = ps.device.bd_writes;
  s.bd_reads = ps.device.bd_reads;
  return s;
}

status pager::check_invariants() const {
  const impl& m = *impl_;
  std::unique_lock g(m.map_lock);
  std::lock_guard l(m.lru_lock);
  std::string bad;
  auto fail = [&](uint64_t idx, const std::string& what) {
    if (bad.size() < 2000) bad += "page " + std::to_string(idx) + ": " + what + "; ";
  };
  // The records: disjoint, covering the arena, adjacent free extents merged.
  std::map<uint64_t, std::pair<uint64_t, char>> all;
  uint64_t mapped_records = 0, foreign_records = 0;
  for (const auto& [s, v] : m.mappings) {
    all[s] = {v.pages, 'm'};
    mapped_records += v.pages;
    if (v.pages == 0) bad += "empty mapping record; ";
  }
  for (const auto& [s, n] : m.free_extents.extents()) all[s] = {n, 'f'};
  for (const auto& [s, n] : m.foreign) {
    all[s] = {n, 'x'};
    foreign_records += n;
  }
  if (all.size() != m.mappings.size() + m.free_extents.extents().size() + m.foreign.size())
    bad += "two records start at the same page; ";
  uint64_t at = 0;
  char prev_kind = 0;
  for (const auto& [s, r] : all) {
    if (s != at) bad += "records leave a gap or overlap at page " + std::to_string(at) + "; ";
    if (r.second == 'f' && prev_kind == 'f') bad += "adjacent free extents not merged; ";
    at = s + r.first;
    prev_kind = r.second;
  }
  if (at != m.nr_pages) bad += "records do not cover the arena; ";
  if (mapped_records != m.mapped_pages.load(std::memory_order_relaxed)) bad += "mapped_pages; ";
  if (foreign_records != m.foreign_pages.load(std::memory_order_relaxed)) bad += "foreign_pages; ";

  uint64_t mapped = 0, with_handle = 0, on_lru = 0, pins = 0, unevictable = 0, shared = 0;
  auto mit = m.mappings.begin();
  m.for_each_touched(0, m.nr_pages, [&](uint64_t i) {
    const uint64_t st = m.ptes[i].load(std::memory_order_relaxed);
    if (st == 0) return;
    if (st & ~page_lock::data_mask) fail(i, "locked");
    while (mit != m.mappings.end() && mit->first + mit->second.pages <= i) ++mit;
    if (mit == m.mappings.end() || mit->first > i) {
      fail(i, "state outside any mapping");
      return;
    }
    if (st & PG_isolated) fail(i, "isolated");
    pins += ps_pins(st);
    const bool readable = mit->second.prot & PROT_READ;
    switch (ps_state(st)) {
      case PS_MAPPED:
        if (st & PG_shared)
          ++shared;
        else
          ++mapped;
        if (st & PG_lru) ++on_lru;
        if (st & PG_unevictable) {
          ++unevictable;
          if (readable) fail(i, "unevictable in a readable mapping");
          if (st & PG_lru) fail(i, "unevictable but on the clock");
        } else if (st & PG_shared) {
          if (st & PG_lru) fail(i, "fork-shared but on the clock");
          if (!readable) fail(i, "evictable in a mapping without PROT_READ");
        } else {
          if (!readable) fail(i, "evictable in a mapping without PROT_READ");
          if (!(st & PG_lru)) fail(i, "mapped but not on the clock");
        }
        if (st & PG_swapcache) {
          ++with_handle;
          if (!(st & PG_uffd_wp)) fail(i, "swap cache page not write-protected");
          if (m.handles[i] == 0) fail(i, "swap cache page without a handle");
        }
        break;
      case PS_SWAPPED:
        ++with_handle;
        if (m.handles[i] == 0) fail(i, "swapped out without a handle");
        if (st & (PG_lru | PG_uffd_wp | PG_swapcache | PG_referenced | PG_active | PG_stamp_exact |
                  PG_unevictable | PG_shared))
          fail(i, "swapped out with mapped-page flags");
        if (ps_pins(st)) fail(i, "swapped out while pinned");
        break;
      case PS_NONE:
        if (st & (PG_lru | PG_uffd_wp | PG_swapcache | PG_referenced | PG_active | PG_stamp_exact |
                  PG_unevictable | PG_shared))
          fail(i, "unmapped with mapped-page flags");
        if (ps_pins(st)) fail(i, "unmapped while pinned");
        break;
      default:
        fail(i, "bad state");
    }
  });
  uint64_t walked = 0;
  if (m.lru_head != lru_nil) {
    uint32_t i = m.lru_head;
    do {
      const uint64_t st = m.ptes[i].load(std::memory_order_relaxed);
      if (!(st & PG_lru) || ps_state(st) != PS_MAPPED)
        fail(i, "on the clock but not PG_lru/mapped");
      if (m.lru_next[m.lru_prev[i]] != i) fail(i, "broken clock links");
      i = m.lru_next[i];
      if (++walked > m.nr_pages) {
        bad += "clock list does not close; ";
        break;
      }
    } while (i != m.lru_head);
  }
  if (walked != m.lru_nr || on_lru != m.lru_nr)
    bad += "clock: " + std::to_string(walked) + " linked, " + std::to_string(on_lru) +
           " flagged, lru_nr " + std::to_string(m.lru_nr) + "; ";
  const uint64_t resident = m.resident.load(std::memory_order_relaxed);
  if (resident != mapped)
    bad += "resident " + std::to_string(resident) + " but " + std::to_string(mapped) +
           " pages mapped; ";
  if (unevictable != m.unevictable.load(std::memory_order_relaxed)) bad += "unevictable count; ";
  if (shared != m.shared_pages.load(std::memory_order_relaxed))
    bad += "shared_pages " + std::to_string(m.shared_pages.load(std::memory_order_relaxed)) +
           " but " + std::to_string(shared) + " pages fork-shared; ";
  if (pins != m.pinned.load(std::memory_order_relaxed)) bad += "pin count mismatch; ";
  const uint64_t started = m.sweep_started.load(std::memory_order_relaxed);
  if (m.sweep_done.load(std::memory_order_relaxed) > started ||
      m.sweep_finished.load(std::memory_order_relaxed) != started)
    bad += "sweep counters; ";
  // One reference per stored page: the slots in use, the pages zram holds and the handles the
  // page states keep are the same number.
  const swap_backend_stats ps = m.store->stats();
  if (ps.used_slots != with_handle || ps.device.stored_pages != with_handle)
    bad += "swap holds " + std::to_string(ps.used_slots) + " slots and zram " +
           std::to_string(ps.device.stored_pages) + " pages but " + std::to_string(with_handle) +
           " pages have handles; ";
  if (auto st = m.store->check_invariants(); !st.ok()) bad += std::string(st.message()) + "; ";
  if (!bad.empty()) return error(EIO, "uffd: " + bad);
  return {};
}

}  // namespace uswap
