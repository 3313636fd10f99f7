// Adapters that let the standard library's locks stand in wherever a uswap lock does, so a
// coarse lock can also be "the standard one" (std::mutex for an exclusive lock, std::shared_mutex
// for a reader-writer lock) and be counted by lockstat like the others.
//
// Contention is detected by a failed try_lock before the blocking lock, which adds one atomic
// operation to the contended path only.
//
// Thread-safety: that of the wrapped standard lock. Like every lock of the layer, they tell
// lockdep.h who holds them (DCHECK builds), which the standard locks cannot say.
#pragma once

#include <mutex>
#include <shared_mutex>

#include "uswap/sync/lockdep.h"
#include "uswap/sync/lockstat.h"

namespace uswap {

class std_mutex_lock {
 public:
  explicit std_mutex_lock(lock_class* cls = nullptr) noexcept : cls_(cls) {}
  void lock() {
    if (m_.try_lock()) [[likely]] {
      if (cls_) cls_->count_acquire();
    } else {
      lock_wait_timer timer(cls_);
      m_.lock();
      timer.acquired();
    }
    lockdep::acquire(this);
  }
  bool try_lock() {
    const bool got = m_.try_lock();
    if (got && cls_) cls_->count_acquire();
    if (got) lockdep::acquire(this);
    return got;
  }
  void unlock() {
    lockdep::release(this);
    m_.unlock();
  }

 private:
  std::mutex m_;
  lock_class* cls_;
};

// std::shared_mutex with both vocabularies: the standard one and the kernel's rwsem names.
class std_shared_mutex_lock {
 public:
  explicit std_shared_mutex_lock(lock_class* cls = nullptr) noexcept : cls_(cls) {}

  void lock() {
    if (m_.try_lock()) [[likely]] {
      if (cls_) cls_->count_acquire();
    } else {
      lock_wait_timer timer(cls_);
      m_.lock();
      timer.acquired();
    }
    lockdep::acquire(this);
  }
  bool try_lock() {
    const bool got = m_.try_lock();
    if (got && cls_) cls_->count_acquire();
    if (got) lockdep::acquire(this);
    return got;
  }
  void unlock() {
    lockdep::release(this);
    m_.unlock();
  }
  void lock_shared() {
    if (m_.try_lock_shared()) [[likely]] {
      if (cls_) cls_->count_acquire();
    } else {
      lock_wait_timer timer(cls_);
      m_.lock_shared();
      timer.acquired();
    }
    lockdep::acquire(this, lockdep::mode::shared);
  }
  bool try_lock_shared() {
    const bool got = m_.try_lock_shared();
    if (got && cls_) cls_->count_acquire();
    if (got) lockdep::acquire(this, lockdep::mode::shared);
    return got;
  }
  void unlock_shared() {
    lockdep::release(this);
    m_.unlock_shared();
  }

  void down_read() { lock_shared(); }
  void up_read() { unlock_shared(); }
  void down_write() { lock(); }
  void up_write() { unlock(); }
  bool down_read_trylock() { return try_lock_shared(); }
  bool down_write_trylock() { return try_lock(); }

 private:
  std::shared_mutex m_;
  lock_class* cls_;
};

}  // namespace uswap
