/* What the preload shim promises, checked from inside a C program run under `uswap run`: large
 * malloc / calloc / realloc / posix_memalign / mmap memory is paged (pager statistics show it),
 * realloc and mremap keep contents, madvise(MADV_DONTNEED) zeroes, fread / fwrite / read / write
 * reach swapped-out buffers, the program's own SIGBUS handler still gets SIGBUS that is not a
 * pager fault, blocking SIGBUS is quietly refused, threads start after the locale's data
 * was pushed out, and a child made by a raw clone system call (no fork(), so no pthread_atfork
 * handler: Chromium's zygote forks so) reads the parent's swapped-out memory, on the stack it was
 * given and, as root, in a pid namespace of its own. It also passes without the shim (the
 * shim-only checks are skipped when USWAP_LIMIT is unset). Exits 0 when every check holds. */
#define _GNU_SOURCE
#include <errno.h>
#include <locale.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <ctype.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include "c_check.h"

#define MiB (1024u * 1024u)

static void fill(uint64_t *p, size_t bytes, uint64_t tag) {
  for (size_t i = 0; i < bytes / 8; ++i) p[i] = (i % 3) ? 0 : tag * 1000003u + i;
}
static int check(const uint64_t *p, size_t bytes, uint64_t tag) {
  for (size_t i = 0; i < bytes / 8; ++i)
    if (p[i] != ((i % 3) ? 0 : tag * 1000003u + i)) return 0;
  return 1;
}
static int zeros(const uint8_t *p, size_t bytes) {
  for (size_t i = 0; i < bytes; i += 64)
    if (p[i]) return 0;
  return 1;
}

static void *thread_body(void *arg) {
  *(int *)arg = isalpha('x') ? 42 : 0;
  return arg;
}

static volatile sig_atomic_t got_sigbus;
static void on_sigbus(int sig) { got_sigbus = sig; }
static volatile uintptr_t usr1_frame;
static volatile int usr1_onstack;
static void on_usr1(int sig) {
  (void)sig;
  usr1_frame = (uintptr_t)__builtin_frame_address(0);
  stack_t cur;
  usr1_onstack = sigaltstack(NULL, &cur) == 0 && (cur.ss_flags & SS_ONSTACK);
}

/* A coroutine on a heap stack (makecontext, as fibers and green threads do): in the arena under
 * the shim, so its frames are paged like any data, and its first fault on a missing stack page
 * must not need that stack for the signal frame. */
static ucontext_t co_main, co_ctx;
static volatile uint64_t co_sum;
static uint64_t co_recurse(int depth, uint64_t tag) {
  volatile uint64_t frame[128]; /* 1 KiB a level: the recursion walks fresh stack pages */
  for (int i = 0; i < 128; ++i) frame[i] = tag * 1000003u + (uint64_t)depth * 131u + (uint64_t)i;
  uint64_t below = 0;
  if (depth > 0) {
    below = co_recurse(depth - 1, tag);
  } else {
    swapcontext(&co_ctx, &co_main); /* main pushes this stack out, then comes back */
  }
  uint64_t ok = 1;
  for (int i = 0; i < 128; ++i)
    ok &= frame[i] == tag * 1000003u + (uint64_t)depth * 131u + (uint64_t)i;
  return below + ok;
}
static void co_body(void) { co_sum = co_recurse(400, 77); }

