// bit_lock: a sleeping lock made of two bits inside a 64-bit word the caller already has, so a
// zram slot entry (seed 002) or a swap cluster_info (seed 000) carries its lock for free, as the
// kernel's bit_spin_lock does on a flags word.
//
// Unlike bit_spin_lock it is built for userspace, where the holder may be preempted: lock() does
// test-and-test-and-set with a pause for at most Spin::spins rounds, then sets the held and waiters
// bits in one fetch_or and, if the lock was held, parks on a futex on the 32-bit half of the word
// that holds the two bits. unlock() clears both bits with one atomic and wakes one parked thread
// if the waiters bit was set. A woken thread takes the lock with the waiters bit set again (it
// cannot know whether others still sleep), so the next unlock wakes the next sleeper: no lost
// wake-up, at the price of at most one spurious futex_wake when the last sleeper leaves. A thread
// that has not parked may take a free lock before a woken one (barging): throughput over
// fairness, as bit_spin_lock. This protocol is modelled and checked in models/bit_lock.pml.
//
// The other 62 bits belong to the caller. While the lock is held, the holder may change them
// with update() / set_bits() / clear_bits(), which use atomic read-modify-write so that a
// concurrent waiter setting the waiters bit is never overwritten. Threads that do not hold the
// lock may read the data bits (load_data) but must not write them.
//
// Thread-safety: any thread may lock; unlock only by the holder (checked by lockdep.h in DCHECK
// builds, which name the lock by its word: one bit lock per word). Not recursive.
// Invariants (checked in every reachable state by models/bit_lock.pml): waiters bit set => held
// bit set; a thread sleeps only while the word's half still shows held and waiters; while a thread
// sleeps, the waiters bit is set, or a woken or newly parking thread is about to set it, or an
// unlock that cleared it is about to call futex_wake.
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

template <unsigned HeldBit, unsigned WaitersBit, class Spin = default_spin_policy>
struct bit_lock {
  static_assert(HeldBit < 64 && WaitersBit < 64 && HeldBit != WaitersBit);
  static_assert(HeldBit / 32 == WaitersBit / 32,
                "held and waiters bits must share a 32-bit half: the futex parks on that half");

  static constexpr uint64_t held_mask = uint64_t{1} << HeldBit;
  static constexpr uint64_t waiters_mask = uint64_t{1} << WaitersBit;
  static constexpr uint64_t lock_mask = held_mask | waiters_mask;
  static constexpr uint64_t data_mask = ~lock_mask;

  static void lock(std::atomic<uint64_t>& word, lock_class* cls = nullptr) noexcept {
    tsan::pre_lock(&word);
    uint64_t v = word.load(std::memory_order_relaxed);
    if (!(v & held_mask) && word.compare_exchange_weak(v, v | held_mask, std::memory_order_acquire,
                                                       std::memory_order_relaxed)) [[likely]] {
      if (cls) cls->count_acquire();
    } else {
      lock_slow(word, cls);
    }
    tsan::post_lock(&word);
    lockdep::acquire(&word);
  }

  static bool try_lock(std::atomic<uint64_t>& word, lock_class* cls = nullptr) noexcept {
    tsan::pre_lock(&word, tsan::try_lock);
    uint64_t v = word.load(std::memory_order_relaxed);
    bool got = false;
    while (!(v & held_mask)) {
      if (word.compare_exchange_weak(v, v | held_mask, std::memory_order_acquire,
                                     std::memory_order_relaxed)) {
        got = true;
        break;
      }
    }
    if (got && cls) cls->count_acquire();
    tsan::post_lock(&word, got ? tsan::try_lock : tsan::try_lock | tsan::try_lock_failed);
    if (got) lockdep::acquire(&word);
    return got;
  }

  static void unlock(std::atomic<uint64_t>& word) noexcept {
    lockdep::release(&word);
    tsan::pre_unlock(&word);
    const uint64_t old = word.fetch_and(data_mask, std::memory_order_release);
    if (old & waiters_mask) futex_wake(futex_word_of(word, HeldBit), 1);
    tsan::post_unlock(&word);
  }

