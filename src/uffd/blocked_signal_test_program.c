// A thread blocked in read(2) into its heap while other threads signal it, as a stop-the-world
// collector does (SBCL's, Boehm GC's): the handler must run on the thread's own stack and see its
// own stack pointer in the interrupted context, since such a collector scans the thread's stack
// from there (Boehm GC took the handler's stack pointer, found the pager's stack, missed the
// thread's and freed a list only that thread held). Under uswap run with seccomp, a read into the
// heap traps and waits inside the pager, on a stack of the pager's. Also: a handler with
// SA_RESTART lets the read go on and return the data written later; one without makes it fail
// with EINTR; each handler gets the value it was sent (sigqueue's siginfo, unchanged).
//
// Prints what the reader saw; on stderr, how many signals found it blocked in read (so the caller
// can see the case happened). Exits 0, or says what went wrong and exits 1.
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

enum { restarting_signals = 3, buf_len = 1 << 16 };

static int restart_pipe[2], eintr_pipe[2];
static uintptr_t stack_lo, stack_hi;
static atomic_int handled, on_stack, ctx_on_stack, values_ok, reader_tid, second_read;

static void die(const char* what) {
  fprintf(stderr, "blocked_signal: %s\n", what);
  exit(1);
}

static int within_stack(uintptr_t a) { return a >= stack_lo && a < stack_hi; }

static void on_signal(int sig, siginfo_t* si, void* ucv) {
  const ucontext_t* uc = ucv;
  volatile char here = 0;
  const int k = atomic_load(&handled);
  if (within_stack((uintptr_t)&here)) atomic_fetch_add(&on_stack, 1);
  if (within_stack((uintptr_t)uc->uc_mcontext.gregs[REG_RSP])) atomic_fetch_add(&ctx_on_stack, 1);
  const int want = sig == SIGUSR1 ? 42 + k : 99;
  if (si->si_code == SI_QUEUE && si->si_value.sival_int == want) atomic_fetch_add(&values_ok, 1);
  atomic_fetch_add(&handled, 1);
}

static void* reader(void* arg) {
  (void)arg;
  pthread_attr_t a;
  void* base;
  size_t size;
  if (pthread_getattr_np(pthread_self(), &a) != 0 || pthread_attr_getstack(&a, &base, &size) != 0)
    die("cannot read the thread's stack");
  pthread_attr_destroy(&a);
  stack_lo = (uintptr_t)base;
  stack_hi = stack_lo + size;
  char* buf = malloc(buf_len);  // the heap: in the arena under uswap run
  if (!buf) die("malloc");
  memset(buf, 0, buf_len);
  atomic_store(&reader_tid, (int)syscall(SYS_gettid));
  const ssize_t n = read(restart_pipe[0], buf, buf_len);
  if (n != 6 || memcmp(buf, "hello\n", 6) != 0) die("the restarted read did not return the data");
  atomic_store(&second_read, 1);
  const ssize_t m = read(eintr_pipe[0], buf, buf_len);
  const int e = errno;
  printf("restart: read %zd bytes after %d signals; no restart: read %zd, %s\n", n,
         restarting_signals, m, m < 0 && e == EINTR ? "EINTR" : "not EINTR");
  return NULL;
}

// Whether thread `tid` waits in read(2) now (its /proc syscall line starts with 0, the number).
static int in_read(int tid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/self/task/%d/syscall", tid);
  FILE* f = fopen(path, "r");
  if (!f) return 0;
  const int ok = fgets(line, sizeof line, f) && strncmp(line, "0 ", 2) == 0;
  fclose(f);
  return ok;
}

static void wait_until(int (*cond)(int), int arg, const char* what) {
  for (int i = 0; i < 20000; ++i) {
    if (cond(arg)) return;
    const struct timespec ms = {0, 1000 * 1000};
    nanosleep(&ms, NULL);
  }
  die(what);
}

static int handled_at_least(int n) { return atomic_load(&handled) >= n; }

int main(void) {
  if (pipe(restart_pipe) != 0 || pipe(eintr_pipe) != 0) die("pipe");
  struct sigaction sa = {0};
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGUSR1, &sa, NULL) != 0) die("sigaction SIGUSR1");
  sa.sa_flags = SA_SIGINFO;
  if (sigaction(SIGUSR2, &sa, NULL) != 0) die("sigaction SIGUSR2");
  struct sigaction back;
  const int flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK | SA_NODEFER | SA_RESETHAND;
  if (sigaction(SIGUSR1, NULL, &back) != 0 || back.sa_sigaction != on_signal ||
      (back.sa_flags & flags) != (SA_SIGINFO | SA_RESTART))
    die("sigaction does not give back the handler and flags the program set");
  pthread_t t;
  if (pthread_create(&t, NULL, reader, NULL) != 0) die("pthread_create");
  while (atomic_load(&reader_tid) == 0) sched_yield();
  const int tid = atomic_load(&reader_tid);
  int found = 0;
  for (int k = 0; k < restarting_signals; ++k) {
    wait_until(in_read, tid, "the reader never waited in read");
    found += in_read(tid);
    if (pthread_sigqueue(t, SIGUSR1, (union sigval){.sival_int = 42 + k}) != 0) die("sigqueue");
    wait_until(handled_at_least, k + 1, "a signal was never handled");
  }
  wait_until(in_read, tid, "the reader did not go back to its read");
  if (write(restart_pipe[1], "hello\n", 6) != 6) die("write");
  while (!atomic_load(&second_read)) sched_yield();
  wait_until(in_read, tid, "the reader never waited in its second read");
  found += in_read(tid);
  if (pthread_sigqueue(t, SIGUSR2, (union sigval){.sival_int = 99}) != 0) die("sigqueue");
  pthread_join(t, NULL);
  const int n = atomic_load(&handled);
  printf("handlers %d; on the thread's stack %d; their contexts on it %d; values as sent %d\n", n,
         atomic_load(&on_stack), atomic_load(&ctx_on_stack), atomic_load(&values_ok));
  fprintf(stderr, "blocked_signal: %d signals found the reader blocked in read\n", found);
  return n == restarting_signals + 1 && atomic_load(&on_stack) == n &&
                 atomic_load(&ctx_on_stack) == n && atomic_load(&values_ok) == n
             ? 0
             : 1;
}
