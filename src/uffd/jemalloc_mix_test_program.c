// A program linked with jemalloc that mixes its interfaces, as jemalloc allows: blocks from
// malloc freed with dallocx or sdallocx, blocks from mallocx freed with free or resized with
// realloc, rallocx with MALLOCX_ZERO and alignment, sizes from sallocx, nallocx and xallocx.
// Each block carries a pattern checked before it is resized or freed; 40 MiB live at once, so
// under a small limit the blocks are paged out in between. Prints a checksum of what it read;
// exits 0, or says what went wrong and exits 1. (The shim once took mallocx's blocks for glibc's:
// "free(): invalid pointer".)
#include <jemalloc/jemalloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { blocks = 20000 };

static void die(const char* what, int i) {
  fprintf(stderr, "jemalloc_mix: %s (block %d)\n", what, i);
  exit(1);
}

static size_t size_of(int i) { return 200 + (size_t)(i % 61) * 64; }

static void fill(unsigned char* p, size_t n, int i) {
  for (size_t j = 0; j < n; ++j) p[j] = (unsigned char)(i * 7 + j);
}

static uint64_t check(const unsigned char* p, size_t n, int i) {
  uint64_t s = 0;
  for (size_t j = 0; j < n; ++j) {
    if (p[j] != (unsigned char)(i * 7 + j)) die("a block read back other bytes", i);
    s += p[j];
  }
  return s;
}

int main(void) {
  static unsigned char* p[blocks];
  uint64_t sum = 0;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < blocks; ++i) {
      const size_t n = size_of(i);
      switch (i % 3) {
        case 0: p[i] = malloc(n); break;
        case 1: p[i] = mallocx(n, 0); break;
        default: p[i] = mallocx(n, MALLOCX_ALIGN(4096)); break;
      }
      if (!p[i]) die("allocation failed", i);
      if (i % 3 == 2 && ((uintptr_t)p[i] & 4095)) die("mallocx ignored MALLOCX_ALIGN", i);
      if (sallocx(p[i], 0) < n || nallocx(n, 0) < n) die("a real size below the size asked", i);
      fill(p[i], n, i);
    }
    for (int i = 0; i < blocks; ++i) {
      const size_t n = size_of(i);
      sum += check(p[i], n, i);
      if (xallocx(p[i], n, 0, 0) < n) die("xallocx shrank a block", i);
      const size_t old_real = sallocx(p[i], 0);
      switch (i % 4) {
        case 0: p[i] = realloc(p[i], 2 * n); break;
        case 1: p[i] = rallocx(p[i], 2 * n, MALLOCX_ZERO); break;
        case 2: p[i] = rallocx(p[i], 2 * n, MALLOCX_ALIGN(64) | MALLOCX_ZERO); break;
        default: break;
      }
      if (!p[i]) die("resizing failed", i);
      if (i % 4 == 1 || i % 4 == 2)  // zeros from the old real size on, jemalloc's boundary
        for (size_t j = old_real; j < 2 * n; ++j)
          if (p[i][j]) die("rallocx with MALLOCX_ZERO left garbage past the old size", i);
      if (i % 4 == 2 && ((uintptr_t)p[i] & 63)) die("rallocx ignored MALLOCX_ALIGN", i);
    }
    for (int i = 0; i < blocks; ++i) {
      const size_t n = size_of(i);
      sum += check(p[i], n, i);
      switch (i % 5) {
        case 0: free(p[i]); break;
        case 1: dallocx(p[i], 0); break;
        case 2: sdallocx(p[i], sallocx(p[i], 0), 0); break;
        case 3: sum += malloc_usable_size(p[i]) >= n; free(p[i]); break;
        default: dallocx(p[i], MALLOCX_TCACHE_NONE); break;
      }
    }
  }
  printf("jemalloc_mix %llu\n", (unsigned long long)sum);
  return 0;
}
