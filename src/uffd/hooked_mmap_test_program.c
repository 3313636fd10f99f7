// A program linked with hooked_mmap_test_lib (memory calls hooked as tcmalloc hooks them): a
// file mapped shared, changed, grown with mremap and unmapped, which the shim passes on to the
// hooks, and an anonymous heap, which it routes. Prints the checksums; on stderr how many calls
// reached the hooks (the caller requires some: the path it tests was taken). Exits 0, or says
// what went wrong and exits 1.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

extern long hooked_mmap_calls;

enum { heap_mib = 48, file_pages = 64 };

static void die(const char* what) {
  fprintf(stderr, "hooked_mmap: %s\n", what);
  exit(1);
}

static uint64_t checksum(const uint8_t* p, size_t len) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < len; i += 64) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

int main(void) {
  char path[] = "/tmp/hooked_mmap.XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) die("mkstemp");
  unlink(path);
  const size_t page = 4096, file_len = file_pages * page;
  if (ftruncate(fd, 2 * file_len) != 0) die("ftruncate");
  for (int round = 0; round < 50; ++round) {
    uint8_t* f = mmap(NULL, file_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (f == MAP_FAILED) die("mmap of the file");
    for (size_t i = 0; i < file_len; i += 64) f[i] += (uint8_t)(i >> 6) + (uint8_t)round;
    uint8_t* g = mremap(f, file_len, 2 * file_len, MREMAP_MAYMOVE);
    if (g == MAP_FAILED) die("mremap of the file");
    for (size_t i = file_len; i < 2 * file_len; i += 64) g[i] ^= (uint8_t)round;
    if (munmap(g, 2 * file_len) != 0) die("munmap of the file");
  }
  uint8_t* f = mmap(NULL, 2 * file_len, PROT_READ, MAP_SHARED, fd, 0);
  if (f == MAP_FAILED) die("mmap of the file to read");
  printf("file %016llx\n", (unsigned long long)checksum(f, 2 * file_len));
  munmap(f, 2 * file_len);

  const size_t heap_len = (size_t)heap_mib << 20;
  uint8_t* heap = mmap(NULL, heap_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (heap == MAP_FAILED) die("mmap of the heap");
  for (int pass = 0; pass < 3; ++pass)
    for (size_t i = 0; i < heap_len; i += 64) heap[i] += (uint8_t)(i * 2654435761u >> 24);
  printf("heap %016llx\n", (unsigned long long)checksum(heap, heap_len));
  if (munmap(heap, heap_len) != 0) die("munmap of the heap");
  fprintf(stderr, "hooked_mmap: %ld calls reached the hooks\n", hooked_mmap_calls);
  return 0;
}
