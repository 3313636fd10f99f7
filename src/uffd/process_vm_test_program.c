// Copies between two processes of one job with process_vm_readv and process_vm_writev, as MPI's
// single-copy transfers make them (Open MPI's vader BTL with CMA), while the memory copied is
// paged out: the kernel's copy cannot fault in another pager's page, so without the job's
// help a copy stops short (EFAULT, or a short count) at the first page not resident.
//
// A parent and its forked child each fill a heap larger than the limit and push it out with a
// second one, then both at once read the other's heap, a MiB at a time into a buffer outside
// the heap (.bss); the child then reads the parent's whole heap in one call into a heap buffer
// of its own (more than one pin budget), and writes a new pattern into the parent's heap,
// which the parent then checks. Prints checksums of what was read and "ok"; exits 0, or says
// what went wrong and exits 1.
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

enum { heap_mib = 24, chunk = 1 << 20 };
static const size_t len = (size_t)heap_mib << 20;
static uint8_t outside[chunk];  // not in the pager's arena

static uint8_t pattern(size_t i, unsigned which) {
  return (uint8_t)((i * 2654435761u >> 13) ^ (i >> 12) ^ (which * 0x5bu));
}

static void die(const char* who, const char* what) {
  fprintf(stderr, "process_vm (%s): %s\n", who, what);
  exit(1);
}

static uint8_t* filled(unsigned which) {
  uint8_t* p = malloc(len);
  uint8_t* push = malloc(len);
  if (!p || !push) die("fill", "cannot allocate");
  for (size_t i = 0; i < len; ++i) p[i] = pattern(i, which);
  for (size_t i = 0; i < len; i += 64) push[i] = (uint8_t)i;  // the limit is below both
  free(push);
  return p;
}

// Reads [remote, remote + len) of pid a MiB at a time into `outside`; the checksum, after
// checking every byte against pattern `which`.
static uint64_t read_outside(const char* who, pid_t pid, const uint8_t* remote, unsigned which) {
  uint64_t sum = 0;
  for (size_t off = 0; off < len;) {
    struct iovec l = {outside, chunk}, r = {(void*)(remote + off), chunk};
    const ssize_t n = process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (n <= 0) {
      fprintf(stderr, "process_vm (%s): process_vm_readv at %zu of the other's heap: %s\n", who,
              off, n < 0 ? strerror(errno) : "nothing read");
      exit(1);
    }
    for (ssize_t i = 0; i < n; ++i) {
      if (outside[i] != pattern(off + (size_t)i, which)) die(who, "read a wrong byte");
      sum = sum * 31 + outside[i];
    }
    off += (size_t)n;
  }
  return sum;
}

int main(void) {
  uint8_t* mine = filled(1);
  int down[2], up[2];
  if (pipe(down) != 0 || pipe(up) != 0) die("parent", "pipe");
  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child < 0) die("parent", "fork");
  if (child == 0) {
    uint8_t* theirs = filled(2);
    if (write(up[1], &theirs, sizeof theirs) != sizeof theirs) die("child", "pipe write");
    const uint64_t sum = read_outside("child", parent, mine, 1);  // the parent's copy of it
    // The parent's whole heap at once, into this one's own paged heap.
    uint8_t* copy = malloc(len);
    if (!copy) die("child", "cannot allocate");
    struct iovec l = {copy, len}, r = {mine, len};
    const ssize_t n = process_vm_readv(parent, &l, 1, &r, 1, 0);
    if (n != (ssize_t)len) {
      fprintf(stderr, "process_vm (child): one process_vm_readv of %zu bytes returned %zd (%s)\n",
              len, n, n < 0 ? strerror(errno) : "short");
      exit(1);
    }
    for (size_t i = 0; i < len; i += 511)
      if (copy[i] != pattern(i, 1)) die("child", "the whole read copied a wrong byte");
    free(copy);
    // A new pattern into the parent's heap, from outside the arena.
    for (size_t off = 0; off < len; off += chunk) {
      for (size_t i = 0; i < chunk; ++i) outside[i] = pattern(off + i, 3);
      struct iovec wl = {outside, chunk}, wr = {mine + off, chunk};
      const ssize_t w = process_vm_writev(parent, &wl, 1, &wr, 1, 0);
      if (w != chunk) {
        fprintf(stderr, "process_vm (child): process_vm_writev at %zu returned %zd (%s)\n", off, w,
                w < 0 ? strerror(errno) : "short");
        exit(1);
      }
    }
    printf("child read %016llx\n", (unsigned long long)sum);
    fflush(stdout);
    char done;
    if (read(down[0], &done, 1) != 1) die("child", "pipe read");  // the parent read this heap
    _exit(0);
  }
  uint8_t* theirs = NULL;
  if (read(up[0], &theirs, sizeof theirs) != sizeof theirs) die("parent", "pipe read");
  const uint64_t sum = read_outside("parent", child, theirs, 2);
  if (write(down[1], "x", 1) != 1) die("parent", "pipe write");
  int st;
  if (waitpid(child, &st, 0) != child || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
    die("parent", "the child failed");
  for (size_t i = 0; i < len; ++i)
    if (mine[i] != pattern(i, 3)) die("parent", "the child's writes are not in this heap");
  printf("parent read %016llx\nok\n", (unsigned long long)sum);
  return 0;
}
