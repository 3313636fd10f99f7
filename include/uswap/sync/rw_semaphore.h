// rw_semaphore: a sleeping reader-writer lock after the kernel's rwsem (kernel/locking/rwsem.c),
// with rwsem_is_contended() as seed 001 added it.
//
// Seed 001 turned the reverse-map locks (i_mmap_lock, anon_vma->lock) into rw semaphores so that
// rmap walks share the lock and may sleep, and so that long walks can drop and retake it when
// someone waits (rwsem_needbreak). This class gives the mm layer the same: down_read for walks,
// down_write for tree changes, is_contended() for the drop-and-retake check.
//
// Protocol. `count_` holds: bit 0 a writer owns the lock; bit 1 the wait list is non-empty;
// bit 2 hand-off (the head of the wait list has waited too long: nobody may steal); bits 8.. the
// number of readers that own it. Fast paths are one CAS. When the lock is not available a thread
// spins a bounded number of rounds (Spin::spins), then queues itself on a FIFO wait list
// protected by `wait_lock_` and sleeps on a futex in its own stack-allocated waiter.
// As in the kernel, readers and writers are woken differently. Readers at the head of the queue
// are granted the lock by the releasing thread (it adds their count for them) and then woken.
// A writer at the head is only woken, and takes the lock itself if it is free: a writer that is
// already running may take a free lock before it ("lock stealing"), which avoids the convoy of
// strict hand-over, where every acquisition waits for a sleeping thread to be scheduled (the
// kernel's anon_vma rwsem convoyed on fork_test until writer lock stealing). When the head
// of the queue, reader or writer, has waited longer than handoff_ns and finds (or a releasing
// thread finds) the lock stolen, the hand-off bit is set: nobody may steal any more, so the head
// gets the lock at the next release (a writer takes it, readers are granted it and the bit is
// cleared). As in the kernel, the bit is raised by the releasing thread as well as by a woken
// writer: two writers that alternate stealing would otherwise never let the head be woken to
// raise it. A set waiters bit stops new readers, so a writer waiting behind a flood of readers
// gets in once the current readers leave (no writer starvation).
// The protocol is modelled in models/rw_semaphore.pml; `make models` checks mutual exclusion, no
// lost wake-up, and that neither a writer nor a reader can starve (under the assumptions stated
// there: CAS retry loops terminate, wait_lock_ starves nobody).
//
// Thread-safety: the usual rwlock contract. up_read/up_write by an owner; downgrade_write by the
// writer (checked by lockdep.h in DCHECK builds). Not recursive: a reader taking it again can deadlock behind a queued writer.
// Invariants: writer bit set => reader count 0; waiters bit set <=> wait list non-empty, and
// hand-off bit set => the list is non-empty and its head has waited handoff_ns (both changed only
// under wait_lock_); a queued reader sleeps until it has been granted ownership, a queued writer
// until it is woken.
#pragma once

#include <atomic>
#include <cstdint>

#include "uswap/sync/lockdep.h"
#include "uswap/sync/lockstat.h"
#include "uswap/sync/mutex.h"
#include "uswap/sync/spin_policy.h"
#include "uswap/sync/tsan.h"

namespace uswap {

class rw_semaphore {
 public:
  explicit rw_semaphore(lock_class* cls = nullptr) noexcept;
  ~rw_semaphore();
  rw_semaphore(const rw_semaphore&) = delete;
  rw_semaphore& operator=(const rw_semaphore&) = delete;

  void down_read() noexcept {
    tsan::pre_lock(this, tsan::read_lock);
    if (!read_trylock_fast()) [[unlikely]]
      down_read_slow();
    else if (cls_)
      cls_->count_acquire();
    tsan::post_lock(this, tsan::read_lock);
    lockdep::acquire(this, lockdep::mode::shared);
  }
  bool down_read_trylock() noexcept;
  void up_read() noexcept;

  void down_write() noexcept {
    tsan::pre_lock(this);
    uint64_t expected = 0;
    if (!count_.compare_exchange_strong(expected, writer_locked, std::memory_order_acquire,
                                        std::memory_order_relaxed)) [[unlikely]]
      down_write_slow();
    else if (cls_)
      cls_->count_acquire();
    tsan::post_lock(this);
    lockdep::acquire(this);
  }
  bool down_write_trylock() noexcept;
  void up_write() noexcept;

  // The writer becomes a reader without letting another writer in between; queued readers at the
  // head of the wait list are let in with it.
  void downgrade_write() noexcept;

  // rwsem_is_contended(): someone is waiting for the lock. Long walks under the lock check it to
  // drop and retake the lock (seed 001's rwsem_needbreak).
  bool is_contended() const noexcept {
    return count_.load(std::memory_order_relaxed) & waiters_flag;
  }
  // For assertions and statistics: whether anyone holds it. That the caller does is
  // USWAP_ASSERT_HELD_WRITE(sem) / USWAP_ASSERT_HELD_READ(sem) (lockdep.h).
  bool is_locked() const noexcept {
    return count_.load(std::memory_order_relaxed) & ~(waiters_flag | handoff_flag);
  }
  bool is_write_locked() const noexcept {
    return count_.load(std::memory_order_relaxed) & writer_locked;
  }
  unsigned readers() const noexcept {
    return static_cast<unsigned>(count_.load(std::memory_order_relaxed) >> reader_shift);
  }

  // std::shared_mutex vocabulary, so std::unique_lock / std::shared_lock work.
  void lock() noexcept { down_write(); }
  bool try_lock() noexcept { return down_write_trylock(); }
  void unlock() noexcept { up_write(); }
  void lock_shared() noexcept { down_read(); }
  bool try_lock_shared() noexcept { return down_read_trylock(); }
  void unlock_shared() noexcept { up_read(); }

 private:
  static constexpr uint64_t writer_locked = 1;
  static constexpr uint64_t waiters_flag = 2;
  static constexpr uint64_t handoff_flag = 4;
  // How long the queued head lets others steal before it demands the lock (the kernel's
  // RWSEM_WAIT_TIMEOUT is 4 ms; 1 ms suits threads that are preempted rather than CPUs).
  static constexpr uint64_t handoff_ns = 1'000'000;
  static constexpr unsigned reader_shift = 8;
  static constexpr uint64_t reader_bias = uint64_t{1} << reader_shift;

  struct waiter;

  bool read_trylock_fast() noexcept {
    uint64_t c = count_.load(std::memory_order_relaxed);
    while (!(c & (writer_locked | waiters_flag))) {
      if (count_.compare_exchange_weak(c, c + reader_bias, std::memory_order_acquire,
                                       std::memory_order_relaxed))
        return true;
    }
    return false;
  }
  // A writer may take the lock when nobody owns it and no queued writer demands a hand-off.
  static bool write_available(uint64_t c) noexcept {
    return !(c & (writer_locked | handoff_flag)) && !(c >> reader_shift);
  }
  void down_read_slow() noexcept;
  void down_write_slow() noexcept;
  void read_queued() noexcept;
  void write_queued() noexcept;
  void enqueue(waiter* w) noexcept;
  void wake() noexcept;

  std::atomic<uint64_t> count_{0};
  mutex wait_lock_;  // protects the wait list and every change of waiters_flag
  waiter* head_ = nullptr;
  waiter* tail_ = nullptr;
  lock_class* cls_;
};

}  // namespace uswap
