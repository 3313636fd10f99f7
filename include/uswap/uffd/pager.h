// pager: real program memory paged through uswap's own swap stack with userfaultfd.
//
// A pager is what a memory cgroup is to the kernel: it owns a resident limit, the LRU its
// reclaim scans, and the swap device its pages go to. It is also the address space of one
// virtual range, the arena (`max_size` bytes, reserved PROT_NONE + MAP_NORESERVE, registered
// with userfaultfd in MISSING and WP modes), inside which it emulates what mmap, munmap,
// mprotect, madvise and mremap do for anonymous private memory: map() / map_fixed() create
// zero-filled mappings of any protection (PROT_NONE reservations included), protect() changes
// protections, discard() is MADV_DONTNEED, remap() is mremap, unmap() returns pages to free
// space (PROT_NONE again, so a stray access is a SIGSEGV as after munmap). A range the program
// covers with a mapping the pager cannot manage (a file mapped MAP_FIXED into a reservation) is
// "foreign" until unmapped. The LD_PRELOAD shim of `uswap run` routes every anonymous private
// mapping of a program, and its malloc, here; uswap::region objects (region.h) are the
// library's handle on one mapping.
//
// Paging (the kernel's counterpart in brackets):
//   - first touch of a page: a read maps the shared zero page (UFFDIO_ZEROPAGE), a write a zeroed
//     page (UFFDIO_COPY) [do_anonymous_page];
//   - at most `limit` bytes are mapped at any time: a fault that would pass it first reclaims a
//     pass of pages [try_charge -> try_to_free_mem_cgroup_pages]. Victims come from a clock over
//     the mapped pages in fault order: a page referenced since the hand last passed gets a second
//     chance [shrink_inactive_list / folio_check_references]. References are seen through
//     faults, and with `track_writes` through bulk write-protect sweeps (pager_impl.h);
//   - eviction [shrink_folio_list -> try_to_unmap -> swap_writepage]: victims are write-protected,
//     copied out, compressed into the zram device under a swap slot, and dropped with
//     MADV_DONTNEED; a write racing the eviction waits for the page lock and then swaps the page
//     back in, so no write is lost. All-zero pages take no slot [si->zeromap]. Pages of a
//     mapping without PROT_READ cannot be copied out: they stay resident, off the clock
//     [the unevictable LRU];
//   - refault [do_swap_page]: the slot is decompressed and mapped with UFFDIO_COPY; a read refault
//     keeps the slot while the page stays clean [swap cache]; readahead [swap_vma_readahead,
//     fault-around] resolves up to `readahead_max` pages of a sequential run with one ioctl,
//     or the swapped pages around a fault in a cluster of 8 that faulted twice recently.
//
// Who resolves faults (fault_mode):
//   - sigbus: UFFD_FEATURE_SIGBUS. The faulting thread itself takes SIGBUS and resolves its fault
//     in the pager's handler (the ExtMem design): no thread switch. A fault taken in kernel mode
//     cannot be resolved this way: the system call returns EFAULT, so memory a system call
//     touches must be pinned first (pin(); `uswap run` does it for every system call, see
//     src/uffd/kernel_access.h). Threads must not block SIGBUS.
//   - handler_thread: handler threads (by default one per CPU the process may use, each bound to
//     its CPU, so that a fault is mostly resolved on the CPU that took it) read fault messages
//     and resolve them while the faulting thread sleeps in the kernel (the umap design). Faults
//     taken in kernel mode are resolved too, if the descriptor takes them (kernel_faults()).
//
// Privileges: as root (or with vm.unprivileged_userfaultfd = 1, CAP_SYS_PTRACE, or access to
// /dev/userfaultfd) the descriptor takes kernel-mode faults. Otherwise only UFFD_USER_MODE_ONLY is
// possible: user-mode faults, write-protection and SIGBUS all work, but a kernel-mode access to a
// page that is not mapped, or mapped write-protected, fails with EFAULT in either fault mode;
// pinning is then the only way to let a system call reach the memory.
//
// Fork (on_fork): with fork_policy::copy (default) the child of a fork() gets a pager of its own
// over a copy of the arena: resident pages are inherited as the kernel copies any private
// mapping, swapped-out pages through the child's copy of the zram device, and the child opens,
// registers and sweeps a userfaultfd of its own and starts its own handler threads (pthread_atfork
// drives it; the fork waits for the pager operations in flight, as the kernel's fork takes
// mmap_lock). The arena is MADV_DONTFORK except during such a fork, so a child made without
// fork() (a raw clone system call) gets no arena at all: an access is SIGSEGV, never zeros;
// unless the caller runs the same handlers around the call (pager_fork_prepare, below), as the
// preload shim does for the clones its seccomp filter traps.
// fork_policy::detach: the child never gets the arena and its copy of the pager refuses every
// operation. vfork and posix_spawn share the parent's memory and are unaffected. exec replaces
// the address space, and with it the pager.
//
// Background reclaim (background_reclaim): one thread per pager, asleep until a charge leaves the
// pager close to its limit [kswapd between its low and high watermarks]. It evicts the way a
// fault over the limit does, under map_lock for reading, and blocks every asynchronous signal.
// unshare(CLONE_NEWUSER) and setns() into a user namespace need a single-threaded process:
// stop_background_reclaim() ends the thread for good (faults reclaim for themselves after it).
// In a job the thread also serves the other members' requests for room; without background
// reclaim a member gets it for that alone, once it holds more than a sixteenth of the job's
// limit in a job of more than one process (kswapd_wanted, start_wanted_threads).
//
// Thread-safety: every member may be called from any thread. Faults take the arena's map_lock
// for reading (the kernel's mmap_lock), map / map_fixed / unmap / protect / remap for writing;
// faults on one page are serialised by the page's lock (a bit lock in its state word); reclaim,
// faults, discard and pins on different pages run in parallel. The pager must outlive its
// regions (they hold a shared_ptr to it); it is destroyed only when no thread touches its memory
// any more.
//
// Errors: EINVAL for bad options or ranges, ENOMEM when the arena is full (it is max_size bytes)
// or a range is not mapped (as mprotect and mremap say it), EEXIST for a map_fixed(noreplace)
// over a mapping, EPERM / ENOTSUP when userfaultfd cannot be had, ENOSPC when swap is full, EIO
// when a stored page is corrupt (its fault then delivers a real SIGBUS). A failed call leaves
// every page as it was.
#pragma once

