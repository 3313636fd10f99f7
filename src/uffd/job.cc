// The job segment: a limit shared by the processes of a job. See include/uswap/uffd/job.h.
#include "uswap/uffd/job.h"

#include <fcntl.h>
#include <time.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "uswap/base/atomic_max.h"
#include "uswap/base/dcheck.h"
#include "uswap/base/page.h"
#include "uswap/sync/futex.h"

namespace uswap {

namespace {

// Linux 6.5's names, which older C libraries lack.
#ifdef SO_PASSPIDFD
constexpr int so_passpidfd = SO_PASSPIDFD;
#else
constexpr int so_passpidfd = 76;
#endif
#ifdef SCM_PIDFD
constexpr int scm_pidfd = SCM_PIDFD;
#else
constexpr int scm_pidfd = 0x04;
#endif

constexpr uint64_t job_magic = 0x757377'61706a6f62ull;  // "uswapjob"
constexpr uint32_t job_version = 7;

// A guest's message on the job's socket: its announcement (magic job_magic, a key), or a
// nudge it asks the supervisor to send (nudge_magic, the target's slot).
struct guest_message {
  uint64_t magic;
  uint64_t value;
};
constexpr uint64_t nudge_magic = job_magic + 1;

enum : uint32_t { slot_free = 0, slot_live = 1, slot_child = 3 };

uint64_t mono_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

// Start time of a process in clock ticks since boot (/proc/PID/stat field 22), 0 if unknown or
// if the process has ended (a zombie): tells a member from a later process that reused its pid.
uint64_t process_start_time(pid_t pid) noexcept {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[1024];
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  // comm may hold spaces and parentheses: the fields start after the last ')'.
  const char* p = std::strrchr(buf, ')');
  if (!p || p[1] != ' ') return 0;
  if (p[2] == 'Z' || p[2] == 'X') return 0;  // ended; only its parent's wait is missing
  ++p;
  for (int field = 2; field < 22 && *p; ++p)
    if (*p == ' ') ++field;
  return std::strtoull(p, nullptr, 10);
}

}  // namespace

struct alignas(cache_line_size) job::member {
  std::atomic<uint32_t> state;
  std::atomic<int32_t> pid;
  std::atomic<int32_t> child;  // slot_child: the fork's child once its parent named it, else 0
  uint64_t start_time;
  uint64_t created_ns;
  char comm[16];
  uint64_t usage;  // under the job lock
  uint64_t guest_key;  // under the job lock: a guest's key (0: not a guest)
  std::atomic<uint64_t> usage_seen;  // a copy for lock-free readers
  // Under the job lock: pages this member still waits for (begin_wait to end_wait); room given
  // back meanwhile goes to it first, into its usage and `granted` (which it takes lock-free).
  uint64_t waiting;
  std::atomic<uint64_t> granted;
  alignas(cache_line_size) std::atomic<uint64_t> reclaim_request;
  // What the member took of its requests and is evicting now (take_reclaim_request until
  // reclaim_served): other askers do not ask for it again.
  std::atomic<uint64_t> reclaim_serving;
  std::atomic<uint32_t> signalled;
  // The member's reclaim thread sleeps on this word (a futex other processes wake) while
  // `listening`; a request bumps it.
  std::atomic<uint32_t> kswapd_word;
  std::atomic<uint32_t> kswapd_listening;
  std::atomic<uint64_t> last_active_ns;
  std::atomic<uint64_t> stat[JOB_STAT_COUNT];
  // The box of faults of other processes (post_fault): its holder's ticket (0: free), the
  // request (a seqlock: written before `fault_posted`, read between two loads of it), the
  // tickets the member took and answered, the answer, and the word the askers wait on.
  alignas(cache_line_size) std::atomic<uint64_t> fault_box;
  std::atomic<uint64_t> fault_addr;
  std::atomic<uint64_t> fault_len;  // the top bit: the access writes
  std::atomic<uint64_t> fault_posted;
  std::atomic<uint64_t> fault_taken;
  std::atomic<uint64_t> fault_served;
  std::atomic<int64_t> fault_result;
  std::atomic<uint32_t> fault_word;
};

struct job::shared {
  uint64_t magic;
  uint32_t version;
  uint32_t max_members;
  uint64_t limit_pages;
  uint64_t pool_limit_bytes;
  int32_t signal;
  uint64_t pidns_dev, pidns_ino;  // the supervisor's pid namespace (0: unknown)
  pthread_mutex_t lock;
  // Under the lock.
  uint64_t charge;
  uint64_t members_joined;
  uint64_t members_reaped;
  uint64_t owner_dead_repairs;
  uint64_t exited[JOB_STAT_COUNT];
  unsigned slots_hint;  // every slot not free is below it
  unsigned waiters;     // slots with waiting != 0
  // Lock-free readers.
  alignas(cache_line_size) std::atomic<uint64_t> charge_seen;
  std::atomic<uint64_t> peak_charge;
  std::atomic<uint64_t> peak_footprint;
  std::atomic<uint64_t> reclaim_requests;
  std::atomic<uint64_t> stop_reason;
  std::atomic<uint64_t> guest_keys;  // the last key handed to a guest
  std::atomic<uint64_t> fault_tickets;  // the last ticket of post_fault
  uint64_t backing_blocks;
  std::atomic<uint64_t> block_hint;
  std::atomic<uint64_t> blocks_in_use;
  member members[job_max_members];
  // The block table follows: backing_blocks holder counts (std::atomic<uint16_t>).
};

// The job lock. A holder that died leaves the mutex EOWNERDEAD: the state it was changing is
// repaired (charge recomputed from the usages) and the mutex made consistent again.
class job::lock_guard {
 public:
  explicit lock_guard(const job& j) noexcept : j_(const_cast<job&>(j)) {
    const int rc = pthread_mutex_lock(&j_.s_->lock);
    if (rc == EOWNERDEAD) {
      j_.repair_locked();
      pthread_mutex_consistent(&j_.s_->lock);
    }
  }
  ~lock_guard() { pthread_mutex_unlock(&j_.s_->lock); }
  lock_guard(const lock_guard&) = delete;
  lock_guard& operator=(const lock_guard&) = delete;

