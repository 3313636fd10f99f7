// libuswap-preload.so: the LD_PRELOAD shim of `uswap run`. It routes a program's large anonymous
// memory into one uswap pager, so that at most --limit bytes of it are resident and the rest is
// compressed in zram (pager.h says how).
//
// What is routed, when the size is at least USWAP_THRESHOLD (default 1 MiB):
//   - malloc, calloc, realloc, reallocarray, memalign, posix_memalign, aligned_alloc, valloc,
//     pvalloc (and so C++'s operator new): a mapping of the pager; free / realloc /
//     malloc_usable_size recognise it by address;
//   - mmap(NULL, len, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS[|MAP_NORESERVE|MAP_POPULATE],
//     -1, 0); munmap, mremap and madvise(MADV_DONTNEED/FREE/REMOVE) of it go to the pager.
// Everything else goes to libc untouched (glibc's own internal mmap calls never reach the shim).
//
// Keeping the pager's guarantees inside a program it does not control:
//   - System calls that read or write pager memory (read, pread, readv, preadv, write, pwrite,
//     writev, pwritev, recv, recvfrom, send, sendto, fread, fwrite): in SIGBUS mode, or when the
//     descriptor is UFFD_USER_MODE_ONLY, the buffer is pinned around the call, in chunks of at
//     most an eighth of the limit (a regular file read in chunks returns the same bytes; a short
//     count ends the loop as it would end the caller's). Calls not listed here that hand pager
//     memory to the kernel fail with EFAULT on an evicted page in that mode; the handler-thread
//     mode (root) has no such gap.
//   - sigaction / signal for SIGBUS: the pager's handler stays installed; the program's handler is
//     recorded and receives every SIGBUS that is not a pager fault.
//   - sigprocmask / pthread_sigmask never block SIGBUS (the kernel kills a thread that takes a
//     forced SIGBUS while blocking it).
//   - MAP_FIXED over pager memory releases that part of the pager first.
// At exit (after the program's own exit handlers) the shim writes one JSON line of statistics to
// the file USWAP_STATS_FILE (uswap run reads it), or a summary to stderr without it.
//
// Configuration (set by uswap run): USWAP_LIMIT (bytes; without it the shim stays out of the
// way), USWAP_COMP, USWAP_THRESHOLD, USWAP_MAX_SIZE, USWAP_SWAP_SIZE, USWAP_FAULT_MODE,
// USWAP_ACCESS, USWAP_STATS_FILE.
//
// Thread-safety: the shim is configured by its constructor before the program's code runs;
// afterwards every entry point may be called from any thread. Allocations made by the pager
// itself (and anything during start-up) go to libc: a thread-local depth (uswap::pager_depth)
// marks pager code.
#include <dlfcn.h>
#include <stdarg.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "../sigbus.h"
#include "../sys.h"
#include "uswap/base/page.h"
#include "uswap/base/units.h"
#include "uswap/uffd/pager.h"

#define USWAP_EXPORT extern "C" __attribute__((visibility("default")))

extern "C" {
void* __libc_malloc(size_t);
void __libc_free(void*);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
void* __libc_valloc(size_t);
void* __libc_pvalloc(size_t);
}

