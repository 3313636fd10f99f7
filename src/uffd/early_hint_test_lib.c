// A library of the early-hint program whose constructor maps memory at an address of its own
// choosing and hands it to the kernel at once, as Chromium's PartitionAlloc does on its first
// malloc (a random hint below 64 TiB, then prctl(PR_SET_VMA_ANON_NAME) on the reservation): it
// runs before the shim's constructor. Under `uswap run` with the seccomp filter an ancestor
// installed (user-mode-only userfaultfd), the hint lies inside the range the filter tests, where
// a call with that address traps while no handler exists yet: the previous shim let the kernel
// place the mapping there, and the prctl killed the process with SIGSYS. Plain, the hint is the
// same address, whatever is there then.
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#define PR_SET_VMA_ANON_NAME 0
#endif

enum { early_pages = 256 };

unsigned char* early_hint_block;
size_t early_hint_bytes = early_pages * 4096;
uintptr_t early_hint_asked;
long early_hint_read;

__attribute__((constructor)) static void map_early(void) {
  // The filter's range as the shim that installed it names it (init.cc, USWAP_SECCOMP); its
  // middle, or 49 TiB, the middle of the shim's default range, when there is none.
  unsigned long long lo = 0, hi = 0, tramp = 0;
  const char* sc = getenv("USWAP_SECCOMP");
  if (!sc || sscanf(sc, "%llx:%llx:%llx", &lo, &hi, &tramp) != 3) {
    lo = 0x300000000000ull;
    hi = 0x340000000000ull;
  }
  early_hint_asked = (uintptr_t)(lo + (hi - lo) / 2);
  void* p = mmap((void*)early_hint_asked, early_hint_bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return;
  early_hint_block = p;
  // Both calls pass the mapping's address to the kernel: the filter sees it.
  (void)prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, (unsigned long)p, early_hint_bytes,
              (unsigned long)"early_hint");
  int fds[2];
  if (pipe(fds) != 0) return;
  static const char msg[] = "written by the kernel into memory mapped before the shim";
  if (write(fds[1], msg, sizeof msg) == (long)sizeof msg)
    early_hint_read = read(fds[0], early_hint_block, sizeof msg);
  close(fds[0]);
  close(fds[1]);
}
