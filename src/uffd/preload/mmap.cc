// mmap, munmap, mprotect, madvise, mremap and the mlock family for the arena.
//
// Every anonymous private mapping of any protection is routed into the pager: the program's own
// (PROT_NONE reservations committed later with mprotect, as the JVM and V8 do), mimalloc's
// segments, a library's buffers. MAP_FIXED inside the arena is a pager map_fixed; MAP_FIXED of a
// file or shared memory there (the JVM maps its class-data archive into a reservation) makes the
// range foreign first. What stays with the kernel: mappings that are not anonymous-private, huge
// pages, MAP_GROWSDOWN stacks, MAP_32BIT, MAP_FIXED outside the arena (the program chose the
// address), and glibc's own internal mmaps (thread stacks), which never reach this file; all of
// it is counted as unrouted memory by the statistics.
//
// A reservation larger than the arena's room (MariaDB reserves innodb_buffer_pool_size_max, 8 TiB
// by default, PROT_NONE, and commits the start of it with MAP_FIXED) is placed across the arena's
// end: the upper half of the free run there routed (the lower half left for other mappings), the
// rest a kernel PROT_NONE reservation above the end, whose
// first page is the arena's upper guard page. Only addresses are reserved: what the program
// commits in the first part is paged and limited, in the second (terabytes further on) unrouted,
// as MAP_FIXED outside the arena is. Calls that cross the end are split, the part inside to the
// pager, the part above to the kernel; the guard page is mapped again when an unmap took it.
// Other calls that straddle the arena's edges are refused (EINVAL): nothing a program gets from
// mmap crosses them, so only a program computing addresses of its own could ask for that.
//
// mmap hints: the kernel places a mapping at its hint when that range is free; the arena cannot,
// and nearly every program takes whatever address it gets (V8's random hints, HotSpot's
// compressed-oops attach points, which fall back). A few accept nothing else: the JVM's ZGC
// reserves its heap views at multiples of 4 TiB, unmaps any other placement and tries the next,
// thousands of times, then gives up. A process that unmapped `rejections_to_honor` hinted
// PROT_NONE reservations whole, as placed, is taken for such a program: from then on its hinted
// reservations outside the arena go to the kernel at the hint (MAP_FIXED_NOREPLACE: nothing is
// replaced), unrouted and named in the summary; one the kernel cannot place there is routed.
// A hint within a rel32 jump of a loaded object's code asks for a JIT's code area (LuaJIT's
// machine code, V8's code range): useless anywhere else, so the kernel places it at the hint if
// it can, unrouted (counted as such); LuaJIT would otherwise unmap every placement and stop
// compiling.
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>


#include <atomic>

#include "uswap/base/dcheck.h"
#include "uswap/base/raw_syscall.h"
#include "shim.h"

