// nbd: a zram device served over NBD through nbdkit - everything of the plugin but the C glue.
//
// nbdkit (the NBD server: handshake, TLS, multi-conn, structured replies) calls a plugin's C
// callbacks from its worker threads. src/nbd/nbdkit_plugin.cc turns each callback into one call
// here and each failed uswap::status into nbdkit_error(message) plus nbd_errno(status). Keeping
// this part free of nbdkit lets unit tests drive every parameter, request and error without a
// server, and run the concurrent cases under ThreadSanitizer (nbdkit itself is not built with it).
//
// Parameters (nbd_config::set, one key=value at a time, as nbdkit passes them):
//   size=SIZE           device size, required (K/M/G through uswap::parse_size); also the bare
//                       first parameter: `nbdkit nbdkit-uswap-plugin.so 4G`
//   comp=ALG            lz4 (default), zstd, lzo, lz4hc
//   lock=MODE           slot_bitlock (default), slot_cas, global_rwlock (zram_lock_mode)
//   mem_limit=SIZE      zram's mem_limit; a write that needs more memory fails with ENOSPC
//   backing=PATH        writeback file (created if missing), as big as the device unless
//   backing_size=SIZE   says otherwise
//   writeback_idle=S    every S seconds, pages not accessed for S seconds go to the backing file
//                       (zram's "echo S > idle; echo idle > writeback"); default 0: never
//   statsdir=DIR        the statistics files, rewritten every stats_interval_ms (see below)
//   stats_interval_ms=N default 1000
//   checksum=on|off     zram_options::checksum (default on: a corrupt object reads as EIO)
//
// Requests map to zram:
//   pread    zram_device::read: whole pages decompress straight into the client's buffer
//   pwrite   zram_device::write: whole pages compress straight from it; the parts of pages at an
//            unaligned start or end are atomic read-modify-writes under the slot lock
//   trim     discard_range: whole pages are freed (read as zeros), partial pages at the ends keep
//            their bytes (trim is advisory in NBD, and zram's discard does the same)
//   zero     with NBD_CMD_FLAG_NO_HOLE absent (may_trim): write_zeroes, whole pages freed;
//            otherwise whole pages become same-filled zero pages (ZRAM_SAME: the slot is stored
//            but holds no pool memory). Both avoid compression, so fast zero is always honoured
//   flush    nothing: the store is memory, and the backing file only extends it for the life of
//            the process (zram's contents do not survive a reset either)
//   cache    reads the range: the pages count as accessed (idle writeback passes them over) and
//            written-back blocks come into the host page cache
//   extents  zram_device::extent_at: empty slots are hole+zero, zero pages zero, the rest data
//
// Statistics (statsdir=DIR): the files of /sys/block/zram<id>/ in the kernel's formats -
// mm_stat, io_stat, bd_stat, debug_stat - plus disksize, comp_algorithm, lock_mode, and nbd_stat
// ("name value" lines: requests and bytes per NBD command, errors, writeback runs). Each file is
// replaced atomically (written aside, then renamed), so `cat DIR/mm_stat` never sees half a file.
//
// Errors: EINVAL for a bad parameter (named) or a request outside the device, ENOSPC at mem_limit
// or a full backing file, EIO for a corrupt object or a failed backing-file read, ENOMEM when
// host memory is refused. A failed request leaves every page it did not reach as it was; pages of
// a multi-page write before the failing one keep the new data (NBD leaves a failed write's range
// unspecified).
//
// Thread-safety: the request methods may be called concurrently from any number of threads and
// connections (nbdkit's PARALLEL model) and keep zram_device's guarantee: each page is read or
// written atomically. start_housekeeping() and stop_housekeeping() are called once each, from one
// thread, with no request in progress across stop_housekeeping() and destruction.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "uswap/base/status.h"
#include "uswap/zram/zram.h"

namespace uswap {

struct nbd_config {
  uint64_t size = 0;                                   // size=, required
  std::string comp = "lz4";                            // comp=, default lz4
  zram_lock_mode lock = zram_lock_mode::slot_bitlock;  // lock=, default slot_bitlock
  uint64_t mem_limit = 0;                              // mem_limit=, default 0: none
  std::string backing = {};                            // backing=, default none
  uint64_t backing_size = 0;                           // backing_size=, default 0: size
  uint32_t writeback_idle = 0;                         // writeback_idle= seconds, default 0: off
  std::string statsdir = {};                           // statsdir=, default none
  uint32_t stats_interval_ms = 1000;                   // stats_interval_ms=, default 1000
  bool checksum = true;                                // checksum=, default on

