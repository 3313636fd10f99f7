// The pager as a member of a job (job.h): joining and leaving, the reservation, serving and
// making reclaim requests, publishing counters, and what fork does to membership. The charge
// itself is in fault.cc.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <system_error>

#include "kernel_access.h"
#include "pager_impl.h"
#include "sigbus.h"
#include "uswap/sync/futex.h"

namespace uswap {

namespace {

// sigqueue's value on the job's reclaim signal, so that the shim tells it from a signal the
// program sends itself with the same number.
constexpr int job_signal_magic = 0x75737770;  // "uswp"

void process_comm(char (&out)[16]) noexcept {
  std::memset(out, 0, sizeof out);
  const int fd = ::open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) {  // no /proc after a chroot: the calling thread's name, usually the main one's
    (void)::prctl(PR_GET_NAME, out);
    out[sizeof out - 1] = 0;
    return;
  }
  const ssize_t n = ::read(fd, out, sizeof out - 1);
  ::close(fd);
  if (n > 0) out[std::strcspn(out, "\n")] = 0;
}

// The first line of /proc/PID/task/PID/`file` (at most out_len - 1 bytes), or false.
bool read_task_file(pid_t pid, const char* file, char* out, size_t out_len) noexcept {
  char path[80];
  std::snprintf(path, sizeof path, "/proc/%d/task/%d/%s", static_cast<int>(pid),
                static_cast<int>(pid), file);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const ssize_t n = ::read(fd, out, out_len - 1);
  ::close(fd);
  if (n <= 0) return false;
  out[n] = 0;
  out[std::strcspn(out, "\n")] = 0;
  return true;
}

}  // namespace

// A signal interrupts a system call, and what the program then sees is not always a restart
// (kernel_access.h, syscall_restarts_cleanly). A program that installed no handler never sees
// a short write or an EINTR without uswap, and not all of them cope (Python's print() of a large
// string to a pipe loses the rest of it). So the job's signal goes only to a main thread that is
// not in a system call (running, or in a fault), or asleep in one that restarts cleanly.
// /proc/PID/syscall says which (readable by the job's own user, unless the process made itself
// undumpable); without it, only a running thread is asked (stat's state R).
bool quiet_to_interrupt(pid_t pid) noexcept {
  char line[256];
  if (read_task_file(pid, "syscall", line, sizeof line)) {
    if (std::strncmp(line, "running", 7) == 0) return true;
    char* end = nullptr;
    const long nr = std::strtol(line, &end, 10);
    if (end == line) return false;
    long args[6] = {};
    for (long& a : args) a = static_cast<long>(std::strtoul(end, &end, 16));
    return nr == -1 /* in the kernel, not in a system call: a fault */ ||
           syscall_restarts_cleanly(nr, args);
  }
  if (!read_task_file(pid, "stat", line, sizeof line)) return false;
  const char* paren = std::strrchr(line, ')');
  return paren && paren[1] == ' ' && paren[2] == 'R';
}

namespace {

// Asks the member to serve its request now: a signal to its main thread (the thread whose
// compression stream the shim made ready, see pager::serve_job_request), once until it takes it,
// and only while the signal cannot disturb a system call of the program's (quiet_to_interrupt).
void nudge(job& j, const job_target& t) noexcept {
  // A guest's pids name other processes than the target's: the supervisor signals for it.
  if (j.guest()) return j.relay_nudge(t.slot);
  if (t.pid <= 0) return;  // a guest not yet named
  if (!quiet_to_interrupt(t.pid)) return;
  if (!j.mark_signalled(t.slot)) return;
  siginfo_t si;
  std::memset(&si, 0, sizeof si);
  si.si_signo = j.signal();
  si.si_code = SI_QUEUE;
  si.si_pid = ::getpid();
  si.si_uid = ::getuid();
  si.si_value.sival_int = job_signal_magic;
  if (::syscall(SYS_rt_tgsigqueueinfo, t.pid, t.pid, j.signal(), &si) != 0)
    j.clear_signalled(t.slot);  // gone, or its main thread is: it serves at its next fault
}

}  // namespace

