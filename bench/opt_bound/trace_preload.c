// LD_PRELOAD tracer: records a subsequence of a program's page references on its large heap
// blocks, for opt_sim (the lower bound on swap-ins; see README.md beside this file).
//
// Requests of at least 256 KiB (xz's dictionary buffer, hash table and tree) get their own
// mmap, kept PROT_NONE.
// A SIGSEGV on such a page records the page's id, opens the page and puts it in a FIFO window of
// W pages (OPT_WINDOW_PAGES); the page that falls out of the window is closed again. So every
// recorded id is a real reference in program order, and what is left out is only references to
// pages in the window: a subsequence of the true reference sequence, which is all the bound
// needs. A larger window leaves out more, which makes the run faster and the bound looser.
//
// References to a page before its first write are left out too: such a page is still all
// zeros (Linux maps the shared zero page and gives it no frame), so bringing it back costs no
// swap-in. A read fault on a never-written page opens it read-only, so that the first write
// faults again and is recorded: the first record of every page is its first write, its zero
// fill, and every later record is a reference to a page with content.
//
// Layout is copied from glibc, so that our pages are the pages the plain program would use:
// glibc serves requests this large from a fresh mmap of its own with the payload 16 bytes past
// the page start (the chunk header), so we put the payload there too (OPT_PAYLOAD_OFFSET). A
// page-aligned payload would shift every page boundary by 16 bytes and the trace would be of a
// slightly different program.
//
// Environment:
//   OPT_TRACE_FILE      where the ids go, raw uint32 little-endian (nothing written if unset)
//   OPT_WINDOW_PAGES    W (default 2048, at least 16: one instruction may touch a few pages at
//                       once, and they must all stay open until it completes)
//   OPT_PAYLOAD_OFFSET  payload offset in the first page (default 16, as glibc)
//   OPT_TRACE_VERBOSE   when set, one stderr line per large allocation, free and realloc
//   OPT_TRACK_MIN       smallest request tracked, bytes (default 262144); set it huge to track
//                       nothing and only read the program's RssAnon at exit (run.sh
//                       --measure-peak: for a program that never frees, that is its peak)
//
// Single-threaded programs only (xz -T1): the handler and the tables take no locks, and a fault
// from another thread aborts the run rather than record a trace in no defined order.
// Kernel accesses (read(2) into a block) would fail with EFAULT instead of faulting; the driver
// compares the program's output with a plain run to catch that.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

extern void* __libc_malloc(size_t);
extern void* __libc_calloc(size_t, size_t);
extern void* __libc_realloc(void*, size_t);
extern void __libc_free(void*);
extern void* __libc_memalign(size_t, size_t);

#define PAGE 4096ul
#define MAX_BLOCKS 1024
#define BUF_RECORDS (1u << 20)
#define PROGRESS_MASK ((1ull << 22) - 1)  // a progress line every 4 Mi records

struct block {
  uintptr_t map;      // 0: slot free
  size_t map_len;
  uintptr_t payload;
  size_t size;        // as requested, for malloc_usable_size
  uint32_t base_id;   // id of the mapping's first page; the next pages follow densely
};

static struct block blocks[MAX_BLOCKS];
static int nslots;  // slots in use or freed, never shrinks

static int inited;
static pid_t main_tid;
static int trace_fd = -1;
static uint32_t* buf;
static uint32_t nbuf;
static uint64_t nrecords;
static uint32_t next_id;

struct slot {
  uintptr_t page;  // 0: empty, or its block was freed
  uint32_t id;
};
static struct slot* window;  // the FIFO of open pages
static size_t window_pages = 2048, window_pos;

// Per page id: written yet, and open in the window. Reserved for MAX_IDS ids (1 TiB of tracked
// memory), of which the kernel backs only the part used.
#define MAX_IDS (1u << 28)
#define WRITTEN 1
#define IN_WINDOW 2
static uint8_t* state;

static size_t payload_offset = 16;
static size_t track_min = 256ul << 10;
static int verbose;
static struct timespec t_start;
static size_t live_bytes, peak_live_bytes;
static uint64_t n_allocs, n_frees, n_reallocs, n_faults;
static size_t (*real_usable_size)(void*);

// --- async-signal-safe output ------------------------------------------------------------------

static int err_fd = 2;  // a private dup: xz closes stderr before the destructors run

static void put_str(const char* s) {
  ssize_t r = write(err_fd, s, strlen(s));
  (void)r;
}

static void put_u64(uint64_t v) {
  char tmp[24];
  int i = sizeof tmp;
  tmp[--i] = 0;
  do {
    tmp[--i] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  put_str(tmp + i);
}

static uint64_t elapsed_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)(t.tv_sec - t_start.tv_sec) * 1000 + (t.tv_nsec - t_start.tv_nsec) / 1000000;
}

