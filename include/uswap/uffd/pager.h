// pager: real program memory paged through uswap's own swap stack with userfaultfd.
//
// A pager is what a memory cgroup is to the kernel: it owns a resident limit, the LRU its
// reclaim scans, and the swap device its pages go to. It reserves one virtual range (the arena,
// `max_size` bytes, MAP_NORESERVE) and registers it with userfaultfd (MISSING and WP modes).
// Memory is handed out of the arena with map() / unmap() (mmap-like, zero-filled) or as
// uswap::region objects (region.h); the LD_PRELOAD shim of `uswap run` routes a program's large
// allocations here. Free arena space is PROT_NONE, so a stray access is a SIGSEGV as elsewhere.
//
// Paging (the kernel's counterpart in brackets):
//   - first touch of a page: a read maps the shared zero page (UFFDIO_ZEROPAGE), a write a zeroed
//     page (UFFDIO_COPY) [do_anonymous_page];
//   - at most `limit` bytes are mapped at any time: a fault that would pass it first reclaims a
//     pass of pages [try_charge -> try_to_free_mem_cgroup_pages]. Victims come from a clock over
//     the mapped pages in fault order: a page referenced since the hand last passed gets a second
//     chance [shrink_inactive_list / folio_check_references]. References are seen through
//     faults: every fault references its page, and with `track_writes` reclaim write-protects
//     all resident unpinned pages with one UFFDIO_WRITEPROTECT per mapping twice per lap of the
//     clock (a sweep, as MGLRU ages page tables in bulk), so the next write to each faults once
//     and marks it referenced (this kernel has neither page_idle nor soft-dirty tracking, and
//     /proc/self/pagemap has no accessed bit);
//   - eviction [shrink_folio_list -> try_to_unmap -> swap_writepage]: the victims are
//     write-protected first (by a sweep since they were last made writable, or else by
//     eviction's own UFFDIO_WRITEPROTECT), then copied out, compressed into the zram device
//     under a swap slot, and dropped with MADV_DONTNEED. A write that races the eviction hits
//     the write-protection and waits for the page lock; it then finds the page swapped out and
//     swaps it in, so no write is ever lost (src/uffd/pager_impl.h has the argument, sweeps and
//     pins included). All-zero pages take no slot [si->zeromap];
//   - refault [do_swap_page]: the slot is decompressed and mapped with UFFDIO_COPY. A write
//     fault maps it writable and frees the slot; a read fault maps it write-protected and keeps
//     the slot, so evicting the still-clean page again costs no compression [swap cache]. A
//     write then faults once, frees the slot and unprotects the page;
//   - readahead [swap_vma_readahead, fault-around]: a fault continuing a sequential run resolves
//     up to `readahead_max` following pages of the same kind with one ioctl.
//
// Who resolves faults (fault_mode):
//   - sigbus (default): UFFD_FEATURE_SIGBUS. The faulting thread itself takes SIGBUS and
//     resolves its fault in the pager's handler (the ExtMem design): no thread switch. A fault
//     taken in kernel mode cannot be resolved this way: the system call returns EFAULT. Memory
//     that a system call will touch must be pinned first (pin(); the shim does it around read,
//     write and the other I/O calls it wraps). Threads must not block SIGBUS.
//   - handler_thread: `handler_threads` threads read fault messages from the descriptor and
//     resolve them while the faulting thread sleeps in the kernel (the umap design). Kernel-mode
//     faults work without pinning, if the descriptor may take them (uffd_access).
//
// Privileges: as root (or with vm.unprivileged_userfaultfd = 1, CAP_SYS_PTRACE, or access to
// /dev/userfaultfd) the descriptor takes kernel-mode faults. Otherwise only
// UFFD_USER_MODE_ONLY is possible: user-mode faults, write-protection and SIGBUS all work, but
// a kernel-mode access to a page that is not mapped, or mapped write-protected, fails with
// EFAULT in either fault mode; pinning is then the only way to let a system call reach the
// memory. kernel_faults() tells which case applies.
//
// Fork: the arena is MADV_DONTFORK. A child process does not inherit it (an access is SIGSEGV,
// never silently zeroes), and the pager refuses every operation in the child.
//
// Thread-safety: every member may be called from any thread. Faults on one page are serialised
// by the page's lock (a bit lock in its state word); reclaim, faults and unmap on different pages
// run in parallel. Sweeps are serialised among themselves and never wait for a lock; pin(write)
// may wait for a sweep in progress (one ioctl per mapping) to finish, so that no sweep
// write-protects a page it has pinned. The pager must outlive its regions (they hold a shared_ptr to it); it is
// destroyed only when no thread touches its memory any more.
//
// Errors: EINVAL for bad options or ranges, ENOMEM when the arena is full or memory is refused,
// EPERM / ENOTSUP when userfaultfd cannot be had, ENOSPC when swap is full, EIO when a stored page
// is corrupt (its fault then delivers a real SIGBUS). A failed call leaves every page as it was.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "uswap/base/status.h"