  // One parameter. EINVAL naming the key for an unknown key or a bad value; the config is
  // unchanged then.
  status set(std::string_view key, std::string_view value);
  // After the last parameter: EINVAL when size= is missing or options contradict each other.
  status complete() const;
  // The zram device these parameters describe (name "nbd").
  zram_options to_zram_options() const;
  // The accepted keys, one "key=VALUE  meaning" line each: nbdkit's config_help.
  static const char* help() noexcept;
};

// The errno an NBD client receives for a failed status. NBD carries only EPERM, EIO, ENOMEM,
// EINVAL, ENOSPC, EOVERFLOW, ENOTSUP and ESHUTDOWN; the codes uswap uses pass through (ERANGE
// and EDOM become EINVAL, EDQUOT and EFBIG ENOSPC), anything else is EIO.
int nbd_errno(const status& st) noexcept;

// NBD block status flags of an extent (the values of NBD_STATE_HOLE / NBD_STATE_ZERO, which
// nbdkit's NBDKIT_EXTENT_HOLE / NBDKIT_EXTENT_ZERO share).
inline constexpr uint32_t nbd_extent_hole = 1;
inline constexpr uint32_t nbd_extent_zero = 2;

// Per-command counters, the contents of nbd_stat.
struct nbd_stat {
  uint64_t pread = 0, pread_bytes = 0;
  uint64_t pwrite = 0, pwrite_bytes = 0;
  uint64_t trim = 0, trim_bytes = 0;
  uint64_t zero = 0, zero_bytes = 0;
  uint64_t flush = 0;
  uint64_t cache = 0, cache_bytes = 0;
  uint64_t extents = 0;
  uint64_t errors = 0;              // requests that failed (any command)
  uint64_t writeback_runs = 0;      // housekeeping writeback passes (writeback_idle=)
  uint64_t writeback_pages = 0;     // pages they moved to the backing file
  uint64_t writeback_failures = 0;  // passes that ended with an error (e.g. backing file full)
};

class nbd_export {
 public:
  // Creates the zram device of a completed config. Errors as zram_device::create (EINVAL naming
  // the option, ENOMEM, the backing file's open error).
  static result<std::unique_ptr<nbd_export>> create(const nbd_config& config);
  ~nbd_export();
  nbd_export(const nbd_export&) = delete;
  nbd_export& operator=(const nbd_export&) = delete;

  uint64_t size() const noexcept { return dev_->disksize(); }
  const nbd_config& config() const noexcept { return config_; }
  zram_device& device() noexcept { return *dev_; }

  // --- Requests (see the table above). A count of 0 is a successful no-op.
  status pread(void* buf, uint32_t count, uint64_t offset);
  status pwrite(const void* buf, uint32_t count, uint64_t offset);
  status trim(uint32_t count, uint64_t offset);
  status zero(uint32_t count, uint64_t offset, bool may_trim);
  status flush();
  status cache(uint32_t count, uint64_t offset);
  // Calls add(offset, length, flags) for consecutive extents from the page holding `offset`
  // (the first may start before `offset`; nbdkit clips it) until `count` bytes are covered, or
  // only once with req_one. add returns false to stop early (nbdkit's extent list is full).
  using add_extent_fn = std::function<bool(uint64_t offset, uint64_t length, uint32_t flags)>;
  status extents(uint32_t count, uint64_t offset, bool req_one, const add_extent_fn& add);

  // --- Statistics and housekeeping.
  nbd_stat stats() const noexcept;
  std::string nbd_stat_text() const;
  // Writes every statistics file into statsdir (EINVAL when none is configured; the error of a
  // failed write otherwise).
  status write_stats() const;
  // Starts the thread that rewrites the statistics files and runs idle writeback, if either is
  // configured. nbdkit calls it after it has forked into the background (threads do not survive
  // fork).
  status start_housekeeping();
  // Stops that thread and writes the statistics one last time.
  void stop_housekeeping();

 private:
  nbd_export(const nbd_config& config, std::unique_ptr<zram_device> dev);
  status failed(status st);
  status out_of_range(const char* op, uint32_t count, uint64_t offset);
  void housekeeping_loop();
  void writeback_idle_pass();

  struct alignas(64) counter {
    std::atomic<uint64_t> n{0};
    void add(uint64_t v = 1) noexcept { n.fetch_add(v, std::memory_order_relaxed); }
    uint64_t get() const noexcept { return n.load(std::memory_order_relaxed); }
  };

  nbd_config config_;
  std::unique_ptr<zram_device> dev_;
  counter pread_, pread_bytes_, pwrite_, pwrite_bytes_, trim_, trim_bytes_, zero_, zero_bytes_,
      flush_, cache_, cache_bytes_, extents_, errors_, wb_runs_, wb_pages_, wb_failures_;

  std::mutex hk_mu_;
  std::condition_variable hk_cv_;
  bool hk_stop_ = false;
  std::thread hk_thread_;
};

}  // namespace uswap
