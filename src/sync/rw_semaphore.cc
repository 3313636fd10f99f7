#include "uswap/sync/rw_semaphore.h"

#include <mutex>

#include "uswap/sync/cpu_relax.h"
#include "uswap/sync/futex.h"

namespace uswap {

// A queued thread, on its own stack. `signal` goes 0 -> 1 when a releasing thread has granted a
// reader the lock, or woken a writer so that it tries again; the waiter sleeps on it.
struct rw_semaphore::waiter {
  bool writer;
  waiter* next = nullptr;
  uint64_t queued_at = 0;  // lockstat::now_ns() when enqueued: the hand-off clock
  std::atomic<uint32_t> signal{0};
};

namespace {

// Polls `signal` for a while, then sleeps on it until it is non-zero.
void wait_for_signal(std::atomic<uint32_t>& signal) noexcept {
  for (int i = 0; i < default_spin_policy::spins; ++i) {
    if (signal.load(std::memory_order_acquire)) return;
    cpu_relax();
  }
  while (!signal.load(std::memory_order_acquire)) futex_wait(&signal, 0);
}

}  // namespace

rw_semaphore::rw_semaphore(lock_class* cls) noexcept : cls_(cls) { tsan::mutex_create(this); }
rw_semaphore::~rw_semaphore() { tsan::mutex_destroy(this); }

bool rw_semaphore::down_read_trylock() noexcept {
  tsan::pre_lock(this, tsan::read_lock | tsan::try_lock);
  const bool got = read_trylock_fast();
  if (got && cls_) cls_->count_acquire();
  tsan::post_lock(this, tsan::read_lock | tsan::try_lock | (got ? 0 : tsan::try_lock_failed));
  if (got) lockdep::acquire(this, lockdep::mode::shared);
  return got;
}

bool rw_semaphore::down_write_trylock() noexcept {
  tsan::pre_lock(this, tsan::try_lock);
  uint64_t c = count_.load(std::memory_order_relaxed);
  bool got = false;
  while (write_available(c)) {
    if (count_.compare_exchange_weak(c, c | writer_locked, std::memory_order_acquire,
                                     std::memory_order_relaxed)) {
      got = true;
      break;
    }
  }
  if (got && cls_) cls_->count_acquire();
  tsan::post_lock(this, tsan::try_lock | (got ? 0 : tsan::try_lock_failed));
  if (got) lockdep::acquire(this);
  return got;
}

void rw_semaphore::down_read_slow() noexcept {
  lock_wait_timer timer(cls_);
  // Optimistic spin while a writer holds it and nobody is queued yet.
  for (int i = 0; i < default_spin_policy::spins; ++i) {
    cpu_relax();
    const uint64_t c = count_.load(std::memory_order_relaxed);
    if (c & waiters_flag) break;
    if (!(c & writer_locked) && read_trylock_fast()) {
      timer.acquired();
      return;
    }
  }
  read_queued();
  timer.acquired();
}

void rw_semaphore::down_write_slow() noexcept {
  lock_wait_timer timer(cls_);
  for (int i = 0; i < default_spin_policy::spins; ++i) {
    cpu_relax();
    uint64_t c = count_.load(std::memory_order_relaxed);
    if (write_available(c) &&
        count_.compare_exchange_weak(c, c | writer_locked, std::memory_order_acquire,
                                     std::memory_order_relaxed)) {
      timer.acquired();
      return;
    }
  }
  write_queued();
  timer.acquired();
}

// Appends w; caller holds wait_lock_ and has set waiters_flag.
void rw_semaphore::enqueue(waiter* w) noexcept {
  w->queued_at = lockstat::now_ns();
  if (tail_)
    tail_->next = w;
  else
    head_ = w;
  tail_ = w;
}

void rw_semaphore::read_queued() noexcept {
  waiter w{false};
  {
    std::lock_guard g(wait_lock_);
    // Re-check under wait_lock_, setting the waiters flag in the same atomic step as the check
    // that found the lock unavailable: any release after that step sees the flag and calls
    // wake(), which needs wait_lock_ and so finds us queued.
    uint64_t c = count_.load(std::memory_order_relaxed);
    for (;;) {
      if (!(c & (writer_locked | waiters_flag))) {
        if (count_.compare_exchange_weak(c, c + reader_bias, std::memory_order_acquire,
                                         std::memory_order_relaxed))
          return;
        continue;
      }
      if ((c & waiters_flag) ||
          count_.compare_exchange_weak(c, c | waiters_flag, std::memory_order_relaxed,
                                       std::memory_order_relaxed))
        break;
    }
    enqueue(&w);
  }
  // A reader is granted the lock by the thread that wakes it: nothing to retry.
  wait_for_signal(w.signal);
}

void rw_semaphore::write_queued() noexcept {
  waiter w{true};
  std::unique_lock g(wait_lock_);
  uint64_t c = count_.load(std::memory_order_relaxed);
  for (;;) {
    if (write_available(c)) {
      if (count_.compare_exchange_weak(c, c | writer_locked, std::memory_order_acquire,
                                       std::memory_order_relaxed))
        return;
      continue;
    }
    if ((c & waiters_flag) ||
        count_.compare_exchange_weak(c, c | waiters_flag, std::memory_order_relaxed,
                                     std::memory_order_relaxed))
      break;
  }
  enqueue(&w);
  for (;;) {
    g.unlock();
    wait_for_signal(w.signal);
    g.lock();
    // Only the head is ever woken. Take the lock if it is free (the hand-off bit, if set, is
    // ours); otherwise whoever owns it will wake us again when it leaves.
    c = count_.load(std::memory_order_relaxed);
    for (;;) {
      if (!(c & writer_locked) && !(c >> reader_shift)) {
        const bool last = (w.next == nullptr);
        const uint64_t n = (c | writer_locked) & ~(handoff_flag | (last ? waiters_flag : 0));
        if (!count_.compare_exchange_weak(c, n, std::memory_order_acquire,
                                          std::memory_order_relaxed))
          continue;
        head_ = w.next;
        if (!head_) tail_ = nullptr;
        return;
      }
      break;
    }
    // Lost to a stealer. After waiting long enough, forbid stealing so the next release is ours.
    if (!(c & handoff_flag) && lockstat::now_ns() - w.queued_at > handoff_ns)
      count_.fetch_or(handoff_flag, std::memory_order_relaxed);
    w.signal.store(0, std::memory_order_relaxed);
  }
}

// Lets the head of the queue in if it can have the lock now (readers are granted it, a writer is
// woken to take it), and keeps waiters_flag equal to "the queue is non-empty". Called by every
// release that saw waiters_flag.
void rw_semaphore::wake() noexcept {
  waiter* wake_list = nullptr;
  {
    std::lock_guard g(wait_lock_);
    uint64_t c = count_.load(std::memory_order_relaxed);
    for (;;) {
      if (!head_) {
        // Nobody queued (grantees already left): clear the flag.
        if (!(c & waiters_flag) ||
            count_.compare_exchange_weak(c, c & ~waiters_flag, std::memory_order_relaxed,
                                         std::memory_order_relaxed))
          break;
        continue;
      }
      if (c & writer_locked) {
        // The owner's up_write will call us again. If it stole the lock from a head that has
        // waited too long, forbid stealing now: only the head is woken, and when two writers
        // alternate stealing, every release finds the lock already stolen again, so the head
        // itself (never woken) could not raise the flag. models/rw_semaphore.pml found this
        // (mutant MUTANT_WRITER_ONLY_HANDOFF): a queued writer starved behind three writers.
        if (!(c & handoff_flag) && lockstat::now_ns() - head_->queued_at > handoff_ns)
          count_.fetch_or(handoff_flag, std::memory_order_relaxed);
        break;
      }
      if (head_->writer) {
        if (c >> reader_shift) break;  // the last reader's up_read will call us again
        wake_list = head_;             // woken, not granted: it takes the lock itself
        break;
      }
      // Readers at the head: grant the lock to every reader up to the next writer.
      uint64_t n_readers = 0;
      waiter* last_reader = head_;
      for (waiter* w = head_; w && !w->writer; w = w->next) {
        ++n_readers;
        last_reader = w;
      }
      const bool empties = (last_reader->next == nullptr);
      // A hand-off flag was set for these readers (the head): they have the lock now.
      const uint64_t n =
          (c + n_readers * reader_bias) & ~(handoff_flag | (empties ? waiters_flag : 0));
      if (!count_.compare_exchange_weak(c, n, std::memory_order_acq_rel,
                                        std::memory_order_relaxed))
        continue;
      wake_list = head_;
      head_ = last_reader->next;
      if (!head_) tail_ = nullptr;
      last_reader->next = nullptr;
      break;
    }
    if (wake_list && wake_list->writer) {
      // Signal the writer under wait_lock_: it stays queued (and its frame alive) until it
      // re-takes wait_lock_. If it is already signalled (a release woke it and it has not yet
      // re-taken wait_lock_ to look at count_), it will look at count_ as it is now, so this
      // release needs no second futex_wake. Without this check every up_write under
      // contention paid a system call: the releasing writer usually takes the lock again (it is
      // running, the woken one is not yet), and each of its releases woke the same head again
      // (sync_bench, 16 writers: 34151 futex calls in one 200 ms round against 123 for
      // std::shared_mutex, at a quarter of its throughput).
      if (!wake_list->signal.load(std::memory_order_relaxed)) {
        wake_list->signal.store(1, std::memory_order_release);
        futex_wake(&wake_list->signal, 1);
      }
      return;
    }
  }
  // Wake granted readers outside wait_lock_. Read `next` before publishing the signal: once
  // signalled, a reader may return and its stack frame disappear.
  for (waiter* w = wake_list; w;) {
    waiter* next = w->next;
    w->signal.store(1, std::memory_order_release);
    futex_wake(&w->signal, 1);
    w = next;
  }
}

void rw_semaphore::up_read() noexcept {
  lockdep::release(this);
  tsan::pre_unlock(this, tsan::read_lock);
  const uint64_t c = count_.fetch_sub(reader_bias, std::memory_order_release) - reader_bias;
  if ((c & waiters_flag) && !(c >> reader_shift)) wake();
  tsan::post_unlock(this, tsan::read_lock);
}

void rw_semaphore::up_write() noexcept {
  lockdep::release(this);
  tsan::pre_unlock(this);
  const uint64_t c = count_.fetch_and(~writer_locked, std::memory_order_release);
  if (c & waiters_flag) wake();
  tsan::post_unlock(this);
}

void rw_semaphore::downgrade_write() noexcept {
  lockdep::downgrade(this);
  tsan::pre_unlock(this);
  // writer -> one reader in one step, so no other writer can slip in between.
  const uint64_t c = count_.fetch_add(reader_bias - writer_locked, std::memory_order_release);
  tsan::post_unlock(this);
  // TSan ignores memory accesses between pre_ and post_ annotations, where the lock's own
  // machinery runs; wake() touches queued threads' waiters, so it must run inside them too.
  tsan::pre_lock(this, tsan::read_lock);
  if (c & waiters_flag) wake();
  tsan::post_lock(this, tsan::read_lock);
}

}  // namespace uswap
