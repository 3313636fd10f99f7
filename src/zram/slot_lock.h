// The three ways a zram slot is locked (zram_lock_mode), behind one pair of calls so that the
// device has a single code path: slot_locks::lock(word, access) / unlock(word, access), which
// struct zram calls as slot_lock(index, access) / slot_unlock(index, access).
//
//   global_rwlock  the table rwlock: down_read for `read` access, down_write for `write`. The
//                  slot word's lock bits stay clear.
//   slot_cas       seed 002 as posted, on the slot word: every poll is a CAS that expects the
//                  held bit clear and sets it, with cpu_relax() between polls; release is a plain
//                  store of the word without the held bit (the patch's atomic_set(IDLE)). The
//                  seed's state had a word of its own; here the word also carries the flags, so
//                  the CAS expects "these flags, not held" - the flags only change under the lock,
//                  so a failed CAS that reloads them is the same as the patch's failed cmpxchg.
//                  No waiters bit, no sleeping: a spinner may burn its time slice on a preempted
//                  holder, which is what this mode exists to show.
//   slot_bitlock   bit_lock<ZRAM_ENTRY_LOCK, ZRAM_ENTRY_WAITERS> (sync layer): test-and-test-and-
//                  set for a bounded spin, then park on a futex on the word's low half.
// Slot modes give `read` and `write` the same exclusive lock, as the kernel's per-slot lock does.
//
// Thread-safety: the usual lock contract. While a slot is locked (or the table lock held), only
// the holder changes the slot's data bits, and always with atomic read-modify-writes that
// preserve the lock bits (flags_update), because bit_lock waiters set the waiters bit
// concurrently and global_rwlock readers update ac_time concurrently under the shared lock.
// slot_locks::assert_held checks, in DCHECK builds (sync/lockdep.h), that the calling thread
// holds a slot's lock for an access: what "with the slot locked" means in zram_drv.cc.
#pragma once

#include <atomic>
#include <cstdint>

#include "uswap/sync/bit_lock.h"
#include "uswap/sync/cpu_relax.h"
#include "uswap/sync/lockdep.h"
#include "uswap/sync/lockstat.h"
#include "uswap/sync/std_locks.h"
#include "uswap/sync/tsan.h"
#include "uswap/zram/zram.h"

namespace uswap::zram_detail {

using slot_bit_lock = bit_lock<ZRAM_ENTRY_LOCK, ZRAM_ENTRY_WAITERS>;

inline constexpr uint64_t lock_bits = slot_bit_lock::lock_mask;
inline constexpr uint64_t held_bit = slot_bit_lock::held_mask;

// Seed 002's `while (atomic_cmpxchg(&state, IDLE, ACCESS) != IDLE) cpu_relax();` on the slot word.
struct cas_slot_lock {
  static void lock(std::atomic<uint64_t>& word, lock_class* cls) noexcept {
    tsan::pre_lock(&word);
    uint64_t expected = word.load(std::memory_order_relaxed) & ~held_bit;
    if (!word.compare_exchange_strong(expected, expected | held_bit, std::memory_order_acquire,
                                      std::memory_order_relaxed)) [[unlikely]] {
      lock_wait_timer timer(cls);
      do {
        cpu_relax();
        expected &= ~held_bit;  // "expect IDLE": the current flags, not held
      } while (!word.compare_exchange_strong(expected, expected | held_bit,
                                             std::memory_order_acquire,
                                             std::memory_order_relaxed));
      timer.acquired();
    } else if (cls) {
      cls->count_acquire();
    }
    tsan::post_lock(&word);
    lockdep::acquire(&word);
  }

  static bool try_lock(std::atomic<uint64_t>& word, lock_class* cls) noexcept {
    tsan::pre_lock(&word, tsan::try_lock);
    uint64_t expected = word.load(std::memory_order_relaxed) & ~held_bit;
    const bool got = word.compare_exchange_strong(expected, expected | held_bit,
                                                  std::memory_order_acquire,
                                                  std::memory_order_relaxed);
    if (got && cls) cls->count_acquire();
    tsan::post_lock(&word, got ? tsan::try_lock : tsan::try_lock | tsan::try_lock_failed);
    if (got) lockdep::acquire(&word);
    return got;
  }

