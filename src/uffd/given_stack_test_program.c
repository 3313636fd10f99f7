// Threads on stacks the program mapped itself (pthread_attr_setstack), as SBCL's are: glibc puts
// each thread's descriptor (its tid words, rseq area, robust list, signal mask) at the top of
// that stack. Under a pager the stack is paged memory. Signals are sent to such a thread while it
// streams through a heap larger than the limit, with a handler that takes no SA_ONSTACK and has
// a frame of 16 KiB; the thread ends and is joined; a second one follows on a fresh stack.
//
// Each signal must be delivered even when the pages below the thread's stack pointer were
// evicted: the program counts, on stderr, the signals sent while mincore found the page below
// that stack pointer missing (so the caller can see the case happened). A join must return (the
// kernel clears the tid word in the descriptor at the thread's exit). Prints checksums and
// whether signals were handled; exits 0, or says what went wrong and exits 1.
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

enum { heap_mib = 48, stack_bytes = 2 << 20, signals_per_thread = 150 };

static uint8_t* heap;
static const size_t heap_len = (size_t)heap_mib << 20;
static atomic_int handled;
static _Atomic(uintptr_t) thread_sp;
static atomic_int streaming, stop;

static void die(const char* what) {
  fprintf(stderr, "given_stack: %s\n", what);
  exit(1);
}

static uint64_t checksum(const uint8_t* p, size_t len) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < len; i += 64) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// A runtime's stop-for-GC handler may have a frame this large.
static void on_signal(int sig) {
  (void)sig;
  volatile uint8_t frame[16384];
  memset((void*)frame, 0x5a, sizeof frame);
  if (frame[100] == 0x5a) atomic_fetch_add(&handled, 1);
}

// Deep once, so that the stack has written pages far below where the thread then runs.
static uint64_t deep(int n) {
  volatile uint8_t pad[4096];
  pad[0] = (uint8_t)n;
  return n ? deep(n - 1) + pad[0] : pad[0];
}

// Streams through the heap from `depth` frames of 4 KiB down the stack, below the part of it
// a pager may keep resident (the thread's descriptor and TLS at its top).
static uint64_t stream(int depth) {
  volatile uint8_t pad[4096];
  pad[0] = (uint8_t)depth;
  if (depth > 0) return stream(depth - 1) + pad[0];
  int local;
  atomic_store(&thread_sp, (uintptr_t)&local);
  atomic_store(&streaming, 1);
  // Reads until told to stop (as long as the signals take), then a fixed number of writes, so
  // that the heap's contents do not depend on the timing.
  uint64_t sum = 0;
  while (!atomic_load(&stop))
    for (size_t i = 0; i < heap_len && !atomic_load(&stop); i += 4096) sum += heap[i];
  for (int pass = 0; pass < 2; ++pass)
    for (size_t i = 0; i < heap_len; i += 4096) heap[i] += 1;
  return sum + pad[0];
}

static void* runner(void* arg) {
  (void)arg;
  volatile uint64_t sink = deep(200);  // 800 KiB of stack
  return (void*)(uintptr_t)((sink + stream(48)) & 1);
}

// Whether the page below the thread's stack pointer is missing.
static int below_sp_missing(void) {
  const uintptr_t sp = atomic_load(&thread_sp);
  if (!sp) return 0;
  unsigned char v = 1;
  void* page = (void*)((sp & ~(uintptr_t)4095) - 4096);
  return mincore(page, 4096, &v) == 0 && !(v & 1);
}

static void run_thread(int* missing) {
  void* stack = mmap(NULL, stack_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (stack == MAP_FAILED) die("mmap of a thread's stack");
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  if (pthread_attr_setstack(&attr, stack, stack_bytes) != 0) die("pthread_attr_setstack");
  pthread_t t;
  atomic_store(&thread_sp, 0);
  atomic_store(&streaming, 0);
  atomic_store(&stop, 0);
  if (pthread_create(&t, &attr, runner, NULL) != 0) die("pthread_create");
  while (!atomic_load(&streaming)) usleep(100);
  for (int i = 0; i < signals_per_thread; ++i) {
    *missing += below_sp_missing();
    if (pthread_kill(t, SIGUSR1) != 0) die("pthread_kill");
    usleep(1000);
  }
  atomic_store(&stop, 1);
  if (pthread_join(t, NULL) != 0) die("pthread_join");
  pthread_attr_destroy(&attr);
  if (munmap(stack, stack_bytes) != 0) die("munmap of a thread's stack");
}

int main(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGUSR1, &sa, NULL) != 0) die("sigaction");
  heap = mmap(NULL, heap_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (heap == MAP_FAILED) die("mmap of the heap");
  for (size_t i = 0; i < heap_len; i += 64) heap[i] = (uint8_t)(i * 2654435761u >> 24);
  int missing = 0;
  run_thread(&missing);
  run_thread(&missing);  // a second one, after the first ended on its own stack
  printf("heap %016llx\n", (unsigned long long)checksum(heap, heap_len));
  printf("handled %s\n", atomic_load(&handled) > 0 ? "yes" : "no");
  // The flags read back are the program's own.
  struct sigaction back;
  if (sigaction(SIGUSR1, NULL, &back) != 0 || (back.sa_flags & SA_ONSTACK)) die("SA_ONSTACK read back");
  fprintf(stderr, "given_stack: %d signals found the page below the stack pointer missing\n",
          missing);
  return 0;
}
