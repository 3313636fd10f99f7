// The writeback target of a zram device, divided into 4 KiB blocks with a bitmap of the blocks
// in use, after the kernel's backing_dev_store(), zram_reserve_bdev_block() and
// zram_release_bdev_block(). Two kinds, chosen by the spec string zram_options::backing_dev names:
//   - a local file or block device (file_backing_dev, backing_dev.cc): pread / pwrite; the
//     spec /proc/self/fd/N names a descriptor the process holds, used as it is, not reopened;
//   - a remote NBD export (nbd_backing_dev, backing_nbd.cc), a spec that starts "nbd://",
//     "nbds://", "nbd+unix://" or "nbds+unix://", reached with libnbd: writes go out as one batch
//     of asynchronous requests in flight, durable (FUA, or a flush) before they count as written.
//
// Blocks are reserved by the writeback loop and released when their slot is freed. With a
// zram_block_allocator (zram_options::backing_allocator) the blocks come from it instead, shared
// with other devices writing into the same target (the processes of one job).
//
// Thread-safety: reserve() and release() may run concurrently (a mutex guards the bitmap);
// read_block / write_blocks on distinct blocks may run concurrently from any thread. The owner
// of a block (the slot that holds it, under its slot lock) is the only one that reads, writes or
// releases it.
// Invariants: count() equals the number of bits set; a block is handed out by reserve() at most
// once until released; a block reads back what its last successful write wrote, or fails (EIO),
// never other bytes (an NBD block written before its connection was lost is EIO: see
// docs/design/zram.md, "Remote writeback").
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "uswap/base/status.h"
#include "uswap/sync/mutex.h"
#include "uswap/zram/zram.h"

namespace uswap::zram_detail {

// One page of a read batch: the caller fills block and page; read_blocks sets result.
struct backing_read {
  uint64_t block = 0;
  void* page = nullptr;
  status result;
};

// One page of a write batch: the caller fills block and page; write_blocks sets result.
struct backing_write {
  uint64_t block = 0;
  const void* page = nullptr;
  status result;
};

class backing_dev {
 public:
  // Opens `spec`: an NBD URI (is_nbd_uri) or a file path (created if missing). For a file,
  // size_bytes 0 uses the file's size, otherwise the file is extended to it when shorter; for an
  // export, size_bytes 0 uses the export's size and a larger size than the export is EINVAL.
  // EINVAL for a zero-sized target, the errno of open / connect otherwise. timeout_ms: an
  // export's zram_options::backing_timeout_ms.
  static result<std::unique_ptr<backing_dev>> open(const std::string& spec, uint64_t size_bytes,
                                                   zram_block_allocator* shared = nullptr,
                                                   uint64_t timeout_ms = 30'000);
  static bool is_nbd_uri(std::string_view spec) noexcept;
  virtual ~backing_dev();
  backing_dev(const backing_dev&) = delete;
  backing_dev& operator=(const backing_dev&) = delete;

  static constexpr uint64_t invalid_block = ~uint64_t{0};

  // zram_reserve_bdev_block(): a free block, or invalid_block when the target is full.
  uint64_t reserve();
  // zram_release_bdev_block().
  void release(uint64_t block);

  // Writes every page of the batch (at most batch_size() of them); each result is ok only once
  // the target has the page durably. Distinct blocks only.
  virtual void write_blocks(std::span<backing_write> batch) = 0;
  status write_block(uint64_t block, const void* page);
  virtual status read_block(uint64_t block, void* page) = 0;
  // Reads every page of the batch, each with read_block's result. A remote target has them in
  // flight together, one round trip for the batch, as swap readahead submits its reads before
  // it waits for the first; a file reads them one by one. Distinct blocks only.
  virtual void read_blocks(std::span<backing_read> batch);
  // How many pages one write_blocks call should carry (the kernel's writeback_batch_size).
  virtual size_t batch_size() const noexcept = 0;
  // In a child after fork(): a connection must not be shared with the parent (NBD); files need
  // nothing. Called with no other thread in the device.
  virtual void after_fork_child() noexcept {}
  // Health of the target for the statistics; empty text when it is healthy.
  virtual zram_backing_stat backing_stat() const;

  uint64_t nr_pages() const noexcept { return nr_pages_; }
  const std::string& path() const noexcept { return path_; }
  zram_block_allocator* shared() const noexcept { return shared_; }

 protected:
  backing_dev(std::string path, uint64_t nr_pages, zram_block_allocator* shared);

 private:
  zram_block_allocator* shared_;
  std::string path_;
  uint64_t nr_pages_;
  mutex bitmap_lock_;
  std::vector<uint64_t> bitmap_;  // under bitmap_lock_
  uint64_t next_ = 0;             // where the next search starts (under bitmap_lock_)
};

// The NBD kind (backing_nbd.cc): connects, checks the export, returns the device.
result<std::unique_ptr<backing_dev>> open_nbd_backing_dev(const std::string& uri,
                                                          uint64_t size_bytes,
                                                          zram_block_allocator* shared,
                                                          uint64_t timeout_ms);

}  // namespace uswap::zram_detail
