// A server's worker as dovecot's imap-login is one: it chroots into an empty directory, where
// there is no /proc, then forks; parent and child each fill and read back 24 MiB. Under a job
// the child must stay in the job (it decides from /proc/self/ns/pid) and both must leave their
// statistics (written through a descriptor, not a path). Prints the sums; exits 0, or says what
// went wrong and exits 1. Needs CAP_SYS_CHROOT.
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static size_t fill_and_sum(unsigned seed) {
  const size_t n = 24u << 20;
  unsigned char* p = malloc(n);
  if (!p) {
    fprintf(stderr, "chroot_test: malloc failed\n");
    exit(1);
  }
  for (size_t i = 0; i < n; ++i) p[i] = (unsigned char)((i >> 12) * seed + (i & 7));
  size_t s = 0;
  for (size_t i = 0; i < n; i += 4096 + 1) s += p[i];
  free(p);
  return s;
}

int main(int argc, char** argv) {
  if (argc < 2 || chroot(argv[1]) != 0 || chdir("/") != 0) {
    perror("chroot_test: chroot");
    return 1;
  }
  const pid_t pid = fork();
  if (pid < 0) {
    perror("chroot_test: fork");
    return 1;
  }
  if (pid == 0) {
    printf("child %zu\n", fill_and_sum(3));
    fflush(stdout);
    _exit(0);
  }
  int st = 0;
  if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    fprintf(stderr, "chroot_test: the child failed (status %d)\n", st);
    return 1;
  }
  printf("parent %zu\n", fill_and_sum(5));
  return 0;
}
