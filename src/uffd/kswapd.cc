// Background reclaim: the pager's kswapd (pager.h, "Background reclaim"; the watermarks and the
// wake-up protocol are in pager_impl.h).
//
// Why a thread: under a limit every fault that maps a page past it must first evict one, and
// eviction (copy out, compress, store, MADV_DONTNEED) costs several times what the fault itself
// does. A memory cgroup's limit makes the kernel reclaim in the faulting task [try_charge]; the
// kernel's kswapd does it ahead of need for the machine's watermarks. Here the thread keeps a
// pager a few reclaim passes under its limit, so that a single-threaded program's faults find
// room and its compression runs on another CPU.
//
// In a job the same thread serves the other members' requests for room (job.h, "Pressure"), with
// or without background reclaim: it sleeps on the job slot's futex word as well, so that a
// member idle in any system call (an event loop in epoll_wait, a write blocked on a pipe) gives
// room at once and no signal need reach the program. Without background reclaim it does
// nothing else (it never evicts ahead of the faults), and a member gets it only once it holds
// enough to be asked (want_kswapd): making a thread costs a short-lived process of a build
// about as much as the rest of its pager's start.
#include <sched.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <system_error>
#include <thread>

#include "pager_impl.h"
#include "sigbus.h"
#include "uswap/base/own_fd.h"
#include "uswap/sync/futex.h"