 private:
  job& j_;
};

void job::repair_locked() noexcept {
  uint64_t sum = 0;
  unsigned waiters = 0;
  for (unsigned i = 0; i < s_->slots_hint; ++i) {
    const member& m = s_->members[i];
    if (m.state.load(std::memory_order_relaxed) == slot_free) continue;
    sum += m.usage;
    waiters += m.waiting != 0;
  }
  s_->charge = sum;
  s_->waiters = waiters;
  s_->charge_seen.store(sum, std::memory_order_relaxed);
  ++s_->owner_dead_repairs;
}

result<std::unique_ptr<job>> job::create(const job_options& opts) {
  if (opts.limit_pages < 64) return error(EINVAL, "job: the limit must be at least 64 pages (256 KiB)");
  const int sig = opts.signal ? opts.signal : SIGRTMAX - 2;
  if (sig < SIGRTMIN || sig > SIGRTMAX)
    return error(EINVAL, "job: the reclaim signal must be a real-time signal (" +
                             std::to_string(SIGRTMIN) + ".." + std::to_string(SIGRTMAX) + ")");
  if (opts.backing_blocks > (uint64_t{1} << 32))
    return error(EINVAL, "job: a backing file of more than 16 TiB (2^32 blocks)");
  const size_t bytes = sizeof(shared) + opts.backing_blocks * sizeof(std::atomic<uint16_t>);
  const int fd = static_cast<int>(::memfd_create("uswap-job", MFD_CLOEXEC));
  if (fd < 0) return error(errno, std::string("job: memfd_create: ") + std::strerror(errno));
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int e = errno;
    ::close(fd);
    return error(e, std::string("job: sizing the segment: ") + std::strerror(e));
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    const int e = errno;
    ::close(fd);
    return error(e, std::string("job: mapping the segment: ") + std::strerror(e));
  }
  // The memfd is zero-filled: every atomic and counter starts at 0, every slot free.
  // The guests' socket: datagrams, each member's announcement one message with its
  // credentials; the supervisor's end is non-blocking and asks for them (and for a pidfd,
  // where the kernel has SO_PASSPIDFD).
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) != 0) {
    const int e = errno;
    ::munmap(p, bytes);
    ::close(fd);
    return error(e, std::string("job: the guests' socket: ") + std::strerror(e));
  }
  const int one = 1;
  (void)::setsockopt(sv[0], SOL_SOCKET, SO_PASSCRED, &one, sizeof one);
  (void)::setsockopt(sv[0], SOL_SOCKET, so_passpidfd, &one, sizeof one);
  (void)::fcntl(sv[0], F_SETFL, O_NONBLOCK);
  auto* s = static_cast<shared*>(p);
  s->limit_pages = opts.limit_pages;
  s->pool_limit_bytes = opts.pool_limit_bytes;
  s->max_members = job_max_members;
  s->signal = sig;
  s->backing_blocks = opts.backing_blocks;
  if (struct stat ns; ::stat("/proc/self/ns/pid", &ns) == 0) {
    s->pidns_dev = ns.st_dev;
    s->pidns_ino = ns.st_ino;
  }
  pthread_mutexattr_t a;
  pthread_mutexattr_init(&a);
  pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(&s->lock, &a);
  pthread_mutexattr_destroy(&a);
  s->version = job_version;
  // Members map the segment only after a fork or exec of the creator (system calls order them).
  s->magic = job_magic;
  std::unique_ptr<job> j(new job(fd, s, bytes));
  j->guest_rx_ = sv[0];
  j->guest_tx_ = sv[1];
  return j;
}

result<std::unique_ptr<job>> job::attach(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return error(errno, std::string("job: fd ") + std::to_string(fd) + ": " + std::strerror(errno));
  const auto bytes = static_cast<size_t>(st.st_size);
  if (bytes < sizeof(shared))
    return error(EINVAL, "job: fd " + std::to_string(fd) + " is not a job segment (size " +
                             std::to_string(st.st_size) + ")");
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return error(errno, std::string("job: mapping the segment: ") + std::strerror(errno));
  auto* s = static_cast<shared*>(p);
  if (s->magic != job_magic || s->version != job_version || s->max_members != job_max_members ||
      bytes != sizeof(shared) + s->backing_blocks * sizeof(std::atomic<uint16_t>)) {
    ::munmap(p, bytes);
    return error(EINVAL, "job: fd " + std::to_string(fd) + " is not a job segment of this uswap");
  }
  return std::unique_ptr<job>(new job(-1, s, bytes));
}

uint64_t job::resident_bytes() const noexcept {
  unsigned char vec[256];
  uint64_t resident = 0;
  auto* base = reinterpret_cast<unsigned char*>(s_);
  for (size_t off = 0; off < bytes_; off += sizeof vec * page_size) {
    const size_t len = std::min(bytes_ - off, sizeof vec * page_size);
    if (::mincore(base + off, len, vec) != 0) return resident;
    for (size_t i = 0; i < (len + page_size - 1) / page_size; ++i) resident += vec[i] & 1;
  }
  return resident * page_size;
}

job::~job() {
  if (s_) ::munmap(s_, bytes_);
  if (fd_ >= 0) {  // the supervisor's: the socket is its too
    ::close(fd_);
    ::close(guest_rx_);
    ::close(guest_tx_);
  }
}

