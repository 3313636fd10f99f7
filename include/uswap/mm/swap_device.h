// swap_device: the block device under a swap area, as reclaim and swap-in see it
// (mm/page_io.c: swap_writepage, swap_read_folio; the device's swap_slot_free_notify and
// discard).
//
// Two devices, chosen with machine_options::swap_dev:
//   zram  a uswap zram_device: pages are compressed into zsmalloc objects; the swap layer's
//         slot_free_notify frees a slot's object when its last reference goes (as the kernel's
//         zram_slot_free_notify; when the slot lock is busy it waits for it, as the 4.9 kernel
//         did, rather than leave the object behind), and freed clusters are discarded in bulk.
//   ram   an uncompressed RAM disk, like the RAM-simulated PMEM device of seed 000's
//         measurement: a page-sized memcpy per write and read and nothing else, so the swap
//         slot locks are not hidden behind compression time.
// Offsets are swap slot offsets (swp_offset), slot 0 being the area's header, never written.
//
// Thread-safety: write_page / read_page / slot_free_notify / discard may run concurrently on
// different offsets. The swap layer guarantees that one offset is never written and read, or
// freed and written, at the same time: a slot is written and read only by the holder of its
// SWAP_HAS_CACHE reference (reclaim's page lock, swap-in's swapcache_prepare), and freed only
// when no reference is left.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "uswap/base/enum_names.h"
#include "uswap/base/status.h"
#include "uswap/zram/zram.h"

namespace uswap {

enum class swap_dev_kind : uint8_t { zram, ram };
inline constexpr enum_name<swap_dev_kind> swap_dev_kind_names[] = {
    {swap_dev_kind::zram, "zram"}, {swap_dev_kind::ram, "ram"}};
static_assert(valid_table(swap_dev_kind_names));
const char* to_string(swap_dev_kind k) noexcept;
// "zram" or "ram"; EINVAL otherwise.
result<swap_dev_kind> parse_swap_dev_kind(std::string_view text);

class swap_device {
 public:
  virtual ~swap_device() = default;
  // swap_writepage: stores the page at `offset`. A failure (zram's mem_limit: ENOSPC) leaves
  // the previous contents of the slot as they were.
  virtual status write_page(uint64_t offset, const void* src) = 0;
  // swap_read_folio: reads the page at `offset` (EIO if it cannot be read back intact).
  virtual status read_page(uint64_t offset, void* dst) = 0;
  // The swap layer's "slot is free" (called under a swap lock: must not call back into swap).
  virtual void slot_free_notify(uint64_t offset) = 0;
  // A freed cluster: slots [offset, offset + nr) hold nothing any more.
  virtual void discard(uint64_t offset, uint64_t nr) = 0;
  virtual uint64_t nr_pages() const noexcept = 0;
  virtual swap_dev_kind kind() const noexcept = 0;
  // The zram device, or nullptr for the ram device.
  virtual zram_device* zram() noexcept { return nullptr; }
};

// The zram device as swap: `zram_opts.disksize` is set to nr_pages pages.
result<std::unique_ptr<swap_device>> make_zram_swap_device(uint64_t nr_pages, zram_options zram_opts);
// The uncompressed RAM disk of nr_pages pages, its host memory populated at creation.
result<std::unique_ptr<swap_device>> make_ram_swap_device(uint64_t nr_pages);

}  // namespace uswap