static void die(const char* msg) {
  put_str("[opt-trace] fatal: ");
  put_str(msg);
  put_str("\n");
  _exit(97);
}

static void flush_buf(void) {
  size_t off = 0, len = (size_t)nbuf * sizeof *buf;
  while (trace_fd >= 0 && off < len) {
    ssize_t w = write(trace_fd, (char*)buf + off, len - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) die("write to OPT_TRACE_FILE failed");
    off += (size_t)w;
  }
  nbuf = 0;
}

static void check_thread(void) {
  if ((pid_t)syscall(SYS_gettid) != main_tid) die("large block used from a second thread");
}

// --- the fault handler ---------------------------------------------------------------------

static struct block* find_block(uintptr_t a) {
  for (int i = 0; i < nslots; i++)
    if (blocks[i].map && a - blocks[i].map < blocks[i].map_len) return &blocks[i];
  return NULL;
}

#if !defined(__x86_64__)
#error "reads the x86-64 page-fault error code to tell reads from writes"
#endif

static void on_segv_inner(int sig, siginfo_t* si, void* uc);

// The program may fault between a failing call and its look at errno.
static void on_segv(int sig, siginfo_t* si, void* uc) {
  int saved = errno;
  on_segv_inner(sig, si, uc);
  errno = saved;
}

static void on_segv_inner(int sig, siginfo_t* si, void* uc) {
  uintptr_t a = (uintptr_t)si->si_addr;
  struct block* b = find_block(a);
  if (!b) {
    // Not ours: a genuine crash. Returning re-runs the access under the default action.
    signal(sig, SIG_DFL);
    return;
  }
  check_thread();
  // Bit 1 of the x86 page-fault error code: the access was a write.
  int is_write = (((ucontext_t*)uc)->uc_mcontext.gregs[REG_ERR] & 2) != 0;
  uintptr_t page = a & ~(PAGE - 1);
  uint32_t id = b->base_id + (uint32_t)((page - b->map) / PAGE);
  if (is_write) state[id] |= WRITTEN;
  int written = state[id] & WRITTEN;
  if (written) {
    buf[nbuf++] = id;
    if (nbuf == BUF_RECORDS) flush_buf();
    if ((++nrecords & PROGRESS_MASK) == 0) {
      put_str("[opt-trace] ");
      put_u64(nrecords);
      put_str(" records, ");
      put_u64(elapsed_ms() / 1000);
      put_str(" s\n");
    }
  }
  if (mprotect((void*)page, PAGE, written ? PROT_READ | PROT_WRITE : PROT_READ))
    die("mprotect open (max_map_count?)");
  n_faults++;
  if (state[id] & IN_WINDOW) return;  // a read-only page written: it keeps its place
  state[id] |= IN_WINDOW;
  struct slot old = window[window_pos];
  window[window_pos] = (struct slot){page, id};
  window_pos = (window_pos + 1) % window_pages;
  if (old.page) {
    state[old.id] &= ~IN_WINDOW;
    if (mprotect((void*)old.page, PAGE, PROT_NONE)) die("mprotect close (max_map_count?)");
  }
}

// --- setup and report ----------------------------------------------------------------------

static size_t env_size(const char* name, size_t dflt) {
  const char* s = getenv(name);
  return s && *s ? (size_t)strtoull(s, NULL, 10) : dflt;
}

static void init(void) {
  if (inited) return;
  inited = 1;
  main_tid = (pid_t)syscall(SYS_gettid);
  clock_gettime(CLOCK_MONOTONIC, &t_start);
  window_pages = env_size("OPT_WINDOW_PAGES", window_pages);
  payload_offset = env_size("OPT_PAYLOAD_OFFSET", payload_offset);
  track_min = env_size("OPT_TRACK_MIN", track_min);
  verbose = getenv("OPT_TRACE_VERBOSE") != NULL;
  int e = fcntl(2, F_DUPFD_CLOEXEC, 100);
  if (e >= 0) err_fd = e;
  if (window_pages < 16) die("OPT_WINDOW_PAGES must be at least 16");
  if (payload_offset >= PAGE) die("OPT_PAYLOAD_OFFSET must be below 4096");
  // Every open page splits its PROT_NONE mapping: up to 2 extra VMAs per window page.
  int mfd = open("/proc/sys/vm/max_map_count", O_RDONLY);
  if (mfd >= 0) {
    char s[32] = {0};
    ssize_t r = read(mfd, s, sizeof s - 1);
    close(mfd);
    if (r > 0 && strtoull(s, NULL, 10) < 2 * window_pages + 4096)
      die("vm.max_map_count is too small for OPT_WINDOW_PAGES (needs > 2*W + slack)");
  }
  const char* path = getenv("OPT_TRACE_FILE");
  if (path && *path) {
    trace_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (trace_fd < 0) die("cannot open OPT_TRACE_FILE");
  } else {
    put_str("[opt-trace] OPT_TRACE_FILE unset: counting only\n");
  }
  buf = mmap(NULL, BUF_RECORDS * sizeof *buf, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  window = mmap(NULL, window_pages * sizeof *window, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  state = mmap(NULL, MAX_IDS, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
               -1, 0);
  if (buf == MAP_FAILED || window == MAP_FAILED || state == MAP_FAILED)
    die("mmap of the tracer's own buffers failed");
  real_usable_size = (size_t (*)(void*))dlsym(RTLD_NEXT, "malloc_usable_size");
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_segv;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;  // NODEFER: a crash inside the handler still crashes
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGSEGV, &sa, NULL)) die("sigaction");
}

