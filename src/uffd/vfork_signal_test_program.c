/* A vfork child that resets its signal handlers before exec, as gdb does when it starts its
 * inferior (and shells, and programs spawning helpers by hand), must leave its parent's handlers
 * alone: the child shares the parent's memory, not its kernel actions. Under `uswap run` the
 * shim keeps the program's handlers in a table of its own behind one entry point, and the
 * child's SIG_DFL for SIGCHLD once emptied the parent's entry: gdb never saw another SIGCHLD
 * and waited for ever. Checked here: after such a child, the parent's SIGCHLD handler runs for
 * a child that stops and one that exits, sigaction reads back its handler, sigaltstack the
 * alternate stack the parent set (the child disabled its own), and its own SIGBUS
 * handler still gets a SIGBUS that is not a pager fault (a read past the end of a file). The
 * program's memory is paged meanwhile (twice the 8 MiB limit of run_test.sh). Prints one line;
 * exits 0 when every check holds. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "c_check.h"

static volatile sig_atomic_t chld_seen, bus_seen;
static sigjmp_buf bus_jump;

static void on_chld(int sig, siginfo_t *si, void *uc) {
  (void)sig; (void)si; (void)uc;
  ++chld_seen;
}
static void on_bus(int sig) {
  (void)sig;
  ++bus_seen;
  siglongjmp(bus_jump, 1);
}

/* Waits up to 5 s for chld_seen to pass `was`. */
static int chld_after(sig_atomic_t was) {
  for (int i = 0; i < 5000 && chld_seen == was; ++i) {
    const struct timespec ms = {0, 1000 * 1000};
    nanosleep(&ms, NULL);
  }
  return chld_seen != was;
}

/* vfork, reset the handlers in the child as gdb's startup does, exec /bin/true. */
static void vfork_resetting_child(void) {
  const pid_t pid = vfork();
  if (pid == 0) {
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGCHLD, &dfl, NULL);
    sigaction(SIGBUS, &dfl, NULL);
    signal(SIGUSR1, SIG_DFL);
    stack_t off;
    memset(&off, 0, sizeof off);
    off.ss_flags = SS_DISABLE;
    sigaltstack(&off, NULL);
    execl("/bin/true", "true", (char *)NULL);
    _exit(127);
  }
  CHECK(pid > 0);
  int st = 0;
  CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

int main(void) {
  const size_t bytes = 16u << 20;
  uint64_t *mem = malloc(bytes);
  CHECK(mem != NULL);
  if (!mem) return 1;
  for (size_t i = 0; i < bytes / 8; ++i) mem[i] = i * 2654435761u;

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_chld;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  CHECK(sigaction(SIGCHLD, &sa, NULL) == 0);
  CHECK(signal(SIGBUS, on_bus) != SIG_ERR);
  static char alt[64 * 1024];
  stack_t ss;
  memset(&ss, 0, sizeof ss);
  ss.ss_sp = alt;
  ss.ss_size = sizeof alt;
  CHECK(sigaltstack(&ss, NULL) == 0);

  sig_atomic_t was = chld_seen;
  vfork_resetting_child();
  CHECK(chld_after(was));  /* the vfork child's exit */

  struct sigaction now;
  CHECK(sigaction(SIGCHLD, NULL, &now) == 0);
  CHECK(now.sa_sigaction == on_chld && (now.sa_flags & SA_SIGINFO));
  stack_t now_ss;
  CHECK(sigaltstack(NULL, &now_ss) == 0);
  CHECK(now_ss.ss_sp == alt && now_ss.ss_size == sizeof alt && !(now_ss.ss_flags & SS_DISABLE));

  /* A child that stops (as gdb's inferior does at each event), then exits. */
  was = chld_seen;
  const pid_t pid = fork();
  if (pid == 0) {
    raise(SIGSTOP);
    _exit(0);
  }
  CHECK(pid > 0);
  int st = 0;
  CHECK(waitpid(pid, &st, WUNTRACED) == pid && WIFSTOPPED(st));
  CHECK(chld_after(was));
  was = chld_seen;
  kill(pid, SIGCONT);
  CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st));
  CHECK(chld_after(was));

  /* A SIGBUS of the program's own: a page of a file mapped past its end. */
  char path[] = "/tmp/vfork_signal_XXXXXX";
  const int fd = mkstemp(path);
  CHECK(fd >= 0);
  unlink(path);
  CHECK(ftruncate(fd, 4096) == 0);
  volatile char *f = mmap(NULL, 8192, PROT_READ, MAP_SHARED, fd, 0);
  CHECK(f != MAP_FAILED);
  if (f != MAP_FAILED) {
    if (sigsetjmp(bus_jump, 1) == 0) (void)f[4096];
    munmap((void *)f, 8192);
  }
  close(fd);
  CHECK(bus_seen == 1);

  size_t bad = 0;
  for (size_t i = 0; i < bytes / 8; ++i) bad += mem[i] != i * 2654435761u;
  CHECK(bad == 0);
  free(mem);
  printf("vfork child's resets: parent's SIGCHLD handler %s, its SIGBUS handler %s\n",
         chld_seen >= 3 ? "kept" : "lost", bus_seen == 1 ? "kept" : "lost");
  return check_exit("vfork_signal_test_program");
}
