// swap_device: the block device under a swap area, as page I/O sees it (mm/page_io.c:
// swap_writepage, swap_read_folio; the device's swap_slot_free_notify and discard).
//
// Two devices, chosen with swap_backend_options::device:
//   zram  a uswap zram_device: pages are compressed into zsmalloc objects; a freed slot's object
//         is freed at once (slot_free_notify), and freed clusters are discarded in bulk.
//   ram   an uncompressed RAM disk, like the RAM-simulated PMEM device of seed 000's
//         measurement: a page-sized memcpy per write and read and nothing else, so the swap
//         slot locks are not hidden behind compression time.
// Offsets are swap slot offsets (swp_offset), slot 0 being the area's header, never written.
//
// Thread-safety: write_page / read_page / slot_free_notify / discard may run concurrently on
// different offsets. The swap layer guarantees that one offset is never written and read, or
// freed and written, at the same time: a slot is written and read only by the holder of a
// reference to it, and freed only when no reference is left. stats() may run at any time (its
// figures are then a sum of racy reads, not a cut). write_back_cold is called by one thread at a
// time (it keeps a cursor); it runs concurrently with everything else.
// Invariant: a slot the swap layer has freed holds nothing on the device (slot_free_notify never
// leaves an object behind), so the device stores at most as many pages as slots are in use.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "uswap/base/enum_names.h"
#include "uswap/base/status.h"
#include "uswap/zram/zram.h"

namespace uswap {

enum class swap_dev_kind : uint8_t { zram, ram };
inline constexpr enum_name<swap_dev_kind> swap_dev_kind_names[] = {{swap_dev_kind::zram, "zram"},
                                                                  {swap_dev_kind::ram, "ram"}};
static_assert(valid_table(swap_dev_kind_names));
const char* to_string(swap_dev_kind k) noexcept;
// "zram" or "ram"; EINVAL otherwise.
result<swap_dev_kind> parse_swap_dev_kind(std::string_view text);

struct swap_device_stats {
  uint64_t stored_pages = 0;  // slots that hold a page now
  uint64_t mem_used = 0;      // host bytes the device's storage takes now (ram: all of it)
  uint64_t mem_used_max = 0;  // the most it took
  std::optional<zram_mm_stat> mm_stat;  // a zram device's own mm_stat
  uint64_t failed_reads = 0;            // io_stat: reads that could not return the page
  uint64_t failed_writes = 0;           // writes refused (mem_limit, no memory)
  uint64_t notify_free = 0;             // slots freed by the swap layer
  uint64_t bd_count = 0;                // bd_stat: pages in the backing file now
  uint64_t bd_reads = 0;                // pages read back from it
  uint64_t bd_writes = 0;               // pages written to it
};

class swap_device {
 public:
  virtual ~swap_device() = default;
  // swap_writepage: stores the page at `offset`. A failure (zram's mem_limit: ENOSPC) leaves
  // the previous contents of the slot as they were.
  virtual status write_page(uint64_t offset, const void* src) = 0;
  // swap_read_folio: reads the page at `offset` (EIO if it cannot be read back intact).
  virtual status read_page(uint64_t offset, void* dst) = 0;
  // read_page for each of distinct ascending offsets, result[i] for offset[i] (spans of one
  // length): a device that can overlap the reads (zram's backing device) does. One by one here.
  virtual void read_pages(std::span<const uint64_t> offset, std::span<void* const> dst,
                          std::span<status> result) {
    for (size_t i = 0; i < offset.size() && i < dst.size() && i < result.size(); ++i)
      result[i] = read_page(offset[i], dst[i]);
  }
  // The swap layer's "slot is free", under the slot's swap lock: frees what the slot holds,
  // always (it never leaves an object for later), and never calls back into swap.
  virtual void slot_free_notify(uint64_t offset) = 0;
  // A freed cluster: slots [offset, offset + nr) hold nothing any more.
  virtual void discard(uint64_t offset, uint64_t nr) = 0;
  // Whether the slot at `offset` holds a page (for invariant checks; quiescent).
  virtual bool holds(uint64_t offset) const = 0;
  // Bytes the page at `offset` takes on the device: 0 for a same-filled page, the compressed
  // size, or page_size. The slot's reference holder only.
  virtual uint32_t stored_size(uint64_t offset) const = 0;
  // zram's mem_limit (0: none); ENOTSUP for a device without one.
  virtual status set_mem_limit(uint64_t bytes) = 0;
  // Makes the device's own memory smaller without losing a page: compaction (pages freed), and
  // with a backing file, writing back up to max_pages cold pages (huge ones first, then those
  // not read since the device's cursor last passed them); how many were written back. 0 for a
  // device without either.
  virtual uint64_t compact() = 0;
  virtual uint64_t write_back_cold(uint64_t max_pages) = 0;
  // The backing-file blocks the device's written-back pages hold (a fork's copy holds them too),
  // and the allocator they came from; none without a shared backing file.
  virtual std::vector<uint64_t> backing_blocks() const = 0;
  virtual zram_block_allocator* backing_allocator() const = 0;
  // The backing device's health (zram_backing_stat; kind empty without one).
  virtual zram_backing_stat backing_stat() const { return {}; }
  // In a child after fork(), before anything else uses the device: connections to a remote
  // backing device were the parent's and are made anew (zram_device::after_fork_child).
  virtual void after_fork_child() noexcept {}
  virtual swap_device_stats stats() const = 0;
  // The device's mm_stat line as /sys/block/zramN/mm_stat prints it, or "" (ram).
  virtual std::string mm_stat_text() const = 0;
  virtual uint64_t nr_pages() const noexcept = 0;
  virtual swap_dev_kind kind() const noexcept = 0;
};

// The zram device as swap: `zram_opts.disksize` is set to nr_pages pages.
result<std::unique_ptr<swap_device>> make_zram_swap_device(uint64_t nr_pages, zram_options zram_opts);
// The uncompressed RAM disk of nr_pages pages, its host memory populated at creation.
result<std::unique_ptr<swap_device>> make_ram_swap_device(uint64_t nr_pages);

}  // namespace uswap