__attribute__((constructor)) static void tracer_start(void) { init(); }

// Copies the RssAnon line of /proc/self/status to stderr, without stdio (xz has closed it).
static void put_rss_anon(void) {
  char s[4096];
  int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t len = read(fd, s, sizeof s - 1);
  close(fd);
  if (len <= 0) return;
  s[len] = 0;
  char* p = strstr(s, "RssAnon:");
  if (!p) return;
  char* end = strchr(p, '\n');
  if (end) *end = 0;
  put_str("[opt-trace] at exit ");
  put_str(p);
  put_str("\n");
}

__attribute__((destructor)) static void tracer_stop(void) {
  flush_buf();
  put_rss_anon();
  put_str("[opt-trace] done: tracked pages (ids) ");
  put_u64(next_id);
  put_str(", peak live tracked KiB ");
  put_u64(peak_live_bytes >> 10);
  put_str(", faults ");
  put_u64(n_faults);
  put_str(", records ");
  put_u64(nrecords);
  put_str(", window pages ");
  put_u64(window_pages);
  put_str(", large allocs ");
  put_u64(n_allocs);
  put_str(", frees ");
  put_u64(n_frees);
  put_str(", reallocs ");
  put_u64(n_reallocs);
  put_str(", ");
  put_u64(elapsed_ms());
  put_str(" ms\n");
}

static void log_event(const char* what, size_t size, uint32_t base_id, size_t pages) {
  if (!verbose) return;
  put_str("[opt-trace] ");
  put_str(what);
  put_str(" size ");
  put_u64(size);
  put_str(" ids ");
  put_u64(base_id);
  put_str("+");
  put_u64(pages);
  put_str(" at record ");
  put_u64(nrecords);
  put_str("\n");
}

// --- tracked blocks ------------------------------------------------------------------------

// Closes the block's pages that are in the window and forgets them there; the next touch of
// each faults again (recording more real references never hurts the bound).
static void drop_from_window(struct block* b, int reprotect) {
  for (size_t i = 0; i < window_pages; i++)
    if (window[i].page && window[i].page - b->map < b->map_len) {
      if (reprotect) mprotect((void*)window[i].page, PAGE, PROT_NONE);
      state[window[i].id] &= ~IN_WINDOW;
      window[i].page = 0;
    }
}

static uint32_t new_ids(size_t pages) {
  if (pages > MAX_IDS - next_id) die("more than MAX_IDS tracked pages");
  uint32_t base = next_id;
  next_id += (uint32_t)pages;
  return base;
}

static struct block* new_slot(void) {
  for (int i = 0; i < nslots; i++)
    if (!blocks[i].map) return &blocks[i];
  if (nslots == MAX_BLOCKS) die("more than MAX_BLOCKS live large blocks");
  return &blocks[nslots++];
}

static void account(ssize_t delta) {
  live_bytes += delta;
  if (live_bytes > peak_live_bytes) peak_live_bytes = live_bytes;
}

static void* track_alloc(size_t size, size_t align) {
  init();
  check_thread();
  if (align < 16) align = 16;
  // The payload goes where glibc's mmapped chunk would put it: payload_offset into the first
  // page, rounded up to the alignment; alignments above a page need slack to slide into.
  size_t slack = align > PAGE ? align : 0;
  size_t first = (payload_offset + align - 1) & ~(align - 1);
  if (size > SIZE_MAX / 2) return NULL;
  size_t len = (first + size + slack + PAGE - 1) & ~(PAGE - 1);
  void* m = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    errno = ENOMEM;
    return NULL;
  }
  struct block* b = new_slot();
  b->map = (uintptr_t)m;
  b->map_len = len;
  b->payload = align > PAGE ? ((b->map + payload_offset + align - 1) & ~(align - 1))
                            : b->map + first;
  b->size = size;
  b->base_id = new_ids(len / PAGE);
  n_allocs++;
  account((ssize_t)len);
  log_event("alloc", size, b->base_id, len / PAGE);
  return (void*)b->payload;
}