#include <sys/mman.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "uswap/base/enum_names.h"
#include "uswap/base/status.h"
#include "uswap/zram/zram.h"

namespace uswap {

class job;

enum class fault_mode : uint8_t { sigbus, handler_thread };
inline constexpr enum_name<fault_mode> fault_mode_names[] = {
    {fault_mode::sigbus, "sigbus"}, {fault_mode::handler_thread, "handler-thread"}};
static_assert(valid_table(fault_mode_names));
std::string_view to_string(fault_mode m) noexcept;
// "sigbus" or "handler-thread" (also "handler"); EINVAL otherwise.
result<fault_mode> parse_fault_mode(std::string_view text);

// A fork made without fork() (a raw clone system call): the handlers fork() runs through
// pthread_atfork, run by hand around the call, on the forking thread. pager_fork_prepare returns
// false, and runs nothing, when this thread is inside fork()'s own handlers: then neither of the
// other two may be called. Otherwise exactly one of them follows: pager_fork_parent in the
// parent (whether or not a child was made; then pager::fork_returned, as after fork()),
// pager_fork_child in the child, before it touches the arena.
bool pager_fork_prepare() noexcept;
void pager_fork_parent() noexcept;
void pager_fork_child() noexcept;

// What a fork()ed child gets (see "Fork").
enum class fork_policy : uint8_t { copy, detach };
inline constexpr enum_name<fork_policy> fork_policy_names[] = {
    {fork_policy::copy, "copy"}, {fork_policy::detach, "detach"}};
static_assert(valid_table(fork_policy_names));

// Which userfaultfd to ask for (see "Privileges").
enum class uffd_access : uint8_t {
  automatic,       // the most capable one the process may have
  full,            // kernel-mode faults too; EPERM if not allowed
  user_mode_only,  // UFFD_USER_MODE_ONLY, what any unprivileged process gets
};
inline constexpr enum_name<uffd_access> uffd_access_names[] = {
    {uffd_access::automatic, "auto"},
    {uffd_access::full, "full"},
    {uffd_access::user_mode_only, "user-mode-only"}};
static_assert(valid_table(uffd_access_names));
std::string_view to_string(uffd_access a) noexcept;
std::string_view to_string(fork_policy p) noexcept;
// "auto", "full" or "user-mode-only" (also "user"); EINVAL otherwise.
result<uffd_access> parse_uffd_access(std::string_view text);

struct pager_options {
  // Most bytes mapped at once, rounded down to pages. Required: below 64 pages is EINVAL.
  uint64_t limit = 0;
  // Virtual size of the arena, rounded up to pages. Default 4 GiB.
  uint64_t max_size = uint64_t{4} << 30;
  // Where the arena goes: 0 (default) anywhere; otherwise exactly there (page aligned), EEXIST if
  // anything is mapped in [arena_base, arena_base + max_size).
  uintptr_t arena_base = 0;
  // Swap space (the zram device's disksize) in bytes. Default 0: max_size, so every page of the
  // arena can be swapped out. zram's slot table costs 16 bytes per page of it, swap_map one.
  uint64_t swap_size = 0;
  // zram's compression algorithm: lz4, lz4hc, zstd or lzo. Default "lz4".
  std::string comp_algorithm = "lz4";
  // Who resolves faults. Default sigbus.
  fault_mode mode = fault_mode::sigbus;
  // Threads reading fault messages in handler_thread mode, 0..64. Default 0: one per CPU in the
  // process's affinity mask, each bound to its CPU; n > 0: n threads, unbound.
  unsigned handler_threads = 0;
  // What a fork()ed child gets. Default copy.
  fork_policy on_fork = fork_policy::copy;
  // Which userfaultfd to open. Default automatic.
  uffd_access access = uffd_access::automatic;
  // The fewest pages a reclaim pass evicts (the kernel's SWAP_CLUSTER_MAX), 1..32. Default 32.
  // Under a larger limit a pass evicts 1/32 of the limit, up to 256 pages (32 in the TSan
  // build): a fault over the limit reclaims down to that low watermark, so the system calls and
  // TLB flushes of eviction are shared by more pages.
  unsigned reclaim_batch = 32;
  // Eviction's unit in pages, a power of two 1..64. A page the clock picks to evict takes with
  // it the neighbours in its aligned window of this many pages that are on the clock and not
  // active, as the kernel reclaims a large folio whole: a window's victims are write-protected
  // with one ioctl, one TLB flush, where scattered pages cost one each (an IPI to every other
  // CPU running the program). 1: page by page. Default 16.
  unsigned reclaim_cluster = 16;
  // Background reclaim [kswapd]: a thread of the pager's own evicts ahead of the faults, so that
  // compression runs beside the program instead of in the thread that faulted. A charge that
  // leaves less room than a low watermark under the limit (two reclaim passes, at most 1/32 of
  // the limit) wakes it; it evicts until the room is back to a high watermark (three passes, at
  // most 1/16), a pass per map_lock hold. Faults that still find the limit reached reclaim
  // themselves, as without it. Started by create() and in a fork()ed child; a process with it is
  // not single-threaded (see "Background reclaim" above for unshare). It pays when faults are
  // cheap (first touches); when they are mostly swap-ins its TLB flushes interrupt the faulting
  // thread's CPU and cost about what they save. Default false: every eviction is then the
  // faulting thread's own, in program order.
  bool background_reclaim = false;
  // Largest readahead / fault-around window in pages, 1..16; 1 turns readahead off. Default 8
  // (the kernel's page-cluster 3); fault-around's cluster is the largest power of two within it,
  // at most 8.
  unsigned readahead_max = 8;
  // Write-protect sweeps twice per lap of the clock, to see pages' next writes and to evict
  // without a write-protect call per victim (see above). false: no sweeps; references come from
  // faults only and every victim is write-protected by eviction. Default true.
  bool track_writes = true;
  // A backing file for the zram device's writeback (zram_options::backing_dev; a job's members
  // share one through backing_allocator). Writeback happens when the pool meets its share of a
  // job's pool limit. Default none.
  std::string backing_dev = {};
  zram_block_allocator* backing_allocator = nullptr;
  // An NBD backing device's timeout (zram_options::backing_timeout_ms): a read waits this long
  // for a lost server to come back, and so does a fault that needs room in a full pool before
  // the job is stopped. Default 30000 ms.
  uint64_t backing_timeout_ms = 30'000;
  // Testing only: called by eviction for each victim after its contents were copied out and
  // stored and before its page is dropped, with the victim's address; a test uses it to force
  // a write into that window. Default nullptr.
  void (*evict_hook)(void* arg, void* page) = nullptr;
  void* evict_hook_arg = nullptr;
  // Called after every reclaim pass (the moments memory is tightest), with the routed pages
  // this process maps (resident, and shared with the forked parent that charged them) and the
  // compressed pool's bytes then; for statistics that sample the process (uswap run's
  // unrouted-memory peak). It runs inside a fault, with map_lock held for reading: it must not
  // call the pager but for stats(), and must be async-signal-safe in sigbus mode. Default
  // nullptr.
  void (*reclaim_hook)(void* arg, uint64_t resident_pages, uint64_t pool_bytes) = nullptr;
  void* reclaim_hook_arg = nullptr;
};

struct pager_stats {
  uint64_t limit_pages = 0;
  uint64_t resident_pages = 0;       // mapped now (what the limit bounds)
  uint64_t peak_resident_pages = 0;  // most mapped at once
  uint64_t mapped_bytes = 0;         // bytes handed out by map() and not unmapped
  uint64_t mappings = 0;             // mapping records (after merging neighbours alike)
  uint64_t foreign_bytes = 0;        // arena bytes held by mappings the pager does not manage
  uint64_t unevictable_pages = 0;    // resident pages of mappings without PROT_READ
  uint64_t shared_pages = 0;         // mapped, shared copy-on-write with the job member this
                                     // process forked from and charged there, not in resident
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
  uint64_t shared_spared = 0;        // victims kept because a forked child maps their frame too
  uint64_t shared_write_around = 0;  // inherited pages made own and writable with a neighbour's write
  uint64_t overcharges = 0;          // faults mapped above the limit because nothing was evictable
  uint64_t pgsteal_kswapd = 0;       // pages evicted by background reclaim (of swap_outs and the
                                     // clean and zero evictions)
  uint64_t pgsteal_direct = 0;       // pages evicted by faults over the limit
  uint64_t kswapd_wakeups = 0;       // times a charge woke background reclaim
  uint64_t swap_out_failures = 0;    // victims kept because swap or zram was full
  uint64_t eviction_batches = 0;     // batches of victims evicted together (a pass has one or more)
  uint64_t store_refusals = 0;       // stores the device refused for want of room (its mem_limit
                                     // or swap space): each a compression done for nothing, at
                                     // most one per batch
  // In a job with a pool limit and a backing device: rounds of the pool worker (the thread
  // that writes cold pages back), and faults that waited for one because the pool was full.
  uint64_t pool_worker_rounds = 0;
  uint64_t pool_full_waits = 0;
  uint64_t fault_ns = 0;             // time spent resolving faults (including reclaim in them)
  uint64_t fault_p50_ns = 0;         // median fault latency (the floor of its ~19% wide bucket)
  uint64_t fault_p99_ns = 0;         // 99th percentile, likewise
  uint64_t swap_out_bytes = 0;       // page bytes compressed (swap_outs * 4 KiB)
  uint64_t compressed_bytes = 0;     // their compressed size
  uint64_t wp_sweeps = 0;            // write-protect sweeps over all mappings (track_writes)
  uint64_t evict_wp_pages = 0;       // victims write-protected one run at a time by eviction,
                                     // because they were made writable since the last sweep
  uint64_t evict_wp_calls = 0;       // the write-protect ioctls eviction made for them (each a
                                     // TLB flush: an IPI to every other CPU running the program)
  uint64_t forks = 0;                // fork()s this pager was copied by (the parent's count)
  // In a job (join_job): pages reserved from it now, the reclaim requests this member served
  // (job_signals of them from the job's signal, the rest at a fault or by the reclaim thread)
  // and the times it waited for another member to make room.
  uint64_t job_reserved_pages = 0;
  uint64_t job_requests_served = 0;
  uint64_t job_signals = 0;
  uint64_t job_signals_deferred = 0;  // of job_signals, those that found the thread in the C
                                      // library, where it may hold a lock reclaim needs
  uint64_t job_waits = 0;
  // Copies between members (fault_in_member): requests this member served, and those it made.
  uint64_t member_faults_served = 0;
  uint64_t member_faults_asked = 0;
  // The swap device now.
  uint64_t swap_pages_used = 0;      // slots in use
  uint64_t zram_orig_data_size = 0;  // mm_stat
  uint64_t zram_compr_data_size = 0;
  uint64_t zram_mem_used_total = 0;
  uint64_t zram_mem_used_max = 0;
  uint64_t bd_count = 0;             // bd_stat: pages in the backing file now
  uint64_t bd_writes = 0;            // pages written back to it
  uint64_t bd_reads = 0;             // pages read back from it
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