namespace {

using uswap::page_size;

std::atomic<bool> ready{false};
uswap::pager* g_pager = nullptr;  // owned by g_owner, set once before `ready`
std::shared_ptr<uswap::pager>* g_owner = nullptr;
uint64_t g_threshold = 1 << 20;
uint64_t g_pin_chunk = 1 << 20;
bool g_pin_io = true;  // pin buffers around I/O (no kernel-mode fault delivery)
const char* g_stats_file = nullptr;
uint64_t g_start_ns = 0;

// The shim's own calls into the pager, and everything the pager does while resolving a fault,
// count as pager code: nothing they allocate or map is routed back into the pager.
using shim_scope = uswap::pager_scope;
inline bool in_pager_code() noexcept { return uswap::pager_depth() != 0; }

bool active() noexcept { return ready.load(std::memory_order_acquire) && !in_pager_code(); }

bool in_arena(const void* p) noexcept {
  return ready.load(std::memory_order_acquire) && g_pager->contains(p);
}

// Whether [p, p + len) touches the arena.
bool overlaps_arena(const void* p, size_t len) noexcept {
  if (!ready.load(std::memory_order_acquire) || len == 0) return false;
  const auto a = reinterpret_cast<uintptr_t>(p);
  const uintptr_t s = g_pager->arena_start(), e = s + g_pager->arena_size();
  return a < e && a + len > s;
}

void* map_to_pager(size_t len, size_t align) {
  shim_scope s;
  auto r = g_pager->map(len, std::max<size_t>(align, page_size));
  return r ? *r : nullptr;
}

// The start and length of the pager mapping that starts at p, or {nullptr, 0}.
std::pair<void*, uint64_t> mapping_at(const void* p) {
  shim_scope s;
  auto m = g_pager->mapping_of(p);
  if (!m || m->first != p) return {nullptr, 0};
  return *m;
}

template <class T>
T next_fn(const char* name) {
  return reinterpret_cast<T>(dlsym(RTLD_NEXT, name));
}

// The libc functions the shim wraps, resolved once by the constructor.
struct libc_fns {
  ssize_t (*read)(int, void*, size_t);
  ssize_t (*pread)(int, void*, size_t, off_t);
  ssize_t (*write)(int, const void*, size_t);
  ssize_t (*pwrite)(int, const void*, size_t, off_t);
  ssize_t (*recv)(int, void*, size_t, int);
  ssize_t (*recvfrom)(int, void*, size_t, int, sockaddr*, socklen_t*);
  ssize_t (*send)(int, const void*, size_t, int);
  ssize_t (*sendto)(int, const void*, size_t, int, const sockaddr*, socklen_t);
  size_t (*fread)(void*, size_t, size_t, FILE*);
  size_t (*fwrite)(const void*, size_t, size_t, FILE*);
  int (*sigaction)(int, const struct sigaction*, struct sigaction*);
  int (*sigprocmask)(int, const sigset_t*, sigset_t*);
  int (*pthread_sigmask)(int, const sigset_t*, sigset_t*);
  size_t (*malloc_usable_size)(void*);
} libc;

// Runs call(ptr, n) over [buf, buf + len) in chunks, each pinned (with `write`: the kernel will
// write it) for the duration of its call. Returns the total, or the first error if nothing was
// done; a short count ends the loop. Without `may_continue` only the first chunk is transferred
// (a short count, which the caller must accept): a second read from a pipe or socket could block
// where the caller's one call would have returned what was there.
template <class MayContinue, class Call>
ssize_t pinned_io(const void* buf, size_t len, bool write, MayContinue may_continue, Call call) {
  if (!g_pin_io || !overlaps_arena(buf, len)) return call(buf, len);
  size_t total = 0;
  const auto* p = static_cast<const uint8_t*>(buf);
  while (len > 0) {
    // A chunk ends on a page boundary so that consecutive chunks pin disjoint pages.
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    size_t n = std::min<size_t>(len, g_pin_chunk - (a & (page_size - 1)));
    bool pinned = false;
    if (g_pager->contains(p) && g_pager->contains(p + n - 1)) {
      // The pager caps all pins together at half the limit: when other threads' I/O holds the
      // rest, pin less, down to one page, and at one page wait for them to unpin.
      shim_scope s;
      for (;;) {
        const uswap::status st = g_pager->pin(p, n, write);
        if (st.ok() || st.code() != ENOMEM) {
          pinned = st.ok();  // EINVAL: not one mapping; the call then runs unpinned
          break;
        }
        const size_t first_page = page_size - (a & (page_size - 1));  // to the first boundary
        if (n > first_page) {
          const uintptr_t half_end = (a + n / 2) & uswap::page_mask;  // still ends on a boundary
          n = half_end > a ? std::max<size_t>(half_end - a, first_page) : first_page;
        } else {
          const timespec pause{0, 50000};
          nanosleep(&pause, nullptr);
        }
      }
    }
    const ssize_t r = call(p, n);
    if (pinned) {
      shim_scope s;
      (void)g_pager->unpin(p, n);
    }
    if (r < 0) return total ? static_cast<ssize_t>(total) : r;
    total += static_cast<size_t>(r);
    if (static_cast<size_t>(r) < n || !may_continue()) break;
    p += n;
    len -= n;
  }
  return static_cast<ssize_t>(total);
}

// may_continue arguments of pinned_io.
constexpr auto always = [] { return true; };
constexpr auto never = [] { return false; };

// Whether reading `fd` in several chunks returns what one read would: a regular file or a block
// device (a read there returns everything up to end of file, never blocks for more data).
bool chunked_read_ok(int fd) noexcept {
  struct stat st;
  return fstat(fd, &st) == 0 && (S_ISREG(st.st_mode) || S_ISBLK(st.st_mode));
}

void print_stats() {
  if (!ready.load(std::memory_order_acquire)) return;
  shim_scope s;
  const uswap::pager_stats st = g_pager->stats();
  char prog[256] = "?";
  if (FILE* f = fopen("/proc/self/comm", "r")) {
    if (fgets(prog, sizeof prog, f)) prog[strcspn(prog, "\n")] = 0;
    fclose(f);
  }
  char line[1536];
  const int n = snprintf(
      line, sizeof line,
      "{\"pid\":%d,\"program\":\"%s\",\"mode\":\"%s\",\"uffd\":\"%s\",\"limit_bytes\":%" PRIu64
      ",\"peak_resident_bytes\":%" PRIu64 ",\"faults\":%" PRIu64 ",\"wp_faults\":%" PRIu64
      ",\"zero_fills\":%" PRIu64 ",\"swap_ins\":%" PRIu64 ",\"swap_outs\":%" PRIu64
      ",\"clean_evictions\":%" PRIu64 ",\"zero_evictions\":%" PRIu64
      ",\"swap_out_bytes\":%" PRIu64 ",\"compressed_bytes\":%" PRIu64 ",\"fault_ns\":%" PRIu64
      ",\"overcharges\":%" PRIu64 ",\"zram_mem_used_max\":%" PRIu64 ",\"run_ns\":%" PRIu64 "}\n",
      static_cast<int>(getpid()), prog, std::string(uswap::to_string(g_pager->mode())).c_str(),
      g_pager->uffd_origin(), st.limit_pages * page_size, st.peak_resident_pages * page_size,
      st.faults, st.wp_faults, st.zero_fills, st.swap_ins, st.swap_outs, st.clean_evictions,
      st.zero_evictions, st.swap_out_bytes, st.compressed_bytes, st.fault_ns, st.overcharges,
      st.zram_mem_used_max,
      [] {
        timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + ts.tv_nsec - g_start_ns;
      }());
  if (n <= 0) return;
  if (g_stats_file) {
    const int fd = open(g_stats_file, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd >= 0) {
      (void)!::write(fd, line, static_cast<size_t>(std::min<int>(n, sizeof line - 1)));
      close(fd);
    }
    return;
  }
  fprintf(stderr,
          "uswap: %s: peak resident %" PRIu64 " MiB of %" PRIu64 " MiB, swap-outs %" PRIu64
          ", swap-ins %" PRIu64 ", compression %.2fx, %.1f ms in faults\n",
          prog, st.peak_resident_pages * page_size >> 20, st.limit_pages * page_size >> 20,
          st.swap_outs, st.swap_ins,
          st.compressed_bytes ? double(st.swap_out_bytes) / double(st.compressed_bytes) : 0.0,
          double(st.fault_ns) / 1e6);
}

uint64_t env_size(const char* name, uint64_t dflt) {
  const char* v = getenv(name);
  if (!v || !*v) return dflt;
  auto r = uswap::parse_size(v);
  if (!r) {
    fprintf(stderr, "uswap preload: bad %s=%s, using the default\n", name, v);
    return dflt;
  }
  return *r;
}

__attribute__((constructor)) void shim_init() {
  shim_scope s;
  libc.read = next_fn<decltype(libc.read)>("read");
  libc.pread = next_fn<decltype(libc.pread)>("pread");
  libc.write = next_fn<decltype(libc.write)>("write");
  libc.pwrite = next_fn<decltype(libc.pwrite)>("pwrite");
  libc.recv = next_fn<decltype(libc.recv)>("recv");
  libc.recvfrom = next_fn<decltype(libc.recvfrom)>("recvfrom");
  libc.send = next_fn<decltype(libc.send)>("send");
  libc.sendto = next_fn<decltype(libc.sendto)>("sendto");
  libc.fread = next_fn<decltype(libc.fread)>("fread");
  libc.fwrite = next_fn<decltype(libc.fwrite)>("fwrite");
  libc.sigaction = next_fn<decltype(libc.sigaction)>("sigaction");
  libc.sigprocmask = next_fn<decltype(libc.sigprocmask)>("sigprocmask");
  libc.pthread_sigmask = next_fn<decltype(libc.pthread_sigmask)>("pthread_sigmask");
  libc.malloc_usable_size = next_fn<decltype(libc.malloc_usable_size)>("malloc_usable_size");

  const char* limit = getenv("USWAP_LIMIT");
  if (!limit || !*limit) return;  // not under uswap run: stay out of the way
  uswap::pager_options o;
  o.limit = env_size("USWAP_LIMIT", 0);
  o.max_size = env_size("USWAP_MAX_SIZE", o.max_size);
  o.swap_size = env_size("USWAP_SWAP_SIZE", 0);
  if (const char* c = getenv("USWAP_COMP"); c && *c) o.comp_algorithm = c;
  if (const char* m = getenv("USWAP_FAULT_MODE"); m && *m) {
    if (auto fm = uswap::parse_fault_mode(m)) o.mode = *fm;
  }
  if (const char* a = getenv("USWAP_ACCESS"); a && *a) {
    if (auto ac = uswap::parse_uffd_access(a)) o.access = *ac;
  }
  g_threshold = std::max<uint64_t>(env_size("USWAP_THRESHOLD", g_threshold), page_size);
  g_stats_file = getenv("USWAP_STATS_FILE");
  auto p = uswap::pager::create(o);
  if (!p) {
    fprintf(stderr, "uswap preload: no pager, the program runs unpaged: %s\n",
            p.error().to_string().c_str());
    return;
  }
  g_owner = new std::shared_ptr<uswap::pager>(std::move(p).value());  // lives until exit
  g_pager = g_owner->get();
  g_pin_io = !g_pager->kernel_faults();
  g_pin_chunk = std::max<uint64_t>(o.limit / 8, 16 * page_size) & uswap::page_mask;
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  g_start_ns = static_cast<uint64_t>(ts.tv_sec) * 1000000000u + ts.tv_nsec;
  // Registered before any of the program's exit handlers, so it runs after all of them.
  atexit(print_stats);
  ready.store(true, std::memory_order_release);
}

void* alloc_large(size_t n, size_t align) { return active() ? map_to_pager(n, align) : nullptr; }

}  // namespace

