// The writeback target of a zram device: a file (regular or block device) divided into 4 KiB
// blocks, with a bitmap of the blocks in use, after the kernel's backing_dev_store(),
// zram_reserve_bdev_block() and zram_release_bdev_block().
//
// Blocks are reserved by the writeback loop and released when their slot is freed; reads and
// writes of a block are plain pread / pwrite on the shared descriptor (safe from any thread).
//
// With a zram_block_allocator (zram_options::backing_allocator) the blocks come from it instead,
// shared with other devices writing into the same file (the processes of one job).
//
// Thread-safety: reserve() and release() may run concurrently (a mutex guards the bitmap);
// read_block / write_block on distinct blocks may run concurrently. The owner of a block (the
// slot that holds it, under its slot lock) is the only one that reads, writes or releases it.
// Invariants: count() equals the number of bits set; a block is handed out by reserve() at most
// once until released.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "uswap/base/status.h"
#include "uswap/sync/mutex.h"
#include "uswap/zram/zram.h"

namespace uswap::zram_detail {

class backing_dev {
 public:
  // Opens (creating if missing) `path`; size_bytes 0 uses the file's size, otherwise the file is
  // extended to it when shorter. EINVAL for a zero-sized file, errno of open/ftruncate otherwise.
  static result<std::unique_ptr<backing_dev>> open(const std::string& path, uint64_t size_bytes,
                                                   zram_block_allocator* shared = nullptr);
  ~backing_dev();
  backing_dev(const backing_dev&) = delete;
  backing_dev& operator=(const backing_dev&) = delete;

  static constexpr uint64_t invalid_block = ~uint64_t{0};

  // zram_reserve_bdev_block(): a free block, or invalid_block when the file is full.
  uint64_t reserve();
  // zram_release_bdev_block().
  void release(uint64_t block);

  status write_block(uint64_t block, const void* page) const;
  status read_block(uint64_t block, void* page) const;

  uint64_t nr_pages() const noexcept { return nr_pages_; }
  const std::string& path() const noexcept { return path_; }
  zram_block_allocator* shared() const noexcept { return shared_; }

 private:
  backing_dev(std::string path, int fd, uint64_t nr_pages, zram_block_allocator* shared);
  zram_block_allocator* shared_;
  std::string path_;
  int fd_;
  uint64_t nr_pages_;
  mutex bitmap_lock_;
  std::vector<uint64_t> bitmap_;  // under bitmap_lock_
  uint64_t next_ = 0;             // where the next search starts (under bitmap_lock_)
};

}  // namespace uswap::zram_detail
