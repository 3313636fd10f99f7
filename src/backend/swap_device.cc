// The swap devices: zram, and the uncompressed RAM disk. See include/uswap/backend/swap_device.h.
#include "uswap/backend/swap_device.h"

#include <atomic>
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "uswap/base/page.h"
#include "uswap/base/resident_memory.h"

namespace uswap {

// The table's names are string literals, so data() is a NUL-terminated C string.
const char* to_string(swap_dev_kind k) noexcept { return name_of(swap_dev_kind_names, k).data(); }

result<swap_dev_kind> parse_swap_dev_kind(std::string_view text) {
  return parse_enum(swap_dev_kind_names, text, "swap device");
}

namespace {

class zram_swap_device final : public swap_device {
 public:
  explicit zram_swap_device(std::unique_ptr<zram_device> z) : z_(std::move(z)) {}
  status write_page(uint64_t offset, const void* src) override { return z_->write_page(offset, src); }
  status read_page(uint64_t offset, void* dst) override { return z_->read_page(offset, dst); }
  void read_pages(std::span<const uint64_t> offset, std::span<void* const> dst,
                  std::span<status> result) override {
    z_->read_pages(offset, dst, result);
  }
  // zram_slot_free_notify. Since 6.0 the kernel only try-locks the slot here and leaves the
  // object for a later write or discard when the lock is busy (miss_free); the zram of seed 000's
  // era (4.9) took the slot lock unconditionally. uswap tries first and then frees with the
  // blocking discard, so a freed slot never keeps its object: zram locks are leaves (zram never
  // calls into swap), so waiting for one under a swap lock cannot deadlock.
  void slot_free_notify(uint64_t offset) override {
    if (!z_->slot_free_notify(offset)) (void)z_->discard(offset, 1);
  }
  void discard(uint64_t offset, uint64_t nr) override { (void)z_->discard(offset, nr); }
  bool holds(uint64_t offset) const override {
    auto info = z_->slot_info(offset);
    return info && info->kind != zram_slot_kind::empty;
  }
  uint32_t stored_size(uint64_t offset) const override {
    auto info = z_->slot_info(offset);
    if (!info) return page_size;
    return info->kind == zram_slot_kind::same ? 0 : info->size;
  }
  status set_mem_limit(uint64_t bytes) override {
    z_->set_mem_limit(bytes);
    return {};
  }
  uint64_t compact() override { return z_->compact(); }
  // A cursor walks the device a chunk at a time: huge pages are written back first, then pages
  // left idle since the cursor last passed (each chunk is marked idle as the cursor leaves it,
  // and any read or write clears the mark), so what goes is what was not used for a lap. A lap
  // ends at the highest slot ever written: a swap area sized to the arena is mostly table
  // nobody wrote, which a lap would otherwise read through, chunk after empty chunk.
  uint64_t write_back_cold(uint64_t max_pages) override {
    if (!z_->options().backing_dev.size() || max_pages == 0) return 0;
    constexpr uint64_t chunk = 64 * 1024;
    const uint64_t nr = z_->slots_end();
    if (nr <= 1) return 0;  // nothing written past the swap header
    uint64_t done = 0;
    for (uint64_t step = 0; step <= nr / chunk + 1 && done < max_pages; ++step) {
      if (wb_cursor_ == 0 || wb_cursor_ >= nr) wb_cursor_ = 1;  // slot 0 is the swap header
      const uint64_t first = wb_cursor_, n = std::min(chunk, nr - first);
      for (zram_writeback_type t : {zram_writeback_type::huge, zram_writeback_type::idle}) {
        if (done >= max_pages) break;
        zram_writeback_params p;
        p.type = t;
        p.first_page = first;
        p.nr_pages = n;
        p.max_pages = max_pages - done;
        auto r = z_->writeback(p);
        if (r.ok()) {
          done += *r;
        } else {
          // The backing file is full (ENOSPC) or failing (an NBD server unreachable: EAGAIN
          // while it backs off): another lap would only rescan the device for nothing. The
          // cursor stays, so that the pages found here go first once blocks come back.
          return done;
        }
      }
      (void)z_->mark_idle_range(first, n);
      wb_cursor_ = first + n;
    }
    return done;
  }
  std::vector<uint64_t> backing_blocks() const override { return z_->backing_blocks(); }
  zram_block_allocator* backing_allocator() const override { return z_->backing_allocator(); }
  zram_backing_stat backing_stat() const override { return z_->backing_stat(); }
  void after_fork_child() noexcept override { z_->after_fork_child(); }
  swap_device_stats stats() const override {
    swap_device_stats s;
    s.mm_stat = z_->mm_stat();
    s.stored_pages = s.mm_stat->orig_data_size / page_size;
    s.mem_used = s.mm_stat->mem_used_total;
    s.mem_used_max = s.mm_stat->mem_used_max;
    const zram_io_stat io = z_->io_stat();
    s.failed_reads = io.failed_reads;
    s.failed_writes = io.failed_writes;
    s.notify_free = io.notify_free;
    const zram_bd_stat bd = z_->bd_stat();
    s.bd_count = bd.bd_count;
    s.bd_reads = bd.bd_reads;
    s.bd_writes = bd.bd_writes;
    return s;
  }
  std::string mm_stat_text() const override { return z_->mm_stat_text(); }
  uint64_t nr_pages() const noexcept override { return z_->nr_pages(); }
  swap_dev_kind kind() const noexcept override { return swap_dev_kind::zram; }

