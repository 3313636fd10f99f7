// A stop-the-world collector's handshake, as SBCL's and Boehm GC's: the collector signals a
// mutator thread, whose handler waits until the collector has walked the heap. The mutator maps
// and unmaps memory all the while, so the signal often lands in the middle of an mmap or munmap
// call; the collector's walk faults. Under a pager, the mutator's handler must not wait while the
// thread holds the pager's locks (its mmap, in user space, takes map_lock): the collector's
// faults would wait for them forever.
//
// Prints the heap's checksum; on stderr, how many stops found the mutator inside a mapping call
// (so the caller can see the case happened). Exits 0, or says what went wrong and exits 1.
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

enum { heap_mib = 32, stops = 600, chunk = 64 << 10 };

static uint8_t* heap;
static const size_t heap_len = (size_t)heap_mib << 20;
static atomic_int in_mapping_call, stopped, resume, done, inside_count;

static void die(const char* what) {
  fprintf(stderr, "stop_the_world: %s\n", what);
  exit(1);
}

static void on_stop(int sig) {
  (void)sig;
  if (atomic_load(&in_mapping_call)) atomic_fetch_add(&inside_count, 1);
  atomic_store(&stopped, 1);
  while (!atomic_load(&resume)) sched_yield();
  atomic_store(&resume, 0);
}

static void* mutator(void* arg) {
  (void)arg;
  while (!atomic_load(&done)) {
    atomic_store(&in_mapping_call, 1);
    uint8_t* p = mmap(NULL, chunk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    atomic_store(&in_mapping_call, 0);
    if (p == MAP_FAILED) die("mmap");
    for (size_t i = 0; i < chunk; i += 4096) p[i] = 1;
    atomic_store(&in_mapping_call, 1);
    const int r = munmap(p, chunk);
    atomic_store(&in_mapping_call, 0);
    if (r != 0) die("munmap");
  }
  return NULL;
}

int main(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGUSR1, &sa, NULL) != 0) die("sigaction");
  heap = mmap(NULL, heap_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (heap == MAP_FAILED) die("mmap of the heap");
  for (size_t i = 0; i < heap_len; i += 64) heap[i] = (uint8_t)(i * 2654435761u >> 24);
  pthread_t t;
  if (pthread_create(&t, NULL, mutator, NULL) != 0) die("pthread_create");
  uint64_t sum = 0;
  for (int round = 0; round < stops; ++round) {
    if (pthread_kill(t, SIGUSR1) != 0) die("pthread_kill");
    while (!atomic_load(&stopped)) sched_yield();
    atomic_store(&stopped, 0);
    // The walk: a slice of the heap, most of it evicted under a small limit.
    const size_t slice = heap_len / 8, at = (size_t)(round % 8) * slice;
    for (size_t i = at; i < at + slice; i += 4096) sum += heap[i]++;
    atomic_store(&resume, 1);
  }
  // On a busy machine the signal can miss every mapping call of those rounds, and where the
  // first stop lands the next ones land too: a signal sent as soon as the mutator resumes is
  // delivered as its handler returns, at the same place. So more stops, each sent once the
  // mutator is inside a mapping call again, whose walks only read (the printed sums stay the
  // plain run's), until a few of them land inside.
  volatile uint64_t read_sum = 0;
  for (int round = 0; round < 40 * stops && atomic_load(&inside_count) < 5; ++round) {
    for (unsigned spins = 0; !atomic_load(&in_mapping_call) && spins < (1u << 20); ++spins)
      if (spins % 1024 == 1023) sched_yield();
    if (pthread_kill(t, SIGUSR1) != 0) die("pthread_kill");
    while (!atomic_load(&stopped)) sched_yield();
    atomic_store(&stopped, 0);
    const size_t slice = heap_len / 8, at = (size_t)(round % 8) * slice;
    for (size_t i = at; i < at + slice; i += 4096) read_sum += heap[i];
    atomic_store(&resume, 1);
  }
  atomic_store(&done, 1);
  if (pthread_join(t, NULL) != 0) die("pthread_join");
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < heap_len; i += 64) h = (h ^ heap[i]) * 1099511628211ull;
  printf("walked %llu heap %016llx\n", (unsigned long long)sum, (unsigned long long)h);
  fprintf(stderr, "stop_the_world: %d stops found the mutator inside a mapping call\n",
          atomic_load(&inside_count));
  return 0;
}
