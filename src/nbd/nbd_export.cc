// The zram device behind the nbdkit plugin; the contract is in include/uswap/nbd/nbd_export.h.
#include "uswap/nbd/nbd_export.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstring>
#include <new>

#include "uswap/base/atomic_file.h"
#include "uswap/base/page.h"
#include "uswap/base/units.h"

namespace uswap {

namespace {

status bad_param(std::string_view key, std::string_view value, std::string_view why) {
  return error(EINVAL, "uswap: " + std::string(key) + "=" + std::string(value) + ": " +
                           std::string(why));
}

result<uint32_t> parse_u32(std::string_view key, std::string_view value) {
  uint32_t v = 0;
  const char* end = value.data() + value.size();
  auto [p, ec] = std::from_chars(value.data(), end, v);
  if (value.empty() || ec != std::errc() || p != end)
    return bad_param(key, value, "expected a whole number below 2^32");
  return v;
}

// One page of zeros for zero requests: write_page() recognises it as same-filled and stores the
// word only.
alignas(page_size) const uint8_t zero_page[page_size] = {};

}  // namespace

// ---------------------------------------------------------------------------------------------
// nbd_config

const char* nbd_config::help() noexcept {
  return "size=<SIZE>            (required) Device size (K/M/G suffixes)\n"
         "comp=lz4|zstd|lzo|lz4hc  Compression algorithm (default lz4)\n"
         "lock=slot_bitlock|slot_cas|global_rwlock  Slot lock mode (default slot_bitlock)\n"
         "mem_limit=<SIZE>       Most memory the compressed pool may use; writes past it fail "
         "with ENOSPC (default: none)\n"
         "backing=<PATH|URI>     Writeback file (created if missing) or NBD export (nbd://...)\n"
         "backing_size=<SIZE>    Its size (default: the device size; an export's own)\n"
         "writeback_idle=<S>     Every S seconds write back pages idle for S seconds (default 0: "
         "never)\n"
         "statsdir=<DIR>         Write mm_stat, io_stat, bd_stat, debug_stat, nbd_stat... there\n"
         "stats_interval_ms=<N>  Rewrite them every N ms (default 1000)\n"
         "checksum=on|off        Checksum stored objects so corruption reads as EIO (default on)";
}

status nbd_config::set(std::string_view key, std::string_view value) {
  auto size_value = [&](uint64_t& target, bool allow_zero) -> status {
    auto v = parse_size(value);
    if (!v.ok()) return bad_param(key, value, v.error().message());
    if (!allow_zero && *v == 0) return bad_param(key, value, "must not be 0");
    target = *v;
    return {};
  };
  if (key == "size") return size_value(size, false);
  if (key == "mem_limit") return size_value(mem_limit, true);
  if (key == "backing_size") return size_value(backing_size, true);
  if (key == "comp") {
    for (const char* alg : {"lz4", "zstd", "lzo", "lz4hc"})
      if (value == alg) {
        comp = value;
        return {};
      }
    return bad_param(key, value, "expected lz4, zstd, lzo or lz4hc");
  }
  if (key == "lock") {
    auto m = parse_zram_lock_mode(value);
    if (!m.ok()) return bad_param(key, value, m.error().message());
    lock = *m;
    return {};
  }
  if (key == "backing") {
    if (value.empty()) return bad_param(key, value, "empty path");
    backing = value;
    return {};
  }
  if (key == "statsdir") {
    if (value.empty()) return bad_param(key, value, "empty path");
    statsdir = value;
    return {};
  }
  if (key == "writeback_idle") {
    auto v = parse_u32(key, value);
    if (!v.ok()) return v.error();
    writeback_idle = *v;
    return {};
  }
  if (key == "stats_interval_ms") {
    auto v = parse_u32(key, value);
    if (!v.ok()) return v.error();
    if (*v == 0) return bad_param(key, value, "must not be 0");
    stats_interval_ms = *v;
    return {};
  }
  if (key == "checksum") {
    if (value == "on" || value == "1" || value == "true") {
      checksum = true;
      return {};
    }
    if (value == "off" || value == "0" || value == "false") {
      checksum = false;
      return {};
    }
    return bad_param(key, value, "expected on or off");
  }
  return error(EINVAL, "uswap: unknown parameter '" + std::string(key) +
                           "' (expected size, comp, lock, mem_limit, backing, backing_size, "
                           "writeback_idle, statsdir, stats_interval_ms, checksum)");
}

status nbd_config::complete() const {
  if (size == 0) return error(EINVAL, "uswap: size=<SIZE> is required (e.g. size=4G)");
  if (backing.empty() && (backing_size || writeback_idle))
    return error(EINVAL, std::string("uswap: ") +
                             (backing_size ? "backing_size=" : "writeback_idle=") +
                             " needs backing=<PATH>");
  return {};
}

zram_options nbd_config::to_zram_options() const {
  zram_options o;
  o.disksize = size;
  o.name = "nbd";
  o.comp_algorithm = comp;
  o.lock_mode = lock;
  o.mem_limit = mem_limit;
  o.backing_dev = backing;
  // A file is made as large as the device; an export has the size its server gave it.
  o.backing_dev_size = backing.empty() || backing_size ? backing_size
                       : zram_backing_is_remote(backing) ? 0
                                                         : size;
  o.checksum = checksum;
  return o;
}

int nbd_errno(const status& st) noexcept {
  switch (st.code()) {
    case 0: return 0;
    case EPERM:
    case EIO:
    case ENOMEM:
    case EINVAL:
    case ENOSPC:
    case EOVERFLOW:
    case ENOTSUP:
    case ESHUTDOWN:
      return st.code();
    case ERANGE:
    case EDOM:
      return EINVAL;
    case EDQUOT:
    case EFBIG:
      return ENOSPC;
    default:
      return EIO;
  }
}

// ---------------------------------------------------------------------------------------------
// nbd_export

nbd_export::nbd_export(const nbd_config& config, std::unique_ptr<zram_device> dev)
    : config_(config), dev_(std::move(dev)) {}

nbd_export::~nbd_export() { stop_housekeeping(); }

result<std::unique_ptr<nbd_export>> nbd_export::create(const nbd_config& config) {
  if (status st = config.complete(); !st.ok()) return st;
  auto dev = zram_device::create(config.to_zram_options());
  if (!dev.ok()) return dev.error();
  std::unique_ptr<nbd_export> e(new (std::nothrow) nbd_export(config, std::move(*dev)));
  if (!e) return error(ENOMEM, "uswap: out of memory");
  return e;
}

status nbd_export::failed(status st) {
  errors_.add();
  return st;
}

status nbd_export::out_of_range(const char* op, uint32_t count, uint64_t offset) {
  return failed(error(EINVAL, std::string("uswap: ") + op + ": range [" + std::to_string(offset) +
                                  ", +" + std::to_string(count) + ") outside the device of " +
                                  std::to_string(size()) + " bytes"));
}

status nbd_export::pread(void* buf, uint32_t count, uint64_t offset) {
  pread_.add();
  pread_bytes_.add(count);
  if (count == 0) return {};
  if (status st = dev_->read(offset, buf, count); !st.ok()) return failed(std::move(st));
  return {};
}

status nbd_export::pwrite(const void* buf, uint32_t count, uint64_t offset) {
  pwrite_.add();
  pwrite_bytes_.add(count);
  if (count == 0) return {};
  if (status st = dev_->write(offset, buf, count); !st.ok()) return failed(std::move(st));
  return {};
}

status nbd_export::trim(uint32_t count, uint64_t offset) {
  trim_.add();
  trim_bytes_.add(count);
  if (count == 0) return {};
  if (status st = dev_->discard_range(offset, count); !st.ok()) return failed(std::move(st));
  return {};
}

status nbd_export::zero(uint32_t count, uint64_t offset, bool may_trim) {
  zero_.add();
  zero_bytes_.add(count);
  if (count == 0) return {};
  if (may_trim) {
    if (status st = dev_->write_zeroes(offset, count); !st.ok()) return failed(std::move(st));
    return {};
  }
  if (offset >= size() || count > size() - offset)
    return out_of_range("zero", count, offset);
  // Without may_trim the client wants the range allocated: whole pages become same-filled zero
  // pages, the partial pages at the ends are rewritten with their zeroed bytes.
  uint64_t pos = offset;
  const uint64_t end = offset + count;
  const uint64_t head_end = std::min(end, round_up_to_page(pos));
  if (head_end > pos) {
    if (status st = dev_->write_zeroes(pos, head_end - pos); !st.ok()) return failed(std::move(st));
    pos = head_end;
  }
  for (; pos + page_size <= end; pos += page_size)
    if (status st = dev_->write_page(pos >> page_shift, zero_page); !st.ok())
      return failed(std::move(st));
  if (pos < end)
    if (status st = dev_->write_zeroes(pos, end - pos); !st.ok()) return failed(std::move(st));
  return {};
}

status nbd_export::flush() {
  flush_.add();
  return {};
}

status nbd_export::cache(uint32_t count, uint64_t offset) {
  cache_.add();
  cache_bytes_.add(count);
  if (count == 0) return {};
  if (offset >= size() || count > size() - offset)
    return out_of_range("cache", count, offset);
  alignas(8) uint8_t scratch[page_size];
  for (uint64_t index = offset >> page_shift; index <= (offset + count - 1) >> page_shift; ++index)
    if (status st = dev_->read_page(index, scratch); !st.ok()) return failed(std::move(st));
  return {};
}

status nbd_export::extents(uint32_t count, uint64_t offset, bool req_one,
                           const add_extent_fn& add) {
  extents_.add();
  if (count == 0) return {};
  if (offset >= size() || count > size() - offset)
    return out_of_range("extents", count, offset);
  const uint64_t end = offset + count;
  uint64_t index = offset >> page_shift;
  const uint64_t end_index = (end + page_size - 1) >> page_shift;
  while (index < end_index) {
    auto e = dev_->extent_at(index, end_index - index);
    if (!e.ok()) return failed(e.error());
    uint32_t flags = 0;
    switch (e->type) {
      case zram_extent_type::hole: flags = nbd_extent_hole | nbd_extent_zero; break;
      case zram_extent_type::zero: flags = nbd_extent_zero; break;
      case zram_extent_type::data: flags = 0; break;
    }
    if (!add(index << page_shift, e->nr_pages << page_shift, flags)) break;
    index += e->nr_pages;
    if (req_one) break;
  }
  return {};
}

// ---------------------------------------------------------------------------------------------
// Statistics and housekeeping

nbd_stat nbd_export::stats() const noexcept {
  nbd_stat s;
  s.pread = pread_.get();
  s.pread_bytes = pread_bytes_.get();
  s.pwrite = pwrite_.get();
  s.pwrite_bytes = pwrite_bytes_.get();
  s.trim = trim_.get();
  s.trim_bytes = trim_bytes_.get();
  s.zero = zero_.get();
  s.zero_bytes = zero_bytes_.get();
  s.flush = flush_.get();
  s.cache = cache_.get();
  s.cache_bytes = cache_bytes_.get();
  s.extents = extents_.get();
  s.errors = errors_.get();
  s.writeback_runs = wb_runs_.get();
  s.writeback_pages = wb_pages_.get();
  s.writeback_failures = wb_failures_.get();
  return s;
}

std::string nbd_export::nbd_stat_text() const {
  const nbd_stat s = stats();
  std::string out;
  auto line = [&out](const char* name, uint64_t v) {
    out += name;
    out += ' ';
    out += std::to_string(v);
    out += '\n';
  };
  line("pread", s.pread);
  line("pread_bytes", s.pread_bytes);
  line("pwrite", s.pwrite);
  line("pwrite_bytes", s.pwrite_bytes);
  line("trim", s.trim);
  line("trim_bytes", s.trim_bytes);
  line("zero", s.zero);
  line("zero_bytes", s.zero_bytes);
  line("flush", s.flush);
  line("cache", s.cache);
  line("cache_bytes", s.cache_bytes);
  line("extents", s.extents);
  line("errors", s.errors);
  line("writeback_runs", s.writeback_runs);
  line("writeback_pages", s.writeback_pages);
  line("writeback_failures", s.writeback_failures);
  return out;
}

status nbd_export::write_stats() const {
  const std::string& dir = config_.statsdir;
  if (dir.empty()) return error(EINVAL, "uswap: no statsdir= configured");
  const std::pair<const char*, std::string> files[] = {
      {"mm_stat", dev_->mm_stat_text()},
      {"io_stat", dev_->io_stat_text()},
      {"bd_stat", dev_->bd_stat_text()},
      {"backing_stat", dev_->backing_stat_text()},
      {"debug_stat", dev_->debug_stat_text()},
      {"nbd_stat", nbd_stat_text()},
      {"disksize", std::to_string(dev_->disksize()) + "\n"},
      {"comp_algorithm", config_.comp + "\n"},
      {"lock_mode", std::string(to_string(config_.lock)) + "\n"},
  };
  for (const auto& [name, text] : files)
    if (status st = write_file_atomically(dir, name, text); !st.ok())
      return error(st.code(), "uswap: statsdir: " + std::string(st.message()));
  return {};
}

status nbd_export::start_housekeeping() {
  if (config_.statsdir.empty() && config_.writeback_idle == 0) return {};
  if (!config_.statsdir.empty()) {
    if (::mkdir(config_.statsdir.c_str(), 0755) != 0 && errno != EEXIST)
      return error(errno, "uswap: statsdir: cannot create " + config_.statsdir + ": " +
                              std::strerror(errno));
    if (status st = write_stats(); !st.ok()) return st;
  }
  try {
    hk_thread_ = std::thread([this] { housekeeping_loop(); });
  } catch (const std::system_error& e) {
    return error(EAGAIN, std::string("uswap: cannot start the statistics thread: ") + e.what());
  }
  return {};
}

void nbd_export::stop_housekeeping() {
  if (!hk_thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> g(hk_mu_);
    hk_stop_ = true;
  }
  hk_cv_.notify_all();
  hk_thread_.join();
  if (!config_.statsdir.empty()) (void)write_stats();
}

void nbd_export::writeback_idle_pass() {
  wb_runs_.add();
  dev_->mark_idle(config_.writeback_idle);
  auto n = dev_->writeback({.type = zram_writeback_type::idle});
  if (n.ok())
    wb_pages_.add(*n);
  else
    wb_failures_.add();
}

void nbd_export::housekeeping_loop() {
  using clock = std::chrono::steady_clock;
  const auto stats_every = std::chrono::milliseconds(config_.stats_interval_ms);
  const auto wb_every = std::chrono::seconds(config_.writeback_idle);
  auto next_stats = clock::now() + stats_every;
  auto next_wb = clock::now() + wb_every;
  std::unique_lock<std::mutex> lk(hk_mu_);
  while (!hk_stop_) {
    auto wake = clock::time_point::max();
    if (!config_.statsdir.empty()) wake = std::min(wake, next_stats);
    if (config_.writeback_idle) wake = std::min(wake, next_wb);
    hk_cv_.wait_until(lk, wake, [this] { return hk_stop_; });
    if (hk_stop_) break;
    lk.unlock();
    const auto now = clock::now();
    if (config_.writeback_idle && now >= next_wb) {
      writeback_idle_pass();
      next_wb = now + wb_every;
    }
    if (!config_.statsdir.empty() && now >= next_stats) {
      (void)write_stats();  // a full disk or removed directory: try again next time
      next_stats = now + stats_every;
    }
    lk.lock();
  }
}

}  // namespace uswap