void job_nudge(job& j, unsigned slot) noexcept {
  const pid_t pid = j.member_pid(slot);
  if (pid > 0) nudge(j, {slot, pid});
}

bool is_job_signal(const siginfo_t* si) noexcept {
  return si && si->si_code == SI_QUEUE && si->si_value.sival_int == job_signal_magic;
}

status pager::join_job(std::shared_ptr<job> j) {
  impl& m = *impl_;
  if (!j) return error(EINVAL, "pager: no job to join");
  if (m.jlink.load(std::memory_order_relaxed)) return error(EBUSY, "pager: already in a job");
  if (m.detached()) return error(EINVAL, "pager: a detached copy cannot join a job");
  char comm[16];
  process_comm(comm);
  auto slot = j->in_pid_namespace() ? j->join(::getpid(), comm) : j->join_guest(comm);
  if (!slot) return slot.error();
  map_read_guard g(m.map_lock, &m);
  // What is mapped already counts from now on (a process joins before it runs, with ~nothing).
  const uint64_t res = m.resident.load(std::memory_order_relaxed);
  const uint64_t got = res ? j->try_reserve(*slot, res, res) : 0;
  if (got < res) j->force_reserve(*slot, res - got);
  m.reserved.store(res, std::memory_order_relaxed);
  m.jslot = *slot;
  m.job_owner = std::move(j);
  m.jlink.store(m.job_owner.get(), std::memory_order_seq_cst);
  m.publish_job_stats(*m.job_owner);
  m.want_kswapd(*m.job_owner);
  g.unlock();
  m.start_pool_worker();
  return {};
}

void pager::leave_job() noexcept {
  impl& m = *impl_;
  job* j = m.jlink.exchange(nullptr, std::memory_order_seq_cst);
  if (!j) return;
  // Threads that loaded the link before it went finish first (job_ref's other half).
  while (m.job_users.load(std::memory_order_seq_cst) != 0) sched_yield();
  m.publish_job_stats(*j);
  // Nobody takes a job_ref any more, so the reclaim thread cannot listen again; woken, it
  // stops waiting on a word the slot's next owner will use.
  j->set_kswapd_listening(m.jslot, false);
  m.kswapd_kick.fetch_add(1, std::memory_order_seq_cst);
  futex_wake(&m.kswapd_kick, 1);
  j->leave(m.jslot);
  m.reserved.store(0, std::memory_order_relaxed);
}

void pager::warm_up() noexcept {
  pager_scope in_pager;
  alignas(64) uint8_t page[page_size];
  for (size_t i = 0; i < page_size; ++i) page[i] = static_cast<uint8_t>(i * 7 + 1);
  swap_entry e;
  uint32_t bytes = 0;
  if (impl_->store->store(page, &e, &bytes) == 0) impl_->store->release(e);
}

bool pager::in_job() const noexcept {
  return impl_->jlink.load(std::memory_order_relaxed) != nullptr;
}

pid_t pager::job_pid() const noexcept {
  const impl& m = *impl_;
  job* j = m.jlink.load(std::memory_order_relaxed);
  return j ? j->member_pid(m.jslot) : 0;
}

