// zram: a compressed RAM page store, after the kernel's drivers/block/zram, as a library.
//
// A zram_device holds disksize / 4 KiB pages ("slots"). Each page written is stored in the
// cheapest form that holds it exactly:
//   - a page whose 8-byte words are all equal keeps only that word in its slot (ZRAM_SAME); no
//     memory is allocated;
//   - a page that compresses to less than the zsmalloc huge_class_size is stored compressed in a
//     zsmalloc object;
//   - a page that does not (incompressible data) is stored raw in a page-sized object
//     (ZRAM_HUGE), as the kernel does, because decompressing it would buy nothing.
// A slot never written, or discarded, reads as zeros.
//
// Beyond the basic store (write_page / read_page / discard and byte-granular read / write), a
// device offers the kernel's post-processing: idle marking by access time (mark_idle), writeback
// of idle, huge or incompressible slots to a backing file that reads back transparently
// (ZRAM_WB; bd_stat), recompression with secondary codecs kept only when smaller (ZRAM_COMP
// priorities; ZRAM_INCOMPRESSIBLE when none helps), zsmalloc compaction, and mem_limit: a write
// that would take the pool past it fails with ENOSPC and changes nothing. Statistics come in the
// kernel's exact formats (mm_stat, io_stat, bd_stat, debug_stat) and as structs.
//
// Integrity. With zram_options::checksum (the default) every stored object carries an XXH3-based
// 32-bit checksum, verified before the object is decompressed or copied out: a corrupted object
// reads as EIO and a zeroed buffer, never as plausible garbage (lz4 and lzo have no checksum of
// their own). The kernel has none; turn it off to match it exactly.
//
// Locking (seed 002). One code path, three lock modes chosen at creation (zram_lock_mode):
//   global_rwlock  one table rwlock, read-held across a page read and its decompression,
//                  write-held for every table update: zram before the seed (3.15's
//                  meta->tb_lock, an rwlock_t that let readers in while a writer waited; here
//                  std::shared_mutex, glibc's reader-preferring pthread_rwlock, which sleeps);
//   slot_cas       the seed's patch as posted: a per-slot CAS IDLE->ACCESS, retried with
//                  cpu_relax() until it succeeds, no sleeping, no read before the CAS;
//   slot_bitlock   the sync layer's bit_lock in the slot word: spin briefly on relaxed loads,
//                  then park on a futex (what the kernel merged as a bit spin lock in 2014 and
//                  made sleepable in 2025, done for userspace where holders get preempted).
// In every mode compression runs outside the lock: a writer compresses into its per-thread
// stream and allocates the new object first, then takes the lock once to free the old object and
// install the new one in the same section (the 2025 kernel bug freed the old handle in a separate
// section and leaked). Reads hold the lock across decompression (the object must not be freed
// under them), as the kernel does.
//
// Thread-safety: every member function may be called concurrently from any number of threads on
// any slots. Each page operation is atomic (linearizable) with respect to the others on the same
// slot: a read returns a page exactly as some write left it (or zeros), never a mix. Byte-granular
// writes of part of a page are atomic read-modify-writes of that page even when compression is
// outside the lock: the writer reads the page, merges its bytes, compresses, and installs only if
// the stored page is still the one it read (compared by content under the lock), retrying
// otherwise; a concurrent write to another part of the same page is never lost. Post-processing
// (writeback, recompress) runs one call at a time per device (a device mutex) and concurrently
// with I/O: a slot written, discarded or read after it was selected keeps its new state and is
// skipped (ZRAM_PP_SLOT, as in the kernel).
//
// Errors (uswap::status): EINVAL for an offset or length outside the device, a zero length or a
// bad option; ENOSPC when mem_limit or the backing file is full; ENOMEM when host memory is
// refused; EIO for a corrupt object or a failed backing-file read. A failed operation leaves every
// stored page as it was.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "uswap/base/enum_names.h"
#include "uswap/base/page.h"
#include "uswap/base/status.h"
#include "uswap/compress/zcomp_ops.h"
#include "uswap/sync/lockstat.h"

