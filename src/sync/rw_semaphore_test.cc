// rw_semaphore: readers share, writers exclude everyone, a writer gets in under a flood of
// readers, is_contended() reports waiters, downgrade_write keeps writers out.
#include "uswap/sync/rw_semaphore.h"

#include <gtest/gtest.h>

#include <array>
#include <shared_mutex>

#include "uswap_testing/threads.h"
#include "uswap/sync/std_locks.h"

namespace uswap {
namespace {

using testing::eventually;
using testing::run_threads;
using testing::work_scale;

template <class Rw>
class RwLockTest : public ::testing::Test {};
using rw_locks = ::testing::Types<rw_semaphore, std_shared_mutex_lock>;
TYPED_TEST_SUITE(RwLockTest, rw_locks);

TYPED_TEST(RwLockTest, ReadersAreInsideTogether) {
  TypeParam sem;
  const int n = 8;
  std::atomic<int> inside{0};
  std::atomic<bool> all_met{true};
  run_threads(n, [&](int) {
    sem.lock_shared();
    inside.fetch_add(1);
    // Every reader waits inside until all n are inside: only possible if they share the lock.
    if (!eventually([&] { return inside.load() == n; })) all_met = false;
    sem.unlock_shared();
  });
  EXPECT_TRUE(all_met.load());
}

TYPED_TEST(RwLockTest, WritersExcludeReadersAndWriters) {
  TypeParam sem;
  // Writers fill the array with one value; readers must never see a mix.
  std::array<uint64_t, 16> data{};
  std::atomic<int> torn{0};
  const int threads = 16;
  const int per_thread = 20000 / work_scale;
  run_threads(threads, [&](int t) {
    for (int i = 0; i < per_thread; ++i) {
      if (t % 4 == 0) {
        sem.lock();
        const uint64_t v = data[0] + 1;
        for (auto& x : data) x = v;
        sem.unlock();
      } else {
        sem.lock_shared();
        for (auto x : data)
          if (x != data[0]) torn.fetch_add(1);
        sem.unlock_shared();
      }
    }
  });
  EXPECT_EQ(torn.load(), 0);
  EXPECT_EQ(data[0], static_cast<uint64_t>(threads / 4) * per_thread);
}

// Only rw_semaphore promises this: glibc's pthread_rwlock (under std::shared_mutex) prefers
// readers by default and starves the writer here indefinitely (observed; see docs/design/sync.md).
TEST(RwSemaphore, WriterGetsInUnderAFloodOfReaders) {
  rw_semaphore sem;
  std::atomic<bool> stop{false};
  std::atomic<int> readers_started{0};
  std::vector<std::thread> readers;
  for (int i = 0; i < 8; ++i) {
    readers.emplace_back([&] {
      readers_started.fetch_add(1);
      // Overlapping read holds: at every instant some reader holds the lock.
      while (!stop.load(std::memory_order_relaxed)) {
        sem.lock_shared();
        for (int k = 0; k < 50; ++k) cpu_relax();
        sem.unlock_shared();
      }
    });
  }
  ASSERT_TRUE(eventually([&] { return readers_started.load() == 8; }));
  std::atomic<bool> writer_done{false};
  std::thread writer([&] {
    for (int i = 0; i < 20; ++i) {
      sem.lock();
      sem.unlock();
    }
    writer_done = true;
  });
  const bool ok = eventually([&] { return writer_done.load(); }, std::chrono::seconds(120));
  stop = true;
  writer.join();
  for (auto& r : readers) r.join();
  EXPECT_TRUE(ok) << "writer starved by readers";
}

// Writers that keep stealing the lock must not starve a queued writer or a queued reader: once
// the head of the wait list has waited handoff_ns, stealing stops. models/rw_semaphore.pml found
// that with the hand-off bit raised only by a woken head writer, a writer queued behind a reader
// could starve while two other writers alternated stealing (every release found the lock stolen
// again, so the head was never woken to raise the bit); releasers now raise it too.
TEST(RwSemaphore, QueuedReaderAndWriterGetInWhileWritersKeepStealing) {
  rw_semaphore sem;
  std::atomic<bool> stop{false};
  uint64_t value = 0;  // plain: written under the write lock
  std::vector<std::thread> stealers;
  for (int i = 0; i < 3; ++i)
    stealers.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        sem.down_write();
        ++value;
        sem.up_write();
      }
    });
  std::atomic<int> reads{0}, writes{0};
  const int rounds = 200 / work_scale;
  std::thread reader([&] {
    for (int i = 0; i < rounds; ++i) {
      sem.down_read();
      (void)value;
      sem.up_read();
      reads.fetch_add(1);
    }
  });
  std::thread writer([&] {
    for (int i = 0; i < rounds; ++i) {
      sem.down_write();
      ++value;
      sem.up_write();
      writes.fetch_add(1);
    }
  });
  const bool ok = eventually([&] { return reads.load() == rounds && writes.load() == rounds; },
                             std::chrono::seconds(120));
  stop = true;
  for (auto& t : stealers) t.join();
  reader.join();
  writer.join();
  EXPECT_TRUE(ok) << "reads " << reads.load() << " writes " << writes.load() << " of " << rounds;
  EXPECT_FALSE(sem.is_locked());
  EXPECT_FALSE(sem.is_contended());
}