uint64_t job::limit_pages() const noexcept { return s_->limit_pages; }
uint64_t job::pool_limit_bytes() const noexcept { return s_->pool_limit_bytes; }
int job::signal() const noexcept { return s_->signal; }

namespace {

void name_member(char (&out)[16], std::string_view comm) noexcept {
  std::memset(out, 0, sizeof out);
  std::memcpy(out, comm.data(), std::min(comm.size(), sizeof out - 1));
}

}  // namespace

// A free slot, set up for `pid` in `state` with `usage` pages (the caller has the job lock and
// has charged them). ENOSPC when none is free.
result<unsigned> job::take_slot_locked(uint32_t state, pid_t pid, uint64_t start,
                                       std::string_view comm, uint64_t usage) {
  for (unsigned i = 0; i < job_max_members; ++i) {
    member& m = s_->members[i];
    if (m.state.load(std::memory_order_relaxed) != slot_free) continue;
    m.pid.store(pid, std::memory_order_relaxed);
    m.child.store(0, std::memory_order_relaxed);
    m.start_time = start;
    m.created_ns = mono_ns();
    name_member(m.comm, comm);
    m.usage = usage;
    m.usage_seen.store(usage, std::memory_order_relaxed);
    m.guest_key = 0;
    m.waiting = 0;
    m.granted.store(0, std::memory_order_relaxed);
    m.reclaim_request.store(0, std::memory_order_relaxed);
    m.reclaim_serving.store(0, std::memory_order_relaxed);
    m.signalled.store(0, std::memory_order_relaxed);
    m.kswapd_listening.store(0, std::memory_order_relaxed);
    m.last_active_ns.store(0, std::memory_order_relaxed);
    for (auto& v : m.stat) v.store(0, std::memory_order_relaxed);
    // A request left for the slot's last member is not the new one's to serve; an asker still
    // waiting for it learns that the process is gone.
    const uint64_t posted = m.fault_posted.load(std::memory_order_acquire);
    m.fault_box.store(0, std::memory_order_relaxed);
    m.fault_taken.store(posted, std::memory_order_relaxed);
    if (m.fault_served.load(std::memory_order_relaxed) != posted) {
      m.fault_result.store(-ESRCH, std::memory_order_relaxed);
      m.fault_served.store(posted, std::memory_order_release);
      m.fault_word.fetch_add(1, std::memory_order_release);
      futex_wake_shared(&m.fault_word, INT32_MAX);
    }
    m.state.store(state, std::memory_order_release);
    s_->slots_hint = std::max(s_->slots_hint, i + 1);
    return i;
  }
  return error(ENOSPC, "job: all " + std::to_string(job_max_members) +
                           " member slots are taken (too many processes at once)");
}

result<unsigned> job::join(pid_t pid, std::string_view comm) {
  const uint64_t start = process_start_time(pid);
  lock_guard g(*this);
  auto slot = take_slot_locked(slot_live, pid, start, comm, 0);
  if (slot) ++s_->members_joined;
  return slot;
}

result<uint64_t> job::announce_guest() {
  if (guest_tx_ < 0)
    return error(EXDEV, "job: the process is in a pid namespace other than the job's, with no "
                        "socket to the supervisor to be named by");
  const guest_message msg{job_magic, s_->guest_keys.fetch_add(1, std::memory_order_relaxed) + 1};
  // The supervisor reads the socket at every round of its watch: a full buffer (a burst of
  // forks in a sandbox) empties within milliseconds.
  for (unsigned tries = 0;; ++tries) {
    if (::send(guest_tx_, &msg, sizeof msg, MSG_DONTWAIT | MSG_NOSIGNAL) ==
        static_cast<ssize_t>(sizeof msg))
      return msg.value;
    if (errno == EINTR) continue;
    if (errno != EAGAIN || tries == 1000)
      return error(errno, std::string("job: cannot announce this process (in a pid namespace "
                                      "other than the job's) to the supervisor: ") +
                              std::strerror(errno));
    const timespec one_ms{0, 1000 * 1000};
    ::nanosleep(&one_ms, nullptr);
  }
}

result<unsigned> job::join_guest(std::string_view comm) {
  auto key = announce_guest();
  if (!key) return key.error();
  lock_guard g(*this);
  auto slot = take_slot_locked(slot_live, 0, 0, comm, 0);
  if (!slot) return slot;
  s_->members[*slot].guest_key = *key;
  ++s_->members_joined;
  guest_ = true;
  return slot;
}

status job::adopt_guest(unsigned slot, std::string_view comm) {
  if (slot >= job_max_members) return error(EINVAL, "job: no slot " + std::to_string(slot));
  auto key = announce_guest();
  if (!key) {
    // The share reserved for it goes back now, not when the supervisor finds it unadopted.
    lock_guard g(*this);
    if (s_->members[slot].state.load(std::memory_order_relaxed) == slot_child)
      leave_locked(s_->members[slot]);
    return key.error();
  }
  lock_guard g(*this);
  member& m = s_->members[slot];
  if (m.state.load(std::memory_order_relaxed) != slot_child)
    return error(EINVAL, "job: slot " + std::to_string(slot) + " is not reserved for a child");
  m.pid.store(0, std::memory_order_relaxed);
  m.start_time = 0;
  m.guest_key = *key;
  name_member(m.comm, comm);
  m.state.store(slot_live, std::memory_order_release);
  ++s_->members_joined;
  guest_ = true;
  return {};
}

void job::relay_nudge(unsigned slot) noexcept {
  if (guest_tx_ < 0 || slot >= job_max_members) return;
  const int saved_errno = errno;
  const guest_message msg{nudge_magic, slot};
  // Lost when the socket is full: the asker asks again within a millisecond.
  (void)::send(guest_tx_, &msg, sizeof msg, MSG_DONTWAIT | MSG_NOSIGNAL);
  errno = saved_errno;
}