// ---------------------------------------------------------------------------------------------
// malloc and friends.

USWAP_EXPORT void* malloc(size_t n) {
  if (n >= g_threshold)
    if (void* p = alloc_large(n, page_size)) return p;
  return __libc_malloc(n);
}

USWAP_EXPORT void free(void* p) {
  if (p && in_arena(p)) {
    auto [start, len] = mapping_at(p);
    if (start) {
      shim_scope s;
      (void)g_pager->unmap(start, len);
    }
    return;  // not a mapping's start: an invalid free, which glibc would abort on; ignore it
  }
  __libc_free(p);
}

USWAP_EXPORT void* calloc(size_t n, size_t m) {
  size_t bytes;
  if (__builtin_mul_overflow(n, m, &bytes)) {
    errno = ENOMEM;
    return nullptr;
  }
  if (bytes >= g_threshold)
    if (void* p = alloc_large(bytes, page_size)) return p;  // pager memory starts zeroed
  return __libc_calloc(n, m);
}

USWAP_EXPORT void* realloc(void* p, size_t n) {
  if (!p) return malloc(n);
  if (in_arena(p)) {
    auto [start, len] = mapping_at(p);
    if (!start) {
      errno = EINVAL;
      return nullptr;
    }
    if (n == 0) {
      free(p);
      return nullptr;
    }
    {
      shim_scope s;
      if (n >= g_threshold && g_pager->resize(start, len, n).ok()) return start;
    }
    void* q = n >= g_threshold ? alloc_large(n, page_size) : nullptr;
    if (!q) q = __libc_malloc(n);
    if (!q) return nullptr;
    memcpy(q, p, std::min<size_t>(len, n));
    shim_scope s;
    (void)g_pager->unmap(start, len);
    return q;
  }
  if (n >= g_threshold) {
    if (void* q = alloc_large(n, page_size)) {
      memcpy(q, p, std::min(libc.malloc_usable_size(p), n));
      __libc_free(p);
      return q;
    }
  }
  return __libc_realloc(p, n);
}