void pager::serve_job_request(bool c_library_locks_maybe_held) noexcept {
  impl& m = *impl_;
  if (m.detached()) return;
  m.job_signals.fetch_add(1, std::memory_order_relaxed);
  // Inside pager code (a fault, a reclaim, a shim call into the pager), the locks it holds are
  // this thread's: the next charge serves the request. Off the main thread, a compression
  // stream may not exist yet, and making one allocates: the same. So while a fork is under way:
  // its prepare handler holds map_lock and pool_mu until the parent or child handler, whatever
  // runs in between on the forking thread (another library's fork handlers, glibc's fork).
  if (pager_depth() != 0 || ::gettid() != ::getpid() || fork_in_progress()) {
    m.job_request_noted.store(true, std::memory_order_relaxed);
    return;
  }
  // Reclaim allocates from glibc's malloc on cold paths (a compression stream, a pool at its
  // limit building its error message). Interrupted where glibc may hold one of its locks, that
  // malloc would wait for its own thread (a hog looping in malloc_stats hung so): the request
  // waits for the next charge, and the member may be signalled again, next time elsewhere.
  if (c_library_locks_maybe_held) {
    m.job_signals_deferred.fetch_add(1, std::memory_order_relaxed);
    m.job_request_noted.store(true, std::memory_order_relaxed);
    if (job_ref jr(m); jr) jr->clear_signalled(m.jslot);
    return;
  }
  pager_scope in_pager;
  map_read_guard g(m.map_lock, &m);
  job_ref jr(m);
  if (jr) m.serve_job_request_locked(*jr);
}

void pager::impl::serve_job_request_locked(job& j) noexcept {
  USWAP_ASSERT_HELD(map_lock);
  job_request_noted.store(false, std::memory_order_relaxed);
  j.clear_signalled(jslot);
  // First the copy that waits for it (a few pages), then the room, which may take a while.
  serve_member_fault_locked(j);
  const uint64_t want = j.take_reclaim_request(jslot);
  if (want != 0) {
    // Counted when taken: the asker may have its room (and look at the count) before the whole
    // of it is evicted.
    job_requests_served.fetch_add(1, std::memory_order_relaxed);
    // In steps, each step's room the job's at once: the asker waits for what it needs, not
    // for all it asked (a parent asked for 120 MiB above its share took a third of a second
    // to evict it, and its children's faults waited all that time).
    uint64_t left = std::min(want, resident.load(std::memory_order_relaxed));
    while (left != 0) {
      const uint64_t step = std::min<uint64_t>(left, job_serve_step);
      const uint64_t got = shrink(step, step);
      trim_reservation(j, 0);
      if (got == 0) break;
      left -= std::min(left, got);
    }
  }
  trim_reservation(j, 0);  // the room is the job's before the request counts as served
  if (want != 0) j.reclaim_served(jslot);
  publish_job_stats(j);
}

void pager::impl::serve_member_fault_locked(job& j) noexcept {
  USWAP_ASSERT_HELD(map_lock);
  const auto f = j.take_fault(jslot);
  if (!f) return;
  member_faults_served.fetch_add(1, std::memory_order_relaxed);
  // Others copy from this member's memory: the reclaim thread will hear their next requests
  // whatever the program is doing (a signal cannot reach it in every system call).
  if (kswapd_may_be_wanted()) kswapd_wanted.store(true, std::memory_order_relaxed);
  // The pages of the range that lie in this pager's mappings, from the first on, as the
  // kernel's copy would fault them in: up to the first page the access may not reach (the copy
  // fails there anyway). Charged as this member's own faults, so the limit holds.
  int64_t made = 0;
  int err = 0;
  const uintptr_t end = base + (nr_pages << page_shift);
  const uintptr_t lo = std::max<uintptr_t>(f->addr, base);
  const uintptr_t hi = f->len > end - std::min(f->addr, end) ? end : f->addr + f->len;
  if (f->len != 0 && lo < hi) {
    const int need = f->write ? PROT_WRITE : PROT_READ;
    readahead_state ra;
    for (uint64_t idx = (lo - base) >> page_shift, last = (hi - 1 - base) >> page_shift;
         idx <= last; ++idx) {
      const auto it = find_mapping(idx);
      if (it == mappings.end() || !(it->second.prot & need)) break;
      bool woke = false;
      err = fault_page(idx, it->first, it->first + it->second.pages,
                       f->write ? FAULT_FLAG_WRITE : 0, ra, false, &woke);
      if (err != 0) break;
      ++made;
    }
  }
  j.fault_served(jslot, f->ticket, made != 0 ? made : -err);
}