job_messages job::read_messages() {
  job_messages out;
  if (guest_rx_ < 0) return out;
  for (;;) {
    guest_message msg{};
    iovec iov{&msg, sizeof msg};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(ucred)) + CMSG_SPACE(sizeof(int))];
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = control;
    mh.msg_controllen = sizeof control;
    const ssize_t n = ::recvmsg(guest_rx_, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    job_announcement a;
    for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
      if (c->cmsg_level != SOL_SOCKET) continue;
      if (c->cmsg_type == SCM_CREDENTIALS) {
        ucred u;
        std::memcpy(&u, CMSG_DATA(c), sizeof u);
        a.pid = u.pid;
      } else if (c->cmsg_type == scm_pidfd) {
        std::memcpy(&a.pidfd, CMSG_DATA(c), sizeof a.pidfd);
      }
    }
    const bool whole = n == static_cast<ssize_t>(sizeof msg);
    if (whole && msg.magic == job_magic && msg.value != 0 && a.pid > 0) {
      a.key = msg.value;
      out.announced.push_back(a);
      continue;
    }
    if (a.pidfd >= 0) ::close(a.pidfd);
    if (whole && msg.magic == nudge_magic && msg.value < job_max_members)
      out.nudges.push_back(static_cast<unsigned>(msg.value));
  }
  return out;
}

pid_t job::member_pid(unsigned slot) const noexcept {
  return slot < job_max_members ? s_->members[slot].pid.load(std::memory_order_acquire) : 0;
}

bool job::name_guest(unsigned slot, uint64_t key, pid_t pid) noexcept {
  if (slot >= job_max_members || key == 0 || pid <= 0) return false;
  const uint64_t start = process_start_time(pid);
  if (start == 0) return false;
  lock_guard g(*this);
  member& m = s_->members[slot];
  if (m.state.load(std::memory_order_relaxed) != slot_live || m.guest_key != key ||
      m.pid.load(std::memory_order_relaxed) != 0)
    return false;
  m.start_time = start;
  m.pid.store(pid, std::memory_order_release);
  return true;
}

void job::reap_guest(unsigned slot, uint64_t key) noexcept {
  if (slot >= job_max_members || key == 0) return;
  lock_guard g(*this);
  member& m = s_->members[slot];
  if (m.state.load(std::memory_order_relaxed) != slot_live || m.guest_key != key) return;
  reap_locked(m);
}

result<unsigned> job::reserve_for_child(pid_t parent, uint64_t pages, uint64_t pool_bytes,
                                        child_share_donor donor) {
  lock_guard g(*this);
  // The parent's reservation above what it keeps resident goes to the child first: the room
  // its eviction made is never free in between, for another member's fault to take.
  uint64_t lent = 0;
  if (donor.slot < job_max_members)
    lent = std::min({pages, donor.surplus, s_->members[donor.slot].usage});
  if (pages != 0 && s_->charge - lent + pages > s_->limit_pages)
    return error(EAGAIN, "job: the child's share does not fit under the limit");
  auto slot = take_slot_locked(slot_child, parent, 0, "(fork)", pages);
  if (!slot) return slot;
  if (lent) {
    member& d = s_->members[donor.slot];
    d.usage -= lent;
    d.usage_seen.store(d.usage, std::memory_order_relaxed);
  }
  s_->members[*slot].stat[JOB_RESIDENT].store(pages, std::memory_order_relaxed);
  s_->members[*slot].stat[JOB_POOL_BYTES].store(pool_bytes, std::memory_order_relaxed);
  s_->charge += pages - lent;
  s_->charge_seen.store(s_->charge, std::memory_order_relaxed);
  fetch_max(s_->peak_charge, s_->charge);
  return slot;
}

status job::adopt(unsigned slot, pid_t pid, std::string_view comm) {
  if (slot >= job_max_members) return error(EINVAL, "job: no slot " + std::to_string(slot));
  const uint64_t start = process_start_time(pid);
  lock_guard g(*this);
  member& m = s_->members[slot];
  if (m.state.load(std::memory_order_relaxed) != slot_child)
    return error(EINVAL, "job: slot " + std::to_string(slot) + " is not reserved for a child");
  m.pid.store(pid, std::memory_order_relaxed);
  m.start_time = start;
  name_member(m.comm, comm);
  m.state.store(slot_live, std::memory_order_release);
  ++s_->members_joined;
  return {};
}

void job::child_forked(unsigned slot, pid_t child) noexcept {
  if (slot >= job_max_members || child <= 0) return;
  lock_guard g(*this);
  member& m = s_->members[slot];
  if (m.state.load(std::memory_order_relaxed) == slot_child)
    m.child.store(child, std::memory_order_relaxed);
}

void job::reap_unadopted(unsigned slot, uint64_t max_age_ns, pid_t ended_child) noexcept {
  if (slot >= job_max_members) return;
  lock_guard g(*this);
  member& m = s_->members[slot];
  // The slot may have been taken again since the caller looked: by age, or by its child.
  const bool ended = ended_child > 0 && m.child.load(std::memory_order_relaxed) == ended_child;
  if (m.state.load(std::memory_order_relaxed) != slot_child ||
      (!ended && mono_ns() - m.created_ns < max_age_ns))
    return;
  reap_locked(m);
}

// The member's share of the job goes back; its cumulative counters join the exited totals.
void job::leave(unsigned slot) noexcept {
  if (slot >= job_max_members) return;
  lock_guard g(*this);
  leave_locked(s_->members[slot]);
}

void job::reap_locked(member& m) noexcept {
  ++s_->members_reaped;
  leave_locked(m);
}

