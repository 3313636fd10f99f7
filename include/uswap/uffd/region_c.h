/* The C API of uswap's userfaultfd pager: pagers and regions (see pager.h and region.h next to
 * this file for what they do), for programs written in C.
 *
 *   struct uswap_pager_options o;
 *   uswap_region *r;
 *   uswap_pager_options_init(&o);
 *   o.limit = 256 << 20;
 *   if (uswap_region_create_standalone(1 << 30, &o, &r) != 0)
 *     fprintf(stderr, "%s\n", uswap_last_error());
 *   uint64_t *a = uswap_region_data(r);    // 1 GiB, at most 256 MiB resident
 *   ...
 *   uswap_region_destroy(r);
 *
 * Every function that can fail returns 0 or an errno value (EINVAL, ENOMEM, EPERM, ENOTSUP,
 * ENOSPC, EIO) and leaves the data as it was; uswap_last_error() then describes the failure.
 *
 * Thread-safety: as the C++ API: every function may be called from any thread; region memory
 * is ordinary memory. A pager lives until uswap_pager_destroy() and the destruction of its last
 * region, whichever comes last. uswap_last_error() is per thread.
 */
#ifndef USWAP_UFFD_REGION_C_H
#define USWAP_UFFD_REGION_C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct uswap_pager uswap_pager;
typedef struct uswap_region uswap_region;

enum uswap_fault_mode { USWAP_FAULT_SIGBUS = 0, USWAP_FAULT_HANDLER_THREAD = 1 };
enum uswap_uffd_access { USWAP_UFFD_AUTO = 0, USWAP_UFFD_FULL = 1, USWAP_UFFD_USER_MODE_ONLY = 2 };

/* pager_options of pager.h; uswap_pager_options_init() sets every default. */
struct uswap_pager_options {
  uint64_t limit;             /* most bytes resident; required, at least 256 KiB */
  uint64_t max_size;          /* arena size; default 4 GiB */
  uint64_t swap_size;         /* zram disksize; default 0 = max_size */
  const char *comp_algorithm; /* "lz4" (default), "lz4hc", "zstd", "lzo" */
  int fault_mode;             /* enum uswap_fault_mode; default USWAP_FAULT_SIGBUS */
  unsigned handler_threads;   /* default 1 */
  int access;                 /* enum uswap_uffd_access; default USWAP_UFFD_AUTO */
  unsigned reclaim_batch;     /* default 32 */
  unsigned readahead_max;     /* default 8 */
  int track_writes;           /* default 1 */
};

/* pager_stats of pager.h. */
struct uswap_pager_stats {
  uint64_t limit_pages, resident_pages, peak_resident_pages, mapped_bytes;
  uint64_t faults, wp_faults, zero_fills, swap_ins, readahead_pages;
  uint64_t swap_outs, clean_evictions, zero_evictions;
  uint64_t reclaim_passes, pages_scanned, pages_rotated, overcharges, swap_out_failures;
  uint64_t fault_ns, swap_out_bytes, compressed_bytes;
  uint64_t swap_pages_used, zram_orig_data_size, zram_compr_data_size, zram_mem_used_total,
      zram_mem_used_max;
};

void uswap_pager_options_init(struct uswap_pager_options *o);

int uswap_pager_create(const struct uswap_pager_options *o, uswap_pager **out);
/* Drops the caller's reference; regions still alive keep the pager. NULL is ignored. */
void uswap_pager_destroy(uswap_pager *p);
/* 1 when system calls reach pager memory without pinning (see pager.h), else 0. */
int uswap_pager_kernel_faults(const uswap_pager *p);
void uswap_pager_get_stats(const uswap_pager *p, struct uswap_pager_stats *out);
/* Evicts up to nr_pages pages now; returns how many were evicted. */
uint64_t uswap_pager_reclaim(uswap_pager *p, uint64_t nr_pages);

/* A region in a shared pager, or with a pager of its own sized to it. */
int uswap_region_create(uswap_pager *p, uint64_t length, uswap_region **out);
int uswap_region_create_standalone(uint64_t length, const struct uswap_pager_options *o,
                                   uswap_region **out);
/* Unmaps the region and frees its zram and swap memory. NULL is ignored. */
void uswap_region_destroy(uswap_region *r);
void *uswap_region_data(const uswap_region *r);
uint64_t uswap_region_size(const uswap_region *r);
/* The region's pager, borrowed: valid while the region lives. */
uswap_pager *uswap_region_pager(uswap_region *r);

/* Keep [addr, addr + len) resident (and writable by the kernel if write) until unpinned. */
int uswap_region_pin(uswap_region *r, const void *addr, uint64_t len, int write);
int uswap_region_unpin(uswap_region *r, const void *addr, uint64_t len);
/* MADV_DONTNEED: the range reads as zeros afterwards. */
int uswap_region_discard(uswap_region *r, void *addr, uint64_t len);

/* The message of this thread's last failed call ("" if none). */
const char *uswap_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* USWAP_UFFD_REGION_C_H */