long pager::fault_in_member(pid_t pid, uintptr_t addr, uint64_t len, bool write) noexcept {
  impl& m = *impl_;
  if (m.detached()) return -ENOSYS;
  // Called from pager code, this thread may hold map_lock: it serves nothing while it waits.
  const bool may_serve = pager_depth() == 0;
  pager_scope in_pager;
  job_ref jr(m);
  if (!jr || jr->guest()) return -ENOSYS;
  job& j = *jr;
  const auto slot = j.live_slot_of(pid);
  if (!slot || *slot == m.jslot) return -ESRCH;
  m.member_faults_asked.fetch_add(1, std::memory_order_relaxed);
  const job_target t{*slot, pid};
  const std::atomic<uint32_t>* word = j.fault_word(*slot);
  const uint64_t deadline = coarse_clock_ns() + job::job_fault_wait_ns;
  uint64_t ticket = 0;
  for (;;) {
    // A member that asks this one meanwhile (both copy from each other) is served from here:
    // this thread may be the one its signal would reach, and it waits in a signal handler.
    if (may_serve && (j.has_fault(m.jslot) || j.has_reclaim_request(m.jslot))) {
      map_read_guard g(m.map_lock, &m);
      m.serve_job_request_locked(j);
    }
    const uint32_t seen = word->load(std::memory_order_acquire);
    if (ticket == 0) ticket = j.post_fault(t.slot, addr, len, write);
    if (ticket != 0) {
      if (const auto a = j.fault_answer(t.slot, ticket)) return static_cast<long>(*a);
      // Until the member took it (then it is being served): its thread, else its signal.
      if (j.has_fault(t.slot) && !j.kick_kswapd(t.slot)) nudge(j, t);
    }
    if (coarse_clock_ns() >= deadline) {
      if (ticket != 0) j.cancel_fault(t.slot, ticket);
      return -ETIMEDOUT;
    }
    futex_wait_shared_for(word, seen, 1000 * 1000);
  }
}

bool pager::impl::wait_for_job_room(job& j, uint64_t excess) noexcept {
  USWAP_ASSERT_HELD(map_lock);
  constexpr uint64_t wait_backoff_ns = uint64_t{1000} * 1000 * 1000;
  const uint64_t failed = job_wait_failed_ns.load(std::memory_order_relaxed);
  if (failed != 0 && coarse_clock_ns() - failed < wait_backoff_ns) return false;
  // Waiting before asking: the room the target makes is this member's from its first page.
  j.begin_wait(jslot, excess);
  uint64_t got = 0;
  auto take = [&](uint64_t g) {
    reserved.fetch_add(g, std::memory_order_relaxed);
    got += g;
    return got >= excess;
  };
  const auto t = j.request_reclaim(jslot, excess + reclaim_pass);
  if (!t) return take(j.end_wait(jslot));  // this member holds a fair share: it evicts its own
  job_waits.fetch_add(1, std::memory_order_relaxed);
  // The member's reclaim thread serves it at once, whatever the member is doing; each
  // millisecond the request is still there, it is kicked again. A member without one serves it
  // at its next fault, or, when it has not charged for a while (blocked in a system call or
  // working on what it has), from the job's signal.
  constexpr uint64_t idle_ns = 2 * 1000 * 1000;
  for (unsigned ms = 0; ms < 200; ++ms) {
    if (j.has_reclaim_request(t->slot) && !j.kick_kswapd(t->slot) &&
        coarse_clock_ns() - j.last_active_ns(t->slot) > idle_ns)
      nudge(j, *t);
    const timespec one_ms{0, 1000 * 1000};
    ::nanosleep(&one_ms, nullptr);
    if (take(j.take_granted(jslot)) ||
        take(j.try_reserve(jslot, excess - got, excess - got + job_charge_batch))) {
      take(j.end_wait(jslot));
      job_wait_failed_ns.store(0, std::memory_order_relaxed);
      return true;
    }
  }
  if (take(j.end_wait(jslot))) return true;
  job_wait_failed_ns.store(coarse_clock_ns(), std::memory_order_relaxed);
  return false;  // nobody made room: evict what this member has
}