void job::leave_locked(member& m) noexcept {
  if (m.state.load(std::memory_order_relaxed) == slot_free) return;
  stop_waiting_locked(m);
  const uint64_t usage = m.usage;
  m.usage = 0;
  m.usage_seen.store(0, std::memory_order_relaxed);
  give_back_locked(usage);
  for (unsigned k = JOB_CUMULATIVE; k < JOB_STAT_COUNT; ++k)
    s_->exited[k] += m.stat[k].load(std::memory_order_relaxed);
  s_->exited[JOB_POOL_PEAK] = std::max(s_->exited[JOB_POOL_PEAK], m.stat[JOB_POOL_PEAK].load(std::memory_order_relaxed));
  m.state.store(slot_free, std::memory_order_release);
}

namespace {
// What this process (or the parent it was forked from) last read from /proc/self/ns/pid:
// 1 the job's namespace, 0 another, -1 never read.
std::atomic<int> last_pidns_seen{-1};
}  // namespace

bool job::in_pid_namespace() const noexcept {
  if (s_->pidns_ino == 0) return true;  // the supervisor could not tell: as before namespaces
  struct stat ns;
  if (::stat("/proc/self/ns/pid", &ns) == 0) {
    const bool same = ns.st_dev == s_->pidns_dev && ns.st_ino == s_->pidns_ino;
    last_pidns_seen.store(same ? 1 : 0, std::memory_order_relaxed);
    return same;
  }
  // No /proc: a process that chrooted (dovecot's login processes). Its fork's child is where its
  // parent was, unless it is the first process of a new namespace (pid 1). No kept descriptor
  // of /proc instead: a directory descriptor would let a chrooted sandbox out (Chromium refuses
  // to run with one).
  return ::getpid() != 1 && last_pidns_seen.load(std::memory_order_relaxed) == 1;
}

bool job::still_alive(unsigned slot) const noexcept {
  if (slot >= job_max_members) return false;
  const member& m = s_->members[slot];
  if (m.state.load(std::memory_order_acquire) != slot_live) return false;
  const pid_t pid = m.pid.load(std::memory_order_relaxed);
  const uint64_t start = process_start_time(pid);
  // A member that joined without /proc (after a chroot) could not read its start time: alive
  // while its pid is, reuse of the pid not told apart.
  return start != 0 && (start == m.start_time || m.start_time == 0);
}

void job::reap_dead(unsigned slot) noexcept {
  if (slot >= job_max_members) return;
  lock_guard g(*this);
  member& m = s_->members[slot];
  if (m.state.load(std::memory_order_relaxed) == slot_live) reap_locked(m);
}

