// lockdep.h: every lock of the layer tells which thread holds it, in which mode, in DCHECK
// builds; the assertions fire when the calling thread does not hold the lock (even when another
// thread does) and stay silent when it does. In Release they compile to nothing.
#include <gtest/gtest.h>

#include <signal.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <vector>

#include "uswap/sync/bit_lock.h"
#include "uswap/sync/lockdep.h"
#include "uswap/sync/mutex.h"
#include "uswap/sync/rw_semaphore.h"
#include "uswap/sync/spin_lock.h"
#include "uswap/sync/std_locks.h"

namespace uswap {
namespace {

using word_lock = bit_lock<62, 63>;

// Every exclusive lock of the layer, by the object lockdep names it by.
struct mutex_case {
  mutex l;
  mutex& key() { return l; }
  void lock() { l.lock(); }
  bool try_lock() { return l.try_lock(); }
  void unlock() { l.unlock(); }
};
struct bit_lock_case {
  std::atomic<uint64_t> word{0x1234};
  std::atomic<uint64_t>& key() { return word; }
  void lock() { word_lock::lock(word); }
  bool try_lock() { return word_lock::try_lock(word); }
  void unlock() { word_lock::unlock(word); }
};
struct bit_lock_with_case : bit_lock_case {
  void unlock() { word_lock::unlock_with(word, 7); }
};
struct rwsem_write_case {
  rw_semaphore l;
  rw_semaphore& key() { return l; }
  void lock() { l.down_write(); }
  bool try_lock() { return l.down_write_trylock(); }
  void unlock() { l.up_write(); }
};
template <class L>
struct plain_case {
  L l;
  L& key() { return l; }
  void lock() { l.lock(); }
  bool try_lock() { return l.try_lock(); }
  void unlock() { l.unlock(); }
};

template <class C>
class LockdepTest : public ::testing::Test {};
using exclusive_cases =
    ::testing::Types<mutex_case, bit_lock_case, bit_lock_with_case, rwsem_write_case,
                     plain_case<tas_spin_lock>, plain_case<ttas_spin_lock>,
                     plain_case<ticket_spin_lock>, plain_case<cas_spin_lock>,
                     plain_case<std_mutex_lock>, plain_case<std_shared_mutex_lock>>;
TYPED_TEST_SUITE(LockdepTest, exclusive_cases);

#if USWAP_DCHECK_ON

// Death tests fork a process that re-runs the test binary up to the statement: safe with the
// threads the tests (and ThreadSanitizer) start.
class threadsafe_death_tests : public ::testing::Environment {
 public:
  void SetUp() override { ::testing::GTEST_FLAG(death_test_style) = "threadsafe"; }
};
const auto* const death_env = ::testing::AddGlobalTestEnvironment(new threadsafe_death_tests);

TYPED_TEST(LockdepTest, HeldExactlyWhileTheCallerHoldsIt) {
  TypeParam c;
  EXPECT_FALSE(lockdep::held(&c.key()));
  const unsigned before = lockdep::depth();
  c.lock();
  EXPECT_TRUE(lockdep::held(&c.key()));
  EXPECT_TRUE(lockdep::held(&c.key(), lockdep::mode::exclusive));
  EXPECT_FALSE(lockdep::held(&c.key(), lockdep::mode::shared));
  EXPECT_EQ(lockdep::depth(), before + 1);
  USWAP_ASSERT_HELD(c.key());
  USWAP_ASSERT_HELD_WRITE(c.key());
  c.unlock();
  EXPECT_FALSE(lockdep::held(&c.key()));
  EXPECT_EQ(lockdep::depth(), before);
  USWAP_ASSERT_NOT_HELD(c.key());

  ASSERT_TRUE(c.try_lock());
  EXPECT_TRUE(lockdep::held(&c.key()));
  // A failed try_lock (here: by another thread) records nothing for the thread that failed.
  bool other_got = true, other_sees_held = true;
  std::thread([&] {
    other_got = c.try_lock();
    other_sees_held = lockdep::held(&c.key());
  }).join();
  EXPECT_FALSE(other_got);
  EXPECT_FALSE(other_sees_held) << "held means held by the calling thread";
  c.unlock();
  EXPECT_FALSE(lockdep::held(&c.key()));
}

TYPED_TEST(LockdepTest, AssertionFiresWhenTheLockIsFree) {
  TypeParam c;
  EXPECT_DEATH(USWAP_ASSERT_HELD(c.key()), "invariant violated: .*lockdep::held");
}

// Asserts that the calling thread holds c while another thread holds it.
template <class C>
void assert_held_while_another_thread_holds(C& c) {
  std::atomic<bool> locked{false};
  std::atomic<bool> done{false};
  std::thread t([&] {
    c.lock();
    locked = true;
    while (!done) std::this_thread::yield();
    c.unlock();
  });
  while (!locked) std::this_thread::yield();
  USWAP_ASSERT_HELD(c.key());  // dies here: the other thread holds it, not this one
  done = true;
  t.join();
}

TYPED_TEST(LockdepTest, AssertionFiresWhenAnotherThreadHoldsIt) {
  TypeParam c;
  EXPECT_DEATH(assert_held_while_another_thread_holds(c), "invariant violated: .*lockdep::held");
}

TYPED_TEST(LockdepTest, NotHeldAssertionFiresWhileHeld) {
  TypeParam c;
  EXPECT_DEATH(
      {
        c.lock();
        USWAP_ASSERT_NOT_HELD(c.key());
      },
      "invariant violated: !.*lockdep::held");
}

TEST(Lockdep, ReadAndWriteSidesOfAnRwSemaphore) {
  rw_semaphore sem;
  sem.down_read();
  USWAP_ASSERT_HELD(sem);
  USWAP_ASSERT_HELD_READ(sem);
  EXPECT_FALSE(lockdep::held(&sem, lockdep::mode::exclusive));
  EXPECT_DEATH(USWAP_ASSERT_HELD_WRITE(sem), "invariant violated");
  sem.up_read();
  EXPECT_FALSE(lockdep::held(&sem));

  ASSERT_TRUE(sem.down_read_trylock());
  USWAP_ASSERT_HELD_READ(sem);
  sem.up_read();

  sem.down_write();
  USWAP_ASSERT_HELD_WRITE(sem);
  EXPECT_DEATH(USWAP_ASSERT_HELD_READ(sem), "invariant violated");
  sem.downgrade_write();  // the writer becomes a reader without letting go
  USWAP_ASSERT_HELD_READ(sem);
  EXPECT_FALSE(lockdep::held(&sem, lockdep::mode::exclusive));
  sem.up_read();
  EXPECT_FALSE(lockdep::held(&sem));

  // The standard lock's adapter, through std::shared_lock.
  std_shared_mutex_lock sm;
  {
    std::shared_lock g(sm);
    USWAP_ASSERT_HELD_READ(sm);
  }
  USWAP_ASSERT_NOT_HELD(sm);
}

TEST(Lockdep, LocksReleasedOutOfOrderKeepTheOthersHeld) {
  mutex a, b;
  std::atomic<uint64_t> w{0};
  a.lock();
  word_lock::lock(w);
  b.lock();
  a.unlock();  // not the innermost
  EXPECT_FALSE(lockdep::held(&a));
  EXPECT_TRUE(lockdep::held(&w));
  EXPECT_TRUE(lockdep::held(&b));
  word_lock::unlock(w);
  EXPECT_TRUE(lockdep::held(&b));
  b.unlock();
  EXPECT_EQ(lockdep::depth(), 0u);
}

TEST(Lockdep, ManyBitLocksAtOnceAsAnEvictionPassHoldsThem) {
  // An uffd eviction pass holds 256 page locks; ThreadSanitizer's deadlock detector tracks at
  // most 64 held locks per thread, and its build holds 32 per pass.
#if defined(USWAP_TSAN)
  constexpr unsigned nr = 48;
#else
  constexpr unsigned nr = 256;
#endif
  std::vector<std::atomic<uint64_t>> words(nr);
  for (auto& w : words) word_lock::lock(w);
  for (auto& w : words) USWAP_ASSERT_HELD(w);
  EXPECT_EQ(lockdep::depth(), nr);
  for (auto& w : words) word_lock::unlock(w);  // in acquisition order, not reversed
  EXPECT_EQ(lockdep::depth(), 0u);
}

TEST(LockdepDeathTest, ReleasingALockThisThreadDoesNotHoldAborts) {
  mutex m;
  EXPECT_DEATH(
      {
        std::thread([&] { m.lock(); }).join();  // held by a thread that is gone
        m.unlock();
      },
      "lockdep: release of a lock this thread does not hold");
}

TEST(LockdepDeathTest, HoldingMoreThanMaxLockDepthAborts) {
  // Through the hook every lock calls (so that ThreadSanitizer's own limit of 64 held locks does
  // not stop the test first).
  std::vector<std::atomic<uint64_t>> words(lockdep::max_lock_depth + 1);
  for (unsigned i = 0; i < lockdep::max_lock_depth; ++i) lockdep::acquire(&words[i]);
  EXPECT_EQ(lockdep::depth(), lockdep::max_lock_depth);
  EXPECT_DEATH(lockdep::acquire(&words.back()),
               "lockdep: a thread holds more than max_lock_depth locks");
  for (unsigned i = 0; i < lockdep::max_lock_depth; ++i) lockdep::release(&words[i]);
  EXPECT_EQ(lockdep::depth(), 0u);
}

// A signal handler that takes and releases a lock on a thread holding others (the uffd SIGBUS
// handler does) leaves that thread's record as it was.
std::atomic<uint64_t> handler_word{0};
std::atomic<bool> handler_ran{false}, handler_saw_own_lock{false};
void take_and_release(int) {
  word_lock::lock(handler_word);
  handler_saw_own_lock = lockdep::held(&handler_word);
  word_lock::unlock(handler_word);
  handler_ran = true;
}

TEST(Lockdep, ASignalHandlerTakingLocksLeavesTheThreadsRecord) {
  struct sigaction sa = {}, old = {};
  sa.sa_handler = take_and_release;
  ASSERT_EQ(sigaction(SIGUSR1, &sa, &old), 0);
  mutex a;
  std::atomic<uint64_t> w{0};
  a.lock();
  word_lock::lock(w);
  raise(SIGUSR1);
  // ThreadSanitizer may hold the signal back until the next intercepted call.
  for (int i = 0; i < 100000 && !handler_ran; ++i) std::this_thread::yield();
  ASSERT_TRUE(handler_ran.load());
  EXPECT_TRUE(handler_saw_own_lock.load());
  EXPECT_FALSE(lockdep::held(&handler_word));
  EXPECT_TRUE(lockdep::held(&a));
  EXPECT_TRUE(lockdep::held(&w));
  EXPECT_EQ(lockdep::depth(), 2u);
  word_lock::unlock(w);
  a.unlock();
  sigaction(SIGUSR1, &old, nullptr);
}

#else  // !USWAP_DCHECK_ON

TYPED_TEST(LockdepTest, AssertionsCompileToNothingInRelease) {
  // Nothing is recorded and nothing is checked: an assertion about a free lock passes, and the
  // locks still work.
  TypeParam c;
  USWAP_ASSERT_HELD(c.key());
  USWAP_ASSERT_HELD_WRITE(c.key());
  USWAP_ASSERT_HELD_READ(c.key());
  c.lock();
  USWAP_ASSERT_NOT_HELD(c.key());
  bool other_got = true;
  std::thread([&] { other_got = c.try_lock(); }).join();
  EXPECT_FALSE(other_got) << "the lock must still exclude";
  c.unlock();
  ASSERT_TRUE(c.try_lock());
  c.unlock();
}

#endif

}  // namespace
}  // namespace uswap
