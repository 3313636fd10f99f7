// The seed-era spin locks, kept as baselines to measure against. They never sleep.
//
//   tas_spin_lock     test-and-set: every poll is an atomic exchange (the cache line bounces).
//   ttas_spin_lock    test-and-test-and-set with bounded exponential backoff (the usual fix).
//   ticket_spin_lock  FIFO tickets, as the kernel's spinlock_t was from 2.6.25 to 4.2.
//   cas_spin_lock     seed 002's per-slot state exactly as posted: CAS IDLE->ACCESS with
//                     cpu_relax() until it succeeds; release stores IDLE.
//
// When not to use them: anywhere real. In userspace a spinner can spend its whole time slice
// waiting for a preempted holder, so with more threads than cores they collapse (sync_bench
// shows it). The zram `slot_cas` mode uses cas_spin_lock precisely to reproduce the
// seed; everything else uses mutex, bit_lock or rw_semaphore.
//
// Thread-safety: the usual mutex contract; unlock only by the holder (checked by lockdep.h in
// DCHECK builds).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "uswap/sync/cpu_relax.h"
#include "uswap/sync/lockdep.h"
#include "uswap/sync/lockstat.h"
#include "uswap/sync/tsan.h"

namespace uswap {

class tas_spin_lock {
 public:
  explicit tas_spin_lock(lock_class* cls = nullptr) noexcept : cls_(cls) {}
  void lock() noexcept {
    tsan::pre_lock(this);
    if (flag_.exchange(true, std::memory_order_acquire)) [[unlikely]] {
      lock_wait_timer timer(cls_);
      while (flag_.exchange(true, std::memory_order_acquire)) cpu_relax();
      timer.acquired();
    } else if (cls_) {
      cls_->count_acquire();
    }
    tsan::post_lock(this);
    lockdep::acquire(this);
  }
  bool try_lock() noexcept {
    tsan::pre_lock(this, tsan::try_lock);
    const bool got = !flag_.exchange(true, std::memory_order_acquire);
    if (got && cls_) cls_->count_acquire();
    tsan::post_lock(this, got ? tsan::try_lock : tsan::try_lock | tsan::try_lock_failed);
    if (got) lockdep::acquire(this);
    return got;
  }
  void unlock() noexcept {
    lockdep::release(this);
    tsan::pre_unlock(this);
    flag_.store(false, std::memory_order_release);
    tsan::post_unlock(this);
  }

 private:
  std::atomic<bool> flag_{false};
  lock_class* cls_;
};

class ttas_spin_lock {
 public:
  // Backoff doubles from 1 to max_backoff pause instructions between polls.
  static constexpr unsigned max_backoff = 1024;

  explicit ttas_spin_lock(lock_class* cls = nullptr) noexcept : cls_(cls) {}
  void lock() noexcept {
    tsan::pre_lock(this);
    if (!try_acquire()) [[unlikely]] {
      lock_wait_timer timer(cls_);
      unsigned backoff = 1;
      do {
        while (flag_.load(std::memory_order_relaxed)) {
          for (unsigned i = 0; i < backoff; ++i) cpu_relax();
          backoff = std::min(backoff * 2, max_backoff);
        }
      } while (!try_acquire());
      timer.acquired();
    } else if (cls_) {
      cls_->count_acquire();
    }
    tsan::post_lock(this);
    lockdep::acquire(this);
  }
  bool try_lock() noexcept {
    tsan::pre_lock(this, tsan::try_lock);
    const bool got = !flag_.load(std::memory_order_relaxed) && try_acquire();
    if (got && cls_) cls_->count_acquire();
    tsan::post_lock(this, got ? tsan::try_lock : tsan::try_lock | tsan::try_lock_failed);
    if (got) lockdep::acquire(this);
    return got;
  }
  void unlock() noexcept {
    lockdep::release(this);
    tsan::pre_unlock(this);
    flag_.store(false, std::memory_order_release);
    tsan::post_unlock(this);
  }