namespace uswap {

class zs_pool;

// ---------------------------------------------------------------------------------------------
// The slot table (drivers/block/zram/zram_drv.h). Public so that its layout is documented and
// checked; callers never touch entries directly.

// The low ZRAM_FLAG_SHIFT bits of a slot's flags word hold the object size (0..page_size), the
// bits above hold zram_pageflags, bits 32..63 hold the access time (ac_time, seconds).
inline constexpr unsigned ZRAM_FLAG_SHIFT = page_shift + 1;

enum zram_pageflags : unsigned {
  ZRAM_SAME = ZRAM_FLAG_SHIFT,  // the page is one 8-byte word repeated; the handle holds the word
  ZRAM_ENTRY_LOCK,              // slot lock: held bit (slot_cas, slot_bitlock)
  ZRAM_WB,                      // stored in the backing file; the handle holds the block
  ZRAM_PP_SLOT,                 // selected for post-processing (writeback, recompress)
  ZRAM_HUGE,                    // stored uncompressed (incompressible page)
  ZRAM_IDLE,                    // not accessed since the last mark_idle
  ZRAM_INCOMPRESSIBLE,          // no secondary codec could shrink it
  ZRAM_COMP_PRIORITY_BIT1,      // codec priority: 0 primary, 1..3 recompression codecs
  ZRAM_COMP_PRIORITY_BIT2,
  ZRAM_ENTRY_WAITERS,           // slot lock: waiters bit (slot_bitlock parks; not in the kernel)
  __NR_ZRAM_PAGEFLAGS,
};
static_assert(__NR_ZRAM_PAGEFLAGS <= 32, "flags and lock bits share the word's low half");

inline constexpr unsigned ZRAM_AC_TIME_SHIFT = 32;
inline constexpr unsigned ZRAM_COMP_PRIORITY_MASK = 0x3;
inline constexpr unsigned ZRAM_MAX_COMPS = 4;  // the primary codec and up to 3 for recompression

// struct zram_table_entry: 16 bytes per slot. The lock lives in `flags`, so the table costs no
// more than handle + one word per page, as in the kernel. All-zero bytes are an empty, unlocked
// slot: the table is zero-filled on demand (uswap/base/zeroed_array.h).
struct zram_table_entry {
  uint64_t handle = 0;              // zs_handle, the fill word (ZRAM_SAME) or the block (ZRAM_WB)
  std::atomic<uint64_t> flags{0};   // size | zram_pageflags | lock bits | ac_time << 32
};
static_assert(sizeof(zram_table_entry) == 16);

// ---------------------------------------------------------------------------------------------
// Options.

enum class zram_lock_mode : uint8_t { global_rwlock, slot_cas, slot_bitlock };

inline constexpr std::array<zram_lock_mode, 3> all_zram_lock_modes = {
    zram_lock_mode::global_rwlock, zram_lock_mode::slot_cas, zram_lock_mode::slot_bitlock};

inline constexpr enum_name<zram_lock_mode> zram_lock_mode_names[] = {
    {zram_lock_mode::global_rwlock, "global_rwlock"},
    {zram_lock_mode::slot_cas, "slot_cas"},
    {zram_lock_mode::slot_bitlock, "slot_bitlock"}};
static_assert(valid_table(zram_lock_mode_names));

std::string_view to_string(zram_lock_mode mode) noexcept;
// "global_rwlock", "slot_cas", "slot_bitlock" (EINVAL lists them otherwise).
result<zram_lock_mode> parse_zram_lock_mode(std::string_view name);

// Where a zram device's backing-file blocks come from when several devices write back into one
// file (the processes of one `uswap run` job share theirs): 4 KiB blocks, reserved with one
// holder, retained by a fork's copy of a device, free when the last holder releases. Every
// member must be callable from any thread, concurrently.
class zram_block_allocator {
 public:
  virtual ~zram_block_allocator() = default;
  static constexpr uint64_t no_block = ~uint64_t{0};
  virtual uint64_t reserve() noexcept = 0;  // a free block, held once; no_block when full
  virtual void retain(uint64_t block) noexcept = 0;
  virtual void release(uint64_t block) noexcept = 0;
  virtual uint64_t nr_blocks() const noexcept = 0;
};

// True when a backing_dev spec names a remote NBD export ("nbd://", "nbds://", "nbd+unix://",
// "nbds+unix://", "nbd+vsock://", "nbds+vsock://": libnbd's URIs) rather than a file.
bool zram_backing_is_remote(std::string_view spec) noexcept;
// How many 4 KiB blocks the export a remote spec names can hold: its size less the header
// block (docs/design/zram.md, "Remote writeback"). Connects to ask; the connect error otherwise.
result<uint64_t> zram_remote_backing_blocks(const std::string& spec);

struct zram_options {
  // Device size in bytes (the kernel's disksize), rounded up to whole pages. Required: 0 is EINVAL.
  uint64_t disksize = 0;
  // Name used in statistics, lock classes and messages. Default "zram0".
  std::string name = "zram0";
  // Primary codec (comp_algorithm): "lz4", "lz4hc", "zstd" or "lzo". Default "lzo", the family of
  // the kernel's default lzo-rle and the seed's codec.
  std::string comp_algorithm = "lzo";
  // Its level; zcomp_param_no_level (the default) is the codec's default level.
  int comp_level = zcomp_param_no_level;
  // Recompression codecs (recomp_algorithm), priority 1, 2, 3 in order. Default none.
  std::vector<std::string> recomp_algorithms = {};
  // How slots are locked. Default slot_bitlock.
  zram_lock_mode lock_mode = zram_lock_mode::slot_bitlock;
  // mem_limit in bytes, rounded up to pages: the most memory the pool may hold. Default 0, none.
  uint64_t mem_limit = 0;
  // Writeback target (backing_dev): a file, created if missing, or an NBD export's URI
  // (zram_backing_is_remote), reached through libnbd. Default empty: no writeback.
  std::string backing_dev = {};
  // Size of the backing file in bytes: 0 (the default) uses the file's current size; otherwise
  // the file is extended to it if shorter. A zero-sized backing file is EINVAL, as in the kernel.
  // For an export: 0 uses all of it; a size the export does not have is EINVAL.
  uint64_t backing_dev_size = 0;
  // The backing file's blocks are handed out by this allocator, shared with other devices
  // writing into the same file, instead of by the device's own bitmap (the file's size is then
  // the allocator's nr_blocks). Default nullptr: the device's own.
  zram_block_allocator* backing_allocator = nullptr;
  // For an NBD export: how long a request may go unanswered, and how long a read waits for a
  // lost server to come back (the kernel nbd's timeout and dead_conn_timeout), in milliseconds.
  // Past it the read is EIO; writeback only pauses. Default 30000; 0 is EINVAL.
  uint64_t backing_timeout_ms = 30'000;
  // Checksum every stored object (see "Integrity" above). Default true.
  bool checksum = true;
  // zsmalloc's chain size (CONFIG_ZSMALLOC_CHAIN_SIZE), 1..16. Default 8.
  unsigned max_pages_per_zspage = 8;
  // Ask for transparent huge pages for the pool's 2 MiB chunks (zspage_arena.h): a chunk then
  // faults in at once, the fast way to fill a device, but is resident in full from its first
  // zspage. false: 4 KiB faults, and the pool's memory follows what it holds (a pager counts its
  // pool against a bound). Default true.
  bool huge_page_chunks = true;
  // Source of access times in seconds (ac_time). Default nullptr: CLOCK_MONOTONIC_COARSE seconds.
  // Tests pass a controllable clock; it must be callable from any thread.
  uint32_t (*clock)() = nullptr;
};

// ---------------------------------------------------------------------------------------------
// Statistics.

// /sys/block/zram<id>/mm_stat, in column order; sizes in bytes.
struct zram_mm_stat {
  uint64_t orig_data_size = 0;   // pages stored (including same-filled and written back) * 4 KiB
  uint64_t compr_data_size = 0;  // compressed bytes of the pages held in memory
  uint64_t mem_used_total = 0;   // memory held by the pool (zs_get_total_pages)
  uint64_t mem_limit = 0;
  uint64_t mem_used_max = 0;
  uint64_t same_pages = 0;
  uint64_t pages_compacted = 0;
  uint64_t huge_pages = 0;
  uint64_t huge_pages_since = 0;
};

// /sys/block/zram<id>/io_stat. The kernel dropped invalid_io in 6.x and prints 0 there; uswap
// still counts requests refused with EINVAL in that column.
struct zram_io_stat {
  uint64_t failed_reads = 0;
  uint64_t failed_writes = 0;
  uint64_t invalid_io = 0;
  uint64_t notify_free = 0;
};

// /sys/block/zram<id>/bd_stat, in 4 KiB pages.
struct zram_bd_stat {
  uint64_t bd_count = 0;   // pages in the backing file now
  uint64_t bd_reads = 0;   // pages read from it
  uint64_t bd_writes = 0;  // pages written to it
};

// The writeback target's health (not in the kernel, whose block layer reports a failing backing
// device in dmesg): a file is always connected; an NBD export can be unreachable, and then
// writeback pauses (the pages stay in the pool) and retries with backoff.
struct zram_backing_stat {
  std::string kind;               // "file" or "nbd"; empty without a backing device
  bool connected = true;          // false while the export cannot be reached
  uint64_t write_failures = 0;    // pages whose writeback failed and stayed in the pool
  uint64_t read_failures = 0;     // pages that could not be read back (EIO to the reader)
  uint64_t connection_losses = 0; // connections found dead (closed, made again after a backoff)
  uint64_t reconnects = 0;        // connections made again after a loss or a fork
  uint64_t server_resets = 0;     // new connections that found a server without the pages
                                  // (its header block changed): every page written before is lost
  uint64_t retry_in_ms = 0;       // while not connected: when writeback tries again
  uint64_t max_in_flight = 0;     // most writes in flight at once (batched asynchronous I/O)
  uint64_t in_flight = 0;         // writes sent and not yet acknowledged, now
  std::string last_error;         // the last failure, for the message; empty when none
};

// Request counts (the block layer's /sys/block/zram<id>/stat, which zram itself does not keep).
struct zram_request_stat {
  uint64_t reads = 0;         // pages read (read_page, and each page a byte read touched)
  uint64_t writes = 0;        // pages written
  uint64_t discards = 0;      // pages discarded
  uint64_t miss_free = 0;     // slot_free_notify calls that found the slot locked (debug_stat)
  uint64_t rmw_retries = 0;   // partial-page writes that found the page changed and redid it
};

// The state of one slot (debugfs block_state, plus what nbd extents need).
enum class zram_slot_kind : uint8_t { empty, same, compressed, huge, written_back };

struct zram_slot_info {
  zram_slot_kind kind = zram_slot_kind::empty;
  uint64_t fill = 0;             // the repeated word, for `same`
  uint32_t size = 0;             // object size in bytes (compressed / huge)
  uint32_t comp_priority = 0;    // 0 primary codec, 1..3 recompression codecs
  uint32_t ac_time = 0;          // last access, seconds of the device clock
  bool idle = false;
  bool incompressible = false;
  bool huge = false;             // ZRAM_HUGE: stored raw (cleared when written back)
  uint64_t handle = 0;           // zs_handle (compressed, huge), block (written_back); diagnostics
};

// What a run of pages holds, as NBD block status (extents) reports it.
enum class zram_extent_type : uint8_t {
  hole,  // never written, or discarded: reads as zeros and holds nothing
  zero,  // same-filled with the word 0: reads as zeros, holds no pool memory, counts as stored
  data,  // anything else: compressed, huge, written back, or same-filled with a non-zero word
};

struct zram_extent {
  zram_extent_type type = zram_extent_type::hole;
  uint64_t nr_pages = 0;  // pages from the index asked for, all of `type`
};

// ---------------------------------------------------------------------------------------------
// Post-processing requests.

// writeback's type= (HUGE_WRITEBACK, IDLE_WRITEBACK, INCOMPRESSIBLE_WRITEBACK).
enum class zram_writeback_type : uint8_t { idle, huge, huge_idle, incompressible };
inline constexpr enum_name<zram_writeback_type> zram_writeback_type_names[] = {
    {zram_writeback_type::idle, "idle"},
    {zram_writeback_type::huge, "huge"},
    {zram_writeback_type::huge_idle, "huge_idle"},
    {zram_writeback_type::incompressible, "incompressible"}};
static_assert(valid_table(zram_writeback_type_names));

struct zram_writeback_params {
  zram_writeback_type type = zram_writeback_type::idle;  // default idle
  // Slots [first_page, first_page + nr_pages) (page_indexes=); nr_pages 0 (default) means to the
  // end of the device.
  uint64_t first_page = 0;
  uint64_t nr_pages = 0;
  // At most this many slots (the first found in the range); 0 (default): no bound (the kernel's
  // writeback_limit, per call).
  uint64_t max_pages = 0;
};

// recompress's type=.
enum class zram_recompress_type : uint8_t { all, idle, huge, huge_idle };
inline constexpr enum_name<zram_recompress_type> zram_recompress_type_names[] = {
    {zram_recompress_type::all, "all"},
    {zram_recompress_type::idle, "idle"},
    {zram_recompress_type::huge, "huge"},
    {zram_recompress_type::huge_idle, "huge_idle"}};
static_assert(valid_table(zram_recompress_type_names));

struct zram_recompress_params {
  zram_recompress_type type = zram_recompress_type::all;  // default: every eligible slot
  // Only objects of at least this many bytes (threshold=); 0 (default) means any size. Must be
  // below huge_class_size.
  uint32_t threshold = 0;
  // At most this many slots are tried (max_pages=); 0 (default) means no limit.
  uint64_t max_pages = 0;
  // Use only the codec of this priority (priority=, 1..3); 0 (default) tries them in order.
  uint32_t priority = 0;
};

// ---------------------------------------------------------------------------------------------

struct zram;  // the device's state (zram_drv.cc), the kernel's struct zram

class zram_device {
 public:
  // disksize_store(): allocates the table, the pool and the codecs. EINVAL for a bad option
  // (names the option), ENOMEM when memory is refused, or the backing file's open error.
  static result<std::unique_ptr<zram_device>> create(const zram_options& options);
  // zram_reset_device(): frees every object. No call may be in progress.
  ~zram_device();
  zram_device(const zram_device&) = delete;
  zram_device& operator=(const zram_device&) = delete;

