// job: one memory limit for a whole process tree, what memory.max is to a memory cgroup. `uswap
// run` (the supervisor) creates a job segment, a small MAP_SHARED memfd that every process of the
// job maps; each process's pager (a "member") charges the pages it maps against the job's limit,
// so the processes share one budget the way a cgroup's tasks do.
//
// Charging (mm/memcontrol.c: try_charge_memcg, consume_stock, refill_stock): a member reserves
// pages from the job in batches (its `usage`) and maps pages against its own reservation without
// touching the job; only a refill or a return takes the job lock. A member's resident pages
// never exceed its usage, and the usages never exceed the limit, so the job's resident memory
// stays within the limit, but for overcharges (a member that cannot evict and cannot wait any
// longer), which are counted.
//
// Pressure: a member that cannot get a batch evicts its own pages, unless it holds less than
// its fair share (limit / live members) while another member holds more: then it asks the
// member with the largest usage to reclaim (reclaim_request) and waits a bounded time for room,
// which is handed to it as it is given back (begin_wait), not left for the next member to charge.
// The member's reclaim thread serves the request at once (kick_kswapd wakes it through a futex
// in the segment); a member without one serves it at its next fault, or from a signal when it
// is idle in a system call that the signal cannot disturb (job_member.cc, quiet_to_interrupt).
//
// fork: a member about to fork reserves its child a slot of its own (reserve_for_child); the
// child adopts it, so the child is a member from its first instruction. The pager's child
// charges its inherited pages only as they become its own (pager_impl.h, "Fork-shared pages"),
// so its share starts empty; reserve_for_child can also lend a share that must exist at once. A slot no child adopted
// (the fork failed, the child died at once) is reaped by the supervisor after a while.
//
// Copies between members: the kernel takes a fault on a member's memory for another process
// (process_vm_readv and process_vm_writev, MPI's single-copy transfers) in kernel mode and for
// another mm, which the member's userfaultfd never delivers (sigbus mode, or a user-mode-only
// descriptor): the copy stops short at the first page not resident. The copying member asks
// the owner to make the range resident (post_fault); the owner's reclaim thread, or its job
// signal (or, when that found it in pager code, its next fault) serves it, and the asker
// copies again from where it stopped. The fault path does not look for such requests: the
// asker signals again every millisecond it waits.
//
// Members leave at exit and before exec, returning their usage. One that dies without leaving
// (SIGKILL, a crash) is reaped by the supervisor, which watches every member through a pidfd:
// reap_dead returns its usage at once. A member killed while holding the job lock leaves
// EOWNERDEAD to the next locker (a robust process-shared mutex), which recomputes the job's
// charge from the members' usage: usage and charge change only under the lock, so the sum is
// exact and nothing leaks.
//
// Pool and backing file: each member publishes its zram pool's size; a member whose pools
// together pass the job's pool limit shrinks its own in proportion (pager balance_pool). The
// job's backing file is shared: its blocks have holder counts in the segment (a block written
// back before a fork is held by parent and child until both free it), handed out lowest first.
//
// Guests: a process in a pid namespace other than the supervisor's (a sandbox's CLONE_NEWPID
// child, a container) has pids that name other processes for the rest of the job. It joins
// unnamed: before it takes its slot it announces a key on the job's socket (a datagram
// socketpair of the supervisor's, its member end inherited), the kernel attaching its
// credentials as the supervisor sees them (its pid there and, where the kernel can, a pidfd);
// the supervisor names the slot that holds the key (name_guest) and then watches it as any
// other. Announced before the slot is taken, a guest that dies at any point is found by its
// pidfd. A guest signals and reaps nobody by pid; others ask it for room through its reclaim
// thread's futex, or by signal once it is named.
//
// Statistics: each member publishes its counters (resident, pool, faults, swap-ins...) into its
// slot; the supervisor sums live slots and the totals of members that left for the live view
// (memory.current, memory.stat, mm_stat) and the summary.
//
// Thread-safety: every function may be called from any thread of any member; the shared state
// is atomics and data under the job lock. A job object is one process's view of the segment.
// Invariants (job lock held): charge == sum of usage over slots not free; waiters == slots
// with waiting != 0, none of them free; a slot is free, live (a member is using it) or reserved
// for a child not yet adopted (a member found gone is reaped, its usage returned, in one hold
// of the lock); a live slot with pid 0 is a guest not yet named, and holds its key.
#pragma once

