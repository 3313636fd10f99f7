// uswap::mutex: a 32-bit futex mutex that spins briefly, then parks. The sync layer's "standard
// lock done right for userspace": the zsmalloc class lock, the swap device and cluster locks, the
// rmap `spin` mode's exclusive lock (seed 001 before the rwsem) are all this lock.
//
// Protocol (Drepper, "Futexes Are Tricky", mutex3): the word is 0 unlocked, 1 locked, 2 locked
// with possible waiters. lock() takes 0->1 with one CAS when free; otherwise spins up to
// Spin::spins rounds on relaxed loads, then exchanges in 2 and sleeps on the futex while the word
// is 2. unlock() exchanges in 0 and wakes one sleeper if the old value was 2. A woken thread
// re-takes the lock as 2, so that the next unlock wakes any remaining sleeper (no lost wake-up).
//
// When not to use it: for a lock inside a word you already have (use bit_lock); for many readers
// (use rw_semaphore).
//
// Thread-safety: the usual mutex contract; unlock() only by the owner (checked by lockdep.h in
// DCHECK builds, as is USWAP_ASSERT_HELD(m): "held by the calling thread"). Not recursive.
// Invariants: word in {0, 1, 2}; a thread sleeps in the kernel only while the word is 2.
#pragma once

#include <atomic>
#include <cstdint>

#include "uswap/sync/cpu_relax.h"
#include "uswap/sync/futex.h"
#include "uswap/sync/lockdep.h"
#include "uswap/sync/lockstat.h"
#include "uswap/sync/spin_policy.h"
#include "uswap/sync/tsan.h"

namespace uswap {

template <class Spin = default_spin_policy>
class basic_mutex {
 public:
  explicit basic_mutex(lock_class* cls = nullptr) noexcept : cls_(cls) { tsan::mutex_create(this); }
  ~basic_mutex() { tsan::mutex_destroy(this); }
  basic_mutex(const basic_mutex&) = delete;
  basic_mutex& operator=(const basic_mutex&) = delete;

  void lock() noexcept {
    tsan::pre_lock(this);
    uint32_t expected = 0;
    if (word_.compare_exchange_strong(expected, 1, std::memory_order_acquire,
                                      std::memory_order_relaxed)) [[likely]] {
      if (cls_) cls_->count_acquire();
    } else {
      lock_slow();
    }
    tsan::post_lock(this);
    lockdep::acquire(this);
  }

  bool try_lock() noexcept {
    tsan::pre_lock(this, tsan::try_lock);
    uint32_t expected = 0;
    const bool got = word_.compare_exchange_strong(expected, 1, std::memory_order_acquire,
                                                   std::memory_order_relaxed);
    if (got && cls_) cls_->count_acquire();
    tsan::post_lock(this, got ? tsan::try_lock : tsan::try_lock | tsan::try_lock_failed);
    if (got) lockdep::acquire(this);
    return got;
  }

  void unlock() noexcept {
    lockdep::release(this);
    tsan::pre_unlock(this);
    if (word_.exchange(0, std::memory_order_release) == 2) futex_wake(&word_, 1);
    tsan::post_unlock(this);
  }

  // For assertions and statistics only: the answer may be stale when it arrives. That the
  // caller holds it is USWAP_ASSERT_HELD(m) (lockdep.h).
  bool is_locked() const noexcept { return word_.load(std::memory_order_relaxed) != 0; }
  // True when a thread is (or may be) parked waiting for the lock.
  bool is_contended() const noexcept { return word_.load(std::memory_order_relaxed) == 2; }

 private:
  [[gnu::noinline]] void lock_slow() noexcept {
    lock_wait_timer timer(cls_);
    for (int i = 0; i < Spin::spins; ++i) {
      cpu_relax();
      uint32_t v = word_.load(std::memory_order_relaxed);
      if (v == 0 && word_.compare_exchange_weak(v, 1, std::memory_order_acquire,
                                                std::memory_order_relaxed)) {
        timer.acquired();
        return;
      }
      if (v == 2) break;  // others are already parked: queue behind them rather than barge
    }
    while (word_.exchange(2, std::memory_order_acquire) != 0) futex_wait(&word_, 2);
    timer.acquired();
  }

  std::atomic<uint32_t> word_{0};
  lock_class* cls_;
};

using mutex = basic_mutex<>;

}  // namespace uswap