  // mmap(hint, len, prot, MAP_PRIVATE | MAP_ANONYMOUS): `len` zero-filled bytes (rounded up to
  // pages) aligned to `alignment` (a power of two, at least a page), at `hint` if that range is
  // free and aligned, else wherever there is room (first fit). EINVAL for len 0 or a bad
  // alignment, ENOMEM when the arena has no room.
  result<void*> map(uint64_t len, uint64_t alignment = 4096, int prot = PROT_READ | PROT_WRITE,
                    const void* hint = nullptr);
  // mmap(addr, len, prot, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS): a new zero-filled mapping at
  // exactly addr (page aligned, inside the arena). Whatever was there (mappings, their pages and
  // slots, foreign ranges) is replaced; with `noreplace` (MAP_FIXED_NOREPLACE) EEXIST instead if
  // anything is.
  result<void*> map_fixed(void* addr, uint64_t len, int prot, bool noreplace = false);
  // munmap-like: releases every page of [addr, addr + len) that is mapped (rounded out to
  // pages): frees its slot, drops it, makes it inaccessible; foreign parts are reserved again.
  // EINVAL for a range outside the arena; nothing mapped there is not an error.
  status unmap(void* addr, uint64_t len);
  // mprotect-like. ENOMEM unless the whole range is mapped (foreign parts are the caller's).
  status protect(void* addr, uint64_t len, int prot);
  // madvise(MADV_DONTNEED)-like: the mapped pages of the range read as zeros afterwards, their
  // memory and slots are freed. ENOMEM (after doing the mapped part) if some of it is not mapped.
  status discard(void* addr, uint64_t len);
  // madvise(MADV_DONTFORK / DOFORK / WIPEONFORK / KEEPONFORK)-like, for fork_policy::copy.
  enum class fork_advice : uint8_t { copy, dontfork, wipeonfork };
  status set_fork_advice(void* addr, uint64_t len, fork_advice advice);
  // mremap-like. Shrinking unmaps the tail; growing extends in place when the arena after the
  // range is free, else (with may_move) moves it: to `new_addr` if given (MREMAP_FIXED, replacing
  // what is there) or wherever there is room. Swapped-out pages move with their slots, resident
  // ones are copied. EFAULT unless [addr, addr + old_len) lies in one mapping; ENOMEM when it
  // cannot grow in place and may not move, or the arena has no room.
  result<void*> remap(void* addr, uint64_t old_len, uint64_t new_len, bool may_move,
                      void* new_addr = nullptr);
  // remap(addr, old_len, new_len, false) for a range that ends where its mapping ends.
  status resize(void* addr, uint64_t old_len, uint64_t new_len);
  // Marks [addr, addr + len) (inside the arena) foreign: the caller is about to map something
  // there the pager cannot manage (a file, shared memory) with MAP_FIXED. The pager releases what
  // it had there and leaves the range alone until unmap() or map_fixed() takes it back.
  status adopt_foreign(void* addr, uint64_t len);
  // Whether addr lies in a foreign range.
  bool is_foreign(const void* addr) const;
  // The mapping containing addr: its start and length; ENOENT if addr is not mapped.
  result<std::pair<void*, uint64_t>> mapping_of(const void* addr) const;
  // Bytes of the free run that ends where the arena ends (0 if its last page is taken): the
  // room a reservation larger than the arena can take, to go on past its end (uswap run's shim
  // places such a reservation across the end, the part past it the kernel's).
  uint64_t free_at_end() const;

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
  // Ends background reclaim in this process, and the pool worker (joins their threads; see
  // "Background reclaim"): the process is single-threaded again if the program's own threads
  // allow. Idempotent. Not from the pager's own threads or a reclaim_hook.
  void stop_background_reclaim() noexcept;
  // Ends the pager's running threads (handler threads, background reclaim, the pool worker) and
  // makes them again from the calling thread, whose credentials they then take: a thread copies
  // them from its creator, and capset(2) and prctl's capability options change the caller's
  // alone. glibc's set*id calls change every thread's and fail (glibc aborts the process) if a
  // thread is refused, so after `setpriv --reuid` raises the caller's capabilities again, the
  // pager's threads must have them too. Faults meanwhile wait. From the program's threads only.
  void restart_threads() noexcept;