#include <pthread.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "uswap/base/status.h"
#include "uswap/zram/zram.h"

namespace uswap {

class job;
// Testing only: takes the job lock, adds n to the slot's usage without the matching charge (half
// of a reservation) and _exits holding the lock, as a member killed mid-update would.
[[noreturn]] void job_die_mid_update_for_test(job& j, unsigned slot, uint64_t n);

inline constexpr unsigned job_max_members = 512;
// Pages a member reserves at a time (the kernel's MEMCG_CHARGE_BATCH).
inline constexpr uint64_t job_charge_batch = 64;

// A member's published counters, by index (the cumulative ones are summed over members that
// left too).
enum job_stat : unsigned {
  JOB_RESIDENT,         // pages mapped now (memory.current's share)
  JOB_SWAP_PAGES,       // pages in the member's swap (memory.stat swap)
  JOB_POOL_BYTES,       // its zram pool now (mem_used_total)
  JOB_POOL_PEAK,        // the largest it was (mem_used_max)
  JOB_ORIG_DATA,        // mm_stat orig_data_size
  JOB_COMPR_DATA,       // mm_stat compr_data_size
  JOB_SAME_PAGES,       // mm_stat same_pages
  JOB_HUGE_PAGES,       // mm_stat huge_pages
  JOB_COMPACTED,        // mm_stat pages_compacted
  JOB_BD_COUNT,         // bd_stat: pages in the backing file now
  JOB_CUMULATIVE,       // --- the counters below only grow
  JOB_PGFAULT = JOB_CUMULATIVE,  // faults resolved (missing + write-protect)
  JOB_PGMAJFAULT,       // faults that read a page back from zram
  JOB_WP_FAULTS,        // write-protect faults
  JOB_SWAP_INS,         // pages read back (workingset_refault_anon)
  JOB_SWAP_OUTS,        // pages written out (pswpout)
  JOB_OVERCHARGES,      // pages mapped above the member's reservation
  JOB_FAILED_READS,     // io_stat
  JOB_FAILED_WRITES,
  JOB_NOTIFY_FREE,
  JOB_BD_READS,         // bd_stat: pages read back from the backing file
  JOB_BD_WRITES,        // pages written back to it
  JOB_STAT_COUNT
};

struct job_options {
  uint64_t limit_pages = 0;       // the job's resident limit; required (at least 64 pages)
  uint64_t pool_limit_bytes = 0;  // the summed compressed pools' limit; default 0: none
  // Blocks of the backing file the members' zram devices write back into (one table of holders
  // for all of them, so that one file serves the whole job). Default 0: no backing file.
  uint64_t backing_blocks = 0;
  // The signal that asks an idle member to serve its reclaim request (a real-time signal the
  // members' shims take over). Default 0: SIGRTMAX - 2.
  int signal = 0;
};

// A member asked to reclaim for another.
struct job_target {
  unsigned slot = 0;
  pid_t pid = 0;
};

// One member's slot, as the supervisor reads it.
struct job_member_view {
  unsigned slot = 0;
  pid_t pid = 0;      // for a child's slot not yet adopted: the parent's
  bool for_child = false;   // reserved by a parent for the child of its fork, not yet adopted
  pid_t child = 0;          // for_child: the child, once the parent named it (0: not yet)
  uint64_t guest_key = 0;   // a guest's announced key (0: not a guest); pid 0 until named
  uint64_t age_ns = 0;      // since it was taken (CLOCK_MONOTONIC)
  std::string comm;
  uint64_t usage = 0;  // pages reserved
  uint64_t stat[JOB_STAT_COUNT] = {};
};

struct job_view {
  uint64_t limit_pages = 0;
  uint64_t pool_limit_bytes = 0;
  uint64_t backing_blocks = 0;        // the shared backing file's size in blocks (0: none)
  uint64_t backing_blocks_used = 0;
  uint64_t charge = 0;          // pages reserved by members now
  uint64_t peak_charge = 0;
  uint64_t peak_footprint = 0;  // most of (resident pages * 4 KiB + pool bytes) seen published
  uint64_t members_joined = 0;  // process images that ever joined
  uint64_t members_reaped = 0;  // of them, reaped after dying without leaving
  uint64_t owner_dead_repairs = 0;  // EOWNERDEAD recoveries of the job lock
  uint64_t reclaim_requests = 0;    // times a member asked another for room
  uint64_t stop_reason = 0;         // job_stop_* (0: running)
  uint64_t exited[JOB_STAT_COUNT] = {};  // cumulative counters of members that left or died
  std::vector<job_member_view> members;  // slots not free
  // Live sum of a counter plus, for cumulative ones, what left.
  uint64_t total(job_stat s) const noexcept;
};

// Why the job cannot go on (set once; the supervisor stops the job and says so).
// job_stop_backing_lost: the same, because the backing device (an NBD export) could not be reached.
enum : uint64_t { job_stop_none = 0, job_stop_pool_full = 1, job_stop_backing_lost = 2 };

// The job's backing-file blocks as a zram device's allocator (zram_options::backing_allocator):
// every member's device writes back into the one file.
class job_blocks final : public zram_block_allocator {
 public:
  explicit job_blocks(job& j) noexcept : j_(j) {}
  uint64_t reserve() noexcept override;
  void retain(uint64_t block) noexcept override;
  void release(uint64_t block) noexcept override;
  uint64_t nr_blocks() const noexcept override;

