/* A statically linked program (no preload shim can reach it) that the kernel-access tests exec
 * after installing the filter: it inherits the filter and must run normally, never seeing a
 * SIGSYS, because it never passes a pointer into the arena.
 *
 *   kernel_access_static_child run     system calls with stack and heap buffers (read, write,
 *                                      stat, getdents64, openat, poll, nanosleep, futex wake,
 *                                      readv), then io_uring_setup, which the inherited filter
 *                                      refuses with ENOSYS: prints "io_uring_setup: ENOSYS";
 *                                      forks with fork() and with a raw clone (a filter that
 *                                      trapped either would kill it: it has no SIGSYS handler)
 *   kernel_access_static_child echo A B  prints its arguments and $KA_ECHO, one per line
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int fail(const char* what) {
  printf("static child: %s failed: %s\n", what, strerror(errno));
  return 1;
}

int main(int argc, char** argv) {
  if (argc >= 2 && strcmp(argv[1], "echo") == 0) {
    for (int i = 2; i < argc; ++i) printf("%s\n", argv[i]);
    const char* e = getenv("KA_ECHO");
    printf("KA_ECHO=%s\n", e ? e : "(unset)");
    return 0;
  }
  if (argc < 2 || strcmp(argv[1], "run") != 0) return 2;
  struct stat st;
  if (stat("/", &st) != 0 || !S_ISDIR(st.st_mode)) return fail("stat");
  int fd = open("/proc/self/status", O_RDONLY);
  if (fd < 0) return fail("open");
  char buf[4096];
  if (read(fd, buf, sizeof buf) <= 0) return fail("read");
  close(fd);
  fd = open("/", O_RDONLY | O_DIRECTORY);
  if (fd < 0) return fail("open /");
  char* dents = malloc(1 << 16);
  if (syscall(SYS_getdents64, fd, dents, 1 << 16) <= 0) return fail("getdents64");
  free(dents);
  close(fd);
  int p[2];
  if (pipe(p) != 0) return fail("pipe");
  struct iovec iov[2] = {{"ab", 2}, {"cd", 2}};
  if (writev(p[1], iov, 2) != 4) return fail("writev");
  struct pollfd pfd = {p[0], POLLIN, 0};
  if (poll(&pfd, 1, 1000) != 1) return fail("poll");
  if (read(p[0], buf, 4) != 4 || memcmp(buf, "abcd", 4) != 0) return fail("read pipe");
  struct timespec ts = {0, 1000000};
  if (nanosleep(&ts, NULL) != 0) return fail("nanosleep");
  int word = 0;
  if (syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0) < 0) return fail("futex");
  for (int raw = 0; raw < 2; ++raw) {
    const long pid = raw ? syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0) : fork();
    if (pid == 0) _exit(42);
    int status = 0;
    if (pid < 0 || waitpid((pid_t)pid, &status, 0) != pid || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 42)
      return fail(raw ? "a raw clone fork" : "fork");
  }
  memset(buf, 0, sizeof buf);
  long r = syscall(SYS_io_uring_setup, 1, buf);
  printf("io_uring_setup: %s\n", r < 0 && errno == ENOSYS ? "ENOSYS" : "allowed");
  printf("static child ok\n");
  return 0;
}