 private:
  bool try_acquire() noexcept { return !flag_.exchange(true, std::memory_order_acquire); }
  std::atomic<bool> flag_{false};
  lock_class* cls_;
};

class ticket_spin_lock {
 public:
  explicit ticket_spin_lock(lock_class* cls = nullptr) noexcept : cls_(cls) {}
  void lock() noexcept {
    tsan::pre_lock(this);
    const uint32_t mine = next_.fetch_add(1, std::memory_order_relaxed);
    if (serving_.load(std::memory_order_acquire) != mine) [[unlikely]] {
      lock_wait_timer timer(cls_);
      while (serving_.load(std::memory_order_acquire) != mine) cpu_relax();
      timer.acquired();
    } else if (cls_) {
      cls_->count_acquire();
    }
    tsan::post_lock(this);
    lockdep::acquire(this);
  }
  bool try_lock() noexcept {
    tsan::pre_lock(this, tsan::try_lock);
    uint32_t s = serving_.load(std::memory_order_acquire);
    uint32_t n = s;
    // Take a ticket only if it would be served at once.
    const bool got = next_.compare_exchange_strong(n, s + 1, std::memory_order_acquire,
                                                   std::memory_order_relaxed);
    if (got && cls_) cls_->count_acquire();
    tsan::post_lock(this, got ? tsan::try_lock : tsan::try_lock | tsan::try_lock_failed);
    if (got) lockdep::acquire(this);
    return got;
  }
  void unlock() noexcept {
    lockdep::release(this);
    tsan::pre_unlock(this);
    serving_.store(serving_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    tsan::post_unlock(this);
  }
  // Threads holding or waiting for the lock (tickets taken and not yet served to completion).
  uint32_t queued() const noexcept {
    return next_.load(std::memory_order_relaxed) - serving_.load(std::memory_order_relaxed);
  }

 private:
  alignas(8) std::atomic<uint32_t> next_{0};
  std::atomic<uint32_t> serving_{0};
  lock_class* cls_;
};

// Seed 002's lock, verbatim in behaviour:
//   while (atomic_cmpxchg(&meta->table[index].state, IDLE, ACCESS) != IDLE) cpu_relax();
//   ...
//   atomic_set(&meta->table[index].state, IDLE);
// The review asked for test-and-test-and-set and a standard lock; this class deliberately keeps
// neither, so that the zram `slot_cas` mode measures what was posted.
class cas_spin_lock {
 public:
  enum : uint32_t { IDLE = 0, ACCESS = 1 };

  void lock(lock_class* cls = nullptr) noexcept {
    tsan::pre_lock(this);
    uint32_t expected = IDLE;
    if (!state_.compare_exchange_strong(expected, ACCESS, std::memory_order_acquire,
                                        std::memory_order_relaxed)) [[unlikely]] {
      lock_wait_timer timer(cls);
      do {
        cpu_relax();
        expected = IDLE;
      } while (!state_.compare_exchange_strong(expected, ACCESS, std::memory_order_acquire,
                                               std::memory_order_relaxed));
      timer.acquired();
    } else if (cls) {
      cls->count_acquire();
    }
    tsan::post_lock(this);
    lockdep::acquire(this);
  }
  bool try_lock(lock_class* cls = nullptr) noexcept {
    tsan::pre_lock(this, tsan::try_lock);
    uint32_t expected = IDLE;
    const bool got = state_.compare_exchange_strong(expected, ACCESS, std::memory_order_acquire,
                                                    std::memory_order_relaxed);
    if (got && cls) cls->count_acquire();
    tsan::post_lock(this, got ? tsan::try_lock : tsan::try_lock | tsan::try_lock_failed);
    if (got) lockdep::acquire(this);
    return got;
  }
  void unlock() noexcept {
    lockdep::release(this);
    tsan::pre_unlock(this);
    state_.store(IDLE, std::memory_order_release);
    tsan::post_unlock(this);
  }

 private:
  std::atomic<uint32_t> state_{IDLE};
};

}  // namespace uswap
