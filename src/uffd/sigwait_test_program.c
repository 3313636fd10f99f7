// A server's signal thread, as MariaDB's signal_hand and many daemons take their signals: every
// thread of the program blocks SIGTERM and SIGHUP and one waits for them with sigwait, while the
// program sends them to its own process (kill(getpid())), as a shutdown request does. Each must
// reach the waiting thread. A handler is installed for both too (MariaDB's logs "Got signal"):
// it runs only if the kernel gave a signal to a thread that does not block it, one the program
// never made (a pager's), and the waiting thread then never sees it: MariaDB's shutdown hangs.
// Memory is written and read back between the signals, so that a pager has work to do. Prints
// the count and exits 0, or says what went wrong and exits 1.
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static atomic_int strays;
static sem_t acked;
static sigset_t waited;

static void stray(int sig) {
  (void)sig;
  atomic_fetch_add(&strays, 1);
}

static void* waiter(void* arg) {
  (void)arg;
  for (;;) {
    int sig;
    if (sigwait(&waited, &sig) != 0) return NULL;
    sem_post(&acked);
  }
}

int main(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = stray;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
  sigemptyset(&waited);
  sigaddset(&waited, SIGTERM);
  sigaddset(&waited, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &waited, NULL);
  sem_init(&acked, 0, 0);
  pthread_t t;
  if (pthread_create(&t, NULL, waiter, NULL) != 0) return perror("pthread_create"), 1;

  const size_t len = 64u << 20;
  unsigned char* mem = malloc(len);
  if (!mem) return perror("malloc"), 1;
  const int rounds = 40;
  for (int i = 0; i < rounds; ++i) {
    for (size_t j = 0; j < len; j += 4096) mem[j] = (unsigned char)(i + j / 4096);
    kill(getpid(), i % 2 ? SIGHUP : SIGTERM);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    int r;
    while ((r = sem_timedwait(&acked, &until)) != 0 && errno == EINTR) {
    }
    if (r != 0 || atomic_load(&strays) != 0) {
      fprintf(stderr, "signal %d of %d did not reach the sigwait thread (%d taken by a handler)\n",
              i + 1, rounds, atomic_load(&strays));
      return 1;
    }
    for (size_t j = 0; j < len; j += 4096)
      if (mem[j] != (unsigned char)(i + j / 4096)) return fprintf(stderr, "wrong byte\n"), 1;
  }
  printf("sigwait: %d signals sent to the process reached the waiting thread\n", rounds);
  return 0;
}