bool pager::impl::balance_pool(job& j, uint64_t mine_cap, pool_balance how) noexcept {
  const uint64_t limit = j.pool_limit_bytes();
  if (limit == 0) return true;
  const uint64_t headroom = pool_headroom();
  switch (how) {
    case pool_balance::on_reclaim: {
      if (!pool_worker_on.load(std::memory_order_acquire)) {
        std::unique_lock<std::mutex> g(pool_mu, std::try_to_lock);
        if (!g.owns_lock()) return true;  // another reclaimer balances right now
        return balance_pool_locked(j, mine_cap, headroom);
      }
      // The worker writes back; this pass only keeps the device within what the others leave
      // and kicks the worker once the pools pass the high watermark (an eighth of the limit,
      // at least the faults' headroom, below it), early enough that it keeps ahead of them.
      swap_device& dev = store->device();
      const uint64_t mine = dev.stats().mem_used;
      const uint64_t others = others_pool_bytes(j);
      (void)dev.set_mem_limit(pool_device_limit(limit, others, mine));
      if (others + mine + pool_high_watermark(limit) > limit) kick_pool_worker();
      return true;
    }
    case pool_balance::when_full: {
      if (!pool_worker_on.load(std::memory_order_acquire)) {
        std::lock_guard<std::mutex> g(pool_mu);
        return balance_pool_locked(j, mine_cap, headroom);
      }
      // The next round that ends after this kick says whether the worker made room.
      pool_waits.fetch_add(1, std::memory_order_relaxed);
      const uint32_t r = pool_round.load(std::memory_order_seq_cst);
      kick_pool_worker();
      while (pool_round.load(std::memory_order_seq_cst) == r &&
             pool_worker_on.load(std::memory_order_seq_cst))
        futex_wait(&pool_round, r);
      return pool_round_shrank.load(std::memory_order_acquire);
    }
    case pool_balance::locked:
      return balance_pool_locked(j, mine_cap, headroom);
    case pool_balance::worker: {
      // Down to the low watermark, a quarter of the limit below it.
      std::lock_guard<std::mutex> g(pool_mu);
      return balance_pool_locked(j, mine_cap, std::max(2 * headroom, limit / 4));
    }
  }
  return true;
}

uint64_t pager::impl::pool_device_limit(uint64_t limit, uint64_t others,
                                        uint64_t mine) const noexcept {
  // What the others leave, less room for a reclaim pass of theirs in flight (their published
  // sizes are from their last pass): several members storing a pass at once stay within the
  // limit. Never below what the device holds (a store fails; nothing is taken away).
  const uint64_t pass = pool_headroom();
  const uint64_t room = limit > others + pass ? limit - others - pass : 0;
  return std::max<uint64_t>(std::max(room, mine), page_size);
}

bool pager::impl::balance_pool_locked(job& j, uint64_t mine_cap, uint64_t headroom) noexcept {
  const uint64_t limit = j.pool_limit_bytes();
  swap_device& dev = store->device();
  const uint64_t mine = dev.stats().mem_used;
  // The job's pools as published, with this one as it is now.
  const uint64_t others = others_pool_bytes(j);
  const uint64_t total = others + mine;
  // Over the target, every member shrinks its pool in proportion to its size (each at its own
  // reclaim passes or worker rounds): cold pages to the backing device, then compaction. The
  // device refuses to grow past what is left for it (zram's mem_limit).
  const uint64_t target = limit > headroom ? limit - headroom : 0;
  uint64_t keep = mine;
  if (total > target && total > 0)
    keep = static_cast<uint64_t>(double(mine) * double(target) / double(total));
  keep = std::min(keep, mine_cap);
  const bool over = keep < mine;
  uint64_t written = 0;
  if (over) {
    const uint64_t excess = mine - keep;
    if (!opts.backing_dev.empty())
      written = dev.write_back_cold(2 * (excess / page_size) + reclaim_pass);
    (void)dev.compact();
  }
  const uint64_t after = dev.stats().mem_used;
  (void)dev.set_mem_limit(pool_device_limit(limit, others, after));
  publish_job_stats(j);
  // Over its share, the pool made room if it shrank or wrote pages back: the stores of the
  // faults waiting for room may have taken what the written pages left before this looked
  // (the pool then stays at its size while pages flow through it to the backing device). A
  // page's worth of bytes under the limit is no room for zsmalloc, which grows by whole zspages.
  return over ? after < mine || written != 0
              : after + page_size <= pool_device_limit(limit, others, 0);
}