namespace uswap {

enum class fault_mode : uint8_t { sigbus, handler_thread };
std::string_view to_string(fault_mode m) noexcept;
// "sigbus" or "handler-thread" (also "handler"); EINVAL otherwise.
result<fault_mode> parse_fault_mode(std::string_view text);

// Which userfaultfd to ask for (see "Privileges").
enum class uffd_access : uint8_t {
  automatic,       // the most capable one the process may have
  full,            // kernel-mode faults too; EPERM if not allowed
  user_mode_only,  // UFFD_USER_MODE_ONLY, what any unprivileged process gets
};
std::string_view to_string(uffd_access a) noexcept;
result<uffd_access> parse_uffd_access(std::string_view text);

struct pager_options {
  // Most bytes mapped at once, rounded down to pages. Required: below 64 pages is EINVAL.
  uint64_t limit = 0;
  // Virtual size of the arena, rounded up to pages. Default 4 GiB.
  uint64_t max_size = uint64_t{4} << 30;
  // Swap space (the zram device's disksize) in bytes. Default 0: max_size, so every page of the
  // arena can be swapped out. zram's slot table costs 16 bytes per page of it, swap_map one.
  uint64_t swap_size = 0;
  // zram's compression algorithm: lz4, lz4hc, zstd or lzo. Default "lz4".
  std::string comp_algorithm = "lz4";
  // Who resolves faults. Default sigbus.
  fault_mode mode = fault_mode::sigbus;
  // Threads reading fault messages in handler_thread mode, 1..64. Default 1.
  unsigned handler_threads = 1;
  // Which userfaultfd to open. Default automatic.
  uffd_access access = uffd_access::automatic;
  // The fewest pages a reclaim pass evicts (the kernel's SWAP_CLUSTER_MAX), 1..32. Default 32.
  // Under a larger limit a pass evicts 1/32 of the limit, up to 256 pages (32 in the TSan
  // build): a fault over the limit reclaims down to that low watermark, so the system calls and
  // TLB flushes of eviction are shared by more pages.
  unsigned reclaim_batch = 32;
  // Largest readahead / fault-around window in pages, 1..16; 1 turns readahead off. Default 8
  // (the kernel's page-cluster 3).
  unsigned readahead_max = 8;
  // Write-protect sweeps twice per lap of the clock, to see pages' next writes and to evict
  // without a write-protect call per victim (see above). false: no sweeps; references come from
  // faults only and every victim is write-protected by eviction. Default true.
  bool track_writes = true;
  // Testing only: called by eviction for each victim after its contents were copied out and
  // stored and before its page is dropped, with the victim's address; a test uses it to force
  // a write into that window. Default nullptr.
  void (*evict_hook)(void* arg, void* page) = nullptr;
  void* evict_hook_arg = nullptr;
};

struct pager_stats {
  uint64_t limit_pages = 0;
  uint64_t resident_pages = 0;       // mapped now (what the limit bounds)
  uint64_t peak_resident_pages = 0;  // most mapped at once
  uint64_t mapped_bytes = 0;         // bytes handed out by map() and not unmapped
  uint64_t faults = 0;               // missing-page faults resolved (not counting readahead)
  uint64_t wp_faults = 0;            // write-protect faults resolved
  uint64_t zero_fills = 0;           // pages first mapped as zeros (UFFDIO_ZEROPAGE or COPY)
  uint64_t swap_ins = 0;             // pages decompressed from zram and mapped
  uint64_t readahead_pages = 0;      // of zero_fills + swap_ins, pages mapped ahead of a fault
  uint64_t swap_outs = 0;            // pages compressed and written to zram
  uint64_t clean_evictions = 0;      // pages dropped whose zram copy was still valid
  uint64_t zero_evictions = 0;       // all-zero pages dropped without a slot
  uint64_t reclaim_passes = 0;
  uint64_t pages_scanned = 0;        // clock hand steps
  uint64_t pages_rotated = 0;        // second chances given
  uint64_t overcharges = 0;          // faults mapped above the limit because nothing was evictable
  uint64_t swap_out_failures = 0;    // victims kept because swap or zram was full
  uint64_t fault_ns = 0;             // time spent resolving faults (including reclaim in them)
  uint64_t swap_out_bytes = 0;       // page bytes compressed (swap_outs * 4 KiB)
  uint64_t compressed_bytes = 0;     // their compressed size
  uint64_t wp_sweeps = 0;            // write-protect sweeps over all mappings (track_writes)
  uint64_t evict_wp_pages = 0;       // victims write-protected one run at a time by eviction,
                                     // because they were made writable since the last sweep
  // The swap device now.
  uint64_t swap_pages_used = 0;      // slots in use
  uint64_t zram_orig_data_size = 0;  // mm_stat
  uint64_t zram_compr_data_size = 0;
  uint64_t zram_mem_used_total = 0;
  uint64_t zram_mem_used_max = 0;
};

class pager {
 public:
  // Opens the userfaultfd, reserves the arena, creates the zram device and swap area, and in
  // handler_thread mode starts the handler threads.
  static result<std::shared_ptr<pager>> create(const pager_options& opts);
  ~pager();
  pager(const pager&) = delete;
  pager& operator=(const pager&) = delete;