/* The child of a raw clone: the parent's memory, as it was, most of it swapped out. */
struct clone_arg {
  const uint64_t *data;
  size_t bytes;
  uint64_t tag;
  int expect_pid1;
};
static int clone_child(void *p) {
  const struct clone_arg *a = p;
  if (a->expect_pid1 && getpid() != 1) return 3;
  return check(a->data, a->bytes, a->tag) ? 0 : 2;
}
static int child_status(pid_t pid) {
  int status = 0;
  if (pid <= 0 || waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int main(void) {
  const int shimmed = getenv("USWAP_LIMIT") != NULL;

  /* malloc, more than the limit (8 MiB in the test), written and read back. */
  uint64_t *big = malloc(24 * MiB);
  CHECK(big != NULL);
  fill(big, 24 * MiB, 1);
  CHECK(check(big, 24 * MiB, 1));
  CHECK(malloc_usable_size(big) >= 24 * MiB);
  /* realloc grows and shrinks, contents kept. */
  big = realloc(big, 32 * MiB);
  CHECK(big != NULL && check(big, 24 * MiB, 1));
  fill(big + 3 * MiB, 8 * MiB, 2);
  big = realloc(big, 2 * MiB);
  CHECK(big != NULL && check(big, 2 * MiB, 1));
  free(big);

  /* calloc is zero. */
  uint8_t *z = calloc(4, 2 * MiB);
  CHECK(z != NULL && zeros(z, 8 * MiB));
  free(z);

  /* posix_memalign with a 2 MiB alignment. */
  void *al = NULL;
  CHECK(posix_memalign(&al, 2 * MiB, 4 * MiB) == 0);
  CHECK(((uintptr_t)al & (2 * MiB - 1)) == 0);
  fill(al, 4 * MiB, 3);
  CHECK(check(al, 4 * MiB, 3));
  free(al);

  /* mmap, madvise(MADV_DONTNEED), mremap, munmap. */
  uint64_t *m = mmap(NULL, 16 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(m != MAP_FAILED);
  fill(m, 16 * MiB, 4);
  CHECK(madvise(m, 1 * MiB, MADV_DONTNEED) == 0);
  CHECK(zeros((uint8_t *)m, 1 * MiB));
  uint64_t *m2 = mremap(m, 16 * MiB, 20 * MiB, MREMAP_MAYMOVE);
  CHECK(m2 != MAP_FAILED);
  CHECK(zeros((uint8_t *)m2, 1 * MiB));
  for (size_t i = MiB / 8; i < 16 * MiB / 8; i += 4099) CHECK(m2[i] == ((i % 3) ? 0 : 4 * 1000003u + i));
  CHECK(zeros((uint8_t *)m2 + 16 * MiB, 4 * MiB));
  CHECK(munmap(m2, 20 * MiB) == 0);

  /* stdio and read/write on buffers that are mostly swapped out. */
  uint64_t *src = malloc(12 * MiB), *dst = malloc(12 * MiB);
  CHECK(src && dst);
  fill(src, 12 * MiB, 5);
  fill(dst, 12 * MiB, 6);
  FILE *f = tmpfile();
  CHECK(f != NULL);
  CHECK(fwrite(src, 1, 12 * MiB, f) == 12 * MiB);
  CHECK(fflush(f) == 0);
  rewind(f);
  CHECK(fread(dst, 1, 12 * MiB, f) == 12 * MiB);
  CHECK(check(dst, 12 * MiB, 5));
  fill(dst, 12 * MiB, 7);
  CHECK(pread(fileno(f), dst, 12 * MiB, 0) == (ssize_t)(12 * MiB));
  CHECK(check(dst, 12 * MiB, 5));
  CHECK(ftruncate(fileno(f), 0) == 0);
  fill(src, 12 * MiB, 8);
  CHECK(pwrite(fileno(f), src, 12 * MiB, 0) == (ssize_t)(12 * MiB));
  CHECK(pread(fileno(f), dst, 12 * MiB, 0) == (ssize_t)(12 * MiB));
  CHECK(check(dst, 12 * MiB, 8));
  fclose(f);
  free(src);
  free(dst);

  /* The program's SIGBUS handler gets a SIGBUS that is not a pager fault. */
  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigbus;
  sigemptyset(&sa.sa_mask);
  CHECK(sigaction(SIGBUS, &sa, NULL) == 0);
  CHECK(sigaction(SIGBUS, NULL, &old) == 0 && old.sa_handler == on_sigbus);
  raise(SIGBUS);
  CHECK(got_sigbus == SIGBUS);

  /* signal() and sysv_signal() route through the shim too: a raised SIGBUS reaches them while
   * paged memory keeps faulting in (a pager fault never does). */
  got_sigbus = 0;
  CHECK(signal(SIGBUS, on_sigbus) != SIG_ERR);
  uint64_t *again = malloc(12 * MiB);
  CHECK(again != NULL);
  fill(again, 12 * MiB, 9);
  CHECK(check(again, 12 * MiB, 9));
  CHECK(got_sigbus == 0);
  raise(SIGBUS);
  CHECK(got_sigbus == SIGBUS);
  free(again);

  /* An alternate signal stack in routed memory: the kernel writes the signal frame there (with
   * seccomp the shim pins it), and the handler runs on it. */
  const size_t alt_size = 256 * 1024;
  uint8_t *alt = malloc(alt_size);
  CHECK(alt != NULL);
  stack_t ss = {.ss_sp = alt, .ss_size = alt_size, .ss_flags = 0};
  CHECK(sigaltstack(&ss, NULL) == 0);
  uint64_t *push = malloc(16 * MiB); /* push the alternate stack's pages out */
  CHECK(push != NULL);
  fill(push, 16 * MiB, 10);
  struct sigaction alt_sa;
  memset(&alt_sa, 0, sizeof alt_sa);
  alt_sa.sa_handler = on_usr1;
  alt_sa.sa_flags = SA_ONSTACK;
  sigemptyset(&alt_sa.sa_mask);
  CHECK(sigaction(SIGUSR1, &alt_sa, NULL) == 0);
  usr1_frame = 0;
  raise(SIGUSR1);
  /* The handler ran on an alternate stack: the program's, or under the shim the shim's (the
   * program's is kept and read back, never made: the pager's handlers need theirs). */
  CHECK(usr1_frame != 0 && usr1_onstack);
  const uintptr_t here = (uintptr_t)__builtin_frame_address(0);
  CHECK(usr1_frame > here + 64 * 1024 || usr1_frame + 64 * 1024 < here);
  if (!shimmed) CHECK(usr1_frame >= (uintptr_t)alt && usr1_frame < (uintptr_t)alt + alt_size);
  stack_t now_ss;
  CHECK(sigaltstack(NULL, &now_ss) == 0);
  CHECK(now_ss.ss_sp == alt && now_ss.ss_size == alt_size && now_ss.ss_flags == 0);
  ss.ss_flags = SS_DISABLE;
  CHECK(sigaltstack(&ss, NULL) == 0);
  CHECK(sigaltstack(NULL, &now_ss) == 0 && (now_ss.ss_flags & SS_DISABLE));
  free(push);

  /* A coroutine on a heap stack: 400 KiB of frames, pushed out while it is suspended, read back
   * when it resumes. */
  {
    const size_t co_stack_size = 1024 * 1024;
    char *co_stack = malloc(co_stack_size);
    CHECK(co_stack != NULL);
    CHECK(getcontext(&co_ctx) == 0);
    co_ctx.uc_stack.ss_sp = co_stack;
    co_ctx.uc_stack.ss_size = co_stack_size;
    co_ctx.uc_link = &co_main;
    makecontext(&co_ctx, co_body, 0);
    CHECK(swapcontext(&co_main, &co_ctx) == 0); /* runs until the deepest frame yields */
    uint64_t *evict = malloc(24 * MiB);
    CHECK(evict != NULL);
    fill(evict, 24 * MiB, 12);
    CHECK(swapcontext(&co_main, &co_ctx) == 0); /* finishes, back through uc_link */
    CHECK(co_sum == 401);
    CHECK(check(evict, 24 * MiB, 12));
    free(evict);
    free(co_stack);
  }

  /* Threads started after setlocale: glibc's start_thread reads the locale's LC_CTYPE data, which
   * setlocale allocated with malloc (in the arena), before it unblocks signals. Pushed out of
   * memory before each thread starts, it must still be readable then (the shim pins it). */
  CHECK(setlocale(LC_ALL, "C.UTF-8") != NULL);
  for (int round = 0; round < 4; ++round) {
    uint64_t *evict = malloc(24 * MiB);
    CHECK(evict != NULL);
    fill(evict, 24 * MiB, 11 + (uint64_t)round);
    int answer = 0;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, thread_body, &answer) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(answer == 42);
    CHECK(check(evict, 24 * MiB, 11 + (uint64_t)round));
    free(evict);
  }

  /* Raw clones: without a stack (the child returns from the system call like fork's), with
   * one (glibc's clone(), as Chromium forks its sandboxed processes), and with CLONE_NEWPID
   * (root only), where the child is pid 1 and must not join the job under that pid. */
  {
    uint64_t *shared = malloc(24 * MiB);
    CHECK(shared != NULL);
    fill(shared, 24 * MiB, 21);
    const long pid = syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
    if (pid == 0) _exit(check(shared, 24 * MiB, 21) ? 0 : 2);
    CHECK(child_status((pid_t)pid) == 0);
    /* On this thread's stack, as Chromium's zygote gives it, and on the heap (in the arena: the
     * child's first faults there push their frames on the shim's alternate stack). */
    enum { stack_size = 64 * 1024 };
    char stack[stack_size] __attribute__((aligned(16)));
    struct clone_arg arg = {shared, 24 * MiB, 21, 0};
    CHECK(child_status(clone(clone_child, stack + stack_size, SIGCHLD, &arg)) == 0);
    char *heap_stack = malloc(stack_size);
    CHECK(heap_stack != NULL);
    CHECK(child_status(clone(clone_child, heap_stack + stack_size, SIGCHLD, &arg)) == 0);
    free(heap_stack);
    if (geteuid() == 0) {
      arg.expect_pid1 = 1;
      CHECK(child_status(clone(clone_child, stack + stack_size, CLONE_NEWPID | SIGCHLD, &arg)) == 0);
    }
    CHECK(check(shared, 24 * MiB, 21));
    free(shared);
  }

  /* Blocking the pager's signals is refused under the shim (the kernel would kill a thread that
   * takes a forced one while blocking it): SIGBUS in sigbus mode, SIGSYS when system calls are
   * trapped (seccomp). Other signals, and SIGBUS in handler-thread mode, block as asked. */
  const char *mode = getenv("USWAP_FAULT_MODE");
  const int pager_sigbus = shimmed && mode && strcmp(mode, "sigbus") == 0;
  const int pager_sigsys = shimmed && getenv("USWAP_SECCOMP") != NULL;
  sigset_t set, now;
  sigemptyset(&set);
  sigaddset(&set, SIGBUS);
  sigaddset(&set, SIGSYS);
  sigaddset(&set, SIGUSR1);
  CHECK(sigprocmask(SIG_BLOCK, &set, NULL) == 0);
  CHECK(sigprocmask(SIG_BLOCK, NULL, &now) == 0);
  CHECK(sigismember(&now, SIGUSR1) == 1);
  CHECK(sigismember(&now, SIGBUS) == !pager_sigbus);
  CHECK(sigismember(&now, SIGSYS) == !pager_sigsys);
  CHECK(sigprocmask(SIG_UNBLOCK, &set, NULL) == 0);

  return check_exit("preload test program");
}