namespace uswap::shim {

thread_local int tls_passing_on [[gnu::tls_model("initial-exec")]] = 0;

namespace {

bool routable(int flags, int fd) noexcept {
  if ((flags & MAP_TYPE) != MAP_PRIVATE || !(flags & MAP_ANONYMOUS)) return false;
  (void)fd;  // ignored for MAP_ANONYMOUS, as the kernel does
  return !(flags & (MAP_HUGETLB | MAP_GROWSDOWN | MAP_32BIT));
}

// The arena is full: say so once, naming the option, then fail as mmap fails.
void arena_full(size_t len) noexcept {
  static std::atomic<bool> said{false};
  if (!said.exchange(true))
    fprintf(stderr,
            "uswap: the arena is full: a mapping of %zu bytes does not fit; run with a larger "
            "--max-size (now %llu MiB)\n",
            len, static_cast<unsigned long long>((g.arena_hi - g.arena_lo) >> 20));
}

// EINVAL for a call over the pager's pages below the arena (shim.h), said once.
int refuse_over_pager_pages(const char* what, const void* addr, size_t len) noexcept {
  static std::atomic<bool> said{false};
  if (!said.exchange(true))
    fprintf(stderr,
            "uswap: refused a %s of %p..%p over the pager's pages below its arena (%#lx..%#lx): "
            "the program would lose its system calls (EINVAL; USWAP_ARENA_BASE moves the arena)\n",
            what, addr, static_cast<const char*>(addr) + len,
            static_cast<unsigned long>(g.arena_lo - pager_pages_below_arena),
            static_cast<unsigned long>(g.arena_lo));
  errno = EINVAL;
  return -1;
}

void refuse_straddle(const char* what) noexcept {
  static std::atomic<bool> said{false};
  if (!said.exchange(true))
    fprintf(stderr, "uswap: refused a %s across the edge of the arena (EINVAL)\n", what);
}

// The last hinted reservation placed in the arena, and how many were unmapped as placed. A
// mutex, not a pair of atomics: a torn pair could count a different unmap as a rejection.
// Only hinted reservations and unmaps of exactly their address take it.
constexpr unsigned rejections_to_honor = 256;  // ZGC tries 8192, HotSpot up to 29 (Shenandoah)
pthread_mutex_t hint_lock = PTHREAD_MUTEX_INITIALIZER;
std::atomic<uintptr_t> hinted_at{0};  // 0: none outstanding
size_t hinted_len = 0;                // with hint_lock
unsigned hint_rejections = 0;         // with hint_lock
std::atomic<bool> honor_hints{false};

bool hinted_reservation(const void* addr, size_t len, int prot) noexcept {
  return addr && prot == PROT_NONE && !overlaps_arena(addr, len);
}

void note_hinted(void* placed, size_t len) noexcept {
  pthread_mutex_lock(&hint_lock);
  hinted_len = len;
  hinted_at.store(reinterpret_cast<uintptr_t>(placed), std::memory_order_relaxed);
  pthread_mutex_unlock(&hint_lock);
}

// An unmap inside the arena: a rejection if it is the last hinted placement, whole.
void note_unmap(const void* addr, size_t len) noexcept {
  if (hinted_at.load(std::memory_order_relaxed) != reinterpret_cast<uintptr_t>(addr)) return;
  bool now = false;
  unsigned n = 0;
  pthread_mutex_lock(&hint_lock);
  if (hinted_at.load(std::memory_order_relaxed) == reinterpret_cast<uintptr_t>(addr) &&
      hinted_len == len) {
    hinted_at.store(0, std::memory_order_relaxed);
    n = ++hint_rejections;
    now = n == rejections_to_honor;
  }
  pthread_mutex_unlock(&hint_lock);
  if (now) {
    honor_hints.store(true, std::memory_order_relaxed);
    note_hints_honored(n);
  }
}

// Memory near code. A program asks for a mapping within a 32-bit displacement of its code only
// to reach that code with one (a JIT's code area: LuaJIT's machine code, which it unmaps
// anywhere else and gives up compiling; V8's code range, near its embedded builtins); the arena,
// terabytes away, can never be that. `code_reach`: the x86-64 rel32 jump's.
constexpr uintptr_t code_reach = uintptr_t{2} << 30;

struct near_code_query {
  uintptr_t lo, hi;  // the mapping asked for
  bool near = false;
};

int find_code_near(dl_phdr_info* info, size_t, void* p) noexcept {
  auto* q = static_cast<near_code_query*>(p);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
    const uintptr_t text_lo = info->dlpi_addr + ph.p_vaddr, text_hi = text_lo + ph.p_memsz;
    const uintptr_t reach_lo = text_lo > code_reach ? text_lo - code_reach : 0;
    if (q->lo >= reach_lo && q->hi <= text_hi + code_reach) {
      q->near = true;
      return 1;
    }
  }
  return 0;
}

// Whether [addr, addr + len) lies within reach of a loaded object's executable segment.
bool near_code(const void* addr, size_t len) noexcept {
  near_code_query q{reinterpret_cast<uintptr_t>(addr), reinterpret_cast<uintptr_t>(addr) + len};
  if (q.hi < q.lo) return false;
  dl_iterate_phdr(find_code_near, &q);
  return q.near;
}

// Reservations across the arena's end (see the top of the file). `min_inside`: a part inside
// shorter than this is too little to route the commits of a reservation that large, which then
// fails as a full arena does. across_lock serialises the placements, so that two never count
// on the same free run.
constexpr uint64_t min_inside = uint64_t{1} << 30;
pthread_mutex_t across_lock = PTHREAD_MUTEX_INITIALIZER;

uintptr_t page_round_up(uintptr_t n) noexcept {
  return (n + uswap::page_size - 1) & ~(uintptr_t{uswap::page_size} - 1);
}

// Whether [addr, addr + len) starts inside the arena and runs past its end.
bool across_end(const void* addr, size_t len) noexcept {
  const auto a = reinterpret_cast<uintptr_t>(addr);
  return in_arena(addr) && len > g.arena_hi - a;
}

// The arena's upper guard page (kernel_access.h's invariant), mapped again after an unmap of
// [addr, addr + len) that may have taken it; where something else is mapped there, that stays.
void restore_upper_guard(const void* addr, size_t len) noexcept {
  const auto a = reinterpret_cast<uintptr_t>(addr);
  if (!ready() || a > g.arena_hi || len <= g.arena_hi - a) return;
  const int saved = errno;
  uswap::raw_syscall(SYS_mmap, g.arena_hi, uswap::page_size, PROT_NONE,
            MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
  errno = saved;
}

// A PROT_NONE reservation of `len` bytes that no free run of the arena holds, placed across its
// end; MAP_FAILED (errno untouched) when the run at the end is too short or the kernel's part
// cannot be had there. Only reservations: a writable mapping that large would be the program's
// memory from the first touch, much of it unrouted, so it fails as a full arena does (Python's
// bytearray(5 << 30) under --max-size 4G gets its MemoryError, not 3.5 GiB past the limit).
void* reserve_across_end(size_t len, int flags) noexcept {
  const uintptr_t hi = g.arena_hi, total = page_round_up(len);
  void* placed = MAP_FAILED;
  const int saved = errno;
  pthread_mutex_lock(&across_lock);
  // The upper half of the free run at the end: the lower half stays for the program's other
  // mappings, which would otherwise find the arena full.
  const uint64_t inside = (g.pg->free_at_end() / 2) & ~(uint64_t{uswap::page_size} - 1);
  if (inside >= min_inside && inside < total) {
    // Above the end: the guard page, then the kernel's reservation right after it.
    const uintptr_t above = total - inside, rest = above - uswap::page_size;
    bool ok = true;
    if (rest) {
      const long k = uswap::raw_syscall(
          SYS_mmap, hi + uswap::page_size, rest, PROT_NONE,
          (flags & MAP_NORESERVE) | MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
      ok = k == static_cast<long>(hi + uswap::page_size);
      if (!ok && k > 0) uswap::raw_syscall(SYS_munmap, k, rest);  // a kernel without NOREPLACE
    }
    if (ok) {
      if (auto r = g.pg->map_fixed(reinterpret_cast<void*>(hi - inside), inside, PROT_NONE, true))
        placed = *r;
      else if (rest)
        uswap::raw_syscall(SYS_munmap, hi + uswap::page_size, rest);
    }
  }
  pthread_mutex_unlock(&across_lock);
  errno = saved;
  return placed;
}

// The pager refuses (EPERM) in a process that does not own it (a raw clone() child): the kernel
// call then does what it can.
bool detached_error(const uswap::status& st) noexcept { return st.code() == EPERM; }

}  // namespace
}  // namespace uswap::shim

using namespace uswap::shim;

USWAP_EXPORT void* mmap(void* addr, size_t len, int prot, int flags, int fd, off_t off) {
  if (!active()) {
    // Before the constructor, a hint in the arena's range would be kept by the kernel: the
    // arena could not be reserved there (the process would run unrouted), and with an
    // ancestor's filter every system call naming that memory would trap while no handler is
    // there to serve it (SIGSYS kills). The hint is dropped; the program takes any address.
    if (addr && !ready() && !(flags & (MAP_FIXED | MAP_FIXED_NOREPLACE)) &&
        in_planned_arena(addr, len))
      addr = nullptr;
    return lc().mmap(addr, len, prot, flags, fd, off);
  }
  const bool fixed = flags & (MAP_FIXED | MAP_FIXED_NOREPLACE);
  if ((flags & MAP_FIXED) && over_pager_pages(addr, len)) {
    refuse_over_pager_pages("MAP_FIXED mapping", addr, len);
    return MAP_FAILED;
  }
  if (fixed && across_end(addr, len)) {
    // Into a reservation across the arena's end: the part inside as below, the rest the
    // kernel's. As a failed MAP_FIXED may, a failure of the second part leaves the first done.
    const size_t inside = g.arena_hi - reinterpret_cast<uintptr_t>(addr);
    void* r = mmap(addr, inside, prot, flags, fd, off);
    if (r == MAP_FAILED) return r;
    const off_t above_off = (flags & MAP_ANONYMOUS) ? off : off + static_cast<off_t>(inside);
    void* k = lc().mmap(reinterpret_cast<void*>(g.arena_hi), len - inside, prot,
                        (flags & ~MAP_FIXED_NOREPLACE) | MAP_FIXED, fd, above_off);
    return k == MAP_FAILED ? MAP_FAILED : addr;
  }
  if (!routable(flags, fd)) {
    if (!fixed || !overlaps_arena(addr, len)) return lc().mmap(addr, len, prot, flags, fd, off);
    if (!inside_arena(addr, len)) {
      refuse_straddle("MAP_FIXED mapping");
      return fail_with<void*>(EINVAL, MAP_FAILED);
    }
    // A file or shared mapping placed inside the arena: the range becomes foreign.
    return pager_call([&] {
      if (flags & MAP_FIXED_NOREPLACE) {
        auto m = g.pg->mapping_of(addr);
        if (m.ok() || g.pg->is_foreign(addr)) return fail_with<void*>(EEXIST, MAP_FAILED);
      }
      if (auto st = g.pg->adopt_foreign(addr, len); !st.ok())
        return fail_with<void*>(st.code(), MAP_FAILED);
      void* r = lc().mmap(addr, len, prot, (flags & ~MAP_FIXED_NOREPLACE) | MAP_FIXED, fd, off);
      if (r == MAP_FAILED) {
        const int err = errno;
        (void)g.pg->unmap(addr, len);  // the range is the pager's free space again
        errno = err;
      }
      return r;
    });
  }
  if (len == 0) return fail_with<void*>(EINVAL, MAP_FAILED);
  if (fixed) {
    if (!overlaps_arena(addr, len)) return lc().mmap(addr, len, prot, flags, fd, off);
    if (!inside_arena(addr, len)) {
      refuse_straddle("MAP_FIXED mapping");
      return fail_with<void*>(EINVAL, MAP_FAILED);
    }
    return pager_call([&] {
      auto r = g.pg->map_fixed(addr, len, prot, flags & MAP_FIXED_NOREPLACE);
      return r ? *r : fail_with<void*>(r.error().code(), MAP_FAILED);
    });
  }
  const bool hinted = hinted_reservation(addr, len, prot);
  // At the hint or nowhere useful (see the top of the file): the kernel's if it can place it
  // there, else the arena's as any other.
  if ((hinted && honor_hints.load(std::memory_order_relaxed)) ||
      (addr && !overlaps_arena(addr, len) && near_code(addr, len))) {
    // The hint as the program gave it, not MAP_FIXED_NOREPLACE: a program's sandbox allows the
    // flags it uses itself (Chromium's renderers are killed for NOREPLACE). Placed elsewhere,
    // it goes back and the arena has it.
    const int saved = errno;
    void* k = lc().mmap(addr, len, prot, flags, fd, off);
    if (k == addr) return k;  // where the program asked, unrouted
    if (k != MAP_FAILED) lc().munmap(k, len);
    errno = saved;
  }
  void* const r = pager_call([&] {
    auto r = g.pg->map(len, uswap::page_size, prot, addr);
    if (r && hinted) note_hinted(*r, len);
    if (r) return *r;
    if (detached_error(r.error())) return lc().mmap(addr, len, prot, flags, fd, off);
    if (r.error().code() == ENOMEM && prot == PROT_NONE)
      if (void* p = reserve_across_end(len, flags); p != MAP_FAILED) return p;
    if (r.error().code() == ENOMEM) arena_full(len);
    return fail_with<void*>(r.error().code(), MAP_FAILED);
  });
  if (r != MAP_FAILED) sample_if_due();
  return r;
}

USWAP_EXPORT void* mmap64(void* addr, size_t len, int prot, int flags, int fd, off_t off) {
  return mmap(addr, len, prot, flags, fd, off);
}

USWAP_EXPORT int munmap(void* addr, size_t len) {
  if (active() && over_pager_pages(addr, len)) return refuse_over_pager_pages("munmap", addr, len);
  if (!active() || !overlaps_arena(addr, len)) {
    const int r = lc().munmap(addr, len);
    if (r == 0) restore_upper_guard(addr, len);
    return r;
  }
  if (across_end(addr, len)) {
    // Under across_lock: a placement meanwhile would find the arena's part free and the
    // kernel's still there, and fail.
    const size_t inside = g.arena_hi - reinterpret_cast<uintptr_t>(addr);
    pthread_mutex_lock(&across_lock);
    int r = munmap(addr, inside);
    if (r == 0) r = munmap(reinterpret_cast<void*>(g.arena_hi), len - inside);
    pthread_mutex_unlock(&across_lock);
    return r;
  }
  if (!inside_arena(addr, len)) {
    refuse_straddle("munmap");
    return fail_with(EINVAL, -1);
  }
  return pager_call([&] {
    const uswap::status st = g.pg->unmap(addr, len);
    if (st.ok()) {
      note_unmap(addr, len);
      return 0;
    }
    if (detached_error(st)) return lc().munmap(addr, len);
    return fail_with(st.code(), -1);
  });
}

USWAP_EXPORT int mprotect(void* addr, size_t len, int prot) {
  if (active() && over_pager_pages(addr, len)) return refuse_over_pager_pages("mprotect", addr, len);
  if (!active() || !overlaps_arena(addr, len)) return lc().mprotect(addr, len, prot);
  if (across_end(addr, len)) {
    const size_t inside = g.arena_hi - reinterpret_cast<uintptr_t>(addr);
    if (mprotect(addr, inside, prot) != 0) return -1;
    return lc().mprotect(reinterpret_cast<void*>(g.arena_hi), len - inside, prot);
  }
  if (!inside_arena(addr, len)) {
    refuse_straddle("mprotect");
    return fail_with(EINVAL, -1);
  }
  return pager_call([&] {
    // A foreign range is the program's own mapping: the kernel's to change.
    if (g.pg->is_foreign(addr)) return lc().mprotect(addr, len, prot);
    const uswap::status st = g.pg->protect(addr, len, prot);
    if (st.ok()) return 0;
    if (detached_error(st)) return lc().mprotect(addr, len, prot);
    return fail_with(st.code(), -1);
  });
}

USWAP_EXPORT int madvise(void* addr, size_t len, int advice) {
  if (!active() || !overlaps_arena(addr, len)) return lc().madvise(addr, len, advice);
  if (across_end(addr, len)) {
    const size_t inside = g.arena_hi - reinterpret_cast<uintptr_t>(addr);
    if (madvise(addr, inside, advice) != 0) return -1;
    return lc().madvise(reinterpret_cast<void*>(g.arena_hi), len - inside, advice);
  }
  if (!inside_arena(addr, len)) {
    refuse_straddle("madvise");
    return fail_with(EINVAL, -1);
  }
  return pager_call([&] {
    if (g.pg->is_foreign(addr)) return lc().madvise(addr, len, advice);
    uswap::status st;
    switch (advice) {
      case MADV_DONTNEED:
      case MADV_FREE:
        // Both may read back zeros afterwards: the pager frees the pages and their slots.
        st = g.pg->discard(addr, len);
        break;
      case MADV_DONTFORK:
        st = g.pg->set_fork_advice(addr, len, uswap::pager::fork_advice::dontfork);
        break;
      case MADV_WIPEONFORK:
        st = g.pg->set_fork_advice(addr, len, uswap::pager::fork_advice::wipeonfork);
        break;
      case MADV_DOFORK:
      case MADV_KEEPONFORK:
        st = g.pg->set_fork_advice(addr, len, uswap::pager::fork_advice::copy);
        break;
      case MADV_HUGEPAGE:
      case MADV_NOHUGEPAGE:
      case MADV_MERGEABLE:
      case MADV_UNMERGEABLE:
      case MADV_COLD:
      case MADV_PAGEOUT:
      case MADV_POPULATE_READ:
      case MADV_POPULATE_WRITE:
        // Hints about page size, merging and residency: the pager decides those (4 KiB pages,
        // its own clock). A populate is met lazily, which a program cannot tell apart.
        return 0;
      default:
        return lc().madvise(addr, len, advice);  // WILLNEED, SEQUENTIAL, DONTDUMP...
    }
    if (st.ok()) return 0;
    if (detached_error(st)) return lc().madvise(addr, len, advice);
    return fail_with(st.code(), -1);
  });
}

USWAP_EXPORT void* mremap(void* old, size_t old_len, size_t new_len, int flags, ...) {
  void* new_addr = nullptr;
  if (flags & MREMAP_FIXED) {
    va_list ap;
    va_start(ap, flags);
    new_addr = va_arg(ap, void*);
    va_end(ap);
  }
  auto kernel = [&] {
    return (flags & MREMAP_FIXED) ? lc().mremap(old, old_len, new_len, flags, new_addr)
                                  : lc().mremap(old, old_len, new_len, flags);
  };
  if (!active()) return kernel();
  const bool old_in = overlaps_arena(old, old_len ? old_len : 1);
  const bool new_in = new_addr && overlaps_arena(new_addr, new_len);
  if (!old_in && !new_in) return kernel();
  if (!old_in || (new_addr && !new_in) || !inside_arena(old, old_len) ||
      (new_addr && !inside_arena(new_addr, new_len))) {
    refuse_straddle("mremap");
    return fail_with<void*>(EINVAL, MAP_FAILED);
  }
  return pager_call([&] {
    if (g.pg->is_foreign(old)) {
      // The program's own mapping moves or grows as the kernel decides; if it leaves its place,
      // that place is the pager's again.
      if (new_addr) {
        if (auto st = g.pg->adopt_foreign(new_addr, new_len); !st.ok())
          return fail_with<void*>(st.code(), MAP_FAILED);
      }
      void* r = kernel();
      if (r != MAP_FAILED && r != old) (void)g.pg->unmap(old, old_len);
      return r;
    }
    if (flags & MREMAP_DONTUNMAP) {
      static std::atomic<bool> said{false};
      if (!said.exchange(true))
        fprintf(stderr,
                "uswap: mremap(MREMAP_DONTUNMAP) of routed memory is not supported (EINVAL)\n");
      return fail_with<void*>(EINVAL, MAP_FAILED);
    }
    auto r = g.pg->remap(old, old_len, new_len, flags & MREMAP_MAYMOVE, new_addr);
    if (!r) return fail_with<void*>(r.error().code(), MAP_FAILED);
    return *r;
  });
}

// mlock of routed memory would pin it beyond the pager's reach (and MADV_DONTNEED refuses
// VM_LOCKED ranges): the pager keeps its limit instead, which a program cannot tell apart but
// by timing.
USWAP_EXPORT int mlock(const void* addr, size_t len) {
  if (active() && inside_arena(addr, len)) return 0;
  return static_cast<int>(uswap::raw_syscall(SYS_mlock, addr, len));
}

USWAP_EXPORT int mlock2(const void* addr, size_t len, unsigned flags) {
  if (active() && inside_arena(addr, len)) return 0;
  return static_cast<int>(uswap::raw_syscall(SYS_mlock2, addr, len, flags));
}

USWAP_EXPORT int munlock(const void* addr, size_t len) {
  if (active() && inside_arena(addr, len)) return 0;
  return static_cast<int>(uswap::raw_syscall(SYS_munlock, addr, len));
}

// MCL_CURRENT would fault in every page of every mapping: the pager's reservations too (its
// swap tables and pools, sized for the largest job, gigabytes that are never touched
// otherwise). The shim asks for MCL_ONFAULT as well: what is resident is locked now, the rest
// as it is touched, so only the program's own pages are ever locked; what the program loses is
// the prefault of its file mappings. The arena must stay pageable: MCL_CURRENT is undone there.
USWAP_EXPORT int mlockall(int flags) {
  if (!ready()) return lc().mlockall(flags);
  const int r = lc().mlockall((flags & MCL_CURRENT) ? flags | MCL_ONFAULT : flags);
  if (r == 0 && (flags & MCL_CURRENT)) uswap::raw_syscall(SYS_munlock, g.arena_lo, g.arena_hi - g.arena_lo);
  return r;
}

// --- syscall(2), the C library's door to calls it has no wrapper for. SBCL maps its garbage-
// collected heap with syscall(SYS_mmap, ...): through the C library's function that mapping
// bypassed the wrappers above and the heap ran unrouted, its limit not held. The shim's syscall()
// is a few instructions of assembly: a memory call (or a close, fds.cc; a seccomp, sandbox.cc)
// goes to the wrapper of the same name, and so does a call whose buffers sit behind an array the
// seccomp filter cannot see (io.cc: libuv makes recvmmsg and sendmmsg with syscall(), its
// mmsghdr array on the stack, and bind9's named lost queries to EFAULT), and the signal calls
// (signals.cc: Chromium resets its child's handlers with syscall(SYS_rt_sigaction)); any
// other number jumps, without a frame of its own, to the C library's syscall(), so that the
// call is made from the C library's text as before (the raw-fork filter traps a clone made
// there) and a vfork made this way returns into no frame of the shim's. Before the shim has
// looked the C library's function up (a library's constructor that runs first), the rest are
// made with raw_syscall. uswap's own memory calls never come here (raw_syscall.h; debug builds
// check the caller).
#if defined(__x86_64__)
long (*uswap_shim_next_syscall)(long, ...) = nullptr;  // C linkage: declared so in shim.h

namespace {
// The shim's own text, for the debug check that no call of uswap's comes through syscall().
[[maybe_unused]] bool from_shim(const void* ra) noexcept;
}  // namespace

extern "C" __attribute__((visibility("hidden"), used)) long uswap_shim_wrapped_syscall(
    long nr, long a1, long a2, long a3, long a4, long a5, long a6) {
  if (tls_passing_on > 0) return uswap::raw_syscall6(nr, a1, a2, a3, a4, a5, a6);
  USWAP_DCHECK(!from_shim(__builtin_return_address(0)));
  void* const p = reinterpret_cast<void*>(a1);
  const auto len = static_cast<size_t>(a2);
  auto address = [](void* r) { return r == MAP_FAILED ? -1L : reinterpret_cast<long>(r); };
  auto iov = [](long a) { return reinterpret_cast<const iovec*>(a); };
  const int fd = static_cast<int>(a1);
  switch (nr) {
    case SYS_mmap:
      return address(mmap(p, len, static_cast<int>(a3), static_cast<int>(a4),
                          static_cast<int>(a5), static_cast<off_t>(a6)));
    case SYS_munmap:
      return munmap(p, len);
    case SYS_mprotect:
      return mprotect(p, len, static_cast<int>(a3));
    case SYS_madvise:
      return madvise(p, len, static_cast<int>(a3));
    case SYS_mremap:
      return address(mremap(p, len, static_cast<size_t>(a3), static_cast<int>(a4),
                            reinterpret_cast<void*>(a5)));
    case SYS_mlock:
      return mlock(p, len);
    case SYS_munlock:
      return munlock(p, len);
    case SYS_mlock2:
      return mlock2(p, len, static_cast<unsigned>(a3));
    case SYS_mlockall:
      return mlockall(static_cast<int>(a1));
    case SYS_close:
      return close(static_cast<int>(a1));
    case SYS_close_range:
      return close_range(static_cast<unsigned>(a1), static_cast<unsigned>(a2),
                         static_cast<int>(a3));
    case SYS_seccomp:
      return seccomp_filter_call(a1, a2, a3);
    case SYS_readv:
      return readv(fd, iov(a2), static_cast<int>(a3));
    case SYS_writev:
      return writev(fd, iov(a2), static_cast<int>(a3));
    case SYS_preadv:  // (fd, iov, cnt, pos_l, pos_h): on x86-64 pos_l is the whole offset
      return preadv(fd, iov(a2), static_cast<int>(a3), a4);
    case SYS_pwritev:
      return pwritev(fd, iov(a2), static_cast<int>(a3), a4);
    case SYS_preadv2:
      return preadv2(fd, iov(a2), static_cast<int>(a3), a4, static_cast<int>(a6));
    case SYS_pwritev2:
      return pwritev2(fd, iov(a2), static_cast<int>(a3), a4, static_cast<int>(a6));
    case SYS_sendmsg:
      return sendmsg(fd, reinterpret_cast<const msghdr*>(a2), static_cast<int>(a3));
    case SYS_recvmsg:
      return recvmsg(fd, reinterpret_cast<msghdr*>(a2), static_cast<int>(a3));
    case SYS_sendmmsg:
      return sendmmsg(fd, reinterpret_cast<mmsghdr*>(a2), static_cast<unsigned>(a3),
                      static_cast<int>(a4));
    case SYS_recvmmsg:
      return recvmmsg(fd, reinterpret_cast<mmsghdr*>(a2), static_cast<unsigned>(a3),
                      static_cast<int>(a4), reinterpret_cast<timespec*>(a5));
    case SYS_process_vm_readv:
      return process_vm_readv(static_cast<pid_t>(a1), iov(a2), static_cast<unsigned long>(a3),
                              iov(a4), static_cast<unsigned long>(a5),
                              static_cast<unsigned long>(a6));
    case SYS_process_vm_writev:
      return process_vm_writev(static_cast<pid_t>(a1), iov(a2), static_cast<unsigned long>(a3),
                               iov(a4), static_cast<unsigned long>(a5),
                               static_cast<unsigned long>(a6));
    case SYS_vmsplice:
      return vmsplice(fd, iov(a2), static_cast<size_t>(a3), static_cast<unsigned>(a4));
    case SYS_rt_sigaction:
      return rt_sigaction_call(a1, a2, a3, a4);
    case SYS_rt_sigprocmask:
      return rt_sigprocmask_call(a1, a2, a3, a4);
    case SYS_sigaltstack:
      return sigaltstack(reinterpret_cast<const stack_t*>(a1), reinterpret_cast<stack_t*>(a2));
    default:
      return uswap::raw_syscall6(nr, a1, a2, a3, a4, a5, a6);
  }
}

extern "C" __attribute__((visibility("hidden"), used)) long uswap_shim_early_syscall(
    long nr, long a1, long a2, long a3, long a4, long a5, long a6) {
  return uswap::raw_syscall6(nr, a1, a2, a3, a4, a5, a6);
}

#define USWAP_STR(x) #x
#define USWAP_XSTR(x) USWAP_STR(x)
#define USWAP_WRAPPED(nr) "  cmp $" USWAP_XSTR(nr) ", %rdi\n  je 1f\n"
// syscall(nr, a1..a6) has the registers and stack of a seven-argument function: the wrappers
// above take them as they are.
// clang-format off
asm(R"(  .text
  .globl syscall
  .type syscall, @function
  .p2align 4
syscall:
  .cfi_startproc
)"
  USWAP_WRAPPED(SYS_mmap) USWAP_WRAPPED(SYS_munmap) USWAP_WRAPPED(SYS_mprotect)
  USWAP_WRAPPED(SYS_madvise) USWAP_WRAPPED(SYS_mremap) USWAP_WRAPPED(SYS_mlock)
  USWAP_WRAPPED(SYS_munlock) USWAP_WRAPPED(SYS_mlock2) USWAP_WRAPPED(SYS_mlockall)
  USWAP_WRAPPED(SYS_close) USWAP_WRAPPED(SYS_close_range) USWAP_WRAPPED(SYS_seccomp)
  USWAP_WRAPPED(SYS_readv) USWAP_WRAPPED(SYS_writev) USWAP_WRAPPED(SYS_preadv)
  USWAP_WRAPPED(SYS_pwritev) USWAP_WRAPPED(SYS_preadv2) USWAP_WRAPPED(SYS_pwritev2)
  USWAP_WRAPPED(SYS_sendmsg) USWAP_WRAPPED(SYS_recvmsg) USWAP_WRAPPED(SYS_sendmmsg)
  USWAP_WRAPPED(SYS_recvmmsg) USWAP_WRAPPED(SYS_process_vm_readv)
  USWAP_WRAPPED(SYS_process_vm_writev) USWAP_WRAPPED(SYS_vmsplice)
  USWAP_WRAPPED(SYS_rt_sigaction) USWAP_WRAPPED(SYS_rt_sigprocmask) USWAP_WRAPPED(SYS_sigaltstack)
R"(  mov uswap_shim_next_syscall(%rip), %rax
  test %rax, %rax
  jz 2f
  jmp *%rax
1:
  jmp uswap_shim_wrapped_syscall
2:
  jmp uswap_shim_early_syscall
  .cfi_endproc
  .size syscall, .-syscall
)");
// clang-format on
#undef USWAP_WRAPPED

namespace {
bool from_shim(const void* ra) noexcept {
  static const std::pair<uintptr_t, uintptr_t> text =
      object_text(reinterpret_cast<uintptr_t>(&uswap_shim_wrapped_syscall));
  const auto a = reinterpret_cast<uintptr_t>(ra);
  return a >= text.first && a < text.second;
}
}  // namespace
#endif
