/* The C API from a C program (compiled as C11): a region four times its limit written and read
 * back, read(2) into evicted pages through pinning (or directly when kernel-mode faults are
 * delivered), discard, a shared pager with two regions returning all memory on destruction, and
 * refused input. Exits 0 when every check holds, 1 otherwise (naming the failed check). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "uswap/uffd/region_c.h"

#include "c_check.h"

static uint64_t word_of(uint64_t page, uint64_t i) {
  return (page * 0x9e3779b97f4a7c15ull) ^ (i * 0xc2b2ae3d27d4eb4full);
}

/* Half of each page varies, half is zero: compressible, not same-filled. */
static void fill(uint64_t *p, uint64_t page) {
  for (uint64_t i = 0; i < 512; ++i) p[i] = (i % 2) ? 0 : word_of(page, i);
}

static int matches(const uint64_t *p, uint64_t page) {
  for (uint64_t i = 0; i < 512; ++i)
    if (p[i] != ((i % 2) ? 0 : word_of(page, i))) return 0;
  return 1;
}

static void one_mode(int mode) {
  struct uswap_pager_options o;
  uswap_pager_options_init(&o);
  o.limit = 1 << 20;
  o.fault_mode = mode;
  uswap_region *r = NULL;
  int rc = uswap_region_create_standalone(4 << 20, &o, &r);
  CHECK(rc == 0);
  if (rc != 0) {
    fprintf(stderr, "%s\n", uswap_last_error());
    return;
  }
  uint64_t *base = uswap_region_data(r);
  const uint64_t pages = uswap_region_size(r) / 4096;
  CHECK(pages == 1024);
  for (uint64_t p = 0; p < pages; ++p) fill(base + p * 512, p);
  for (uint64_t p = 0; p < pages; ++p) CHECK(matches(base + p * 512, p));

  struct uswap_pager_stats s;
  uswap_pager_get_stats(uswap_region_pager(r), &s);
  CHECK(s.peak_resident_pages <= s.limit_pages);
  CHECK(s.swap_outs >= pages - s.limit_pages);
  CHECK(s.compressed_bytes < s.swap_out_bytes);

  /* read(2) from /dev/urandom-like data: a file of known contents. */
  char path[] = "/tmp/uswap_c_testXXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  unlink(path);
  uint64_t file[512 * 4];
  for (int p = 0; p < 4; ++p) fill(file + p * 512, 7000 + p);
  CHECK(pwrite(fd, file, sizeof file, 0) == (ssize_t)sizeof file);
  uint64_t *dst = base; /* the first pages were evicted long ago */
  int direct = uswap_pager_kernel_faults(uswap_region_pager(r));
  if (!direct) {
    errno = 0;
    CHECK(pread(fd, dst, sizeof file, 0) == -1 && errno == EFAULT);
    CHECK(uswap_region_pin(r, dst, sizeof file, 1) == 0);
  }
  CHECK(pread(fd, dst, sizeof file, 0) == (ssize_t)sizeof file);
  if (!direct) CHECK(uswap_region_unpin(r, dst, sizeof file) == 0);
  CHECK(memcmp(dst, file, sizeof file) == 0);
  close(fd);

  /* discard: zeros afterwards; bad ranges refused, data intact. */
  CHECK(uswap_region_discard(r, base + 512 * 100, 4096 * 10) == 0);
  for (uint64_t p = 100; p < 110; ++p) CHECK(base[p * 512] == 0 && base[p * 512 + 510] == 0);
  CHECK(uswap_region_discard(r, (char *)base + 1, 4096) == EINVAL);
  CHECK(strlen(uswap_last_error()) > 0);
  CHECK(uswap_region_pin(r, base, uswap_region_size(r), 0) == ENOMEM);
  CHECK(uswap_region_unpin(r, base + 512 * 200, 4096) == EINVAL);
  CHECK(matches(base + 512 * 200, 200));
  CHECK(matches(base + 512 * (pages - 1), pages - 1));
  uswap_region_destroy(r);
}

static void shared_pager(void) {
  struct uswap_pager_options o;
  uswap_pager_options_init(&o);
  o.limit = 512 << 10;
  o.max_size = 16 << 20;
  uswap_pager *pg = NULL;
  CHECK(uswap_pager_create(&o, &pg) == 0);
  if (!pg) return;
  uswap_region *a = NULL, *b = NULL;
  CHECK(uswap_region_create(pg, 2 << 20, &a) == 0);
  CHECK(uswap_region_create(pg, 2 << 20, &b) == 0);
  if (!a || !b) return;
  uint64_t *pa = uswap_region_data(a), *pb = uswap_region_data(b);
  for (uint64_t p = 0; p < 512; ++p) {
    fill(pa + p * 512, p);
    fill(pb + p * 512, 10000 + p);
  }
  for (uint64_t p = 0; p < 512; ++p) CHECK(matches(pa + p * 512, p) && matches(pb + p * 512, 10000 + p));
  struct uswap_pager_stats s;
  uswap_pager_get_stats(pg, &s);
  CHECK(s.swap_pages_used > 0 && s.zram_mem_used_total > 0);
  CHECK(s.peak_resident_pages <= s.limit_pages);
  uswap_pager_destroy(pg); /* the regions keep it alive */
  uswap_pager *view = uswap_region_pager(a);
  uswap_region_destroy(a);
  uswap_pager_get_stats(uswap_region_pager(b), &s);
  CHECK(s.mapped_bytes == 2 << 20);
  (void)view;
  uswap_region_destroy(b);
}

static void refused(void) {
  struct uswap_pager_options o;
  uswap_pager_options_init(&o);
  uswap_pager *pg = NULL;
  o.limit = 4096; /* below 64 pages */
  CHECK(uswap_pager_create(&o, &pg) == EINVAL && pg == NULL);
  o.limit = 1 << 20;
  o.comp_algorithm = "gzip";
  CHECK(uswap_pager_create(&o, &pg) == EINVAL);
  o.comp_algorithm = "zstd";
  o.fault_mode = 7;
  CHECK(uswap_pager_create(&o, &pg) == EINVAL);
  o.fault_mode = USWAP_FAULT_SIGBUS;
  uswap_region *r = NULL;
  CHECK(uswap_region_create_standalone(0, &o, &r) == EINVAL && r == NULL);
  CHECK(uswap_pager_create(NULL, &pg) == EINVAL);
}

int main(void) {
  one_mode(USWAP_FAULT_SIGBUS);
  one_mode(USWAP_FAULT_HANDLER_THREAD);
  shared_pager();
  refused();
  return check_exit("region_c_test");
}