 private:
  job& j_;
};

// What a guest announced (job::read_messages): its key, and the sender as the supervisor sees
// it.
struct job_announcement {
  uint64_t key = 0;
  pid_t pid = 0;   // the sender's pid in the supervisor's namespace (0: not known)
  int pidfd = -1;  // the sender's pidfd (the caller closes it); -1 where the kernel gives none
};

// What guests sent the supervisor: announcements, and the slots of members a guest asked for
// room and that the supervisor is to signal for it (job_nudge; a guest cannot, their pids not
// being its).
struct job_messages {
  std::vector<job_announcement> announced;
  std::vector<unsigned> nudges;
};

// Asks the member of `slot` to serve its reclaim request now, by the job's signal to its main
// thread, once until it takes it, and only where the signal cannot cut one of the program's
// system calls short (job_member.cc). The caller sees pids as the supervisor does (not a guest).
void job_nudge(job& j, unsigned slot) noexcept;

// Who lends a fork's child its share (job::reserve_for_child).
struct child_share_donor {
  unsigned slot = job_max_members;  // the parent's slot; default: none, all from free room
  uint64_t surplus = 0;             // its reservation above what it keeps resident; default: 0
};

class job {
 public:
  // The supervisor's job: a new memfd of the segment, mapped; fd() names it to the members.
  // EINVAL for a limit under 64 pages or a bad signal.
  static result<std::unique_ptr<job>> create(const job_options& opts);
  // A member's (or a second) view of the segment behind fd: mapped, the fd not kept (the
  // caller closes it; a fork()ed child inherits the mapping). EINVAL if fd is not a job segment
  // of this version.
  static result<std::unique_ptr<job>> attach(int fd);
  ~job();
  job(const job&) = delete;
  job& operator=(const job&) = delete;

  int fd() const noexcept { return fd_; }  // -1 for an attached view
  // The resident part of the shared segment's mapping in this process (mincore): shared
  // memory of uswap's own, which a member's RssShmem includes.
  uint64_t resident_bytes() const noexcept;
  uint64_t limit_pages() const noexcept;
  uint64_t pool_limit_bytes() const noexcept;
  int signal() const noexcept;