static struct block* find_payload(void* p) {
  for (int i = 0; i < nslots; i++)
    if (blocks[i].map && blocks[i].payload == (uintptr_t)p) return &blocks[i];
  return NULL;
}

static void track_free(struct block* b) {
  check_thread();
  log_event("free", b->size, b->base_id, b->map_len / PAGE);
  drop_from_window(b, 0);
  munmap((void*)b->map, b->map_len);
  account(-(ssize_t)b->map_len);
  n_frees++;
  b->map = 0;
}

// glibc moves a large mmapped chunk with mremap, which copies no page, so we do too (a memcpy
// would add references the plain program does not make). Pages kept in place keep their ids; a
// moved or grown block gets fresh ids, which can only lower the count (a moved page's next touch
// looks like a zero fill) and so keeps the bound valid. The written marks move with the pages.
static void* track_realloc(struct block* b, size_t size) {
  check_thread();
  size_t off = b->payload - b->map;
  if (size > SIZE_MAX / 2) return NULL;
  size_t len = (off + size + PAGE - 1) & ~(PAGE - 1);
  drop_from_window(b, 1);
  void* m = mremap((void*)b->map, b->map_len, len, MREMAP_MAYMOVE);
  if (m == MAP_FAILED) {
    errno = ENOMEM;
    return NULL;
  }
  account((ssize_t)len - (ssize_t)b->map_len);
  if ((uintptr_t)m != b->map || len > b->map_len) {
    uint32_t old_base = b->base_id;
    size_t kept = (len < b->map_len ? len : b->map_len) / PAGE;
    b->base_id = new_ids(len / PAGE);
    for (size_t i = 0; i < kept; i++) state[b->base_id + i] = state[old_base + i] & WRITTEN;
  }
  b->map = (uintptr_t)m;
  b->map_len = len;
  b->payload = b->map + off;
  b->size = size;
  n_reallocs++;
  log_event("realloc", size, b->base_id, len / PAGE);
  return (void*)b->payload;
}

// --- the allocator interface -----------------------------------------------------------------

void* malloc(size_t n) { return n >= track_min ? track_alloc(n, 16) : __libc_malloc(n); }

void* calloc(size_t n, size_t m) {
  size_t total;
  if (__builtin_mul_overflow(n, m, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  // A fresh mmap is already zero: writing zeros would touch every page (glibc does not either).
  return total >= track_min ? track_alloc(total, 16) : __libc_calloc(n, m);
}

void free(void* p) {
  if (!p) return;
  struct block* b = inited ? find_payload(p) : NULL;
  if (b)
    track_free(b);
  else
    __libc_free(p);
}

void* realloc(void* p, size_t n) {
  if (!p) return malloc(n);
  struct block* b = inited ? find_payload(p) : NULL;
  if (b) {
    if (n == 0) {
      track_free(b);
      return NULL;
    }
    return track_realloc(b, n);
  }
  if (n < track_min) return __libc_realloc(p, n);
  // A small block grown into a large one: copy as glibc would (its new chunk is an mmap too).
  size_t old = real_usable_size ? real_usable_size(p) : 0;
  void* q = track_alloc(n, 16);
  if (!q) return NULL;
  memcpy(q, p, old < n ? old : n);
  __libc_free(p);
  return q;
}

static void* aligned(size_t align, size_t n) {
  return n >= track_min ? track_alloc(n, align) : __libc_memalign(align, n);
}

int posix_memalign(void** out, size_t align, size_t n) {
  if (align < sizeof(void*) || (align & (align - 1))) return EINVAL;
  void* p = aligned(align, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}

void* aligned_alloc(size_t align, size_t n) { return aligned(align, n); }
void* memalign(size_t align, size_t n) { return aligned(align, n); }
void* valloc(size_t n) { return aligned(PAGE, n); }
void* pvalloc(size_t n) { return aligned(PAGE, (n + PAGE - 1) & ~(PAGE - 1)); }

size_t malloc_usable_size(void* p) {
  if (!p) return 0;
  struct block* b = inited ? find_payload(p) : NULL;
  if (b) return b->size;
  return real_usable_size ? real_usable_size(p) : 0;
}
