// Address-space reservations made at an mmap hint, as two kinds of real programs make them
// (run_test.sh cli runs it under `uswap run`):
//   strict: the JVM's ZGC. Reserves 1 GiB PROT_NONE at hints from 4 TiB up in 512 MiB steps,
//           unmaps any reservation placed elsewhere and tries the next hint; at the hint, maps
//           shared memory (a memfd) over the start of it and reads back what it wrote there.
//           Prints the attempts it took, or fails after 8192.
//   any:    V8 and HotSpot's heaps. Reserves 1 GiB PROT_NONE at a hint, takes whatever it gets,
//           commits 48 MiB with mprotect, writes and reads it back. Prints a checksum.
//   near:   LuaJIT's JIT. Maps 64 KiB at hints within reach of its own code (rel32), unmaps any
//           placement out of reach, runs code written there.
//   huge:   MariaDB's buffer pool. Reserves 8 TiB PROT_NONE without a hint (more than any
//           arena), commits 48 MiB at its start with mmap MAP_FIXED and 1 MiB at its end,
//           writes and reads both back, decommits part of the first with MAP_FIXED PROT_NONE,
//           then changes, advises and unmaps the whole of it, twice over. Prints a checksum.
// Exit status 0 and the line, or 1 with the reason.
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define GIB (1ul << 30)
#define MIB (1ul << 20)

static int strict(void) {
  const int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
  for (unsigned attempt = 1; attempt <= 8192; ++attempt) {
    char* hint = (char*)(4ul << 40) + (attempt - 1) * (512 * MIB);
    char* r = mmap(hint, GIB, PROT_NONE, flags, -1, 0);
    if (r == MAP_FAILED) continue;
    if (r != hint) {
      munmap(r, GIB);
      continue;
    }
    const int fd = memfd_create("heap", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, 16 * MIB) != 0) return perror("memfd"), 1;
    char* heap = mmap(r, 16 * MIB, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
    if (heap != r) return perror("mmap MAP_FIXED memfd"), 1;
    for (size_t i = 0; i < 16 * MIB; i += 4096) heap[i] = (char)(i >> 12);
    for (size_t i = 0; i < 16 * MIB; i += 4096)
      if (heap[i] != (char)(i >> 12)) return fprintf(stderr, "wrong byte at %zu\n", i), 1;
    printf("strict: reserved at the hint after %u attempts\n", attempt);
    return 0;
  }
  fprintf(stderr, "strict: no reservation at any of 8192 hints\n");
  return 1;
}

static int any(void) {
  char* r =
      mmap((void*)(6ul << 40), GIB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (r == MAP_FAILED) return perror("mmap"), 1;
  if (mprotect(r, 48 * MIB, PROT_READ | PROT_WRITE) != 0) return perror("mprotect"), 1;
  uint64_t x = 88172645463325252ull, sum = 0;
  for (size_t i = 0; i < 48 * MIB; i += 8) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    memcpy(r + i, &x, 8);
  }
  for (size_t i = 0; i < 48 * MIB; i += 8) {
    uint64_t v;
    memcpy(&v, r + i, 8);
    sum = sum * 31 + v;
  }
  printf("any: sum %llu\n", (unsigned long long)sum);
  return 0;
}

// LuaJIT's machine-code area (lj_mcode.c, mcode_alloc): 31 tries at pseudo-random 64 KiB-aligned
// hints within a 1 GiB reach of the program's code, unmapping every placement out of reach; then
// code written there, made executable and called.
static int near(void) {
  const uintptr_t target = (uintptr_t)(void*)&near & ~(uintptr_t)0xffff;
  const uintptr_t range = (1ul << 30) - (2ul << 20), size = 64 * 1024;
  uint64_t x = 88172645463325252ull;
  for (int attempt = 1; attempt <= 31; ++attempt) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    const uintptr_t hint = target - range + (x & ((1ul << 31) - 0x10000)) % (2 * range - size);
    unsigned char* p = mmap((void*)(hint & ~(uintptr_t)0xffff), size, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) continue;
    if ((uintptr_t)p + size - target < range || target - (uintptr_t)p < range) {
      static const unsigned char code[] = {0xb8, 42, 0, 0, 0, 0xc3};  // mov $42, %eax; ret
      memcpy(p, code, sizeof code);
      if (mprotect(p, size, PROT_READ | PROT_EXEC) != 0) return perror("mprotect"), 1;
      int (*fn)(void) = (int (*)(void))(void*)p;
      printf("near: code placed within reach ran and returned %d\n", fn());
      return munmap(p, size) == 0 ? 0 : 1;
    }
    munmap(p, size);
  }
  fprintf(stderr, "near: no mapping within reach of the code in 31 tries\n");
  return 1;
}

static uint64_t fill_and_sum(char* p, size_t len, uint64_t seed) {
  uint64_t x = seed, sum = 0;
  for (size_t i = 0; i < len; i += 8) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    memcpy(p + i, &x, 8);
  }
  for (size_t i = 0; i < len; i += 8) {
    uint64_t v;
    memcpy(&v, p + i, 8);
    sum = sum * 31 + v;
  }
  return sum;
}

static int huge(void) {
  const size_t size = 8ul << 40, commit = 48 * MIB, tail = MIB;
  const int rw = PROT_READ | PROT_WRITE, fixed = MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED;
  uint64_t sum = 0;
  for (int round = 0; round < 2; ++round) {
    char* r = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r == MAP_FAILED) return perror("mmap 8 TiB PROT_NONE"), 1;
    if (mmap(r, commit, rw, fixed, -1, 0) != r) return perror("commit the start"), 1;
    if (madvise(r, commit, MADV_DONTDUMP) != 0) return perror("madvise MADV_DONTDUMP"), 1;
    char* end = r + size - tail;
    if (mmap(end, tail, rw, fixed, -1, 0) != end) return perror("commit the end"), 1;
    sum = sum * 31 + fill_and_sum(r, commit, 88172645463325252ull + round);
    sum = sum * 31 + fill_and_sum(end, tail, 1234567ull + round);
    if (mmap(r + commit / 2, commit / 2, PROT_NONE, fixed | MAP_NORESERVE, -1, 0) != r + commit / 2)
      return perror("decommit"), 1;
    for (size_t i = 0; i < commit / 2; i += 8) sum = sum * 31 + (unsigned char)r[i];
    if (mprotect(r, size, PROT_READ) != 0) return perror("mprotect the whole"), 1;
    for (size_t i = 0; i < tail; i += 4096) sum = sum * 31 + (unsigned char)end[i];
    if (madvise(r, size, MADV_DONTNEED) != 0) return perror("madvise the whole"), 1;
    if (r[0] != 0 || end[tail - 1] != 0) return fprintf(stderr, "not zero after DONTNEED\n"), 1;
    if (munmap(r, size) != 0) return perror("munmap the whole"), 1;
  }
  printf("huge: sum %llu\n", (unsigned long long)sum);
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "strict") == 0) return strict();
  if (argc == 2 && strcmp(argv[1], "any") == 0) return any();
  if (argc == 2 && strcmp(argv[1], "near") == 0) return near();
  if (argc == 2 && strcmp(argv[1], "huge") == 0) return huge();
  fprintf(stderr, "usage: %s strict|any|near|huge\n", argv[0]);
  return 2;
}
