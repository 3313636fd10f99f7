// A coroutine on a stack the program mapped (makecontext, as green-thread libraries, Ruby's
// fibers and QEMU's coroutines do): under a pager that stack is paged memory, in the arena. On it
// the program maps, fills, checks and unmaps buffers, drops and re-protects pages, streams
// through a heap larger than the limit, passes heap pages through a pipe with writev and readv,
// and forks children that check the heap, so that the wrappers of mmap, munmap, madvise,
// mprotect, mremap, writev, readv and fork enter the pager, which reclaims, from that stack.
//
// The program proves the stack was paged: it counts, on stderr, the times mincore found a page
// it had written deep down the coroutine's stack evicted. Prints checksums of every buffer and
// of the heap; exits 0, or says what went wrong and exits 1.
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

enum { heap_mib = 24, stack_bytes = 1 << 20, rounds = 400, buf_bytes = 64 << 10 };

// Outside the arena (static storage is not routed): swapcontext's signal-mask calls name these.
static ucontext_t main_ctx, co_ctx;
static uint8_t* heap;
static const size_t heap_len = (size_t)heap_mib << 20;
static uint8_t* deep_page;  // a page of the coroutine's stack far below where it runs
static int paged_out;
static uint64_t sum;

static void die(const char* what) {
  fprintf(stderr, "arena_stack: %s\n", what);
  exit(1);
}

static uint64_t checksum(const uint8_t* p, size_t len) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < len; i += 64) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// Deep once: writes stack pages 256 KiB below the coroutine's frames, and remembers one.
static uint64_t deep(int n) {
  volatile uint8_t pad[4096];
  pad[0] = (uint8_t)n;
  if (n == 0) deep_page = (uint8_t*)((uintptr_t)pad & ~(uintptr_t)4095);
  return n ? deep(n - 1) + pad[0] : pad[0];
}

static int deep_page_resident(void) {
  static unsigned char v;  // outside the arena: the call itself names no paged memory
  if (mincore(deep_page, 4096, &v) != 0) die("mincore of the coroutine's stack failed");
  return v & 1;
}

// A child's view of the heap is the parent's: its checksum's low byte is the exit status.
static void fork_and_check(void) {
  static int status;  // outside the arena, as main_ctx
  const pid_t pid = fork();
  if (pid < 0) die("fork failed");
  if (pid == 0) _exit((int)(checksum(heap, heap_len) & 0xff));
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) die("a child did not exit");
  if (WEXITSTATUS(status) != (int)(checksum(heap, heap_len) & 0xff))
    die("a child read the heap differently");
}

// 64 KiB of the heap at `from` through a pipe into `sink` (iovec arrays outside the arena, the
// buffers in it: the shim's wrappers have them pinned), and compared.
static int pipe_fds[2];
static uint8_t* sink;
static void through_pipe(size_t from) {
  static struct iovec out[2], in[2];
  out[0] = (struct iovec){heap + from, 16384};
  out[1] = (struct iovec){heap + from + 16384, 49152};
  in[0] = (struct iovec){sink, 40960};
  in[1] = (struct iovec){sink + 40960, 24576};
  if (writev(pipe_fds[1], out, 2) != 65536) die("writev failed");
  if (readv(pipe_fds[0], in, 2) != 65536) die("readv failed");
  if (memcmp(heap + from, sink, 65536) != 0) die("readv read back other bytes");
}

static void coroutine(void) {
  sum += deep(64);
  for (int r = 0; r < rounds; ++r) {
    uint8_t* b = mmap(NULL, buf_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (b == MAP_FAILED) die("mmap failed");
    memset(b, (uint8_t)(r * 7 + 1), buf_bytes);
    // Drop half (it reads back as zeros), make it read-only and writable again, grow it.
    if (madvise(b, buf_bytes / 2, MADV_DONTNEED) != 0) die("madvise failed");
    if (mprotect(b, buf_bytes, PROT_READ) != 0 || mprotect(b, buf_bytes, PROT_READ | PROT_WRITE))
      die("mprotect failed");
    uint8_t* m = mremap(b, buf_bytes, 2 * buf_bytes, MREMAP_MAYMOVE);
    if (m == MAP_FAILED) die("mremap failed");
    for (size_t i = 0; i < 2 * buf_bytes; i += 4096) {
      const uint8_t want = i < buf_bytes / 2 ? 0 : i < buf_bytes ? (uint8_t)(r * 7 + 1) : 0;
      if (m[i] != want || m[i + 4095] != want) die("a buffer read back wrong bytes");
    }
    sum += checksum(m, 2 * buf_bytes);
    if (munmap(m, 2 * buf_bytes) != 0) die("munmap failed");
    // A quarter of the heap, in turn: what is resident now goes out.
    const size_t q = heap_len / 4, at = (size_t)(r % 4) * q;
    for (size_t i = 0; i < q; i += 4096) heap[at + i] += 1;
    if (!deep_page_resident()) ++paged_out;
    if (r % 50 == 25) fork_and_check();
    if (r % 4 == 3) through_pipe(((size_t)r << 16) % heap_len);
  }
  swapcontext(&co_ctx, &main_ctx);
}

int main(void) {
  heap = malloc(heap_len);
  sink = malloc(65536);
  uint8_t* stack = mmap(NULL, stack_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                        -1, 0);
  if (!heap || !sink || stack == MAP_FAILED) die("cannot allocate");
  if (pipe(pipe_fds) != 0) die("pipe failed");
  for (size_t i = 0; i < heap_len; ++i) heap[i] = (uint8_t)(i * 31 >> 12);
  getcontext(&co_ctx);
  co_ctx.uc_stack.ss_sp = stack;
  co_ctx.uc_stack.ss_size = stack_bytes;
  co_ctx.uc_link = &main_ctx;
  makecontext(&co_ctx, coroutine, 0);
  if (swapcontext(&main_ctx, &co_ctx) != 0) die("swapcontext failed");
  // Every heap page was incremented rounds / 4 times.
  for (size_t i = 0; i < heap_len; i += 4096)
    if (heap[i] != (uint8_t)((i * 31 >> 12) + rounds / 4)) die("the heap read back wrong bytes");
  fprintf(stderr, "arena_stack: the stack's deep page was found evicted %d times\n", paged_out);
  printf("%016llx %016llx\n", (unsigned long long)sum,
         (unsigned long long)checksum(heap, heap_len));
  return 0;
}