  const pager_options& options() const noexcept;
  fault_mode mode() const noexcept;
  // Whether faults taken in kernel mode are resolved without pinning (handler_thread mode with
  // a descriptor that takes them).
  bool kernel_faults() const noexcept;
  // How the descriptor was obtained (uffd_file::origin).
  const char* uffd_origin() const noexcept;

  uintptr_t arena_start() const noexcept;
  uint64_t arena_size() const noexcept;
  bool contains(const void* addr) const noexcept;

  // mmap-like: `len` zero-filled bytes (rounded up to pages) aligned to `alignment` (a power of
  // two, at least a page). EINVAL for len 0 or a bad alignment, ENOMEM when the arena has no
  // room.
  result<void*> map(uint64_t len, uint64_t alignment = 4096);
  // munmap-like: releases every page of [addr, addr + len) that is mapped (rounded out to
  // pages): frees its slot, drops it, makes it inaccessible. EINVAL for a range outside the
  // arena. Unmapping part of a mapping is allowed.
  status unmap(void* addr, uint64_t len);
  // madvise(MADV_DONTNEED)-like: the pages read as zeros afterwards, their memory and slots are
  // freed. EINVAL unless the whole range is mapped.
  status discard(void* addr, uint64_t len);
  // Extends the mapping that ends at addr + old_len in place to new_len, if the arena space after
  // it is free; ENOMEM otherwise (mremap without MREMAP_MAYMOVE). Shrinking unmaps the tail.
  status resize(void* addr, uint64_t old_len, uint64_t new_len);
  // The mapping containing addr: its start and length; ENOENT if addr is not mapped.
  result<std::pair<void*, uint64_t>> mapping_of(const void* addr) const;

  // Makes [addr, addr + len) resident and keeps it so until unpin(): reclaim skips pinned pages.
  // With `write`, the pages are also writable without a fault (not write-protected, and left
  // alone by sweeps until unpinned), so a system call may write them even when kernel-mode
  // faults are not delivered. EINVAL unless the range
  // is mapped; ENOMEM if pinning it would need more than half the limit.
  status pin(const void* addr, uint64_t len, bool write);
  status unpin(const void* addr, uint64_t len);

  // Evicts up to `nr_pages` unpinned pages now (what a fault over the limit does); returns how
  // many were evicted.
  uint64_t reclaim(uint64_t nr_pages);

  pager_stats stats() const;

  // Quiescent only (no fault, map, unmap or reclaim running): checks that the page states, the
  // LRU, the resident count and the swap slots agree. EIO lists what is wrong.
  status check_invariants() const;

  struct impl;

 private:
  explicit pager(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

}  // namespace uswap