bool pager::impl::wait_for_backing(job& j) noexcept {
  USWAP_ASSERT_HELD(map_lock);
  const uint64_t give_up = coarse_clock_ns() + opts.backing_timeout_ms * 1000 * 1000;
  do {
    // Each round tries the server again at its backoff's times (ensure_connected).
    if (balance_pool(j, UINT64_MAX, pool_balance::when_full)) return true;
    if (j.stop_reason() != job_stop_none) return false;
    const timespec pause{0, 100 * 1000 * 1000};
    ::nanosleep(&pause, nullptr);
  } while (coarse_clock_ns() < give_up);
  return false;
}

void pager::impl::kick_pool_worker() noexcept {
  // Dekker with the worker's idle flag (both sequentially consistent): either it sees the new
  // count before it sleeps, or this sees it idle and wakes it. Busy, it looks again when done.
  pool_kick.fetch_add(1, std::memory_order_seq_cst);
  if (pool_worker_idle.load(std::memory_order_seq_cst)) futex_wake(&pool_kick, 1);
}

void pager::impl::pool_worker_loop() noexcept {
  pager_scope in_pager;  // what it allocates (libnbd's requests) is the pager's
  uint32_t seen = pool_kick.load(std::memory_order_seq_cst);
  bool again = false;
  for (;;) {
    if (!again) {
      pool_worker_idle.store(true, std::memory_order_seq_cst);
      uint32_t k;
      while ((k = pool_kick.load(std::memory_order_seq_cst)) == seen &&
             !pool_worker_stop.load(std::memory_order_seq_cst))
        futex_wait(&pool_kick, seen);
      pool_worker_idle.store(false, std::memory_order_seq_cst);
      seen = k;
    }
    if (pool_worker_stop.load(std::memory_order_seq_cst)) return;
    bool shrank = false, still_high = false;
    {
      job_ref jr(*this);
      if (jr && jr->pool_limit_bytes()) {
        shrank = balance_pool(*jr, UINT64_MAX, pool_balance::worker);
        const uint64_t limit = jr->pool_limit_bytes();
        still_high = jr->pool_bytes() + pool_high_watermark(limit) > limit;
      }
    }
    pool_rounds.fetch_add(1, std::memory_order_relaxed);
    pool_round_shrank.store(shrank, std::memory_order_release);
    pool_round.fetch_add(1, std::memory_order_release);
    futex_wake(&pool_round, INT_MAX);
    // A round that shrank the pool and left it above the high watermark goes on at once; one
    // that could not (the backing device full or unreachable, retrying with its own backoff)
    // waits for the next kick, and a moment, rather than rescan the device for nothing.
    again = shrank && still_high;
    if (!shrank) {
      const timespec pause{0, 20 * 1000 * 1000};
      ::nanosleep(&pause, nullptr);
    }
  }
}

void pager::impl::start_pool_worker() noexcept {
  if (pool_worker_on.load(std::memory_order_relaxed) || opts.backing_dev.empty() ||
      background_ended.load(std::memory_order_relaxed))
    return;
  job_ref jr(*this);
  if (!jr || jr->pool_limit_bytes() == 0) return;
  pool_worker_stop.store(false, std::memory_order_relaxed);
  pool_worker_idle.store(true, std::memory_order_relaxed);
  // Without a thread, faults balance the pool themselves, as without a backing device.
  if (start_background_thread(pool_worker, &impl::pool_worker_loop))
    pool_worker_on.store(true, std::memory_order_release);
}

