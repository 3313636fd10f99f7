// zram's statistics in the kernel's formats (drivers/block/zram/zram_drv.c: mm_stat_show,
// io_stat_show, bd_stat_show, debug_stat_show) and as structs (zram.h).
//
// Thread-safety: each counter is read on its own (relaxed): a snapshot taken under load is a
// consistent-enough sum, not an atomic cut, as in the kernel.
#include <cstdio>
#include <string>

#include "backing_dev.h"
#include "zram_drv.h"

namespace uswap {

zram_mm_stat zram_device::mm_stat() const {
  const zram_stats& s = z_->stats;
  zram_mm_stat m;
  m.orig_data_size = s.pages_stored.load(std::memory_order_relaxed) << page_shift;
  m.compr_data_size = s.compr_data_size.load(std::memory_order_relaxed);
  m.mem_used_total = z_->mem_pool->get_total_pages() << page_shift;
  m.mem_limit = z_->limit_pages.load(std::memory_order_relaxed) << page_shift;
  m.mem_used_max = s.max_used_pages.load(std::memory_order_relaxed) << page_shift;
  m.same_pages = s.same_pages.load(std::memory_order_relaxed);
  m.pages_compacted = z_->mem_pool->pool_stats().pages_compacted;
  m.huge_pages = s.huge_pages.load(std::memory_order_relaxed);
  m.huge_pages_since = s.huge_pages_since.load(std::memory_order_relaxed);
  return m;
}

zram_io_stat zram_device::io_stat() const {
  const zram_stats& s = z_->stats;
  return {s.failed_reads.load(std::memory_order_relaxed),
          s.failed_writes.load(std::memory_order_relaxed),
          s.invalid_io.load(std::memory_order_relaxed),
          s.notify_free.load(std::memory_order_relaxed)};
}

zram_bd_stat zram_device::bd_stat() const {
  const zram_stats& s = z_->stats;
  return {s.bd_count.load(std::memory_order_relaxed), s.bd_reads.load(std::memory_order_relaxed),
          s.bd_writes.load(std::memory_order_relaxed)};
}

zram_request_stat zram_device::request_stat() const {
  return {z_->nr_reads.sum(), z_->nr_writes.sum(), z_->nr_discards.sum(),
          z_->stats.miss_free.load(std::memory_order_relaxed), z_->nr_rmw_retries.sum()};
}

namespace {

template <class... T>
std::string format(const char* fmt, T... args) {
  char buf[256];
  const int n = std::snprintf(buf, sizeof buf, fmt, args...);
  return std::string(buf, n > 0 ? static_cast<size_t>(n) : 0);
}

using ull = unsigned long long;

}  // namespace

std::string zram_device::mm_stat_text() const {
  const zram_mm_stat m = mm_stat();
  // mm_stat_show(): "%8llu %8llu %8llu %8lu %8ld %8llu %8lu %8llu %8llu\n"
  return format("%8llu %8llu %8llu %8lu %8ld %8llu %8lu %8llu %8llu\n", ull(m.orig_data_size),
                ull(m.compr_data_size), ull(m.mem_used_total), (unsigned long)m.mem_limit,
                (long)m.mem_used_max, ull(m.same_pages), (unsigned long)m.pages_compacted,
                ull(m.huge_pages), ull(m.huge_pages_since));
}

std::string zram_device::io_stat_text() const {
  const zram_io_stat s = io_stat();
  return format("%8llu %8llu %8llu %8llu\n", ull(s.failed_reads), ull(s.failed_writes),
                ull(s.invalid_io), ull(s.notify_free));
}

std::string zram_device::bd_stat_text() const {
  const zram_bd_stat s = bd_stat();
  return format("%8llu %8llu %8llu\n", ull(s.bd_count), ull(s.bd_reads), ull(s.bd_writes));
}

zram_backing_stat zram_device::backing_stat() const {
  if (z_->bdev) return z_->bdev->backing_stat();
  zram_backing_stat none;
  none.connected = false;
  return none;
}

std::string zram_device::backing_stat_text() const {
  const zram_backing_stat s = backing_stat();
  if (s.kind.empty()) return "kind none\n";
  return format("kind %s\nconnected %d\nwrite_failures %llu\nread_failures %llu\n"
                "connection_losses %llu\nreconnects %llu\nserver_resets %llu\nretry_in_ms %llu\n"
                "max_in_flight %llu\nin_flight %llu\n"
                "last_error %s\n",
                s.kind.c_str(), s.connected ? 1 : 0, ull(s.write_failures), ull(s.read_failures),
                ull(s.connection_losses), ull(s.reconnects), ull(s.server_resets), ull(s.retry_in_ms),
                ull(s.max_in_flight), ull(s.in_flight),
                s.last_error.empty() ? "-" : s.last_error.c_str());
}

std::string zram_device::debug_stat_text() const {
  return format("version: %d\n0 %8llu\n", 1,
                ull(z_->stats.miss_free.load(std::memory_order_relaxed)));
}

}  // namespace uswap
