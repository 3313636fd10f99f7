// The malloc family: mimalloc, whose memory is the pager's arena (init.cc gives it a managed
// arena there; what it maps beyond that goes through the shim's mmap into the pager too).
//
// Which allocator a pointer belongs to is decided by its address: everything mimalloc hands out
// lies in the arena, nothing glibc's malloc hands out does (the arena is one reserved range the
// kernel places nothing else in). glibc's malloc serves pager code (the SIGBUS handler and the
// handler threads allocate zspages and compression streams while resolving a fault: routing
// those into the pager would recurse) and everything allocated before the constructor ran;
// such blocks are freed and resized by glibc as before.
//
// glibc's malloc also serves the dynamic loader: its allocations (each thread's DTV, dynamic TLS
// blocks, dlopen's link maps) are read by every __tls_get_addr, including the pager's own TLS
// accesses while it resolves a fault. In the arena such a block could be evicted, and a fault
// taken inside fault resolution, holding a page lock, would wait for itself. An allocation whose
// caller lies in the loader's text is therefore glibc's.
//
// jemalloc's own interface (mallocx, rallocx, xallocx, sallocx, dallocx, sdallocx, nallocx) is
// served here too. A program linked with libjemalloc (bind9) gets its malloc and free from the
// shim, which comes first; had its mallocx stayed jemalloc's, a block from one side freed by the
// other (jemalloc documents the two interfaces as interchangeable) would reach an allocator that
// does not own it, and jemalloc's blocks would sit in extents it mapped before the shim's
// constructor, outside the arena, unrouted. So every block a program holds is mimalloc's or
// glibc's, whichever interface it came from; jemalloc's mallctl stays jemalloc's and reports on
// the little it still holds.
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <malloc.h>
#include <mimalloc.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>

#include "shim.h"

namespace uswap::shim {

libc_fns libc;

namespace {

template <class T>
T next_fn(const char* name) {
  return reinterpret_cast<T>(dlsym(RTLD_NEXT, name));
}

}  // namespace

namespace {

// The dynamic loader's text, [lo, hi).
uintptr_t ldso_lo = 0, ldso_hi = 0;

int find_ldso(struct dl_phdr_info* info, size_t, void*) {
  if (!info->dlpi_name || !strstr(info->dlpi_name, "ld-linux")) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X)) {
      ldso_lo = info->dlpi_addr + ph.p_vaddr;
      ldso_hi = ldso_lo + ph.p_memsz;
    }
  }
  return 1;
}

}  // namespace

namespace {

// The next definitions of the memory calls, as dlsym found them; libc_fns holds the guarded
// functions below, which call them with tls_passing_on raised.
struct {
  decltype(libc_fns::mmap) mmap;
  decltype(libc_fns::munmap) munmap;
  decltype(libc_fns::mprotect) mprotect;
  decltype(libc_fns::madvise) madvise;
  decltype(libc_fns::mremap) mremap;
  decltype(libc_fns::mlockall) mlockall;
} next_memory;

struct passing_on {
  passing_on() noexcept { ++tls_passing_on; }
  ~passing_on() { --tls_passing_on; }
  passing_on(const passing_on&) = delete;
  passing_on& operator=(const passing_on&) = delete;
};

void* pass_mmap(void* addr, size_t len, int prot, int flags, int fd, off_t off) {
  passing_on p;
  return next_memory.mmap(addr, len, prot, flags, fd, off);
}
int pass_munmap(void* addr, size_t len) {
  passing_on p;
  return next_memory.munmap(addr, len);
}
int pass_mprotect(void* addr, size_t len, int prot) {
  passing_on p;
  return next_memory.mprotect(addr, len, prot);
}
int pass_madvise(void* addr, size_t len, int advice) {
  passing_on p;
  return next_memory.madvise(addr, len, advice);
}
void* pass_mremap(void* old, size_t old_len, size_t new_len, int flags, ...) {
  void* new_addr = nullptr;
  if (flags & MREMAP_FIXED) {
    va_list ap;
    va_start(ap, flags);
    new_addr = va_arg(ap, void*);
    va_end(ap);
  }
  passing_on p;
  return next_memory.mremap(old, old_len, new_len, flags, new_addr);
}
int pass_mlockall(int flags) {
  passing_on p;
  return next_memory.mlockall(flags);
}

}  // namespace