  const zram_options& options() const noexcept;
  uint64_t disksize() const noexcept;  // bytes, a multiple of page_size
  uint64_t nr_pages() const noexcept;
  // One past the highest slot ever written (0 before the first write; never lowered). A device
  // sized far beyond what it stores (a swap area the size of an arena) walks [0, slots_end())
  // only: the table past it costs nothing until written.
  uint64_t slots_end() const noexcept;
  zram_lock_mode lock_mode() const noexcept;

  // --- Page I/O (zram_write_page / zram_read_page / discard). `index` < nr_pages(); src and dst
  // hold page_size bytes.
  status write_page(uint64_t index, const void* src);
  status read_page(uint64_t index, void* dst);
  // Reads slot index[i] into dst[i] for each i, as read_page would, result[i] its status (the
  // page zeroed on failure); the three spans are equally long, the indices distinct and
  // ascending. The pages written back are read from the backing device in one batch with their
  // slots locked (a remote one's in one round trip, as swap readahead's reads are submitted
  // before it waits for the first). At most max_read_batch pages; page by page when more, under
  // global_rwlock (a second read lock of the table's rwlock may queue behind a writer that waits
  // for the first) and without a backing device.
  static constexpr size_t max_read_batch = 16;
  void read_pages(std::span<const uint64_t> index, std::span<void* const> dst,
                  std::span<status> result);
  // Frees slots [index, index + nr_pages): they read as zeros afterwards. Counted in notify_free.
  status discard(uint64_t index, uint64_t nr_pages = 1);
  // zram_slot_free_notify(): the swap layer's "this slot is free". Frees the slot if its lock
  // can be taken without waiting; otherwise counts a miss_free and returns false (the slot keeps
  // its contents, as in the kernel).
  bool slot_free_notify(uint64_t index);