void pager::impl::stop_pool_worker() noexcept {
  // One caller joins (stop_background_reclaim may race the destructor's call); faults see the
  // worker gone from here on and balance the pool themselves.
  if (!pool_worker_on.exchange(false, std::memory_order_seq_cst)) return;
  pool_worker_stop.store(true, std::memory_order_seq_cst);
  pool_kick.fetch_add(1, std::memory_order_seq_cst);
  futex_wake(&pool_kick, 1);
  pool_worker.join();
  // A fault waiting for the end of a round (when_full) gets one that made no room: it saw the
  // worker on before the exchange, so it read the round count before this increment.
  pool_round_shrank.store(false, std::memory_order_release);
  pool_round.fetch_add(1, std::memory_order_seq_cst);
  futex_wake(&pool_round, INT_MAX);
}

void pager::impl::trim_reservation(job& j, uint64_t keep) noexcept {
  uint64_t r = reserved.load(std::memory_order_relaxed);
  for (;;) {
    const uint64_t want = resident.load(std::memory_order_relaxed) + keep;
    if (r <= want) return;
    if (reserved.compare_exchange_weak(r, want, std::memory_order_relaxed)) {
      j.unreserve(jslot, r - want);
      return;
    }
  }
}

void pager::impl::publish_job_stats(job& j) noexcept {
  auto ld = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  uint64_t v[JOB_STAT_COUNT] = {};
  const swap_backend_stats ps = store->stats();
  v[JOB_RESIDENT] = ld(resident);
  job_fair_pages.store(j.fair_share(), std::memory_order_relaxed);
  v[JOB_SWAP_PAGES] = ps.used_slots;
  v[JOB_POOL_BYTES] = ps.device.mem_used;
  v[JOB_POOL_PEAK] = ps.device.mem_used_max;
  if (const auto& mm = ps.device.mm_stat) {
    v[JOB_ORIG_DATA] = mm->orig_data_size;
    v[JOB_COMPR_DATA] = mm->compr_data_size;
    v[JOB_SAME_PAGES] = mm->same_pages;
    v[JOB_HUGE_PAGES] = mm->huge_pages;
    v[JOB_COMPACTED] = mm->pages_compacted;
  }
  v[JOB_PGFAULT] = ld(c.faults) + ld(c.wp_faults);
  v[JOB_PGMAJFAULT] = ld(c.major_faults);
  v[JOB_WP_FAULTS] = ld(c.wp_faults);
  v[JOB_SWAP_INS] = ld(c.swap_ins);
  v[JOB_SWAP_OUTS] = ld(c.swap_outs);
  v[JOB_OVERCHARGES] = ld(c.overcharges);
  v[JOB_BD_COUNT] = ps.device.bd_count;
  v[JOB_BD_READS] = ps.device.bd_reads;
  v[JOB_BD_WRITES] = ps.device.bd_writes;
  v[JOB_FAILED_READS] = ps.device.failed_reads;
  v[JOB_FAILED_WRITES] = ps.device.failed_writes + ld(c.swap_out_failures);
  v[JOB_NOTIFY_FREE] = ps.device.notify_free;
  j.publish(jslot, v, coarse_clock_ns());
}

void pager::impl::job_make_room_for_fork() noexcept {
  USWAP_ASSERT_HELD_WRITE(map_lock);  // nothing faults in while the share is reserved
  child_slot = -1;
  fork_blocks.clear();
  fork_child_slot = -1;
  reserve_child_share();
  // The child's copy of the zram device refers to the same backing blocks (those written back
  // just now included): they are held for it before the fork, so that this process freeing one
  // cannot let another member overwrite it. (A fork whose return fork_returned never saw,
  // glibc's own, is taken to have succeeded.)
  if (zram_block_allocator* a = store->device().backing_allocator()) {
    fork_blocks = store->device().backing_blocks();
    for (uint64_t b : fork_blocks) a->retain(b);
  }
}