namespace uswap {

uint64_t pager::impl::reclaim_room() const noexcept {
  const uint64_t res = resident.load(std::memory_order_seq_cst);  // the Dekker (pager_impl.h)
  uint64_t allowance = limit_pages;
  if (job_ref jr(*this); jr) {
    if (res < jr->fair_share()) return UINT64_MAX;
    allowance = reserved.load(std::memory_order_relaxed);
    const uint64_t limit = jr->limit_pages(), all = jr->charge();
    if (limit > all) allowance += limit - all;
  }
  return allowance > res ? allowance - res : 0;
}

void pager::impl::wake_kswapd() noexcept {
  c.kswapd_wakeups.fetch_add(1, std::memory_order_relaxed);
  kswapd_kick.fetch_add(1, std::memory_order_seq_cst);
  futex_wake(&kswapd_kick, 1);
}

void pager::impl::kswapd_loop() noexcept {
  pager_scope in_pager;  // what reclaim allocates is the pager's
  for (;;) {
    // Asleep until a charge leaves the room under the low watermark. The kick count is read
    // before the stop flag and the room: a kick after it makes the futex wait return at once,
    // one before it was made after its charge or its stop, which the room or the flag then
    // shows. (Read after the flag, a stop between the two was lost: stop_kswapd's join waited
    // for ever, once in a ThreadSanitizer run of the region restart test.)
    kswapd_idle.store(true, std::memory_order_seq_cst);
    for (;;) {
      const uint32_t k = kswapd_kick.load(std::memory_order_seq_cst);
      if (kswapd_stop.load(std::memory_order_seq_cst)) {
        kswapd_stop_listening();
        return;
      }
      // Its load of resident is seq_cst.
      if (opts.background_reclaim && reclaim_room() < kswapd_low_room()) break;
      kswapd_sleep(k);
    }
    kswapd_idle.store(false, std::memory_order_relaxed);
    // Up to the high watermark, a pass per hold of map_lock: a program's mmap or munmap waits
    // for one pass at most.
    while (!kswapd_stop.load(std::memory_order_relaxed) && reclaim_room() < kswapd_high_room()) {
      uint64_t got;
      {
        map_read_guard g(map_lock, this);
        got = shrink(reclaim_pass, reclaim_pass);
      }
      c.pgsteal_kswapd.fetch_add(got, std::memory_order_relaxed);
      if (got == 0) {
        // Nothing evictable now (pinned, locked by faults, or isolated by their reclaim): the
        // faults reclaim for themselves; look again after a moment, not in a spin.
        const timespec pause{0, 1000 * 1000};
        ::nanosleep(&pause, nullptr);
        break;
      }
    }
  }
}

void pager::impl::kswapd_sleep(uint32_t k) noexcept {
  futex_waiter w[2] = {{&kswapd_kick, k, false}, {}};
  bool requested = false;
  if (kswapd_listens.load(std::memory_order_relaxed)) {
    job_ref jr(*this);
    if (jr) {
      // The word before the request: a kick between the two makes the wait return at once
      // (job::kick_kswapd). The word is in the segment, which stays mapped while the pager
      // holds the job; the ref is dropped before the wait, which leave_job waits for.
      const std::atomic<uint32_t>* word = jr->kswapd_word(jslot);
      w[1] = {word, word->load(std::memory_order_seq_cst), true};
      jr->set_kswapd_listening(jslot, true);
      requested = jr->has_reclaim_request(jslot) || jr->has_fault(jslot);
    }
  }
  if (requested) {
    map_read_guard g(map_lock, this);
    if (job_ref jr(*this); jr) serve_job_request_locked(*jr);
    return;
  }
  if (!w[1].word) {
    futex_wait(&kswapd_kick, k);
    return;
  }
  if (futex_wait_any(w)) return;
  // No futex_waitv here (an old kernel, a sandbox's filter): requests for room come as the
  // job's signal, as to a member without this thread.
  kswapd_listens.store(false, std::memory_order_relaxed);
  kswapd_stop_listening();
}

void pager::impl::kswapd_stop_listening() noexcept {
  if (job_ref jr(*this); jr) jr->set_kswapd_listening(jslot, false);
}

void pager::impl::start_kswapd() noexcept {
  if (opts.background_reclaim) start_kswapd_thread();
}

void pager::impl::start_kswapd_thread() noexcept {
  if (background_ended.load(std::memory_order_relaxed)) return;
  // One starter: the program's threads may all come here at once (start_wanted_threads), and
  // the std::thread may be assigned only once.
  if (kswapd_claimed.exchange(true, std::memory_order_acq_rel)) return;
  kswapd_stop.store(false, std::memory_order_relaxed);
  kswapd_idle.store(true, std::memory_order_relaxed);
  // Without a thread, faults reclaim for themselves, as without background reclaim.
  if (start_background_thread(kswapd, &impl::kswapd_loop))
    kswapd_on.store(true, std::memory_order_release);
  else
    kswapd_claimed.store(false, std::memory_order_release);
}

const std::atomic<bool>& pager::kswapd_wanted() const noexcept { return impl_->kswapd_wanted; }

void pager::start_wanted_threads() noexcept {
  impl& m = *impl_;
  if (pager_depth() != 0 || m.detached()) return;
  if (!m.kswapd_wanted.exchange(false, std::memory_order_relaxed)) return;
  m.start_kswapd_thread();
}

bool pager::impl::start_background_thread(std::thread& t, void (impl::*loop)() noexcept) noexcept {
  pager_scope in_pager;
  async_signals_blocked inherited_by_the_thread;
  bool ok = true;
  try {
    // Running its loop when this returns (start_handlers says why a fork must not find a thread
    // still starting). Shared with the thread, which may still be in notify_one after the wait.
    auto started = std::make_shared<std::atomic<bool>>(false);
    t = std::thread([this, loop, started]() mutable {
      started->store(true, std::memory_order_release);
      started->notify_one();
      started.reset();
      (this->*loop)();
    });
    started->wait(false, std::memory_order_acquire);
  } catch (const std::system_error&) {
    ok = false;
  }
  return ok;
}

void pager::impl::stop_kswapd() noexcept {
  // A start in progress on another thread finishes first, so that its thread is joined here
  // (a stop that has taken kswapd_on clears the claim once it joined).
  while (kswapd_claimed.load(std::memory_order_acquire) && !kswapd_on.load(std::memory_order_acquire))
    sched_yield();
  // One caller joins: the exchange makes a second one (and note_room) see it off.
  if (!kswapd_on.exchange(false, std::memory_order_acq_rel)) return;
  kswapd_stop.store(true, std::memory_order_seq_cst);
  kswapd_kick.fetch_add(1, std::memory_order_seq_cst);
  futex_wake(&kswapd_kick, 1);
  kswapd.join();
  kswapd_claimed.store(false, std::memory_order_release);
}

void pager::stop_background_reclaim() noexcept {
  if (impl_->detached()) return;
  impl_->background_ended.store(true, std::memory_order_relaxed);
  impl_->stop_kswapd();
  impl_->stop_pool_worker();
}

void pager::restart_threads() noexcept {
  impl& m = *impl_;
  if (m.detached()) return;
  pager_scope in_pager;
  std::lock_guard g(m.restart_mu);
  const bool kswapd = m.kswapd_on.load(std::memory_order_acquire);
  const bool pool = m.pool_worker_on.load(std::memory_order_acquire);
  if (kswapd) m.stop_kswapd();
  if (pool) m.stop_pool_worker();
  if (!m.handlers.empty()) {
    // The new set first, while the old one serves the faults: a thread starting may fault (glibc
    // reads the locale's data, in the arena, as a thread starts), and only a handler thread can
    // resolve that. Then the old set ends; each thread polls the stop_fd it was made with.
    std::vector<std::thread> old = std::move(m.handlers);
    m.handlers.clear();
    const int old_stop = m.stop_fd;
    const uint64_t one = 1;
    if (auto st = m.start_handlers(); !st.ok()) {
      // Keep the old set: end whatever of the new one started.
      std::fprintf(stderr, "uswap: the pager's handler threads could not be made again: %s\n",
                   st.to_string().c_str());
      if (m.stop_fd >= 0) {
        (void)!::write(m.stop_fd, &one, sizeof one);
        for (std::thread& t : m.handlers) t.join();
        own_fd_release(m.stop_fd);
        ::close(m.stop_fd);
      }
      m.handlers = std::move(old);
      m.stop_fd = old_stop;
    } else {
      (void)!::write(old_stop, &one, sizeof one);
      for (std::thread& t : old) t.join();
      own_fd_release(old_stop);
      ::close(old_stop);
    }
  }
  if (pool) m.start_pool_worker();
  if (kswapd) m.start_kswapd_thread();
}

}  // namespace uswap
