// region: a range of program memory that a pager keeps at most `limit` bytes of resident,
// swapping the rest into compressed RAM (zram) with userfaultfd. See pager.h for how paging
// works; this is the convenient handle: one mapping of one pager, unmapped on destruction.
//
//   auto r = uswap::region::create(1 << 30, {.limit = 256 << 20});
//   auto* a = static_cast<uint64_t*>((*r)->data());   // 1 GiB, at most 256 MiB resident
//
// create(length, options) makes a pager of its own, sized to the region; create(pager, length)
// carves the region out of a shared pager, whose limit then covers all its regions together
// (the way `uswap run` pages a whole program).
//
// System calls that read or write region memory (read(2) into it, write(2) from it) work as
// pager.h explains: in sigbus mode, pin() the buffer around the call; in handler_thread mode
// with kernel-mode faults available (kernel_faults()), they just work.
//
// Thread-safety: data() may be used by any number of threads at once, like any memory; the
// member functions may be called concurrently. Destroying the region while a thread still
// touches it is a use after free, as with munmap.
// Invariant: [data(), data() + size()) is one mapping of owner() until destruction.
#pragma once

#include <cstdint>
#include <memory>

#include "uswap/base/status.h"
#include "uswap/uffd/pager.h"

namespace uswap {

class region {
 public:
  // A region with a pager of its own: opts.max_size is set to `length` (rounded up to pages).
  static result<std::unique_ptr<region>> create(uint64_t length, pager_options opts);
  // A region in a shared pager. EINVAL for length 0 or a bad alignment, ENOMEM when the arena is
  // full.
  static result<std::unique_ptr<region>> create(std::shared_ptr<pager> owner, uint64_t length,
                                                uint64_t alignment = 4096);
  // Unmaps the region: its resident pages, zram objects and swap slots are all freed.
  ~region();
  region(const region&) = delete;
  region& operator=(const region&) = delete;

  void* data() const noexcept { return data_; }
  uint64_t size() const noexcept { return size_; }
  pager& owner() const noexcept { return *owner_; }
  const std::shared_ptr<pager>& shared_owner() const noexcept { return owner_; }

  // pager::pin / unpin / discard, restricted to this region (EINVAL outside it).
  status pin(const void* addr, uint64_t len, bool write);
  status unpin(const void* addr, uint64_t len);
  status discard(void* addr, uint64_t len);

 private:
  region(std::shared_ptr<pager> owner, void* data, uint64_t size)
      : owner_(std::move(owner)), data_(data), size_(size) {}
  bool inside(const void* addr, uint64_t len) const noexcept;
  std::shared_ptr<pager> owner_;
  void* data_;
  uint64_t size_;
};

}  // namespace uswap
