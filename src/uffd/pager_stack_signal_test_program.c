// Signals to a thread that maps and unmaps memory from a stack the program mapped itself
// (pthread_attr_setstack, as SBCL's threads run): under a pager that stack is in the arena, and
// the shim makes each mmap and munmap on a stack of its own, outside it. A runtime that stops
// threads with a signal reads the stack pointer in the handler's context as the thread's
// (SBCL's "no SP known for thread", Boehm GC's scan): every handler must find it on the
// thread's own stack, wherever in the call the signal landed.
//
// The thread maps, fills, checks and unmaps buffers in a loop while the main thread signals it
// whenever it is inside one of those calls (SA_RESTART and SA_SIGINFO, with a value). Prints
// the buffers' checksum and whether signals were handled; on stderr, how many signals landed
// while the thread was inside mmap or munmap (so that the caller can see that the case
// happened). Exits 0, or says what went wrong and exits 1.
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

enum { stack_bytes = 1 << 20, buf_bytes = 64 << 10, rounds = 20000 };

static uint8_t* stack;
static atomic_int in_call, done;
static atomic_long handled, landed_in_call, off_stack, bad_value;
static _Atomic(uintptr_t) first_off_stack_sp;
static uint64_t sum;

static void die(const char* what) {
  fprintf(stderr, "pager_stack_signal: %s\n", what);
  exit(1);
}

static void on_signal(int sig, siginfo_t* si, void* ucv) {
  (void)sig;
  const ucontext_t* uc = ucv;
  const uintptr_t sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
  if (sp < (uintptr_t)stack || sp >= (uintptr_t)stack + stack_bytes) {
    uintptr_t none = 0;
    atomic_compare_exchange_strong(&first_off_stack_sp, &none, sp);
    atomic_fetch_add(&off_stack, 1);
  }
  if (si->si_code == SI_QUEUE && si->si_value.sival_int != 0x5eed) atomic_fetch_add(&bad_value, 1);
  if (atomic_load_explicit(&in_call, memory_order_relaxed)) atomic_fetch_add(&landed_in_call, 1);
  atomic_fetch_add(&handled, 1);
}

static uint64_t checksum(const uint8_t* p, size_t len) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < len; i += 64) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// The rounds go on past `rounds` (their buffers checked, not summed: the printed checksum stays
// the plain run's) until a few signals landed inside a call, for up to a minute: on a busy
// machine the main thread may not run at all while the first rounds do.
static int enough_rounds(int r, time_t start) {
  if (r < rounds) return 0;
  return atomic_load(&landed_in_call) >= 5 || time(NULL) - start > 60;
}

static void* mapper(void* arg) {
  (void)arg;
  const time_t start = time(NULL);
  for (int r = 0; !enough_rounds(r, start); ++r) {
    atomic_store_explicit(&in_call, 1, memory_order_relaxed);
    uint8_t* p = mmap(NULL, buf_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    atomic_store_explicit(&in_call, 0, memory_order_relaxed);
    if (p == MAP_FAILED) die("mmap of a buffer");
    for (size_t i = 0; i < buf_bytes; i += 64) p[i] = (uint8_t)(r * 31 + i / 64);
    if (r < rounds) {
      sum = sum * 1099511628211ull ^ checksum(p, buf_bytes);
    } else {
      for (size_t i = 0; i < buf_bytes; i += 64)
        if (p[i] != (uint8_t)(r * 31 + i / 64)) die("a buffer read back wrong");
    }
    atomic_store_explicit(&in_call, 1, memory_order_relaxed);
    const int rc = munmap(p, buf_bytes);
    atomic_store_explicit(&in_call, 0, memory_order_relaxed);
    if (rc != 0) die("munmap of a buffer");
  }
  atomic_store(&done, 1);
  return NULL;
}

int main(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGUSR1, &sa, NULL) != 0) die("sigaction");
  stack = mmap(NULL, stack_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (stack == MAP_FAILED) die("mmap of the thread's stack");
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  if (pthread_attr_setstack(&attr, stack, stack_bytes) != 0) die("pthread_attr_setstack");
  pthread_t t;
  if (pthread_create(&t, &attr, mapper, NULL) != 0) die("pthread_create");
  const union sigval v = {.sival_int = 0x5eed};
  for (long n = 0; !atomic_load(&done); ++n) {
    // Aimed at the calls: sent once the thread is in one (a signal held by the call is handled
    // on its way out, still inside it).
    for (unsigned spins = 0; !atomic_load(&in_call) && !atomic_load(&done); ++spins)
      if (spins % 1024 == 1023) sched_yield();
    if (atomic_load(&done)) break;  // the thread may be gone: no signal for it
    const long before = atomic_load(&handled);
    const int rc = (n & 1) ? pthread_kill(t, SIGUSR1) : pthread_sigqueue(t, SIGUSR1, v);
    if (rc != 0 && rc != EAGAIN && rc != ESRCH) die(strerror(rc));
    // One at a time (signals to a thread merge while one is pending): the next once this one
    // was handled.
    while (atomic_load(&handled) == before && !atomic_load(&done)) sched_yield();
  }
  if (pthread_join(t, NULL) != 0) die("pthread_join");
  pthread_attr_destroy(&attr);
  printf("buffers %016llx\n", (unsigned long long)sum);
  printf("handled %s\n", atomic_load(&handled) > 0 ? "yes" : "no");
  fprintf(stderr, "pager_stack_signal: %ld signals landed inside a mapping call, of %ld\n",
          atomic_load(&landed_in_call), atomic_load(&handled));
  if (atomic_load(&bad_value) != 0) die("a queued signal's value was not the one sent");
  if (atomic_load(&off_stack) != 0) {
    fprintf(stderr, "pager_stack_signal: %ld handlers found a stack pointer off the thread's "
                    "stack (the first %#lx; the stack %p..%p)\n",
            atomic_load(&off_stack), (unsigned long)atomic_load(&first_off_stack_sp),
            (void*)stack, (void*)(stack + stack_bytes));
    return 1;
  }
  return 0;
}
