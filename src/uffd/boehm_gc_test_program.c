// Boehm GC (libgc, the collector of guile, inkscape, w3m), as a program uses it: a thread builds
// a list only its own stack holds, then waits in read(2) into a collected buffer while the main
// thread collects again and again. The collector stops the reader with a signal and scans its
// stack from the stack pointer its handler finds: if that is not the reader's stack (a handler
// run on another stack while the read waits), the list is freed under the reader, and its walk
// finds other data or faults.
//
// Prints the bytes read and the list's check. Exits 0, or 1 when the list is not intact.
#define GC_THREADS
#include <gc/gc.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

enum { nodes = 200000, words = 7, rounds = 200 };

struct node {
  struct node* next;
  long v[words];
};

static int fds[2];

static void* reader(void* arg) {
  (void)arg;
  struct node* head = NULL;
  for (long i = 0; i < nodes; ++i) {
    struct node* n = GC_MALLOC(sizeof *n);
    n->next = head;
    for (int k = 0; k < words; ++k) n->v[k] = i * words + k;
    head = n;
  }
  char* buf = GC_MALLOC_ATOMIC(1 << 16);
  long total = 0;
  for (;;) {
    const ssize_t r = read(fds[0], buf, 1 << 16);
    if (r <= 0) break;
    total += r;
  }
  long bad = 0, i = nodes - 1;
  for (struct node* n = head; n; n = n->next, --i)
    for (int k = 0; k < words; ++k) bad += n->v[k] != i * words + k;
  printf("read %ld bytes; list: %ld wrong words, %ld nodes missing\n", total, bad, i + 1);
  return (void*)(bad != 0 || i != -1);
}

int main(void) {
  GC_INIT();
  if (pipe(fds) != 0) return 1;
  pthread_t t;
  if (pthread_create(&t, NULL, reader, NULL) != 0) return 1;
  for (int round = 0; round < rounds; ++round) {
    for (int i = 0; i < 20000; ++i) {
      long* p = GC_MALLOC(64);
      p[0] = i;
    }
    GC_gcollect();
    if (round % 20 == 0 && write(fds[1], "x", 1) != 1) return 1;
    usleep(2000);
  }
  close(fds[1]);
  void* failed = NULL;
  pthread_join(t, &failed);
  return failed != NULL;
}