  // --- Byte-granular I/O (partial pages are atomic read-modify-writes, see above).
  status read(uint64_t offset, void* dst, uint64_t len);
  status write(uint64_t offset, const void* src, uint64_t len);
  // Zeroes a byte range: whole pages are freed, partial pages rewritten (nbd's WRITE_ZEROES).
  status write_zeroes(uint64_t offset, uint64_t len);
  // Frees the whole pages inside a byte range and leaves partial pages at its ends untouched
  // (zram_bio_discard; nbd's TRIM).
  status discard_range(uint64_t offset, uint64_t len);

  // One slot's state, read under its lock (EINVAL for a bad index).
  result<zram_slot_info> slot_info(uint64_t index) const;
  // The type of page `index` and how many pages from it (at most max_pages, and never past the
  // end) share that type: one call answers an NBD extents request a run at a time, without a
  // slot_info per page. A slot's kind is read from its word without the lock; only a same-filled
  // slot is locked, to read its fill word. Like NBD block status, the answer is a snapshot that a
  // concurrent write may already have changed. EINVAL for a bad index or max_pages 0.
  result<zram_extent> extent_at(uint64_t index, uint64_t max_pages) const;

  // --- Post-processing.
  // idle_store(): marks every stored slot (not same-filled, not written back) idle, or with
  // min_age, only those last accessed more than min_age seconds ago (and clears the mark on the
  // others), as the kernel's "echo SECONDS > idle". Returns the number of slots marked idle.
  uint64_t mark_idle(std::optional<uint32_t> min_age_seconds = std::nullopt);
  // The same over slots [first_page, first_page + nr_pages) only (clamped to the device).
  uint64_t mark_idle_range(uint64_t first_page, uint64_t nr_pages,
                           std::optional<uint32_t> min_age_seconds = std::nullopt);
  // The backing blocks the written-back slots hold, one entry per slot: a fork's copy of the
  // device refers to the same blocks, and must hold them too (zram_block_allocator::retain).
  std::vector<uint64_t> backing_blocks() const;
  zram_block_allocator* backing_allocator() const noexcept;
  // In a child after fork(), before the device is used there: a remote backing device's
  // connections belonged to the parent and are made anew. No other thread may use the device.
  void after_fork_child() noexcept;
  // writeback_store(): moves the selected slots to the backing file; returns how many moved.
  // EINVAL without a backing file; ENOSPC when it filled up (the slots moved so far stay moved).
  result<uint64_t> writeback(const zram_writeback_params& params = {});
  // recompress_store(): returns how many slots were replaced by a smaller object. EINVAL without
  // recompression codecs or for a bad priority / threshold.
  result<uint64_t> recompress(const zram_recompress_params& params = {});
  // compact_store(): zs_compact; returns pages freed.
  uint64_t compact();
  // mem_limit_store() (bytes, rounded up to pages; 0 removes it) and mem_used_max_store("0").
  void set_mem_limit(uint64_t bytes);
  void reset_mem_used_max();

  // --- Statistics.
  zram_mm_stat mm_stat() const;
  zram_io_stat io_stat() const;
  zram_bd_stat bd_stat() const;
  zram_request_stat request_stat() const;
  // The kernel's text, byte for byte in format: "%8llu %8llu ...\n".
  std::string mm_stat_text() const;
  std::string io_stat_text() const;
  std::string bd_stat_text() const;
  // The backing device's health (zram_backing_stat); kind empty without one.
  zram_backing_stat backing_stat() const;
  // The same as text, one "key value" per line (uswap's own file, beside bd_stat).
  std::string backing_stat_text() const;
  std::string debug_stat_text() const;
  // The lock class of the slot locks (slot modes) or of the table rwlock (global_rwlock);
  // lockstat::enable() turns counting on.
  lock_class& lock_stats() noexcept;
  // Compressed objects of this size or more are stored raw (ZRAM_HUGE): zs_huge_class_size().
  size_t huge_class_size() const noexcept;
  // The pool, for diagnostics and tests (class statistics, corrupting an object on purpose).
  zs_pool& mem_pool() noexcept;

 private:
  explicit zram_device(std::unique_ptr<zram> z) noexcept;
  std::unique_ptr<zram> z_;
};

}  // namespace uswap
