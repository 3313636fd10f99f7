// Signals to a thread that starts threads with clone(2) itself, its tid words on the heap (as a
// runtime with threads of its own makes them): under a pager with seccomp that clone names
// paged memory, so it traps and the pager makes it. A runtime that stops threads with a signal
// reads the stack pointer in the handler's context as the thread's: every handler must find
// it on the thread's own stack, wherever in the clone the signal landed. Each child must start
// with its parent's signal mask, as clone gives it.
//
// The cloning thread blocks SIGUSR2 and starts short-lived children in a loop (each records its
// mask and ends; the parent waits for its CHILD_CLEARTID word) while the main thread signals it
// with SIGUSR1 whenever it is inside clone. Prints how many children ran and whether signals were
// handled; on stderr, how many signals landed while the thread was inside clone (so that the
// caller can see that the case happened). Exits 0, or says what went wrong and exits 1.
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

enum { child_stack_bytes = 64 << 10, slots = 64, rounds = 20000 };

static uintptr_t stack_lo, stack_hi;  // the cloning thread's stack
static atomic_int in_call, ready, done;
static atomic_long handled, landed_in_call, off_stack, children_ran, wrong_mask;
static _Atomic(uintptr_t) first_off_stack_sp;

static void die(const char* what) {
  fprintf(stderr, "clone_signal: %s\n", what);
  exit(1);
}

static void on_signal(int sig, siginfo_t* si, void* ucv) {
  (void)sig;
  (void)si;
  const ucontext_t* uc = ucv;
  const uintptr_t sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
  if (sp < stack_lo || sp >= stack_hi) {
    uintptr_t none = 0;
    atomic_compare_exchange_strong(&first_off_stack_sp, &none, sp);
    atomic_fetch_add(&off_stack, 1);
  }
  if (atomic_load_explicit(&in_call, memory_order_relaxed)) atomic_fetch_add(&landed_in_call, 1);
  atomic_fetch_add(&handled, 1);
}

static uint64_t parent_mask;
static uint64_t child_mask[slots];  // outside the heap: the child's call names no paged memory

// The child shares the parent's thread pointer (no CLONE_SETTLS): raw calls only, no errno.
static int child(void* arg) {
  uint64_t* mask = arg;
  if (syscall(SYS_rt_sigprocmask, SIG_BLOCK, NULL, mask, 8) != 0 || *mask != parent_mask)
    atomic_fetch_add(&wrong_mask, 1);
  atomic_fetch_add(&children_ran, 1);
  return 0;
}

static void* cloner(void* arg) {
  (void)arg;
  pthread_attr_t attr;
  void* lo;
  size_t size;
  if (pthread_getattr_np(pthread_self(), &attr) != 0 || pthread_attr_getstack(&attr, &lo, &size))
    die("pthread_getattr_np");
  pthread_attr_destroy(&attr);
  stack_lo = (uintptr_t)lo;
  stack_hi = stack_lo + size;
  sigset_t usr2;
  sigemptyset(&usr2);
  sigaddset(&usr2, SIGUSR2);
  if (pthread_sigmask(SIG_BLOCK, &usr2, NULL) != 0) die("pthread_sigmask");
  if (syscall(SYS_rt_sigprocmask, SIG_BLOCK, NULL, &parent_mask, 8) != 0) die("rt_sigprocmask");
  atomic_store(&ready, 1);
  // On the heap, which a pager pages: the clone names them. Children in slots, so that the
  // thread spends its time in clone rather than waiting for each child to end.
  char* stacks = malloc(slots * child_stack_bytes);
  _Atomic pid_t* tids = malloc(2 * slots * sizeof(pid_t));
  if (!stacks || !tids) die("malloc");
  for (int i = 0; i < 2 * slots; ++i) atomic_store(&tids[i], 0);
  const int flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD |
                    CLONE_SYSVSEM | CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID;
  for (int r = 0; r < rounds + slots; ++r) {
    const int slot = r % slots;
    _Atomic pid_t* done_word = &tids[2 * slot + 1];
    // Until the kernel clears the slot's last child's tid word at its exit: its stack is free.
    for (pid_t t; (t = atomic_load(done_word)) != 0;)
      syscall(SYS_futex, done_word, FUTEX_WAIT, t, NULL, NULL, 0);
    if (r >= rounds) continue;
    atomic_store(done_word, -1);
    atomic_store_explicit(&in_call, 1, memory_order_relaxed);
    const int tid = clone(child, stacks + (slot + 1) * child_stack_bytes, flags, &child_mask[slot],
                          (pid_t*)&tids[2 * slot], NULL, (pid_t*)done_word);
    atomic_store_explicit(&in_call, 0, memory_order_relaxed);
    if (tid <= 0) die("clone");
  }
  free(stacks);
  free((void*)tids);
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
  pthread_t t;
  if (pthread_create(&t, NULL, cloner, NULL) != 0) die("pthread_create");
  while (!atomic_load(&ready)) sched_yield();
  while (!atomic_load(&done)) {
    // Aimed at the clone: sent once the thread is in it (a signal that waits for the trapped
    // call's end is handled there too).
    for (unsigned spins = 0; !atomic_load(&in_call) && !atomic_load(&done); ++spins)
      if (spins % 1024 == 1023) sched_yield();
    if (atomic_load(&done)) break;  // the thread may be gone: no signal for it
    const long before = atomic_load(&handled);
    const int rc = pthread_kill(t, SIGUSR1);
    if (rc != 0 && rc != ESRCH) die("pthread_kill");
    // One at a time (signals to a thread merge while one is pending).
    while (atomic_load(&handled) == before && !atomic_load(&done)) sched_yield();
  }
  if (pthread_join(t, NULL) != 0) die("pthread_join");
  printf("children %ld\n", atomic_load(&children_ran));
  printf("handled %s\n", atomic_load(&handled) > 0 ? "yes" : "no");
  fprintf(stderr, "clone_signal: %ld signals landed inside clone, of %ld\n",
          atomic_load(&landed_in_call), atomic_load(&handled));
  if (atomic_load(&wrong_mask) != 0) {
    fprintf(stderr, "clone_signal: %ld children started with another mask than their parent's\n",
            atomic_load(&wrong_mask));
    return 1;
  }
  if (atomic_load(&off_stack) != 0) {
    fprintf(stderr, "clone_signal: %ld handlers found a stack pointer off the thread's stack "
                    "(the first %#lx; the stack %#lx..%#lx)\n",
            atomic_load(&off_stack), (unsigned long)atomic_load(&first_off_stack_sp),
            (unsigned long)stack_lo, (unsigned long)stack_hi);
    return 1;
  }
  return 0;
}
