/* A program that allocates until malloc says no, run under `uswap run` with the arena exhausted or
 * an allocation inside the pager refused (USWAP_FAIL_INJECT, uswap/base/fault_inject.h). It checks
 * that the refusal reaches it as its libc would give it: malloc returns NULL with errno ENOMEM,
 * mmap returns MAP_FAILED with ENOMEM, never a crash; that every block it got keeps its contents;
 * and that it can still free and go on allocating.
 *   until-null   1 MiB blocks (one page of each written) until malloc returns NULL, at most
 *                `cap` MiB (argv[2], at most and by default 16384); then an anonymous mmap must fail the same
 *                way when the arena is what ran out ("mmap" as argv[3]); free every other
 *                block and allocate 16 again, which must succeed
 *   touch        write and read back 32 MiB in 4 KiB steps (paging with evictions refused keeps
 *                the pages resident: nothing is lost)
 * Exits 0 when every check holds; prints the number of blocks it got. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "c_check.h"

#define MiB ((size_t)1 << 20)

static uint64_t tag_of(size_t i) { return 0x9e3779b97f4a7c15ull * (i + 1); }

#define MAX_BLOCKS 16384
/* Static: with every arena mapping refused, not even this table could be malloc'ed. */
static void *blocks[MAX_BLOCKS];

static int until_null(size_t cap, int want_mmap_failure) {
  if (cap > MAX_BLOCKS) cap = MAX_BLOCKS;
  size_t n = 0;
  int err = 0;
  for (; n < cap; ++n) {
    errno = 0;
    void *p = malloc(MiB);
    if (!p) {
      err = errno;
      break;
    }
    *(uint64_t *)p = tag_of(n);
    blocks[n] = p;
  }
  printf("blocks before NULL: %zu\n", n);
  CHECK(n < cap);       /* malloc did say no */
  CHECK(err == ENOMEM); /* as libc says it */
  if (want_mmap_failure) {
    errno = 0;
    void *m = mmap(NULL, 64 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(m == MAP_FAILED);
    CHECK(errno == ENOMEM);
    if (m != MAP_FAILED) munmap(m, 64 * MiB);
  }
  for (size_t i = 0; i < n; ++i) CHECK(*(uint64_t *)blocks[i] == tag_of(i));
  /* Free and go on: freed blocks are allocated again. */
  size_t freed = 0;
  for (size_t i = 0; i < n; i += 2, ++freed) {
    free(blocks[i]);
    blocks[i] = NULL;
  }
  size_t again = 0;
  for (size_t i = 0; i < n && again < 16 && again < freed; i += 2, ++again) {
    blocks[i] = malloc(MiB);
    CHECK(blocks[i] != NULL);
    if (blocks[i]) *(uint64_t *)blocks[i] = tag_of(i);
  }
  CHECK(again == (freed < 16 ? freed : 16));
  for (size_t i = 0; i < n; ++i)
    if (blocks[i]) CHECK(*(uint64_t *)blocks[i] == tag_of(i));
  for (size_t i = 0; i < n; ++i) free(blocks[i]);
  return check_exit("fault_inject_test_program");
}

static int touch(void) {
  const size_t bytes = 32 * MiB;
  uint64_t *p = malloc(bytes);
  CHECK(p != NULL);
  if (!p) return check_exit("fault_inject_test_program");
  for (size_t i = 0; i < bytes / 8; i += 512) p[i] = tag_of(i);
  for (size_t i = 0; i < bytes / 8; i += 512) CHECK(p[i] == tag_of(i));
  free(p);
  return check_exit("fault_inject_test_program");
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "until-null";
  if (strcmp(mode, "touch") == 0) return touch();
  const size_t cap = argc > 2 ? strtoull(argv[2], NULL, 10) : 16384;
  return until_null(cap, argc > 3 && strcmp(argv[3], "mmap") == 0);
}