  // --- Membership.
  // Whether the calling process sees pids as the supervisor does: members are named by their
  // pids (signals, the supervisor's pidfds), so a process in another pid namespace (a sandbox's
  // CLONE_NEWPID child, where it may be pid 1) joins as a guest; false also when /proc is out
  // of reach and the process cannot be known to be where its parent was.
  bool in_pid_namespace() const noexcept;
  // A slot for process `pid` (comm: its name, for the summary); ENOSPC when every slot is taken.
  result<unsigned> join(pid_t pid, std::string_view comm);

  // --- Guests (processes in another pid namespace; see above).
  // Supervisor: the member end of the job's socket, for the members to inherit (-1 for an
  // attached view). Member: set_guest_socket gives the view its inherited end (not owned).
  int guest_socket() const noexcept { return guest_tx_; }
  void set_guest_socket(int fd) noexcept { guest_tx_ = fd; }
  // A slot for the calling process as a guest, announced first; EXDEV without the socket, the
  // send's error when the announcement cannot be made (the supervisor gone), ENOSPC.
  result<unsigned> join_guest(std::string_view comm);
  // adopt() for a child that is a guest; the reserved slot goes back if the announcement fails.
  status adopt_guest(unsigned slot, std::string_view comm);
  // Whether this process joined or adopted as a guest.
  bool guest() const noexcept { return guest_; }
  // Supervisor: the end guests' messages arrive at (poll it for POLLIN), and those waiting
  // there, read without blocking.
  int message_socket() const noexcept { return guest_rx_; }
  job_messages read_messages();
  // A guest: asks the supervisor to signal the member of `slot` (job_nudge) for it.
  void relay_nudge(unsigned slot) noexcept;
  // Supervisor: the guest of `slot` (unnamed, holding `key`) is process `pid`, whose start
  // time is read now; false when the slot holds no such guest or the process has ended.
  bool name_guest(unsigned slot, uint64_t key, pid_t pid) noexcept;
  // Supervisor: the guest that announced `key` died (its pidfd said so, named or not): its slot
  // is reaped as reap_dead would, if it still holds that guest (keys are never used twice).
  void reap_guest(unsigned slot, uint64_t key) noexcept;
  // The pid slot's member has in the supervisor's namespace (0: a guest not yet named).
  pid_t member_pid(unsigned slot) const noexcept;
  // Returns the slot's usage and adds its cumulative counters to the job's; the slot is free.
  void leave(unsigned slot) noexcept;
  // Supervisor: whether `pid` of slot still is the process that joined (not a reused pid).
  bool still_alive(unsigned slot) const noexcept;
  // Supervisor: the member of `slot` died without leaving: its usage goes back at once.
  void reap_dead(unsigned slot) noexcept;
  // A member (`self`) that found the job full: the members whose process no longer exists (killed,
  // and waited for by their parent) go as reap_dead would have them, without waiting for the
  // supervisor's next look (up to 200 ms after a member it had not seen yet). A zombie, or a
  // pid used again, stays. Returns how many went. Async-signal-safe.
  unsigned reap_ended_members(unsigned self) noexcept;

  // --- fork.
  // A slot holding `pages` for the child of a fork `parent` is about to make; EAGAIN when they
  // do not fit under the limit (the parent evicts more and asks again), ENOSPC without a slot.
  // Up to `donor.surplus` of them move from the donor's usage (the parent's reservation above
  // what it keeps resident), the rest comes from free room. The slot publishes the child's copy
  // at once (`pages` resident, `pool_bytes` of pool): the others' pool limits and the job's
  // footprint count it before the child has run.
  result<unsigned> reserve_for_child(pid_t parent, uint64_t pages, uint64_t pool_bytes = 0,
                                     child_share_donor donor = {});
  // The child takes the slot over as its own (its pid and name); EINVAL if the slot is not one
  // reserved for a child.
  status adopt(unsigned slot, pid_t pid, std::string_view comm);
  // The parent names the child of a slot reserved for it, once fork() returned: the supervisor
  // can then tell a child that died before it adopted the slot (strace's probe children are
  // killed at once) from one still on its way. Ignored once the slot is adopted.
  void child_forked(unsigned slot, pid_t child) noexcept;
  // Supervisor: a slot reserved for a child and not adopted for `max_age_ns` goes back, or at
  // once when it is still reserved for `ended_child` (a child its parent named, seen gone).
  void reap_unadopted(unsigned slot, uint64_t max_age_ns, pid_t ended_child = 0) noexcept;

