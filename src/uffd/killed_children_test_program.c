// Forks 200 children and kills each at once, as strace's start-up probes do: most die before
// they return from fork, with the share their parent reserved for them in the job not yet
// adopted. Prints how many were killed; exits 0, or 1 when fork fails.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
int main(void) {
  char* heap = malloc(4u << 20);
  memset(heap, 1, 4u << 20);
  int killed = 0;
  for (int i = 0; i < 200; ++i) {
    pid_t pid = fork();
    if (pid == 0) { pause(); _exit(0); }
    if (pid < 0) { perror("fork"); return 1; }
    kill(pid, SIGKILL);
    int st;
    waitpid(pid, &st, 0);
    killed += WIFSIGNALED(st);
  }
  printf("killed %d\n", killed);
  return 0;
}