 private:
  std::unique_ptr<zram_device> z_;
  uint64_t wb_cursor_ = 1;  // where write_back_cold goes on (one caller at a time)
};

// brd / pmem: the slots are plain host memory. A freed slot's bytes stay until its next write,
// as on a disk; only a byte per slot records whether it holds a page (for the statistics and
// the invariant checks), written by the slot's reference holder or by the free under its lock.
class ram_swap_device final : public swap_device {
 public:
  ram_swap_device(std::byte* base, uint64_t nr_pages)
      : base_(base), nr_pages_(nr_pages), present_(new std::atomic<uint8_t>[nr_pages]()) {}
  ~ram_swap_device() override { unmap_resident_memory(base_, static_cast<size_t>(pages_to_bytes(nr_pages_))); }
  status write_page(uint64_t offset, const void* src) override {
    if (offset >= nr_pages_) return error(EINVAL, "ram swap device: write past the end");
    std::memcpy(base_ + pages_to_bytes(offset), src, page_size);
    present_[offset].store(1, std::memory_order_relaxed);
    return {};
  }
  status read_page(uint64_t offset, void* dst) override {
    if (offset >= nr_pages_) return error(EINVAL, "ram swap device: read past the end");
    std::memcpy(dst, base_ + pages_to_bytes(offset), page_size);
    return {};
  }
  void slot_free_notify(uint64_t offset) override {
    if (offset < nr_pages_) present_[offset].store(0, std::memory_order_relaxed);
  }
  void discard(uint64_t offset, uint64_t nr) override {
    for (uint64_t i = offset; i < offset + nr && i < nr_pages_; ++i)
      present_[i].store(0, std::memory_order_relaxed);
  }
  bool holds(uint64_t offset) const override {
    return offset < nr_pages_ && present_[offset].load(std::memory_order_relaxed);
  }
  uint32_t stored_size(uint64_t) const override { return page_size; }
  status set_mem_limit(uint64_t) override {
    return error(ENOTSUP, "ram swap device: no mem_limit (it is all allocated at creation)");
  }
  uint64_t compact() override { return 0; }
  uint64_t write_back_cold(uint64_t) override { return 0; }
  std::vector<uint64_t> backing_blocks() const override { return {}; }
  zram_block_allocator* backing_allocator() const override { return nullptr; }
  swap_device_stats stats() const override {
    swap_device_stats s;
    for (uint64_t i = 0; i < nr_pages_; ++i) s.stored_pages += present_[i].load(std::memory_order_relaxed);
    s.mem_used = s.mem_used_max = pages_to_bytes(nr_pages_);
    return s;
  }
  std::string mm_stat_text() const override { return {}; }
  uint64_t nr_pages() const noexcept override { return nr_pages_; }
  swap_dev_kind kind() const noexcept override { return swap_dev_kind::ram; }

 private:
  std::byte* base_;
  uint64_t nr_pages_;
  std::unique_ptr<std::atomic<uint8_t>[]> present_;
};

}  // namespace

result<std::unique_ptr<swap_device>> make_zram_swap_device(uint64_t nr_pages, zram_options zram_opts) {
  zram_opts.disksize = pages_to_bytes(nr_pages);
  auto z = zram_device::create(zram_opts);
  if (!z) return z.error();
  return std::unique_ptr<swap_device>(new zram_swap_device(std::move(*z)));
}

result<std::unique_ptr<swap_device>> make_ram_swap_device(uint64_t nr_pages) {
  if (nr_pages == 0) return error(EINVAL, "ram swap device: size 0");
  // Present up front, like the seed's RAM-simulated PMEM: a write is a memcpy into memory that
  // is already mapped, not a host fault (see resident_memory.h for what that takes on this VM).
  auto base = map_resident_memory(static_cast<size_t>(pages_to_bytes(nr_pages)), "ram swap device");
  if (!base) return base.error();
  return std::unique_ptr<swap_device>(new ram_swap_device(*base, nr_pages));
}

}  // namespace uswap
