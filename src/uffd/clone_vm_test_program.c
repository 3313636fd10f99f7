// Chromium's ChrootToSafeEmptyDir: a clone sharing memory, with CLONE_VFORK and a thread
// pointer of its own (a block of zeros), whose child calls chdir and _exit, 20 times while a
// 32 MiB heap is paged. Prints how many children failed and the heap's sum; exits 1 if any did.
// (The shim's _exit ran pager code in such a child, which read TLS through the zeros: SIGSEGV.)
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
static int child(void* arg) {
  (void)arg;
  if (chdir("/") != 0) _exit(2);
  _exit(0);
}
int main(void) {
  size_t n = 32u << 20, s = 0;
  unsigned char* heap = malloc(n);
  for (size_t i = 0; i < n; ++i) heap[i] = (unsigned char)(i >> 12);
  int bad = 0;
  for (int round = 0; round < 20; ++round) {
    static char stack_buf[65536] __attribute__((aligned(16)));
    static char tls_buf[65536] __attribute__((aligned(64)));
    memset(tls_buf, 0, sizeof tls_buf);
    pid_t pid = clone(child, stack_buf + sizeof stack_buf,
                      CLONE_VM | CLONE_VFORK | CLONE_SETTLS | SIGCHLD, NULL, NULL, tls_buf, NULL);
    if (pid < 0) { perror("clone"); return 1; }
    int st = 0;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) ++bad;
  }
  for (size_t i = 0; i < n; i += 4096) s += heap[i];
  printf("children that failed %d, sum %zu\n", bad, s);
  return bad != 0;
}