  // --- Charging (the member's pager).
  // Reserves pages: at least `need`, up to `want` when the job has room; returns what was
  // granted (0: not even `need` fits; the caller makes room). Never beyond the limit.
  uint64_t try_reserve(unsigned slot, uint64_t need, uint64_t want) noexcept;
  // Reserves `n` pages beyond the limit (an overcharge: nothing could be evicted).
  void force_reserve(unsigned slot, uint64_t n) noexcept;
  // Gives back `n` reserved pages (at most the slot's usage); members waiting for room get them
  // first (begin_wait).
  void unreserve(unsigned slot, uint64_t n) noexcept;
  // A member that asked another for room (request_reclaim) waits for it: room given back from
  // begin_wait until end_wait (unreserve, a member leaving) goes to it first, up to `pages` in
  // all, added to its usage at once so that no other member's fault takes it meanwhile (memcg
  // needs no such hand-off: there every task reclaims the cgroup's pages itself, here a member
  // evicts only its own). take_granted returns what was given since it last took (lock-free);
  // end_wait ends the wait and returns what is left to take.
  void begin_wait(unsigned slot, uint64_t pages) noexcept;
  uint64_t take_granted(unsigned slot) noexcept;
  uint64_t end_wait(unsigned slot) noexcept;
  uint64_t usage(unsigned slot) const noexcept;
  // The job's charge now (a lock-free snapshot).
  uint64_t charge() const noexcept;

  // --- Pressure.
  // A member's fair share: the limit divided among the live members (a scan of the slots).
  uint64_t fair_share() const noexcept;
  // When `slot` holds less than its fair share (limit / live members): the member with the
  // largest usage above a fair share, asked to reclaim what it holds above it and at least `n`
  // pages; what others asked of it already, or it took and is evicting, counts towards the
  // share above (each asker adds its own `n`). Nothing when `slot` holds a fair share or more
  // (it should evict its own) or nobody holds more than one.
  std::optional<job_target> request_reclaim(unsigned slot, uint64_t n) noexcept;
  // Whether others asked this member to reclaim (one relaxed load: the fault path's check).
  bool has_reclaim_request(unsigned slot) const noexcept;
  // Pages others asked this member to reclaim, taken (the request is cleared); they count as
  // being evicted for request_reclaim until reclaim_served (after the member returned the room).
  uint64_t take_reclaim_request(unsigned slot) noexcept;
  void reclaim_served(unsigned slot) noexcept;
  // Whether a signal was sent to this member and not yet taken; the sender sets it, the member
  // clears it (so a busy member gets one signal, not one per request).
  bool mark_signalled(unsigned slot) noexcept;
  void clear_signalled(unsigned slot) noexcept;
  // The member's reclaim thread: the word it sleeps on (a futex shared between processes) and
  // whether it is listening there. kick_kswapd wakes it after a request; false when nobody
  // listens (the requester then signals the member). A slot starts not listening.
  const std::atomic<uint32_t>* kswapd_word(unsigned slot) const noexcept;
  void set_kswapd_listening(unsigned slot, bool on) noexcept;
  bool kick_kswapd(unsigned slot) noexcept;

