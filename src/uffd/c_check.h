/* CHECK and its failure report for the uffd layer's plain C test programs (region_c_test.c, the
 * C API from C11; preload_test_program.c, run under `uswap run`). They use no GoogleTest (the
 * point is a plain C program), so this header is their whole test framework: CHECK notes a failed
 * condition on stderr with its file and line and goes on, so that one run names every broken
 * promise; check_exit() ends main with the count and the exit status ctest reads.
 *
 * Thread-safety: none. The failure count is a plain static int of the including program; call
 * CHECK from one thread at a time (both programs check from their main thread only).
 *
 * Invariants: c_check_failures counts the CHECKs that failed since the program started; each
 * program includes this header once (the count is static, one per translation unit); check_exit
 * returns 0 exactly when that count is 0. */
#ifndef USWAP_UFFD_C_CHECK_H
#define USWAP_UFFD_C_CHECK_H

#include <stdio.h>

static int c_check_failures;

#define CHECK(cond)                                                              \
  do {                                                                           \
    if (!(cond)) {                                                               \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);   \
      ++c_check_failures;                                                        \
    }                                                                            \
  } while (0)

/* The end of main: "N checks failed" on stderr and 1, or "<program>: all checks passed" on stdout
 * and 0. */
static inline int check_exit(const char *program) {
  if (c_check_failures) {
    fprintf(stderr, "%d checks failed\n", c_check_failures);
    return 1;
  }
  printf("%s: all checks passed\n", program);
  return 0;
}

#endif /* USWAP_UFFD_C_CHECK_H */
