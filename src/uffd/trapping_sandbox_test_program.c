// A program whose seccomp sandbox traps calls to a SIGSYS handler of its own, as Firefox's
// content processes do (its handler brokers file opens, and reads its own data, which may be
// paged out): the pager's own calls that such a filter refuses (a statistics sample's open of
// /proc and mincore, the kswapd thread's futex_waitv, a job's kill and nudge) must never reach
// that handler. They did, inside the pager with its locks held, and Firefox's handler touched an
// evicted page there: the fault waited for a lock its own thread held (a writer queued behind it
// by another thread's mmap), and the process hung.
//
// The filter traps openat, mincore, futex_waitv, kill and rt_tgsigqueueinfo; the handler counts
// what it gets by number, reads pages of the paged heap (faults inside the handler), and answers
// EACCES or EPERM. The main thread walks the heap, opens a file through the sandbox itself (its
// own traps, answered EACCES), and another thread maps and unmaps all along (the writers); a
// forked child walks its copy too, so that the job has company and the pagers' kswapd threads
// wait with futex_waitv. Exits 0 when the handler saw exactly the program's own calls, in both
// processes, printing the heap's sum; 1, saying what it saw, otherwise.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif

enum { heap_mib = 40, own_opens = 256 };  // a page in every 40 of round 1

static unsigned char* heap;
static size_t heap_bytes = (size_t)heap_mib << 20;
static atomic_ulong traps_openat, traps_other, handler_sum;
static atomic_int other_nr = -1;
static atomic_bool done;

static void on_sigsys(int sig, siginfo_t* si, void* ucv) {
  (void)sig;
  ucontext_t* uc = ucv;
  // The handler's own reads of the heap: faults here, pages brought back by the pager.
  unsigned long s = 0;
  const size_t pages = heap_bytes / 4096;
  for (size_t k = 0, i = (size_t)si->si_call_addr % pages; k < 8; ++k, i = (i * 7919 + 13) % pages)
    s += heap[i * 4096 + 5];
  atomic_fetch_add(&handler_sum, s);
  if (si->si_syscall == SYS_openat) {
    atomic_fetch_add(&traps_openat, 1);
    uc->uc_mcontext.gregs[REG_RAX] = -EACCES;
  } else {
    atomic_fetch_add(&traps_other, 1);
    atomic_store(&other_nr, si->si_syscall);
    uc->uc_mcontext.gregs[REG_RAX] = -EPERM;
  }
}

static void* mapper(void* arg) {
  (void)arg;
  while (!atomic_load(&done)) {
    void* p = mmap(NULL, 64 << 10, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) continue;
    memset(p, 1, 4096);
    munmap(p, 64 << 10);
  }
  return NULL;
}

#define TRAP_NR(nr) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), \
                    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP)

int main(void) {
  heap = malloc(heap_bytes);
  if (!heap) return 1;
  for (size_t i = 0; i < heap_bytes; ++i) heap[i] = (unsigned char)(i / 4096 * 31 + i % 251);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_sigsys;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  if (sigaction(SIGSYS, &sa, NULL) != 0) return 1;
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      TRAP_NR(SYS_openat),
      TRAP_NR(SYS_mincore),
      TRAP_NR(SYS_futex_waitv),
      TRAP_NR(SYS_kill),
      TRAP_NR(SYS_rt_tgsigqueueinfo),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {sizeof f / sizeof f[0], f};
  fflush(stdout);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) != 0) {
    fprintf(stderr, "trapping_sandbox: cannot install the filter: %s\n", strerror(errno));
    return 1;
  }
  const pid_t child = fork();
  if (child < 0) return 1;
  if (child == 0) {
    unsigned long s = 0;
    for (int round = 0; round < 3; ++round)
      for (size_t i = 0; i < heap_bytes; i += 4096) s += heap[i + 7];
    if (atomic_load(&traps_other) != 0 || atomic_load(&traps_openat) != 0) {
      fprintf(stderr, "trapping_sandbox: the child's handler got calls it never made (last %d)\n",
              atomic_load(&other_nr));
      _exit(1);
    }
    _exit(s == 0 ? 2 : 0);
  }
  pthread_t t;
  if (pthread_create(&t, NULL, mapper, NULL) != 0) return 1;
  unsigned long sum = 0;
  int refused = 0;
  const size_t every = heap_bytes / 4096 / own_opens;
  for (int round = 0; round < 4; ++round)
    for (size_t i = 0; i < heap_bytes; i += 4096) {
      sum += heap[i] + heap[i + 4095];
      if (round == 1 && (i / 4096) % every == 0) {
        errno = 0;
        const int fd = open("/etc/hostname", O_RDONLY);  // openat: the program's own trap
        if (fd < 0 && errno == EACCES) ++refused;
        else if (fd >= 0) close(fd);
      }
    }
  atomic_store(&done, 1);
  pthread_join(t, NULL);
  int status = 0;
  if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "trapping_sandbox: the child ended with status %#x\n", status);
    return 1;
  }
  const unsigned long opens = atomic_load(&traps_openat), others = atomic_load(&traps_other);
  fprintf(stderr,
          "trapping_sandbox: the handler saw %lu openat (%d the program's own), %lu other\n",
          opens, refused, others);
  if (opens != (unsigned long)refused || refused != own_opens || others != 0) {
    fprintf(stderr, "trapping_sandbox: the handler got calls the program never made (last %d)\n",
            atomic_load(&other_nr));
    return 1;
  }
  printf("sum %lu\n", sum);
  return 0;
}
