// A program linked with early_hint_test_lib, whose constructor mapped memory at a hint and used
// it in system calls before the shim's constructor ran (the library says why that matters). main
// checks what the kernel wrote there, uses the memory through more system calls and prints a
// checksum that must equal the plain run's; on stderr whether the mapping landed inside the
// range the hint asked for (the caller requires "outside" under a filter: the shim moved it).
// Exits 0, or says what went wrong and exits 1.
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern unsigned char* early_hint_block;
extern size_t early_hint_bytes;
extern uintptr_t early_hint_asked;
extern long early_hint_read;

static void die(const char* what) {
  fprintf(stderr, "early_hint: %s\n", what);
  exit(1);
}

int main(void) {
  static const char msg[] = "written by the kernel into memory mapped before the shim";
  if (!early_hint_block) die("the constructor's mapping failed");
  if (early_hint_read != (long)sizeof msg || memcmp(early_hint_block, msg, sizeof msg) != 0)
    die("the constructor's read did not arrive");
  // Every page written, then read back through a pipe page by page: more calls on the mapping.
  for (size_t i = 0; i < early_hint_bytes; ++i)
    early_hint_block[i] = (unsigned char)(i * 7 + i / 4096);
  int fds[2];
  if (pipe(fds) != 0) die("pipe");
  uint64_t h = 1469598103934665603ull;
  unsigned char page[4096];
  for (size_t off = 0; off < early_hint_bytes; off += sizeof page) {
    if (write(fds[1], early_hint_block + off, sizeof page) != (long)sizeof page) die("write");
    if (read(fds[0], page, sizeof page) != (long)sizeof page) die("read");
    if (memcmp(page, early_hint_block + off, sizeof page) != 0) die("a page came back different");
    for (size_t i = 0; i < sizeof page; i += 61) h = (h ^ page[i]) * 1099511628211ull;
  }
  const uintptr_t at = (uintptr_t)early_hint_block;
  fprintf(stderr, "early_hint: mapped %s the hinted range\n",
          at == early_hint_asked ? "at the hint, inside" : "outside");
  printf("%016llx\n", (unsigned long long)h);
  return 0;
}