unsigned job::reap_ended_members(unsigned self) noexcept {
  if (guest_) return 0;  // its pids are not the members' (kill(pid, 0) would ask another)
  const int saved_errno = errno;
  unsigned n = 0;
  const unsigned hint = std::min<unsigned>(s_->slots_hint, job_max_members);
  for (unsigned i = 0; i < hint; ++i) {
    member& m = s_->members[i];
    if (i == self || m.state.load(std::memory_order_acquire) != slot_live) continue;
    const pid_t pid = m.pid.load(std::memory_order_relaxed);
    if (pid <= 0 || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    lock_guard g(*this);
    // Still that member: it may have left meanwhile and its slot gone to a new one.
    if (m.state.load(std::memory_order_relaxed) != slot_live ||
        m.pid.load(std::memory_order_relaxed) != pid)
      continue;
    reap_locked(m);
    ++n;
  }
  errno = saved_errno;
  return n;
}

uint64_t job::try_reserve(unsigned slot, uint64_t need, uint64_t want) noexcept {
  want = std::max(want, need);
  lock_guard g(*this);
  const uint64_t room = s_->charge < s_->limit_pages ? s_->limit_pages - s_->charge : 0;
  if (room < need) return 0;
  const uint64_t got = std::min(room, want);
  s_->charge += got;
  s_->charge_seen.store(s_->charge, std::memory_order_relaxed);
  fetch_max(s_->peak_charge, s_->charge);
  member& m = s_->members[slot];
  m.usage += got;
  m.usage_seen.store(m.usage, std::memory_order_relaxed);
  return got;
}

void job::force_reserve(unsigned slot, uint64_t n) noexcept {
  lock_guard g(*this);
  s_->charge += n;
  s_->charge_seen.store(s_->charge, std::memory_order_relaxed);
  fetch_max(s_->peak_charge, s_->charge);
  member& m = s_->members[slot];
  m.usage += n;
  m.usage_seen.store(m.usage, std::memory_order_relaxed);
}

void job::unreserve(unsigned slot, uint64_t n) noexcept {
  lock_guard g(*this);
  member& m = s_->members[slot];
  n = std::min(n, m.usage);
  m.usage -= n;
  m.usage_seen.store(m.usage, std::memory_order_relaxed);
  give_back_locked(n);
}

void job::give_back_locked(uint64_t n) noexcept {
  s_->charge -= std::min(s_->charge, n);
  // The room goes to the members waiting for it first (lowest slot first), never beyond the
  // limit: a job overcharged gets below it before anyone is given more.
  const unsigned hint = std::min<unsigned>(s_->slots_hint, job_max_members);
  for (unsigned i = 0; s_->waiters != 0 && i < hint && s_->charge < s_->limit_pages; ++i) {
    member& w = s_->members[i];
    if (w.waiting == 0 || w.state.load(std::memory_order_relaxed) != slot_live) continue;
    const uint64_t x = std::min(w.waiting, s_->limit_pages - s_->charge);
    s_->charge += x;
    w.usage += x;
    w.usage_seen.store(w.usage, std::memory_order_relaxed);
    w.granted.fetch_add(x, std::memory_order_relaxed);
    w.waiting -= x;
    if (w.waiting == 0) --s_->waiters;
  }
  s_->charge_seen.store(s_->charge, std::memory_order_relaxed);
  USWAP_DCHECK(waiters_counted_locked() == s_->waiters);
}

unsigned job::waiters_counted_locked() const noexcept {
  unsigned n = 0;
  for (unsigned i = 0; i < std::min<unsigned>(s_->slots_hint, job_max_members); ++i)
    n += s_->members[i].state.load(std::memory_order_relaxed) != slot_free &&
         s_->members[i].waiting != 0;
  return n;
}

void job::begin_wait(unsigned slot, uint64_t pages) noexcept {
  lock_guard g(*this);
  member& m = s_->members[slot];
  if (pages == 0) return;
  if (m.waiting == 0) ++s_->waiters;
  m.waiting = pages;
  USWAP_DCHECK(waiters_counted_locked() == s_->waiters);
}

uint64_t job::take_granted(unsigned slot) noexcept {
  std::atomic<uint64_t>& g = s_->members[slot].granted;
  return g.load(std::memory_order_relaxed) != 0 ? g.exchange(0, std::memory_order_relaxed) : 0;
}

uint64_t job::end_wait(unsigned slot) noexcept {
  {
    lock_guard g(*this);
    stop_waiting_locked(s_->members[slot]);
  }
  return take_granted(slot);
}

void job::stop_waiting_locked(member& m) noexcept {
  if (m.waiting == 0) return;
  m.waiting = 0;
  --s_->waiters;
}

uint64_t job::usage(unsigned slot) const noexcept {
  return s_->members[slot].usage_seen.load(std::memory_order_relaxed);
}

uint64_t job::charge() const noexcept { return s_->charge_seen.load(std::memory_order_relaxed); }

uint64_t job::fair_share() const noexcept {
  unsigned live = 0;
  const unsigned hint = std::min<unsigned>(s_->slots_hint, job_max_members);
  for (unsigned i = 0; i < hint; ++i)
    if (s_->members[i].state.load(std::memory_order_relaxed) == slot_live) ++live;
  return s_->limit_pages / std::max(1u, live);
}

std::optional<job_target> job::request_reclaim(unsigned slot, uint64_t n) noexcept {
  const unsigned hint = std::min<unsigned>(s_->slots_hint, job_max_members);
  const uint64_t fair = fair_share();
  if (usage(slot) >= fair) return std::nullopt;
  unsigned best = job_max_members;
  uint64_t best_usage = fair;
  for (unsigned i = 0; i < hint; ++i) {
    if (i == slot || s_->members[i].state.load(std::memory_order_relaxed) != slot_live) continue;
    const uint64_t u = usage(i);
    if (u > best_usage) {
      best = i;
      best_usage = u;
    }
  }
  if (best == job_max_members) return std::nullopt;
  // Ask for what the victim holds above its fair share, at least n. Askers at the same time
  // want the same pages above that share: each adds its own n, not the share again, nor what
  // the victim is evicting already for a request it took (else a parent asked by its two
  // children at once evicted twice what it held above its share, and read it back later).
  member& v = s_->members[best];
  const uint64_t above = best_usage - fair;
  const uint64_t serving = v.reclaim_serving.load(std::memory_order_relaxed);
  const uint64_t ask = std::min((above > serving ? above - serving : 0) + n, best_usage);
  uint64_t cur = v.reclaim_request.load(std::memory_order_relaxed);
  while (!v.reclaim_request.compare_exchange_weak(
      cur, std::min(std::max(cur + n, ask), best_usage), std::memory_order_relaxed)) {
  }
  s_->reclaim_requests.fetch_add(1, std::memory_order_relaxed);
  return job_target{best, s_->members[best].pid.load(std::memory_order_relaxed)};
}

bool job::has_reclaim_request(unsigned slot) const noexcept {
  return s_->members[slot].reclaim_request.load(std::memory_order_relaxed) != 0;
}

uint64_t job::take_reclaim_request(unsigned slot) noexcept {
  member& m = s_->members[slot];
  if (m.reclaim_request.load(std::memory_order_relaxed) == 0) return 0;
  const uint64_t want = m.reclaim_request.exchange(0, std::memory_order_relaxed);
  m.reclaim_serving.fetch_add(want, std::memory_order_relaxed);
  return want;
}

void job::reclaim_served(unsigned slot) noexcept {
  s_->members[slot].reclaim_serving.store(0, std::memory_order_relaxed);
}

bool job::mark_signalled(unsigned slot) noexcept {
  return s_->members[slot].signalled.exchange(1, std::memory_order_acq_rel) == 0;
}

void job::clear_signalled(unsigned slot) noexcept {
  s_->members[slot].signalled.store(0, std::memory_order_release);
}

const std::atomic<uint32_t>* job::kswapd_word(unsigned slot) const noexcept {
  return &s_->members[slot].kswapd_word;
}

void job::set_kswapd_listening(unsigned slot, bool on) noexcept {
  s_->members[slot].kswapd_listening.store(on, std::memory_order_seq_cst);
}

bool job::kick_kswapd(unsigned slot) noexcept {
  member& m = s_->members[slot];
  if (m.kswapd_listening.load(std::memory_order_seq_cst) == 0) return false;
  // After the request (request_reclaim's add): a thread that read the word before this sees it
  // change and does not sleep; one that read it after sees the request.
  m.kswapd_word.fetch_add(1, std::memory_order_seq_cst);
  futex_wake_shared(&m.kswapd_word, 1);
  return true;
}

std::optional<unsigned> job::live_slot_of(pid_t pid) const noexcept {
  if (pid <= 0) return std::nullopt;
  const unsigned hint = std::min<unsigned>(s_->slots_hint, job_max_members);
  for (unsigned i = 0; i < hint; ++i) {
    const member& m = s_->members[i];
    if (m.state.load(std::memory_order_acquire) == slot_live &&
        m.pid.load(std::memory_order_relaxed) == pid)
      return i;
  }
  return std::nullopt;
}

uint64_t job::post_fault(unsigned slot, uintptr_t addr, uint64_t len, bool write) noexcept {
  member& m = s_->members[slot];
  // A ticket carries the millisecond it was made in its top 40 bits, so that the box's one
  // word says since when it is held: a box held past any asker's wait belongs to an asker that
  // died waiting, and is taken over (by a compare-and-swap of that word, so by one asker).
  const uint64_t now_ms = mono_ns() / 1000000;
  const uint64_t ticket =
      (now_ms << 24) | ((s_->fault_tickets.fetch_add(1, std::memory_order_relaxed) + 1) & 0xffffff);
  if (ticket == 0) return 0;  // the first millisecond of the machine's uptime
  uint64_t held = m.fault_box.load(std::memory_order_relaxed);
  if (held != 0 && now_ms - std::min(now_ms, held >> 24) < job_fault_box_stale_ns / 1000000)
    return 0;
  if (!m.fault_box.compare_exchange_strong(held, ticket, std::memory_order_acquire)) return 0;
  // A seqlock's writer: `fault_posted` 0 while the fields change (a request cancelled before
  // the member took it would otherwise be read with this one's fields under its old ticket).
  // The fields' release stores publish that 0 to a reader whose acquire load sees them.
  m.fault_posted.store(0, std::memory_order_relaxed);
  m.fault_addr.store(addr, std::memory_order_release);
  m.fault_len.store((len & ~(uint64_t{1} << 63)) | (write ? uint64_t{1} << 63 : 0),
                    std::memory_order_release);
  m.fault_posted.store(ticket, std::memory_order_seq_cst);  // before the kick's word
  return ticket;
}

bool job::has_fault(unsigned slot) const noexcept {
  const member& m = s_->members[slot];
  const uint64_t posted = m.fault_posted.load(std::memory_order_relaxed);
  return posted != 0 && posted != m.fault_taken.load(std::memory_order_relaxed);
}

std::optional<job::member_fault> job::take_fault(unsigned slot) noexcept {
  member& m = s_->members[slot];
  for (;;) {
    uint64_t taken = m.fault_taken.load(std::memory_order_acquire);
    const uint64_t t = m.fault_posted.load(std::memory_order_acquire);
    if (t == 0 || t == taken) return std::nullopt;
    member_fault f;
    f.ticket = t;
    f.addr = m.fault_addr.load(std::memory_order_acquire);
    const uint64_t len = m.fault_len.load(std::memory_order_acquire);
    f.len = len & ~(uint64_t{1} << 63);
    f.write = (len >> 63) != 0;
    // The request is the ticket's only if no other asker posted meanwhile (the box freed by a
    // cancel and taken again: a field of its read above makes its 0 visible here), and the
    // member's only if no other thread of its took it.
    if (m.fault_posted.load(std::memory_order_relaxed) != t) continue;
    if (m.fault_taken.compare_exchange_strong(taken, t, std::memory_order_acq_rel)) return f;
  }
}

void job::fault_served(unsigned slot, uint64_t ticket, int64_t result) noexcept {
  member& m = s_->members[slot];
  m.fault_result.store(result, std::memory_order_relaxed);
  m.fault_served.store(ticket, std::memory_order_release);
  m.fault_word.fetch_add(1, std::memory_order_release);
  futex_wake_shared(&m.fault_word, INT32_MAX);
}

std::optional<int64_t> job::fault_answer(unsigned slot, uint64_t ticket) noexcept {
  member& m = s_->members[slot];
  if (m.fault_served.load(std::memory_order_acquire) != ticket) return std::nullopt;
  // The box is still this asker's, so no later request's answer can have replaced it.
  const int64_t r = m.fault_result.load(std::memory_order_relaxed);
  cancel_fault(slot, ticket);
  return r;
}

void job::cancel_fault(unsigned slot, uint64_t ticket) noexcept {
  uint64_t mine = ticket;
  s_->members[slot].fault_box.compare_exchange_strong(mine, 0, std::memory_order_release);
}

const std::atomic<uint32_t>* job::fault_word(unsigned slot) const noexcept {
  return &s_->members[slot].fault_word;
}

void job::publish(unsigned slot, const uint64_t (&stat)[JOB_STAT_COUNT], uint64_t now_ns) noexcept {
  member& m = s_->members[slot];
  for (unsigned k = 0; k < JOB_STAT_COUNT; ++k) m.stat[k].store(stat[k], std::memory_order_relaxed);
  m.last_active_ns.store(now_ns, std::memory_order_relaxed);
  // The footprint peak is the job's, summed over live members and children about to run (a
  // copy of their parent) at this moment.
  uint64_t resident = 0, pool = 0;
  const unsigned hint = std::min<unsigned>(s_->slots_hint, job_max_members);
  for (unsigned i = 0; i < hint; ++i) {
    const member& o = s_->members[i];
    const uint32_t state = o.state.load(std::memory_order_relaxed);
    if (state != slot_live && state != slot_child) continue;
    resident += o.stat[JOB_RESIDENT].load(std::memory_order_relaxed);
    pool += o.stat[JOB_POOL_BYTES].load(std::memory_order_relaxed);
  }
  fetch_max(s_->peak_footprint, resident * page_size + pool);
}

void job::note_active(unsigned slot, uint64_t now_ns) noexcept {
  s_->members[slot].last_active_ns.store(now_ns, std::memory_order_relaxed);
}

uint64_t job::last_active_ns(unsigned slot) const noexcept {
  return s_->members[slot].last_active_ns.load(std::memory_order_relaxed);
}

void job::set_stop_reason(uint64_t reason) noexcept {
  uint64_t none = job_stop_none;
  s_->stop_reason.compare_exchange_strong(none, reason, std::memory_order_relaxed);
}

uint64_t job::stop_reason() const noexcept { return s_->stop_reason.load(std::memory_order_relaxed); }

std::atomic<uint16_t>* job::block_refs() const noexcept {
  return reinterpret_cast<std::atomic<uint16_t>*>(reinterpret_cast<char*>(s_) + sizeof(shared));
}

uint64_t job::backing_blocks() const noexcept { return s_->backing_blocks; }

uint64_t job::reserve_block() noexcept {
  const uint64_t n = s_->backing_blocks;
  if (n == 0) return no_block;
  std::atomic<uint16_t>* refs = block_refs();
  uint64_t hint = s_->block_hint.load(std::memory_order_relaxed);
  const uint64_t start = hint % n;
  for (uint64_t k = 0; k < n; ++k) {
    const uint64_t b = (start + k) % n;
    uint16_t zero = 0;
    if (refs[b].load(std::memory_order_relaxed) == 0 &&
        refs[b].compare_exchange_strong(zero, 1, std::memory_order_acq_rel)) {
      // Only if no release lowered the hint meanwhile (it is a hint: a lost update costs a scan).
      s_->block_hint.compare_exchange_strong(hint, b + 1, std::memory_order_relaxed);
      s_->blocks_in_use.fetch_add(1, std::memory_order_relaxed);
      return b;
    }
  }
  return no_block;
}

void job::retain_block(uint64_t block) noexcept {
  if (block >= s_->backing_blocks) return;
  const uint16_t before = block_refs()[block].fetch_add(1, std::memory_order_acq_rel);
  USWAP_DCHECK(before != 0 && before != UINT16_MAX);  // retained by a holder, never overflowed
  (void)before;
}

void job::release_block(uint64_t block) noexcept {
  if (block >= s_->backing_blocks) return;
  const uint16_t before = block_refs()[block].fetch_sub(1, std::memory_order_acq_rel);
  USWAP_DCHECK(before != 0);
  if (before == 1) {
    s_->blocks_in_use.fetch_sub(1, std::memory_order_relaxed);
    // Lowest free block first, as the kernel's alloc_block_bdev: the file stays dense and a
    // freed block is the next one handed out.
    fetch_min(s_->block_hint, block);
  }
}

uint64_t job::blocks_in_use() const noexcept {
  return s_->blocks_in_use.load(std::memory_order_relaxed);
}

uint64_t job::pool_bytes() const noexcept {
  uint64_t sum = 0;
  const unsigned hint = std::min<unsigned>(s_->slots_hint, job_max_members);
  for (unsigned i = 0; i < hint; ++i) {
    const uint32_t state = s_->members[i].state.load(std::memory_order_relaxed);
    if (state == slot_live || state == slot_child)
      sum += s_->members[i].stat[JOB_POOL_BYTES].load(std::memory_order_relaxed);
  }
  return sum;
}

uint64_t job::published(unsigned slot, job_stat s) const noexcept {
  return slot < job_max_members ? s_->members[slot].stat[s].load(std::memory_order_relaxed) : 0;
}

uint64_t job_blocks::reserve() noexcept {
  const uint64_t b = j_.reserve_block();
  return b == job::no_block ? zram_block_allocator::no_block : b;
}
void job_blocks::retain(uint64_t block) noexcept { j_.retain_block(block); }
void job_blocks::release(uint64_t block) noexcept { j_.release_block(block); }
uint64_t job_blocks::nr_blocks() const noexcept { return j_.backing_blocks(); }

uint64_t job_view::total(job_stat s) const noexcept {
  uint64_t v = s >= JOB_CUMULATIVE ? exited[s] : 0;
  for (const auto& m : members) v += m.stat[s];
  return v;
}

job_view job::view() const {
  job_view v;
  v.limit_pages = s_->limit_pages;
  v.pool_limit_bytes = s_->pool_limit_bytes;
  v.backing_blocks = s_->backing_blocks;
  v.backing_blocks_used = blocks_in_use();
  {
    lock_guard g(*this);
    v.charge = s_->charge;
    v.members_joined = s_->members_joined;
    v.members_reaped = s_->members_reaped;
    v.owner_dead_repairs = s_->owner_dead_repairs;
    std::copy(std::begin(s_->exited), std::end(s_->exited), std::begin(v.exited));
    for (unsigned i = 0; i < s_->slots_hint; ++i) {
      const member& m = s_->members[i];
      const uint32_t st = m.state.load(std::memory_order_relaxed);
      if (st == slot_free) continue;
      job_member_view mv;
      mv.slot = i;
      mv.pid = m.pid.load(std::memory_order_relaxed);
      mv.for_child = st == slot_child;
      if (mv.for_child) mv.child = m.child.load(std::memory_order_relaxed);
      mv.guest_key = m.guest_key;
      mv.age_ns = mono_ns() - m.created_ns;
      mv.comm.assign(m.comm, strnlen(m.comm, sizeof m.comm));
      mv.usage = m.usage;
      for (unsigned k = 0; k < JOB_STAT_COUNT; ++k) mv.stat[k] = m.stat[k].load(std::memory_order_relaxed);
      v.members.push_back(std::move(mv));
    }
  }
  v.peak_charge = s_->peak_charge.load(std::memory_order_relaxed);
  v.peak_footprint = s_->peak_footprint.load(std::memory_order_relaxed);
  v.reclaim_requests = s_->reclaim_requests.load(std::memory_order_relaxed);
  v.stop_reason = s_->stop_reason.load(std::memory_order_relaxed);
  return v;
}

void job_die_mid_update_for_test(job& j, unsigned slot, uint64_t n) {
  pthread_mutex_lock(&j.s_->lock);
  j.s_->members[slot].usage += n;  // and the charge never follows
  ::_exit(0);
}

}  // namespace uswap