TEST(RwSemaphore, IsContendedWhileAWaiterExists) {
  rw_semaphore sem;
  EXPECT_FALSE(sem.is_contended());
  sem.down_write();
  EXPECT_FALSE(sem.is_contended()) << "an owner alone is not contention";
  std::thread reader([&] {
    sem.down_read();
    sem.up_read();
  });
  EXPECT_TRUE(eventually([&] { return sem.is_contended(); }));
  sem.up_write();
  reader.join();
  EXPECT_FALSE(sem.is_contended());
  EXPECT_FALSE(sem.is_locked());

  // A queued writer behind readers is contention too.
  sem.down_read();
  std::thread writer([&] {
    sem.down_write();
    sem.up_write();
  });
  EXPECT_TRUE(eventually([&] { return sem.is_contended(); }));
  sem.up_read();
  writer.join();
  EXPECT_FALSE(sem.is_contended());
}

TEST(RwSemaphore, QueuedWriterBlocksNewReaders) {
  rw_semaphore sem;
  sem.down_read();
  std::atomic<bool> writer_in{false};
  std::thread writer([&] {
    sem.down_write();
    writer_in = true;
    sem.up_write();
  });
  ASSERT_TRUE(eventually([&] { return sem.is_contended(); }));
  // A new reader must not overtake the queued writer.
  EXPECT_FALSE(sem.down_read_trylock());
  sem.up_read();
  writer.join();
  EXPECT_TRUE(writer_in.load());
  EXPECT_TRUE(sem.down_read_trylock());
  sem.up_read();
}

TEST(RwSemaphore, TryVariants) {
  rw_semaphore sem;
  ASSERT_TRUE(sem.down_write_trylock());
  EXPECT_FALSE(sem.down_write_trylock());
  EXPECT_FALSE(sem.down_read_trylock());
  sem.up_write();
  ASSERT_TRUE(sem.down_read_trylock());
  ASSERT_TRUE(sem.down_read_trylock());
  EXPECT_EQ(sem.readers(), 2u);
  EXPECT_FALSE(sem.down_write_trylock());
  sem.up_read();
  sem.up_read();
  EXPECT_FALSE(sem.is_locked());
}

TEST(RwSemaphore, DowngradeWriteAdmitsReadersButNotWriters) {
  rw_semaphore sem;
  sem.down_write();
  int value = 1;  // written under the write lock, read after the downgrade
  sem.downgrade_write();
  EXPECT_FALSE(sem.is_write_locked());
  EXPECT_EQ(sem.readers(), 1u);
  std::atomic<bool> reader_in{false};
  std::thread reader([&] {
    sem.down_read();
    reader_in = value == 1;
    sem.up_read();
  });
  reader.join();
  EXPECT_TRUE(reader_in.load());
  EXPECT_FALSE(sem.down_write_trylock());
  sem.up_read();
  EXPECT_TRUE(sem.down_write_trylock());
  sem.up_write();
}

TEST(RwSemaphore, DowngradeWakesQueuedReaders) {
  rw_semaphore sem;
  sem.down_write();
  std::atomic<int> readers_in{0};
  std::vector<std::thread> readers;
  for (int i = 0; i < 4; ++i)
    readers.emplace_back([&] {
      sem.down_read();
      readers_in.fetch_add(1);
      sem.up_read();
    });
  ASSERT_TRUE(eventually([&] { return sem.is_contended(); }));
  sem.downgrade_write();
  // The readers get in while we still hold our (now shared) lock.
  EXPECT_TRUE(eventually([&] { return readers_in.load() == 4; }));
  sem.up_read();
  for (auto& r : readers) r.join();
  EXPECT_FALSE(sem.is_locked());
  EXPECT_FALSE(sem.is_contended());
}

TEST(RwSemaphore, MixedStressWithDowngradesLeavesItFree) {
  rw_semaphore sem;
  uint64_t value = 0;
  std::atomic<int> bad{0};
  const int threads = 64;
  const int per_thread = 2000 / work_scale;
  run_threads(threads, [&](int t) {
    for (int i = 0; i < per_thread; ++i) {
      switch ((t + i) % 5) {
        case 0: {
          sem.down_write();
          const uint64_t v = ++value;
          sem.downgrade_write();
          if (value != v) bad.fetch_add(1);  // no writer may run while we still read
          sem.up_read();
          break;
        }
        case 1:
          if (sem.down_write_trylock()) {
            ++value;
            sem.up_write();
          }
          break;
        default:
          sem.down_read();
          (void)value;
          sem.up_read();
      }
    }
  });
  EXPECT_EQ(bad.load(), 0);
  EXPECT_FALSE(sem.is_locked());
  EXPECT_FALSE(sem.is_contended());
}

}  // namespace
}  // namespace uswap