void pager::impl::reserve_child_share() noexcept {
  job_ref jr(*this);
  if (!jr) return;
  // The child starts with the frames this process charged, shared copy-on-write: it charges a
  // page only once it is its own (mark_fork_shared), so its share starts empty and nothing is
  // evicted for it here.
  for (unsigned attempt = 0; attempt < 8; ++attempt) {
    // The child's copy of the zram device counts as a pool of its own: with a pool limit, this
    // pool goes down to half of what the others leave, and the device may grow to that half
    // only, in both processes (the child's copy inherits the device's limit), until each has
    // seen the other's published size at a reclaim pass. A limit of what the others leave would
    // let both store a pass into the whole of it first.
    if (const uint64_t pool_limit = jr->pool_limit_bytes()) {
      const uint64_t others_pool = others_pool_bytes(*jr);
      const uint64_t half = pool_limit > others_pool ? (pool_limit - others_pool) / 2 : 0;
      balance_pool(*jr, half, pool_balance::locked);
      swap_device& dev = store->device();
      (void)dev.set_mem_limit(std::max<uint64_t>({half, dev.stats().mem_used, page_size}));
    }
    USWAP_DCHECK(reserved.load(std::memory_order_relaxed) == jr->usage(jslot));
    // A guest's pid is not the job's: its child's slot is reaped by age if no child adopts it.
    auto slot = jr->reserve_for_child(jr->guest() ? 0 : ::getpid(), 0,
                                      store->device().stats().mem_used, {jslot, 0});
    if (slot) {
      child_slot = static_cast<int>(*slot);
      return;
    }
    if (slot.error().code() != EAGAIN) break;  // no slot: the child will be limited alone
  }
}

void pager::impl::job_after_fork_child() noexcept {
  job* j = jlink.load(std::memory_order_relaxed);
  if (!j) return;
  job_users.store(0, std::memory_order_relaxed);  // the parent's threads are not here
  job_request_noted.store(false, std::memory_order_relaxed);
  charges_since_publish.store(0, std::memory_order_relaxed);
  job_requests_served.store(0, std::memory_order_relaxed);
  job_signals.store(0, std::memory_order_relaxed);
  job_signals_deferred.store(0, std::memory_order_relaxed);
  job_waits.store(0, std::memory_order_relaxed);
  member_faults_served.store(0, std::memory_order_relaxed);
  member_faults_asked.store(0, std::memory_order_relaxed);
  char comm[16];
  process_comm(comm);
  // A child in a new pid namespace (clone with CLONE_NEWPID, or after unshare), or of a guest:
  // its pid here names another process for everyone else in the job, so it is a guest.
  const bool guest = !j->in_pid_namespace();
  const bool adopted =
      child_slot >= 0 && (guest ? j->adopt_guest(static_cast<unsigned>(child_slot), comm)
                                : j->adopt(static_cast<unsigned>(child_slot), ::getpid(), comm))
                             .ok();
  if (adopted) {
    jslot = static_cast<unsigned>(child_slot);
    mark_fork_shared();
    reserved.store(j->usage(jslot), std::memory_order_relaxed);
  } else {
    // The parent could not reserve a share (or a guest could not announce itself): join anew,
    // or be limited alone.
    auto slot = guest ? j->join_guest(comm) : j->join(::getpid(), comm);
    if (!slot) {
      own_all_shared();
      jlink.store(nullptr, std::memory_order_relaxed);  // limited alone (its limit is the job's)
      reserved.store(0, std::memory_order_relaxed);
      child_slot = -1;
      return;
    }
    jslot = *slot;
    mark_fork_shared();
    reserved.store(0, std::memory_order_relaxed);
  }
  child_slot = -1;
  publish_job_stats(*j);
  // The parent's thread is not here; a copy of a large member wants one of its own.
  kswapd_wanted.store(false, std::memory_order_relaxed);
  want_kswapd(*j);
}

}  // namespace uswap
