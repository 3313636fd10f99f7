// page_store: where the pager keeps the pages it evicts. One compressed copy per evicted page,
// named by a non-zero 64-bit handle the pager keeps in the page's state.
//
// The store compresses with the chosen codec and keeps the result in a zsmalloc pool: a
// two-byte length header followed by the compressed bytes, or the raw page when compression does
// not shrink it below zs_huge_class_size (zram's ZRAM_HUGE rule).
//
// Signal safety: store/load/release are called from the SIGBUS handler of a faulting thread.
// They return errno values instead of a uswap::status on the hot path and allocate only what
// zsmalloc and zcomp allocate (a zspage, a thread's first compression stream); see the uffd
// section of docs/DESIGN.md for why that is safe for a synchronous fault on region memory.
//
// Thread-safety: every member may be called concurrently on different handles; a handle is used
// by one thread at a time (the pager holds the page's lock). Invariant: pages() == handles
// stored and not released.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "uswap/base/status.h"
#include "uswap/compress/zcomp.h"
#include "uswap/zsmalloc/zsmalloc.h"

namespace uswap {

struct page_store_options {
  uint64_t max_pages = 0;          // most pages stored at once; required
  std::string comp_algorithm = "lz4";
};

struct page_store_stats {
  uint64_t pages = 0;            // stored now
  uint64_t orig_data_size = 0;   // pages * 4 KiB
  uint64_t compr_data_size = 0;  // compressed bytes stored now
  uint64_t mem_used_total = 0;   // bytes the pool holds
  uint64_t mem_used_max = 0;
};

class page_store {
 public:
  static result<std::unique_ptr<page_store>> create(const page_store_options& opts);
  ~page_store();
  page_store(const page_store&) = delete;
  page_store& operator=(const page_store&) = delete;

  // Compresses and stores one page. 0 with *handle and *compressed_size set, or ENOSPC (the
  // store holds max_pages), ENOMEM (no memory for the object).
  int store(const void* page, uint64_t* handle, uint32_t* compressed_size) noexcept;
  // Decompresses the page of `handle` into dst. 0, or EIO for a corrupt object.
  int load(uint64_t handle, void* dst) noexcept;
  // Frees the page of `handle`.
  void release(uint64_t handle) noexcept;

  page_store_stats stats() const noexcept;
  // Quiescent only: pages() objects are allocated in the pool, no more, no less.
  status check_invariants() const;

 private:
  page_store(std::unique_ptr<zcomp> comp, std::unique_ptr<zs_pool> pool, uint64_t max_pages);
  std::unique_ptr<zcomp> comp_;
  std::unique_ptr<zs_pool> pool_;
  const uint64_t max_pages_;
  std::atomic<uint64_t> pages_{0};
  std::atomic<uint64_t> compr_bytes_{0};
  std::atomic<uint64_t> mem_used_max_{0};
};

}  // namespace uswap