  // atomic_set(&state, IDLE): a plain store. Only the holder writes the word while it is held
  // (spinners' failed CASes write nothing), so storing it back without the held bit is exact.
  static void unlock(std::atomic<uint64_t>& word) noexcept {
    lockdep::release(&word);
    tsan::pre_unlock(&word);
    word.store(word.load(std::memory_order_relaxed) & ~held_bit, std::memory_order_release);
    tsan::post_unlock(&word);
  }
};

enum class slot_access { read, write };

// The device's slot locks in its mode. `word` is the slot's flags word (table[index].flags).
class slot_locks {
 public:
  // cls counts every slot lock (slot modes) or the table rwlock (global_rwlock).
  slot_locks(zram_lock_mode mode, lock_class* cls) noexcept
      : mode_(mode), cls_(cls), tb_lock_(cls) {}

  void lock(std::atomic<uint64_t>& word, slot_access a) noexcept {
    switch (mode_) {
      case zram_lock_mode::global_rwlock:
        if (a == slot_access::read)
          tb_lock_.down_read();
        else
          tb_lock_.down_write();
        return;
      case zram_lock_mode::slot_cas:
        cas_slot_lock::lock(word, cls_);
        return;
      case zram_lock_mode::slot_bitlock:
        slot_bit_lock::lock(word, cls_);
        return;
    }
  }
  bool trylock(std::atomic<uint64_t>& word, slot_access a) noexcept {
    switch (mode_) {
      case zram_lock_mode::global_rwlock:
        return a == slot_access::read ? tb_lock_.down_read_trylock()
                                      : tb_lock_.down_write_trylock();
      case zram_lock_mode::slot_cas:
        return cas_slot_lock::try_lock(word, cls_);
      case zram_lock_mode::slot_bitlock:
        return slot_bit_lock::try_lock(word, cls_);
    }
    return false;
  }
  void unlock(std::atomic<uint64_t>& word, slot_access a) noexcept {
    switch (mode_) {
      case zram_lock_mode::global_rwlock:
        if (a == slot_access::read)
          tb_lock_.up_read();
        else
          tb_lock_.up_write();
        return;
      case zram_lock_mode::slot_cas:
        cas_slot_lock::unlock(word);
        return;
      case zram_lock_mode::slot_bitlock:
        slot_bit_lock::unlock(word);
        return;
    }
  }

  // DCHECK builds: the calling thread holds the slot's lock, for `write` exclusively (`read`
  // access is satisfied by either). Release: nothing.
  void assert_held(const std::atomic<uint64_t>& word, slot_access a) const noexcept {
    if (mode_ != zram_lock_mode::global_rwlock)
      USWAP_ASSERT_HELD(word);  // slot modes: one exclusive lock for both accesses
    else if (a == slot_access::write)
      USWAP_ASSERT_HELD_WRITE(tb_lock_);
    else
      USWAP_ASSERT_HELD(tb_lock_);
  }

 private:
  zram_lock_mode mode_;
  lock_class* cls_;
  // global_rwlock mode only: 3.15's meta->tb_lock was an rwlock_t, which (before qrwlock, 3.16)
  // let readers in while a writer waited. std::shared_mutex is glibc's pthread_rwlock, reader-
  // preferring by default: the same policy, sleeping instead of spinning as userspace must.
  std_shared_mutex_lock tb_lock_;
};

// Replaces the data bits selected by `clear` with `set` (lock bits never change); returns the new
// word. A no-op change writes nothing.
inline uint64_t flags_update(std::atomic<uint64_t>& word, uint64_t clear, uint64_t set) noexcept {
  clear &= ~lock_bits;
  set &= ~lock_bits;
  uint64_t v = word.load(std::memory_order_relaxed);
  uint64_t n;
  do {
    n = (v & ~clear) | set;
    if (n == v) return v;
  } while (!word.compare_exchange_weak(v, n, std::memory_order_relaxed,
                                       std::memory_order_relaxed));
  return n;
}

}  // namespace uswap::zram_detail
