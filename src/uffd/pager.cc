// The pager's life cycle, its arena (map / unmap / discard / resize), pinning, statistics and
// invariants, and the handler threads of handler_thread mode. Faults are in fault.cc, reclaim in
// reclaim.cc, the SIGBUS handler in sigbus.cc.
#include <linux/userfaultfd.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "pager_impl.h"
#include "sys.h"

namespace uswap {

namespace {

std::string mib(uint64_t bytes) {
  return std::to_string(bytes >> 20) + " MiB";
}

constexpr int staging_pool_slots = 64;
constexpr size_t staging_bytes = staging_buffer::pages * page_size;
std::atomic<void*> staging_pool[staging_pool_slots];

void* map_meta(uint64_t bytes) {
  void* p = sys::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

uint64_t now_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Names.

std::string_view to_string(fault_mode m) noexcept {
  return m == fault_mode::sigbus ? "sigbus" : "handler-thread";
}

result<fault_mode> parse_fault_mode(std::string_view text) {
  if (text == "sigbus") return fault_mode::sigbus;
  if (text == "handler-thread" || text == "handler") return fault_mode::handler_thread;
  return error(EINVAL, "uffd: unknown fault mode '" + std::string(text) +
                           "' (valid: sigbus, handler-thread)");
}

std::string_view to_string(uffd_access a) noexcept {
  switch (a) {
    case uffd_access::automatic: return "auto";
    case uffd_access::full: return "full";
    case uffd_access::user_mode_only: return "user-mode-only";
  }
  return "?";
}

result<uffd_access> parse_uffd_access(std::string_view text) {
  if (text == "auto") return uffd_access::automatic;
  if (text == "full") return uffd_access::full;
  if (text == "user-mode-only" || text == "user") return uffd_access::user_mode_only;
  return error(EINVAL, "uffd: unknown userfaultfd access '" + std::string(text) +
                           "' (valid: auto, full, user-mode-only)");
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
  void* p = sys::mmap(nullptr, staging_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
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
  return fork_generation != current_fork_generation();
}

pager::impl::~impl() {
  const bool child = detached();
  if (registry_slot >= 0) sigbus_unregister(registry_slot);
  if (!handlers.empty()) {
    if (child) {
      // The threads live in the parent; here only their descriptors were copied.
      for (std::thread& t : handlers) t.detach();
    } else {
      const uint64_t one = 1;
      (void)!::write(stop_fd, &one, sizeof one);
      for (std::thread& t : handlers) t.join();
    }
  }
  if (stop_fd >= 0) ::close(stop_fd);
  if (self_pidfd >= 0) ::close(self_pidfd);
  // In a forked child the arena was not inherited (MADV_DONTFORK): its range may hold
  // something else by now.
  if (base && !child) sys::munmap(reinterpret_cast<void*>(base), nr_pages << page_shift);
  if (ptes) sys::munmap(ptes, meta_bytes);
  if (handles) sys::munmap(handles, meta_bytes);
  if (lru_prev) sys::munmap(lru_prev, meta_bytes / 2);
  if (lru_next) sys::munmap(lru_next, meta_bytes / 2);
}

pager::pager(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
pager::~pager() = default;

result<std::shared_ptr<pager>> pager::create(const pager_options& o) {
  const uint64_t limit_pages = o.limit >> page_shift;
  if (limit_pages < 64)
    return error(EINVAL, "uffd: limit must be at least 64 pages (256 KiB), not " +
                             std::to_string(o.limit) + " bytes");
  const uint64_t nr_pages = round_up_to_page(o.max_size) >> page_shift;
  if (nr_pages == 0 || nr_pages >= lru_nil)
    return error(EINVAL, "uffd: max_size must be between 4 KiB and 16 TiB");
  const uint64_t swap_pages = o.swap_size ? round_up_to_page(o.swap_size) >> page_shift : nr_pages;
  if (o.handler_threads < 1 || o.handler_threads > 64)
    return error(EINVAL, "uffd: handler_threads must be 1..64");
  if (o.reclaim_batch < 1 || o.reclaim_batch > max_reclaim_batch)
    return error(EINVAL, "uffd: reclaim_batch must be 1..32");
  if (o.readahead_max < 1 || o.readahead_max > max_readahead)
    return error(EINVAL, "uffd: readahead_max must be 1..16");

  auto m = std::make_unique<impl>();
  m->opts = o;
  m->opts.swap_size = swap_pages << page_shift;
  m->limit_pages = limit_pages;
  m->reclaim_pass = static_cast<unsigned>(std::clamp<uint64_t>(
      limit_pages / 32, o.reclaim_batch, max_reclaim_pass));
  m->nr_pages = nr_pages;
  note_fork_handlers();
  m->fork_generation = current_fork_generation();

  auto store = page_store::create({swap_pages, o.comp_algorithm});
  if (!store) return store.error();
  m->store = std::move(store).value();

  auto f = uffd_file::open(o.mode == fault_mode::sigbus, o.access);
  if (!f) return f.error();
  m->uffd = std::move(f).value();

  const uint64_t arena_bytes = nr_pages << page_shift;
  void* a = sys::mmap(nullptr, arena_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
  if (a == MAP_FAILED) return error(ENOMEM, "uffd: cannot reserve an arena of " + mib(arena_bytes));
  m->base = reinterpret_cast<uintptr_t>(a);
  // No transparent huge pages: userfaultfd resolves 4 KiB pages, and khugepaged must not merge
  // them behind the pager. No inheritance by fork: see pager.h.
  sys::madvise(a, arena_bytes, MADV_NOHUGEPAGE);
  sys::madvise(a, arena_bytes, MADV_DONTFORK);
  if (auto st = m->uffd->register_range(m->base, arena_bytes); !st.ok()) return st;

  m->meta_bytes = round_up_to_page(nr_pages * sizeof(uint64_t));
  m->ptes = static_cast<std::atomic<uint64_t>*>(map_meta(m->meta_bytes));
  m->handles = static_cast<uint64_t*>(map_meta(m->meta_bytes));
  m->lru_prev = static_cast<uint32_t*>(map_meta(m->meta_bytes / 2));
  m->lru_next = static_cast<uint32_t*>(map_meta(m->meta_bytes / 2));
  if (!m->ptes || !m->handles || !m->lru_prev || !m->lru_next)
    return error(ENOMEM, "uffd: cannot reserve page metadata for " + mib(arena_bytes));
  m->free_extents[0] = nr_pages;
  m->self_pidfd = static_cast<int>(::syscall(SYS_pidfd_open, ::getpid(), 0));

  if (o.mode == fault_mode::sigbus) {
    m->registry_slot = sigbus_register(m.get());
    if (m->registry_slot < 0) return error(ENOSPC, "uffd: 64 pagers in sigbus mode already exist");
  } else {
    m->uffd->set_dontwake(true);
    m->stop_fd = ::eventfd(0, EFD_CLOEXEC);
    if (m->stop_fd < 0) return error(errno, "uffd: eventfd for the handler threads");
    impl* raw = m.get();
    for (unsigned i = 0; i < o.handler_threads; ++i)
      m->handlers.emplace_back([raw] { raw->handler_loop(); });
  }
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

void pager::impl::handler_loop() noexcept {
  pager_scope in_pager;  // everything this thread does is pager work
  // Readahead state per faulting thread, by thread id: the faults of several sequential
  // streams arrive interleaved on one descriptor.
  readahead_state streams[64];
  uffd_msg msgs[16];
  pollfd fds[2] = {{uffd->fd(), POLLIN, 0}, {stop_fd, POLLIN, 0}};
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
      const uint64_t t0 = now_ns();
      bool woke = false;
      const int r = handle_fault(addr, flags, streams[static_cast<unsigned>(tid) % 64], &woke);
      // A fault that cannot be resolved (no mapping, lost contents) is the faulting thread's
      // SIGBUS, as the kernel would deliver it.
      if (r != 0) ::syscall(SYS_tgkill, pid, tid, SIGBUS);
      (void)uffd->wake(addr & page_mask, page_size);
      c.fault_ns.fetch_add(now_ns() - t0, std::memory_order_relaxed);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The arena.

void pager::impl::release_pages(uint64_t first, uint64_t n, bool invalidate) noexcept {
  constexpr unsigned chunk = 32;
  const uint64_t cleared = invalidate ? 0 : PS_VALID;
  uint64_t slow[chunk];
  for (uint64_t s = first; s < first + n; s += chunk) {
    const auto m = static_cast<unsigned>(std::min<uint64_t>(chunk, first + n - s));
    // Pages in the plain "valid, never touched" state need no lock: one CAS invalidates them
    // (a racing fault then finds them invalid), and a discard leaves them as they are.
    unsigned ns = 0;
    for (unsigned i = 0; i < m; ++i) {
      std::atomic<uint64_t>& w = ptes[s + i];
      uint64_t v = w.load(std::memory_order_relaxed);
      if (v == PS_VALID && (!invalidate || w.compare_exchange_strong(v, 0, std::memory_order_relaxed)))
        continue;
      if (v == 0) continue;  // already invalid (part of a range being unmapped twice)
      slow[ns++] = s + i;
    }
    if (ns == 0) continue;
    bool any_mapped = false, any_lru = false;
    for (unsigned i = 0; i < ns; ++i) {
      page_lock::lock(ptes[slow[i]], &page_class);
      const uint64_t st = page_lock::load_data(ptes[slow[i]]);
      any_mapped |= ps_state(st) == PS_MAPPED;
      any_lru |= (st & (PG_lru | PG_isolated)) != 0;
    }
    if (any_mapped) sys::madvise(reinterpret_cast<void*>(page_addr(s)), uint64_t{m} << page_shift,
                              MADV_DONTNEED);
    if (any_lru) {
      std::lock_guard g(lru_lock);
      for (unsigned i = 0; i < ns; ++i) {
        const uint64_t st = page_lock::load_data(ptes[slow[i]]);
        if (st & PG_lru) lru_del_locked(slow[i]);
        if (st & PG_isolated) ptes[slow[i]].fetch_and(~PG_isolated, std::memory_order_relaxed);
      }
    }
    uint64_t unmapped = 0;
    for (unsigned i = 0; i < ns; ++i) {
      std::atomic<uint64_t>& w = ptes[slow[i]];
      const uint64_t st = page_lock::load_data(w);
      if (ps_state(st) == PS_SWAPPED || (ps_state(st) == PS_MAPPED && (st & PG_swapcache))) {
        store->release(handles[slow[i]]);
        handles[slow[i]] = 0;
      }
      if (ps_state(st) == PS_MAPPED) ++unmapped;
      if (ps_pins(st)) pinned.fetch_sub(ps_pins(st), std::memory_order_relaxed);
      if (st != cleared) page_lock::update(w, ~uint64_t{0}, cleared);
      page_lock::unlock(w);
    }
    uncharge(unmapped);
  }
  if (invalidate) {
    // Give back the metadata pages that lie wholly inside the released range.
    const uint64_t per_page = page_size / sizeof(uint64_t);
    const uint64_t lo = (first + per_page - 1) / per_page, hi = (first + n) / per_page;
    if (hi > lo) {
      sys::madvise(reinterpret_cast<char*>(ptes) + lo * page_size, (hi - lo) * page_size,
                MADV_DONTNEED);
      sys::madvise(reinterpret_cast<char*>(handles) + lo * page_size, (hi - lo) * page_size,
                MADV_DONTNEED);
    }
  }
}

result<void*> pager::map(uint64_t len, uint64_t alignment) {
  impl& m = *impl_;
  if (m.detached()) return error(EPERM, "uffd: the pager belongs to the parent process");
  if (len == 0) return error(EINVAL, "uffd: map of 0 bytes");
  if (alignment < page_size || (alignment & (alignment - 1)))
    return error(EINVAL, "uffd: alignment must be a power of two of at least 4096");
  const uint64_t np = round_up_to_page(len) >> page_shift;
  if (np > m.nr_pages || np == 0)
    return error(ENOMEM, "uffd: " + std::to_string(len) + " bytes do not fit an arena of " +
                             mib(m.nr_pages << page_shift));

  std::lock_guard g(m.map_mu);
  uint64_t at = 0;
  bool found = false;
  for (auto it = m.free_extents.begin(); it != m.free_extents.end(); ++it) {
    const uint64_t s = it->first, n = it->second;
    const uintptr_t aligned = (m.page_addr(s) + alignment - 1) & ~(alignment - 1);
    const uint64_t a = (aligned - m.base) >> page_shift;
    if (a + np <= s + n) {
      at = a;
      found = true;
      m.free_extents.erase(it);
      if (a > s) m.free_extents[s] = a - s;
      if (a + np < s + n) m.free_extents[a + np] = s + n - (a + np);
      break;
    }
  }
  if (!found)
    return error(ENOMEM, "uffd: no room for " + mib(np << page_shift) + " in an arena of " +
                             mib(m.nr_pages << page_shift) + " (" + mib(m.mapped_pages << page_shift) +
                             " mapped)");
  for (uint64_t i = at; i < at + np; ++i) m.ptes[i].fetch_or(PS_VALID, std::memory_order_relaxed);
  void* addr = reinterpret_cast<void*>(m.page_addr(at));
  if (sys::mprotect(addr, np << page_shift, PROT_READ | PROT_WRITE) != 0) {
    const int err = errno;
    for (uint64_t i = at; i < at + np; ++i) m.ptes[i].store(0, std::memory_order_relaxed);
    m.free_extents[at] = np;  // coalesced on the next free; correct either way
    return error(err == ENOMEM ? ENOMEM : err,
                 std::string("uffd: mprotect of a new mapping: ") + std::strerror(err));
  }
  m.mappings[at] = np;
  m.mapped_pages += np;
  return addr;
}

namespace {

// Adds [s, s + n) to the free extents, merging with its neighbours.
void free_extent(std::map<uint64_t, uint64_t>& ext, uint64_t s, uint64_t n) {
  auto next = ext.lower_bound(s);
  if (next != ext.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == s) {
      s = prev->first;
      n += prev->second;
      ext.erase(prev);
    }
  }
  if (next != ext.end() && s + n == next->first) {
    n += next->second;
    ext.erase(next);
  }
  ext[s] = n;
}

}  // namespace

status pager::unmap(void* addr, uint64_t len) {
  impl& m = *impl_;
  if (m.detached()) return error(EPERM, "uffd: the pager belongs to the parent process");
  const auto a = reinterpret_cast<uintptr_t>(addr);
  if (len == 0 || (a & ~page_mask) || !contains(addr) ||
      round_up_to_page(len) > (m.nr_pages << page_shift) - (a - m.base))
    return error(EINVAL, "uffd: unmap of a range outside the arena");
  const uint64_t first = (a - m.base) >> page_shift;
  const uint64_t last = first + (round_up_to_page(len) >> page_shift);  // exclusive

  std::lock_guard g(m.map_mu);
  auto it = m.mappings.upper_bound(first);
  if (it != m.mappings.begin()) --it;
  while (it != m.mappings.end() && it->first < last) {
    const uint64_t ms = it->first, mn = it->second;
    const uint64_t s = std::max(ms, first), e = std::min(ms + mn, last);
    if (s >= e) {
      ++it;
      continue;
    }
    m.release_pages(s, e - s, true);
    sys::mprotect(reinterpret_cast<void*>(m.page_addr(s)), (e - s) << page_shift, PROT_NONE);
    it = m.mappings.erase(it);
    if (ms < s) m.mappings[ms] = s - ms;
    if (e < ms + mn) {
      it = m.mappings.emplace(e, ms + mn - e).first;
      ++it;
    }
    m.mapped_pages -= e - s;
    free_extent(m.free_extents, s, e - s);
  }
  return {};
}

namespace {

// Whether [first, last) is covered by mappings; map_mu held.
bool all_mapped(const std::map<uint64_t, uint64_t>& maps, uint64_t first, uint64_t last) {
  uint64_t at = first;
  auto it = maps.upper_bound(at);
  if (it == maps.begin()) return false;
  --it;
  while (at < last) {
    if (it == maps.end() || it->first > at || it->first + it->second <= at) return false;
    at = it->first + it->second;
    ++it;
  }
  return true;
}

}  // namespace

status pager::discard(void* addr, uint64_t len) {
  impl& m = *impl_;
  if (m.detached()) return error(EPERM, "uffd: the pager belongs to the parent process");
  const auto a = reinterpret_cast<uintptr_t>(addr);
  if (len == 0 || (a & ~page_mask) || !contains(addr))
    return error(EINVAL, "uffd: discard of a range outside the arena");
  const uint64_t first = (a - m.base) >> page_shift;
  const uint64_t last = first + (round_up_to_page(len) >> page_shift);
  std::lock_guard g(m.map_mu);
  if (last > m.nr_pages || !all_mapped(m.mappings, first, last))
    return error(EINVAL, "uffd: discard of a range that is not wholly mapped");
  m.release_pages(first, last - first, false);
  return {};
}

status pager::resize(void* addr, uint64_t old_len, uint64_t new_len) {
  impl& m = *impl_;
  if (m.detached()) return error(EPERM, "uffd: the pager belongs to the parent process");
  const auto a = reinterpret_cast<uintptr_t>(addr);
  if (old_len == 0 || new_len == 0 || (a & ~page_mask) || !contains(addr))
    return error(EINVAL, "uffd: resize of a range outside the arena");
  const uint64_t first = (a - m.base) >> page_shift;
  const uint64_t old_end = first + (round_up_to_page(old_len) >> page_shift);
  const uint64_t new_end = first + (round_up_to_page(new_len) >> page_shift);
  std::lock_guard g(m.map_mu);
  auto it = m.mappings.upper_bound(first);
  if (it == m.mappings.begin()) return error(EINVAL, "uffd: resize of an unmapped range");
  --it;
  const uint64_t ms = it->first, mn = it->second;
  if (first < ms || old_end != ms + mn)
    return error(EINVAL, "uffd: resize must name a range that ends where its mapping ends");
  if (new_end == old_end) return {};
  if (new_end < old_end) {
    m.release_pages(new_end, old_end - new_end, true);
    sys::mprotect(reinterpret_cast<void*>(m.page_addr(new_end)), (old_end - new_end) << page_shift,
               PROT_NONE);
    it->second = new_end - ms;
    m.mapped_pages -= old_end - new_end;
    free_extent(m.free_extents, new_end, old_end - new_end);
    return {};
  }
  auto f = m.free_extents.find(old_end);
  if (new_end > m.nr_pages || f == m.free_extents.end() || f->second < new_end - old_end)
    return error(ENOMEM, "uffd: no free arena space after the mapping to grow it in place");
  const uint64_t grow = new_end - old_end, fn = f->second;
  for (uint64_t i = old_end; i < new_end; ++i) m.ptes[i].fetch_or(PS_VALID, std::memory_order_relaxed);
  if (sys::mprotect(reinterpret_cast<void*>(m.page_addr(old_end)), grow << page_shift,
                 PROT_READ | PROT_WRITE) != 0) {
    const int err = errno;
    for (uint64_t i = old_end; i < new_end; ++i) m.ptes[i].store(0, std::memory_order_relaxed);
    return error(err, std::string("uffd: mprotect while growing a mapping: ") + std::strerror(err));
  }
  m.free_extents.erase(f);
  if (fn > grow) m.free_extents[new_end] = fn - grow;
  it->second = new_end - ms;
  m.mapped_pages += grow;
  return {};
}

result<std::pair<void*, uint64_t>> pager::mapping_of(const void* addr) const {
  const impl& m = *impl_;
  if (!contains(addr)) return error(ENOENT, "uffd: address outside the arena");
  const uint64_t idx = (reinterpret_cast<uintptr_t>(addr) - m.base) >> page_shift;
  std::lock_guard g(m.map_mu);
  auto it = m.mappings.upper_bound(idx);
  if (it == m.mappings.begin()) return error(ENOENT, "uffd: address not mapped");
  --it;
  if (idx >= it->first + it->second) return error(ENOENT, "uffd: address not mapped");
  return std::pair<void*, uint64_t>{reinterpret_cast<void*>(m.page_addr(it->first)),
                                    it->second << page_shift};
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
    return error(ENOMEM, "uffd: pinning " + std::to_string(n) + " pages would pin more than half "
                         "the limit");
  readahead_state ra;
  for (uint64_t idx = first; idx <= last; ++idx) {
    bool woke = false;
    int r = m.fault_page(idx, write ? FAULT_FLAG_WRITE : 0, ra, true, &woke);
    if (r != 0) {
      if (idx > first)
        (void)unpin(reinterpret_cast<void*>(m.page_addr(first)), (idx - first) << page_shift);
      if (r == EFAULT) return error(EINVAL, "uffd: pin of a range that is not wholly mapped");
      return error(r, "uffd: pin could not make a page resident: " + std::string(std::strerror(r)));
    }
    // Keep write-protect sweeps off the page, or wait out one that may not have seen the pin.
    r = m.settle_pin(idx, write);
    if (r != 0) {
      (void)unpin(reinterpret_cast<void*>(m.page_addr(first)), (idx + 1 - first) << page_shift);
      return error(r, "uffd: pin could not make a page writable: " + std::string(std::strerror(r)));
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
  if (impl_->detached()) return 0;
  return nr_pages ? impl_->shrink(nr_pages, nr_pages) : 0;
}

// ---------------------------------------------------------------------------------------------
// Statistics and invariants.

pager_stats pager::stats() const {
  const impl& m = *impl_;
  pager_stats s;
  s.limit_pages = m.limit_pages;
  s.resident_pages = m.resident.load(std::memory_order_relaxed);
  s.peak_resident_pages = m.peak_resident.load(std::memory_order_relaxed);
  {
    std::lock_guard g(m.map_mu);
    s.mapped_bytes = m.mapped_pages << page_shift;
  }
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
  s.overcharges = ld(m.c.overcharges);
  s.swap_out_failures = ld(m.c.swap_out_failures);
  s.fault_ns = ld(m.c.fault_ns);
  s.swap_out_bytes = s.swap_outs << page_shift;
  s.compressed_bytes = ld(m.c.compressed_bytes);
  s.wp_sweeps = ld(m.c.wp_sweeps);
  s.evict_wp_pages = ld(m.c.evict_wp_pages);
  const page_store_stats ps = m.store->stats();
  s.swap_pages_used = ps.pages;
  s.zram_orig_data_size = ps.mm.orig_data_size;
  s.zram_compr_data_size = ps.mm.compr_data_size;
  s.zram_mem_used_total = ps.mm.mem_used_total;
  s.zram_mem_used_max = ps.mm.mem_used_max;
  return s;
}

status pager::check_invariants() const {
  const impl& m = *impl_;
  std::lock_guard g(m.map_mu);
  std::lock_guard l(m.lru_lock);
  std::string bad;
  auto fail = [&](uint64_t idx, const std::string& what) {
    if (bad.size() < 2000) bad += "page " + std::to_string(idx) + ": " + what + "; ";
  };
  uint64_t mapped = 0, with_handle = 0, on_lru = 0, pins = 0, valid = 0;
  for (uint64_t i = 0; i < m.nr_pages; ++i) {
    const uint64_t st = m.ptes[i].load(std::memory_order_relaxed);
    if (st == 0) continue;
    if (st & ~page_lock::data_mask) fail(i, "locked");
    if (!(st & PS_VALID)) {
      fail(i, "state outside any mapping");
      continue;
    }
    ++valid;
    if (st & PG_isolated) fail(i, "isolated");
    pins += ps_pins(st);
    switch (ps_state(st)) {
      case PS_MAPPED:
        ++mapped;
        if (st & PG_lru) ++on_lru;
        if (st & PG_swapcache) {
          ++with_handle;
          if (!(st & PG_uffd_wp)) fail(i, "swap cache page not write-protected");
          if (m.handles[i] == 0) fail(i, "swap cache page without a handle");
        }
        if (!(st & PG_lru)) fail(i, "mapped but not on the clock");
        break;
      case PS_SWAPPED:
        ++with_handle;
        if (m.handles[i] == 0) fail(i, "swapped out without a handle");
        if (st & (PG_lru | PG_uffd_wp | PG_swapcache | PG_referenced | PG_active |
                  PG_stamp_exact))
          fail(i, "swapped out with mapped-page flags");
        if (ps_pins(st)) fail(i, "swapped out while pinned");
        break;
      case PS_NONE:
        if (st & (PG_lru | PG_uffd_wp | PG_swapcache | PG_referenced | PG_active |
                  PG_stamp_exact))
          fail(i, "unmapped with mapped-page flags");
        if (ps_pins(st)) fail(i, "unmapped while pinned");
        break;
      default:
        fail(i, "bad state");
    }
  }
  uint64_t walked = 0;
  if (m.lru_head != lru_nil) {
    uint32_t i = m.lru_head;
    do {
      const uint64_t st = m.ptes[i].load(std::memory_order_relaxed);
      if (!(st & PG_lru) || ps_state(st) != PS_MAPPED) fail(i, "on the clock but not PG_lru/mapped");
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
  if (pins != m.pinned.load(std::memory_order_relaxed)) bad += "pin count mismatch; ";
  const uint64_t started = m.sweep_started.load(std::memory_order_relaxed);
  if (m.sweep_done.load(std::memory_order_relaxed) > started ||
      m.sweep_finished.load(std::memory_order_relaxed) != started)
    bad += "sweep counters; ";
  const page_store_stats ps = m.store->stats();
  if (ps.pages != with_handle)
    bad += "store holds " + std::to_string(ps.pages) + " pages but " +
           std::to_string(with_handle) + " pages have handles; ";
  if (auto st = m.store->check_invariants(); !st.ok()) bad += std::string(st.message()) + "; ";
  if (valid > m.mapped_pages) bad += "more valid pages than mapped; ";
  uint64_t covered = 0;
  for (const auto& [s, n] : m.mappings) covered += n;
  for (const auto& [s, n] : m.free_extents) covered += n;
  if (covered != m.nr_pages || m.mapped_pages + 0 > m.nr_pages) bad += "arena accounting; ";
  if (!bad.empty()) return error(EIO, "uffd: " + bad);
  return {};
}

}  // namespace uswap