  // Releases the lock and sets the data bits to `data` in the same atomic store, saving one
  // read-modify-write when the holder's last act is to write the word.
  static void unlock_with(std::atomic<uint64_t>& word, uint64_t data) noexcept {
    lockdep::release(&word);
    tsan::pre_unlock(&word);
    const uint64_t old = word.exchange(data & data_mask, std::memory_order_release);
    if (old & waiters_mask) futex_wake(futex_word_of(word, HeldBit), 1);
    tsan::post_unlock(&word);
  }

  // Whether anyone holds it (assert_spin_locked). That the caller does is
  // USWAP_ASSERT_HELD(word) (lockdep.h).
  static bool is_locked(const std::atomic<uint64_t>& word) noexcept {
    return word.load(std::memory_order_relaxed) & held_mask;
  }

  // The caller's bits, without the lock bits.
  static uint64_t load_data(const std::atomic<uint64_t>& word,
                            std::memory_order order = std::memory_order_relaxed) noexcept {
    return word.load(order) & data_mask;
  }

  // While held: replaces the bits selected by `mask` with those of `value`; the lock bits are
  // never changed. Returns the new data bits.
  static uint64_t update(std::atomic<uint64_t>& word, uint64_t mask, uint64_t value) noexcept {
    mask &= data_mask;
    uint64_t v = word.load(std::memory_order_relaxed);
    uint64_t n;
    do {
      n = (v & ~mask) | (value & mask);
    } while (!word.compare_exchange_weak(v, n, std::memory_order_relaxed));
    return n & data_mask;
  }
  static void set_bits(std::atomic<uint64_t>& word, uint64_t bits) noexcept {
    word.fetch_or(bits & data_mask, std::memory_order_relaxed);
  }
  static void clear_bits(std::atomic<uint64_t>& word, uint64_t bits) noexcept {
    word.fetch_and(~(bits & data_mask), std::memory_order_relaxed);
  }

 private:
  [[gnu::noinline]] static void lock_slow(std::atomic<uint64_t>& word, lock_class* cls) noexcept {
    lock_wait_timer timer(cls);
    // Phase 1: bounded test-and-test-and-set.
    for (int i = 0; i < Spin::spins; ++i) {
      cpu_relax();
      uint64_t v = word.load(std::memory_order_relaxed);
      if (v & waiters_mask) break;  // sleepers exist: queue behind them rather than barge
      if (!(v & held_mask) && word.compare_exchange_weak(v, v | held_mask,
                                                         std::memory_order_acquire,
                                                         std::memory_order_relaxed)) {
        timer.acquired();
        return;
      }
    }
    // Phase 2: set both bits in one fetch_or, the bit-lock form of Drepper's mutex3 exchange(2).
    // Finding the held bit clear takes the lock, with the waiters bit set because others may
    // still sleep; finding it set has announced us, and we sleep while the half is unchanged.
    // One atomic read-modify-write per round and no compare-exchange retry: the model
    // (models/bit_lock.pml, mutant MUTANT_CAS_PARK_LOOP) shows that the earlier form, separate
    // CASes to take the lock and to set the waiters bit, can leave sleepers with nobody to wake
    // them while a barger keeps making a woken waiter's CAS fail.
    const std::atomic<uint32_t>* futex = futex_word_of(word, HeldBit);
    for (;;) {
      const uint64_t old = word.fetch_or(lock_mask, std::memory_order_acquire);
      if (!(old & held_mask)) {
        timer.acquired();
        return;
      }
      futex_wait(futex, futex_half_of(old | lock_mask, HeldBit));
    }
  }
};

// Scoped holder, for code that takes a bit lock for one block.
template <class BitLock>
class bit_lock_guard {
 public:
  explicit bit_lock_guard(std::atomic<uint64_t>& word, lock_class* cls = nullptr) noexcept
      : word_(word) {
    BitLock::lock(word_, cls);
  }
  ~bit_lock_guard() { BitLock::unlock(word_); }
  bit_lock_guard(const bit_lock_guard&) = delete;
  bit_lock_guard& operator=(const bit_lock_guard&) = delete;

 private:
  std::atomic<uint64_t>& word_;
};

}  // namespace uswap