  // Fork hooks (fork_policy::copy): called by the pthread_atfork handlers every pager registers
  // on creation; public so that tests can drive them. prepare_fork waits for the operations in
  // flight and holds off new ones until after_fork_parent / after_fork_child. after_fork_child
  // returns the error that left the child's pager unusable (it then refuses every operation).
  void prepare_fork() noexcept;
  void after_fork_parent() noexcept;
  status after_fork_child() noexcept;
  // In the parent, once fork() returned: what prepare_fork set aside for the child (its share of
  // a job, the backing blocks its copy of the zram device refers to) is the child's when one was
  // created (`child` > 0, its pid), and goes back when the fork failed. The shim's fork() calls
  // it.
  void fork_returned(pid_t child) noexcept;

  // The program installed a seccomp filter of its own (a sandbox): from now on the pager makes
  // only calls such filters allow to any allocator, madvise rather than process_madvise, since a
  // call the filter refuses kills the process (Chromium's renderers). Inherited by fork.
  void program_sandboxed() noexcept;

  // --- A limit shared with other processes (uswap run's job, job.h).
  // Joins the job as a member: from then on the pager's pages are charged to the job, reserved
  // in batches (resident <= the reservation <= the job's limit, which takes the place of
  // `limit`), and the pager serves the job's reclaim requests. A fork()ed child joins on its own
  // after its parent made room for its copy. EBUSY if already in a job, ENOSPC when the job has
  // no free slot.
  status join_job(std::shared_ptr<job> j);
  // Leaves the job: the reservation goes back at once (exit, exec). Charges are then against
  // `limit` alone. Waits for the threads in the middle of a charge. Idempotent.
  void leave_job() noexcept;
  bool in_job() const noexcept;
  // This process's pid as the job knows it: its own, or, for a guest (in another pid namespace,
  // job.h), the one the supervisor named it by; 0 outside a job or before a guest is named.
  pid_t job_pid() const noexcept;
  // Serves the reclaim request others made of this member (the signal the shim takes on the
  // job's behalf); from pager code it only notes the request for the next fault. Async-signal-
  // safe, but reclaim may call malloc: the caller says whether the thread it interrupted may
  // hold one of the C library's locks (src/uffd/c_library.h), and then the request is only
  // noted, and the member may be signalled again.
  void serve_job_request(bool c_library_locks_maybe_held) noexcept;
  // A copy between this process and the job's member `pid` (process_vm_readv or
  // process_vm_writev made here) stopped short at `addr` in that member's memory: asks the
  // member to make [addr, addr + len) resident, writable with `write`, and waits up to
  // job::job_fault_wait_ns for the answer (job.h, "Copies between members"), serving this
  // member's own requests meanwhile (two members copying from each other at once). Returns the
  // pages it made resident (copy again), 0 when none needed it (the copy's own fault), or
  // -errno: ENOSYS outside a job or as a guest (its pids are not the job's), ESRCH when `pid`
  // is no other member, ETIMEDOUT without an answer. From a program thread outside pager code.
  long fault_in_member(pid_t pid, uintptr_t addr, uint64_t len, bool write) noexcept;
  // In a job without background reclaim, a member that holds enough to be asked for room gets a
  // thread to serve the others' requests (kswapd.cc); it is made outside pager code, by
  // start_wanted_threads, once kswapd_wanted() says so (one relaxed load for the shim's hot
  // paths). Not from a signal handler or with a lock held that thread creation needs (the shim
  // calls it from the program's malloc).
  const std::atomic<bool>& kswapd_wanted() const noexcept;
  void start_wanted_threads() noexcept;
  // Makes the calling thread's compression stream and swap slot number now (by storing and
  // releasing one page), so that evicting on this thread later allocates nothing.
  void warm_up() noexcept;

  // Lock-free (atomic counters): callable from anywhere, a reclaim_hook included.
  pager_stats stats() const;
  // What the pager's own tables hold resident, estimated from what they index: the per-page
  // tables of every arena chunk touched so far (never given back) and the swap device's per-slot
  // tables up to the most slots seen in use by this call. Memory that RssAnon counts but that
  // is neither routed nor the compressed pool. Callable from anywhere, a reclaim_hook included.
  uint64_t metadata_bytes() const noexcept;
  // The backing device's health (zram_device::backing_stat): callable from anywhere.
  zram_backing_stat backing_stat() const;

  // Quiescent only (no fault, map, unmap or reclaim running): checks that the page states, the
  // LRU, the resident count and the swap slots agree. EIO lists what is wrong.
  status check_invariants() const;

  struct impl;

 private:
  explicit pager(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

}  // namespace uswap
