// A runtime that manages its own memory as SBCL does: its heap mapped through the C library's
// syscall() (syscall(SYS_mmap, ...) at a hint), and changed through it (mprotect, madvise,
// mremap, munmap). Under a pager the heap must be routed: the caller checks that it pages.
// Prints the heap's checksums; exits 0, or says what went wrong and exits 1.
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { heap_mib = 48 };

static uint8_t* heap;
static size_t heap_len = (size_t)heap_mib << 20;

static void die(const char* what) {
  fprintf(stderr, "raw_syscall: %s\n", what);
  exit(1);
}

static void* map(size_t len, void* hint) {
  long r = syscall(SYS_mmap, hint, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0L);
  if (r == -1) die("syscall(SYS_mmap) failed");
  return (void*)r;
}

static uint64_t checksum(const uint8_t* p, size_t len) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < len; i += 64) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

int main(void) {
  heap = map(heap_len, (void*)0x1000000000);
  for (size_t i = 0; i < heap_len; i += 64) heap[i] = (uint8_t)(i * 2654435761u >> 24);
  // A guard page and a discarded range, as a collector's: zeros read back.
  if (syscall(SYS_mprotect, heap + heap_len - 4096, 4096, PROT_NONE) != 0) die("mprotect");
  if (syscall(SYS_mprotect, heap + heap_len - 4096, 4096, PROT_READ | PROT_WRITE) != 0)
    die("mprotect back");
  if (syscall(SYS_madvise, heap + (1 << 20), 1 << 20, MADV_DONTNEED) != 0) die("madvise");
  for (size_t i = 0; i < (1 << 20); i += 64)
    if (heap[(1 << 20) + i]) die("a discarded page did not read back as zeros");
  printf("heap %016llx\n", (unsigned long long)checksum(heap, heap_len));

  for (int pass = 0; pass < 3; ++pass)
    for (size_t i = 0; i < heap_len; i += 4096) heap[i] += 1;
  printf("written %016llx\n", (unsigned long long)checksum(heap, heap_len));
  // The heap grows in place or moves, contents kept.
  long grown = syscall(SYS_mremap, heap, heap_len, heap_len * 2, MREMAP_MAYMOVE);
  if (grown == -1) die("syscall(SYS_mremap) failed");
  heap = (uint8_t*)grown;
  printf("grown %016llx\n", (unsigned long long)checksum(heap, heap_len));
  for (size_t i = heap_len; i < 2 * heap_len; i += 4096)
    if (heap[i]) die("the grown part did not read as zeros");
  heap_len *= 2;
  if (syscall(SYS_munmap, heap, heap_len) != 0) die("munmap");
  return 0;
}