  // --- Faults of other processes ("Copies between members" above). One request per member at
  // a time, in a box of its slot: post_fault takes the box (a ticket; 0 while another asker
  // holds it), take_fault hands the member the request once, fault_served answers it and wakes
  // the askers' word; fault_answer returns the answer to its ticket (nullopt: not yet) and frees
  // the box, cancel_fault frees it unanswered (an answer that comes later is ignored).
  struct member_fault {
    uint64_t ticket = 0;
    uintptr_t addr = 0;
    uint64_t len = 0;
    bool write = false;
  };
  // A box held this long (CLOCK_MONOTONIC) is taken over by the next asker: its holder died
  // waiting. Longer than any wait for an answer (job_fault_wait_ns).
  static constexpr uint64_t job_fault_box_stale_ns = uint64_t{3} * 1000 * 1000 * 1000;
  static constexpr uint64_t job_fault_wait_ns = uint64_t{1} * 1000 * 1000 * 1000;
  // The live member slot of the process `pid` (in the supervisor's pid namespace).
  std::optional<unsigned> live_slot_of(pid_t pid) const noexcept;
  uint64_t post_fault(unsigned slot, uintptr_t addr, uint64_t len, bool write) noexcept;
  // Whether a request waits for this member, not yet taken (the reclaim thread's and the
  // asker's test).
  bool has_fault(unsigned slot) const noexcept;
  std::optional<member_fault> take_fault(unsigned slot) noexcept;
  // `result`: pages made resident, or -errno.
  void fault_served(unsigned slot, uint64_t ticket, int64_t result) noexcept;
  std::optional<int64_t> fault_answer(unsigned slot, uint64_t ticket) noexcept;
  void cancel_fault(unsigned slot, uint64_t ticket) noexcept;
  const std::atomic<uint32_t>* fault_word(unsigned slot) const noexcept;

  // --- Statistics.
  void publish(unsigned slot, const uint64_t (&stat)[JOB_STAT_COUNT], uint64_t now_ns) noexcept;
  // When the member last resolved a fault (CLOCK_MONOTONIC ns): the pressure path's idleness test.
  void note_active(unsigned slot, uint64_t now_ns) noexcept;
  uint64_t last_active_ns(unsigned slot) const noexcept;
  job_view view() const;

  void set_stop_reason(uint64_t reason) noexcept;
  uint64_t stop_reason() const noexcept;

  // --- The shared backing file's blocks (zram_block_allocator's contract, see zram.h): a holder
  // count per block; reserve finds a free one from a rotating hint. A process killed while it
  // held blocks leaves them held until the job ends (the file goes with the job).
  static constexpr uint64_t no_block = ~uint64_t{0};
  uint64_t backing_blocks() const noexcept;
  uint64_t reserve_block() noexcept;
  void retain_block(uint64_t block) noexcept;
  void release_block(uint64_t block) noexcept;
  uint64_t blocks_in_use() const noexcept;
  // The members' compressed pools now, as they last published them (a child not yet running
  // with its parent's copy), and one member's last published counter.
  uint64_t pool_bytes() const noexcept;
  uint64_t published(unsigned slot, job_stat s) const noexcept;

 private:
  struct shared;
  struct member;
  class lock_guard;
  job(int fd, shared* s, size_t bytes) noexcept : fd_(fd), s_(s), bytes_(bytes) {}
  // Sends a new key on the guest socket; the key, or why not.
  result<uint64_t> announce_guest();
  std::atomic<uint16_t>* block_refs() const noexcept;
  void repair_locked() noexcept;
  // The job's charge less n (pages a member gave back), then the room to waiting members.
  void give_back_locked(uint64_t n) noexcept;
  // leave() of a slot not free.
  void leave_locked(member& m) noexcept;
  // A member gone without leaving (killed, crashed; a child slot nobody adopted): counted as
  // reaped, and its share back at once, under the same hold of the lock as the check that found
  // it gone, so no other holder ever sees it half reaped.
  void reap_locked(member& m) noexcept;
  // The member waits no more (its count off `waiters`).
  void stop_waiting_locked(member& m) noexcept;
  // Slots not free with waiting != 0, counted (the debug check of `waiters`).
  unsigned waiters_counted_locked() const noexcept;
  result<unsigned> take_slot_locked(uint32_t state, pid_t pid, uint64_t start,
                                    std::string_view comm, uint64_t usage);
  friend void job_die_mid_update_for_test(job& j, unsigned slot, uint64_t n);
  int fd_ = -1;
  shared* s_ = nullptr;
  size_t bytes_ = 0;  // the mapping: the shared header and the block table after it
  // The job's socket: the supervisor reads guests' announcements at guest_rx_; guest_tx_ is
  // the members' end (owned by the supervisor's view, inherited by a member's).
  int guest_rx_ = -1;
  int guest_tx_ = -1;
  bool guest_ = false;
};

}  // namespace uswap