USWAP_EXPORT void* reallocarray(void* p, size_t n, size_t m) {
  size_t bytes;
  if (__builtin_mul_overflow(n, m, &bytes)) {
    errno = ENOMEM;
    return nullptr;
  }
  return realloc(p, bytes);
}

USWAP_EXPORT void* memalign(size_t align, size_t n) {
  if (n >= g_threshold && align && !(align & (align - 1)))
    if (void* p = alloc_large(n, align)) return p;
  return __libc_memalign(align, n);
}

USWAP_EXPORT int posix_memalign(void** out, size_t align, size_t n) {
  if (align < sizeof(void*) || (align & (align - 1))) return EINVAL;
  void* p = memalign(align, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}

USWAP_EXPORT void* aligned_alloc(size_t align, size_t n) { return memalign(align, n); }

USWAP_EXPORT void* valloc(size_t n) {
  if (n >= g_threshold)
    if (void* p = alloc_large(n, page_size)) return p;
  return __libc_valloc(n);
}

USWAP_EXPORT void* pvalloc(size_t n) {
  if (n >= g_threshold)
    if (void* p = alloc_large(n, page_size)) return p;
  return __libc_pvalloc(n);
}

USWAP_EXPORT size_t malloc_usable_size(void* p) {
  if (p && in_arena(p)) return mapping_at(p).second;
  return libc.malloc_usable_size ? libc.malloc_usable_size(p) : 0;
}

// ---------------------------------------------------------------------------------------------
// mmap and friends.

USWAP_EXPORT void* mmap(void* addr, size_t len, int prot, int flags, int fd, off_t off) {
  constexpr int plain = MAP_PRIVATE | MAP_ANONYMOUS;
  constexpr int allowed = plain | MAP_NORESERVE | MAP_POPULATE;
  if (!addr && len >= g_threshold && prot == (PROT_READ | PROT_WRITE) &&
      (flags & plain) == plain && (flags & ~allowed) == 0) {
    if (void* p = alloc_large(len, page_size)) return p;
  }
  if ((flags & (MAP_FIXED | MAP_FIXED_NOREPLACE)) && overlaps_arena(addr, len) && !in_pager_code()) {
    // The program maps something over memory the pager handed it: the pager lets go of it.
    shim_scope s;
    (void)g_pager->unmap(addr, len);
  }
  return uswap::sys::mmap(addr, len, prot, flags, fd, off);
}

USWAP_EXPORT void* mmap64(void* addr, size_t len, int prot, int flags, int fd, off_t off) {
  return mmap(addr, len, prot, flags, fd, off);
}

USWAP_EXPORT int munmap(void* addr, size_t len) {
  if (!in_pager_code() && in_arena(addr)) {
    shim_scope s;
    const uswap::status st = g_pager->unmap(addr, len);
    if (st.ok()) return 0;
    errno = st.code();
    return -1;
  }
  return uswap::sys::munmap(addr, len);
}

USWAP_EXPORT void* mremap(void* old, size_t old_len, size_t new_len, int flags, ...) {
  void* new_addr = nullptr;
  if (flags & MREMAP_FIXED) {
    va_list ap;
    va_start(ap, flags);
    new_addr = va_arg(ap, void*);
    va_end(ap);
  }
  if (!in_pager_code() && in_arena(old) && !(flags & (MREMAP_FIXED | MREMAP_DONTUNMAP))) {
    {
      shim_scope s;
      if (g_pager->resize(old, old_len, new_len).ok()) return old;
    }
    if (!(flags & MREMAP_MAYMOVE)) {
      errno = ENOMEM;
      return MAP_FAILED;
    }
    void* q = map_to_pager(new_len, page_size);
    if (!q) {
      errno = ENOMEM;
      return MAP_FAILED;
    }
    memcpy(q, old, std::min(old_len, new_len));
    shim_scope s;
    (void)g_pager->unmap(old, old_len);
    return q;
  }
  const long r = syscall(SYS_mremap, old, old_len, new_len, flags, new_addr);
  return r == -1 ? MAP_FAILED : reinterpret_cast<void*>(r);
}

USWAP_EXPORT int madvise(void* addr, size_t len, int advice) {
  if (!in_pager_code() && in_arena(addr)) {
    if (advice == MADV_DONTNEED || advice == MADV_FREE || advice == MADV_REMOVE) {
      shim_scope s;
      const uswap::status st = g_pager->discard(addr, len);
      if (st.ok()) return 0;
      errno = ENOMEM;
      return -1;
    }
    // Hints (WILLNEED, SEQUENTIAL, HUGEPAGE...) are the pager's business; none may change how
    // the arena is mapped.
    return 0;
  }
  return uswap::sys::madvise(addr, len, advice);
}

// ---------------------------------------------------------------------------------------------
// I/O into and out of pager memory.

USWAP_EXPORT ssize_t read(int fd, void* buf, size_t n) {
  return pinned_io(buf, n, true, [&] { return chunked_read_ok(fd); }, [&](const void* p, size_t k) {
    return libc.read(fd, const_cast<void*>(p), k);
  });
}

USWAP_EXPORT ssize_t pread(int fd, void* buf, size_t n, off_t off) {
  const auto* base = static_cast<const uint8_t*>(buf);
  return pinned_io(buf, n, true, [&] { return chunked_read_ok(fd); }, [&](const void* p, size_t k) {
    return libc.pread(fd, const_cast<void*>(p), k, off + (static_cast<const uint8_t*>(p) - base));
  });
}

USWAP_EXPORT ssize_t pread64(int fd, void* buf, size_t n, off_t off) {
  return pread(fd, buf, n, off);
}

USWAP_EXPORT ssize_t write(int fd, const void* buf, size_t n) {
  return pinned_io(buf, n, false, always,
                   [&](const void* p, size_t k) { return libc.write(fd, p, k); });
}

USWAP_EXPORT ssize_t pwrite(int fd, const void* buf, size_t n, off_t off) {
  const auto* base = static_cast<const uint8_t*>(buf);
  return pinned_io(buf, n, false, always, [&](const void* p, size_t k) {
    return libc.pwrite(fd, p, k, off + (static_cast<const uint8_t*>(p) - base));
  });
}

USWAP_EXPORT ssize_t pwrite64(int fd, const void* buf, size_t n, off_t off) {
  return pwrite(fd, buf, n, off);
}

namespace {

bool iov_in_arena(const iovec* iov, int cnt) {
  for (int i = 0; i < cnt; ++i)
    if (overlaps_arena(iov[i].iov_base, iov[i].iov_len)) return true;
  return false;
}

// readv / writev / preadv / pwritev over pager memory: one buffer at a time (pinned), stopping
// at the first short count. `off` < 0: no offset.
template <class One>
ssize_t vector_io(const iovec* iov, int cnt, One one) {
  size_t total = 0;
  for (int i = 0; i < cnt; ++i) {
    const ssize_t r = one(iov[i].iov_base, iov[i].iov_len, total);
    if (r < 0) return total ? static_cast<ssize_t>(total) : r;
    total += static_cast<size_t>(r);
    if (static_cast<size_t>(r) < iov[i].iov_len) break;
  }
  return static_cast<ssize_t>(total);
}

}  // namespace

USWAP_EXPORT ssize_t readv(int fd, const iovec* iov, int cnt) {
  if (!g_pin_io || !iov_in_arena(iov, cnt)) return static_cast<ssize_t>(syscall(SYS_readv, fd, iov, cnt));
  return vector_io(iov, cnt, [&](void* b, size_t n, size_t) { return read(fd, b, n); });
}

USWAP_EXPORT ssize_t writev(int fd, const iovec* iov, int cnt) {
  if (!g_pin_io || !iov_in_arena(iov, cnt)) return static_cast<ssize_t>(syscall(SYS_writev, fd, iov, cnt));
  return vector_io(iov, cnt, [&](void* b, size_t n, size_t) { return write(fd, b, n); });
}

USWAP_EXPORT ssize_t preadv(int fd, const iovec* iov, int cnt, off_t off) {
  if (!g_pin_io || !iov_in_arena(iov, cnt))
    return static_cast<ssize_t>(syscall(SYS_preadv, fd, iov, cnt, off, 0));
  return vector_io(iov, cnt, [&](void* b, size_t n, size_t done) {
    return pread(fd, b, n, off + static_cast<off_t>(done));
  });
}

USWAP_EXPORT ssize_t pwritev(int fd, const iovec* iov, int cnt, off_t off) {
  if (!g_pin_io || !iov_in_arena(iov, cnt))
    return static_cast<ssize_t>(syscall(SYS_pwritev, fd, iov, cnt, off, 0));
  return vector_io(iov, cnt, [&](void* b, size_t n, size_t done) {
    return pwrite(fd, b, n, off + static_cast<off_t>(done));
  });
}

USWAP_EXPORT ssize_t recv(int fd, void* buf, size_t n, int flags) {
  return pinned_io(buf, n, true, never, [&](const void* p, size_t k) {
    return libc.recv(fd, const_cast<void*>(p), k, flags);
  });
}

USWAP_EXPORT ssize_t recvfrom(int fd, void* buf, size_t n, int flags, sockaddr* from,
                              socklen_t* fromlen) {
  return pinned_io(buf, n, true, never, [&](const void* p, size_t k) {
    return libc.recvfrom(fd, const_cast<void*>(p), k, flags, from, fromlen);
  });
}

USWAP_EXPORT ssize_t send(int fd, const void* buf, size_t n, int flags) {
  return pinned_io(buf, n, false, always,
                   [&](const void* p, size_t k) { return libc.send(fd, p, k, flags); });
}

USWAP_EXPORT ssize_t sendto(int fd, const void* buf, size_t n, int flags, const sockaddr* to,
                            socklen_t tolen) {
  return pinned_io(buf, n, false, always, [&](const void* p, size_t k) {
    return libc.sendto(fd, p, k, flags, to, tolen);
  });
}

// stdio reads and writes large requests straight into or out of the caller's buffer with its
// internal (unwrapped) read and write: the buffer is pinned here instead.
USWAP_EXPORT size_t fread(void* ptr, size_t size, size_t n, FILE* f) {
  size_t bytes;
  if (size == 0 || n == 0 || __builtin_mul_overflow(size, n, &bytes)) return libc.fread(ptr, size, n, f);
  if (!g_pin_io || !overlaps_arena(ptr, bytes)) return libc.fread(ptr, size, n, f);
  const ssize_t got = pinned_io(ptr, bytes, true, always, [&](const void* p, size_t k) {
    return static_cast<ssize_t>(libc.fread(const_cast<void*>(p), 1, k, f));
  });
  return got < 0 ? 0 : static_cast<size_t>(got) / size;
}

USWAP_EXPORT size_t fwrite(const void* ptr, size_t size, size_t n, FILE* f) {
  size_t bytes;
  if (size == 0 || n == 0 || __builtin_mul_overflow(size, n, &bytes)) return libc.fwrite(ptr, size, n, f);
  if (!g_pin_io || !overlaps_arena(ptr, bytes)) return libc.fwrite(ptr, size, n, f);
  const ssize_t put = pinned_io(ptr, bytes, false, always, [&](const void* p, size_t k) {
    return static_cast<ssize_t>(libc.fwrite(p, 1, k, f));
  });
  return put < 0 ? 0 : static_cast<size_t>(put) / size;
}

// ---------------------------------------------------------------------------------------------
// Signals: SIGBUS stays the pager's.

namespace {

bool pager_owns_sigbus() {
  return ready.load(std::memory_order_acquire) && g_pager->mode() == uswap::fault_mode::sigbus;
}

const sigset_t* without_sigbus(int how, const sigset_t* set, sigset_t* copy) {
  if (!set || how == SIG_UNBLOCK || !pager_owns_sigbus() || !sigismember(set, SIGBUS)) return set;
  *copy = *set;
  sigdelset(copy, SIGBUS);
  return copy;
}

}  // namespace

USWAP_EXPORT int sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  if (sig == SIGBUS && pager_owns_sigbus() && !in_pager_code()) {
    shim_scope s;
    uswap::sigbus_chain(act, old);
    return 0;
  }
  return libc.sigaction(sig, act, old);
}

USWAP_EXPORT sighandler_t signal(int sig, sighandler_t handler) {
  struct sigaction act {}, old{};
  act.sa_handler = handler;
  sigemptyset(&act.sa_mask);
  act.sa_flags = SA_RESTART;
  if (sigaction(sig, &act, &old) != 0) return SIG_ERR;
  return old.sa_handler;
}

USWAP_EXPORT int sigprocmask(int how, const sigset_t* set, sigset_t* old) {
  sigset_t copy;
  return libc.sigprocmask(how, without_sigbus(how, set, &copy), old);
}

USWAP_EXPORT int pthread_sigmask(int how, const sigset_t* set, sigset_t* old) {
  sigset_t copy;
  return libc.pthread_sigmask(how, without_sigbus(how, set, &copy), old);
}