void resolve_libc() {
  if (!ldso_lo) dl_iterate_phdr(find_ldso, nullptr);
  next_memory.mmap = next_fn<decltype(libc.mmap)>("mmap");
  next_memory.munmap = next_fn<decltype(libc.munmap)>("munmap");
  next_memory.mprotect = next_fn<decltype(libc.mprotect)>("mprotect");
  next_memory.madvise = next_fn<decltype(libc.madvise)>("madvise");
  next_memory.mremap = next_fn<decltype(libc.mremap)>("mremap");
  next_memory.mlockall = next_fn<decltype(libc.mlockall)>("mlockall");
  libc.munmap = pass_munmap;
  libc.mprotect = pass_mprotect;
  libc.madvise = pass_madvise;
  libc.mremap = pass_mremap;
  libc.mlockall = pass_mlockall;
  libc.mmap = pass_mmap;  // last: lc() resolves again while it is null
  // glibc's own, for glibc's blocks: the next definition would be a malloc the program links
  // (libjemalloc: bind9's named and dig), which cannot size a glibc block and crashed on it.
  // Not through dlopen("libc.so.6"), which calls malloc, and malloc may be the program's, which
  // may be what called this: Chromium's PartitionAlloc maps memory inside its lock, the shim's
  // mmap resolved the C library's then, and the process spun on that lock forever.
  libc.malloc_usable_size = reinterpret_cast<decltype(libc.malloc_usable_size)>(
      object_function(reinterpret_cast<const void*>(&__libc_malloc), "malloc_usable_size"));
  if (!libc.malloc_usable_size)
    libc.malloc_usable_size = next_fn<decltype(libc.malloc_usable_size)>("malloc_usable_size");
  libc.sigaction = next_fn<decltype(libc.sigaction)>("sigaction");
  libc.sigprocmask = next_fn<decltype(libc.sigprocmask)>("sigprocmask");
  libc.pthread_sigmask = next_fn<decltype(libc.pthread_sigmask)>("pthread_sigmask");
  libc.sigsuspend = next_fn<decltype(libc.sigsuspend)>("sigsuspend");
  libc.sigaltstack = next_fn<decltype(libc.sigaltstack)>("sigaltstack");
  libc.syscall = next_fn<decltype(libc.syscall)>("syscall");
  uswap_shim_next_syscall = libc.syscall;
}

namespace {

inline bool mimalloc_block(const void* p) noexcept { return in_arena(p); }

// Whether an allocation goes to mimalloc: the shim is active and the caller (`ra`, the return
// address) is not the dynamic loader.
inline bool to_mimalloc(const void* ra) noexcept {
  return active() && reinterpret_cast<uintptr_t>(ra) - ldso_lo >= ldso_hi - ldso_lo;
}
#define USWAP_CALLER __builtin_return_address(0)

// A glibc block moved into mimalloc (a realloc after the constructor of memory allocated
// before it).
void* move_to_mimalloc(void* p, size_t n) noexcept {
  void* q = mi_malloc(n);
  if (!q) return fail_with<void*>(ENOMEM, nullptr);
  const size_t old = libc.malloc_usable_size ? lc().malloc_usable_size(p) : 0;
  memcpy(q, p, std::min(old, n));
  __libc_free(p);
  return q;
}

}  // namespace

}  // namespace uswap::shim

using namespace uswap::shim;

USWAP_EXPORT void* malloc(size_t n) {
  if (!to_mimalloc(USWAP_CALLER)) return __libc_malloc(n);
  start_wanted_threads();
  return mi_malloc(n);
}

USWAP_EXPORT void free(void* p) {
  if (!p) return;
  if (mimalloc_block(p))
    mi_free(p);
  else
    __libc_free(p);
}

USWAP_EXPORT void cfree(void* p) { free(p); }

USWAP_EXPORT void* calloc(size_t n, size_t m) {
  return to_mimalloc(USWAP_CALLER) ? mi_calloc(n, m) : __libc_calloc(n, m);
}

USWAP_EXPORT void* realloc(void* p, size_t n) {
  if (!p) return to_mimalloc(USWAP_CALLER) ? mi_malloc(n) : __libc_malloc(n);
  if (mimalloc_block(p)) {
    if (n == 0) {
      mi_free(p);
      return nullptr;
    }
    return mi_realloc(p, n);
  }
  if (!to_mimalloc(USWAP_CALLER) || n == 0) return __libc_realloc(p, n);
  return move_to_mimalloc(p, n);
}

USWAP_EXPORT void* reallocarray(void* p, size_t n, size_t m) {
  size_t bytes;
  if (__builtin_mul_overflow(n, m, &bytes)) return fail_with<void*>(ENOMEM, nullptr);
  return realloc(p, bytes);
}

USWAP_EXPORT void* memalign(size_t align, size_t n) {
  if (!to_mimalloc(USWAP_CALLER)) return __libc_memalign(align, n);
  if (align == 0 || (align & (align - 1))) return fail_with<void*>(EINVAL, nullptr);
  return mi_malloc_aligned(n, align);
}

USWAP_EXPORT void* aligned_alloc(size_t align, size_t n) { return memalign(align, n); }

USWAP_EXPORT int posix_memalign(void** out, size_t align, size_t n) {
  if (align < sizeof(void*) || (align & (align - 1))) return EINVAL;
  const int saved = errno;
  void* p = memalign(align, n);
  if (!p && n) {
    errno = saved;
    return ENOMEM;
  }
  *out = p;
  return 0;
}

USWAP_EXPORT void* valloc(size_t n) { return memalign(static_cast<size_t>(getpagesize()), n); }

USWAP_EXPORT void* pvalloc(size_t n) {
  const size_t page = static_cast<size_t>(getpagesize());
  return memalign(page, (n + page - 1) & ~(page - 1));
}

USWAP_EXPORT size_t malloc_usable_size(void* p) {
  if (!p) return 0;
  if (mimalloc_block(p)) return mi_usable_size(p);
  return libc.malloc_usable_size ? lc().malloc_usable_size(p) : 0;
}

// glibc's malloc_trim gives its heap's free memory back; for mimalloc the counterpart is a
// collection, whose purges reach the pager as MADV_DONTNEED.
USWAP_EXPORT int malloc_trim(size_t) {
  if (ready()) mi_collect(true);
  return 1;
}

// --- jemalloc's non-standard interface (see the top of the file). Its flags: the low six bits
// are lg(alignment), MALLOCX_ZERO zero-fills; tcache and arena choices are jemalloc's business
// and ignored.
namespace {

constexpr int mallocx_lg_align_mask = 0x3f;
constexpr int mallocx_zero = 0x40;

size_t mallocx_align(int flags) noexcept {
  const int lg = flags & mallocx_lg_align_mask;
  return lg ? size_t{1} << lg : 0;
}

}  // namespace

USWAP_EXPORT void* mallocx(size_t n, int flags) {
  const size_t align = mallocx_align(flags);
  if (!to_mimalloc(USWAP_CALLER)) {
    void* p = align ? __libc_memalign(align, n) : __libc_malloc(n);
    if (p && (flags & mallocx_zero)) memset(p, 0, n);
    return p;
  }
  start_wanted_threads();
  if (flags & mallocx_zero) return align ? mi_zalloc_aligned(n, align) : mi_zalloc(n);
  return align ? mi_malloc_aligned(n, align) : mi_malloc(n);
}

USWAP_EXPORT void* rallocx(void* p, size_t n, int flags) {
  const size_t align = mallocx_align(flags);
  const size_t old = malloc_usable_size(p);
  void* q;
  if (mimalloc_block(p) && (!align || reinterpret_cast<uintptr_t>(p) % align == 0)) {
    // mi_realloc_aligned keeps the block's offset from the alignment: only an aligned one goes.
    q = align ? mi_realloc_aligned(p, n, align) : mi_realloc(p, n);
  } else if (!align) {
    q = realloc(p, n);  // a glibc block: kept by glibc or moved, as realloc decides
  } else {
    q = mallocx(n, flags & ~mallocx_zero);
    if (!q) return nullptr;
    memcpy(q, p, std::min(old, n));
    free(p);
  }
  if (q && (flags & mallocx_zero)) {
    const size_t now = malloc_usable_size(q);
    if (now > old) memset(static_cast<char*>(q) + old, 0, now - old);
  }
  return q;
}

// In place only: the block keeps its size, which is what jemalloc returns when it cannot grow
// one ("a value less than size if the allocation could not be adequately grown in place").
USWAP_EXPORT size_t xallocx(void* p, size_t, size_t, int) { return malloc_usable_size(p); }

USWAP_EXPORT size_t sallocx(const void* p, int) { return malloc_usable_size(const_cast<void*>(p)); }

USWAP_EXPORT void dallocx(void* p, int) { free(p); }

USWAP_EXPORT void sdallocx(void* p, size_t, int) { free(p); }

USWAP_EXPORT size_t nallocx(size_t n, int flags) {
  const size_t align = mallocx_align(flags);
  size_t real = mi_good_size(n);
  if (align) real = (std::max(real, align) + align - 1) & ~(align - 1);
  return real < n ? 0 : real;
}
