// bit_lock keeps the caller's bits of the word intact: under contention (waiters setting their
// bit while the holder rewrites data bits), over a table of words locked at random like zram's
// slot table, and through unlock_with.
#include "uswap/sync/bit_lock.h"

#include <gtest/gtest.h>

#include <random>
#include <thread>
#include <vector>

#include "uswap_testing/threads.h"

namespace uswap {
namespace {

using testing::run_threads;
using testing::work_scale;

// Lock bits at the top, as a zram slot entry keeps flags and size below them.
using slot_lock = bit_lock<62, 63>;
constexpr uint64_t counter_mask = 0xffff'ffffULL;        // bits 0..31: a counter
constexpr uint64_t tag_mask = 0x0fff'ffffULL << 32;      // bits 32..59: a constant tag

TEST(BitLock, DataBitsSurviveConcurrentUpdatesByHoldersAndWaiters) {
  const uint64_t tag = 0x0abc'def0ULL << 32;
  std::atomic<uint64_t> word{tag};
  const int threads = 16;
  const int per_thread = 20000 / work_scale;
  run_threads(threads, [&](int) {
    for (int i = 0; i < per_thread; ++i) {
      slot_lock::lock(word);
      const uint64_t d = slot_lock::load_data(word);
      // Read-modify-write of the data bits while waiters may be setting the waiters bit.
      slot_lock::update(word, counter_mask, (d & counter_mask) + 1);
      slot_lock::unlock(word);
    }
  });
  const uint64_t v = word.load();
  EXPECT_EQ(v & slot_lock::lock_mask, 0u) << "lock bits left set";
  EXPECT_EQ(v & tag_mask, tag) << "bits the holders never wrote were changed";
  EXPECT_EQ(v & counter_mask, static_cast<uint64_t>(threads) * per_thread);
}

TEST(BitLock, SlotTableOfWordsLockedAtRandom) {
  // Like zram: many words, each with its own lock and its own counter; threads pick at random.
  const int slots = 64;
  std::vector<std::atomic<uint64_t>> table(slots);
  for (int i = 0; i < slots; ++i) table[i].store(static_cast<uint64_t>(i) << 32);
  std::vector<std::atomic<uint64_t>> expected(slots);
  const int threads = 32;
  const int per_thread = 20000 / work_scale;
  run_threads(threads, [&](int t) {
    std::mt19937 rng(static_cast<unsigned>(t));
    for (int i = 0; i < per_thread; ++i) {
      const int s = static_cast<int>(rng() % slots);
      slot_lock::lock(table[s]);
      const uint64_t d = slot_lock::load_data(table[s]);
      slot_lock::update(table[s], counter_mask, (d & counter_mask) + 1);
      slot_lock::unlock(table[s]);
      expected[s].fetch_add(1, std::memory_order_relaxed);
    }
  });
  for (int i = 0; i < slots; ++i) {
    const uint64_t v = table[i].load();
    EXPECT_EQ(v & slot_lock::lock_mask, 0u) << i;
    EXPECT_EQ((v & tag_mask) >> 32, static_cast<uint64_t>(i)) << i;
    EXPECT_EQ(v & counter_mask, expected[i].load()) << i;
  }
}

TEST(BitLock, UnlockWithStoresDataAndReleasesInOneStep) {
  std::atomic<uint64_t> word{0};
  const int threads = 8;
  const int per_thread = 20000 / work_scale;
  run_threads(threads, [&](int) {
    for (int i = 0; i < per_thread; ++i) {
      slot_lock::lock(word);
      const uint64_t d = slot_lock::load_data(word);
      slot_lock::unlock_with(word, d + 1);
    }
  });
  EXPECT_EQ(word.load(), static_cast<uint64_t>(threads) * per_thread);
}

TEST(BitLock, SetAndClearBitsPreserveTheLock) {
  std::atomic<uint64_t> word{0};
  slot_lock::lock(word);
  slot_lock::set_bits(word, 0xf0 | slot_lock::lock_mask);  // lock bits in the mask are ignored
  EXPECT_TRUE(slot_lock::is_locked(word));
  EXPECT_EQ(slot_lock::load_data(word), 0xf0u);
  slot_lock::clear_bits(word, 0x30 | slot_lock::held_mask);
  EXPECT_TRUE(slot_lock::is_locked(word));
  EXPECT_EQ(slot_lock::load_data(word), 0xc0u);
  EXPECT_EQ(slot_lock::update(word, ~uint64_t{0}, 0x5), 0x5u);
  EXPECT_TRUE(slot_lock::is_locked(word));
  slot_lock::unlock(word);
  EXPECT_EQ(word.load(), 0x5u);
}

TEST(BitLock, WaiterSetsItsBitAndIsWoken) {
  using parking = bit_lock<10, 11, no_spin_policy>;
  std::atomic<uint64_t> word{0};
  parking::lock(word);
  std::atomic<bool> got{false};
  std::thread t([&] {
    parking::lock(word);
    got = true;
    parking::unlock(word);
  });
  EXPECT_TRUE(testing::eventually([&] { return (word.load() & parking::waiters_mask) != 0; }));
  EXPECT_FALSE(got.load());
  parking::unlock(word);
  t.join();
  EXPECT_TRUE(got.load());
  EXPECT_EQ(word.load(), 0u) << "a woken waiter must leave both lock bits clear";
}

// Parked threads are always woken, even while threads that never park keep taking the lock
// (barging). models/bit_lock.pml proves it for the protocol; this runs it. The earlier parking loop
// (separate CASes for "take" and "set waiters") could in principle leave sleepers unwoken while a
// woken waiter's CAS kept losing to bargers (the model's MUTANT_CAS_PARK_LOOP).
TEST(BitLock, SleepersAreWokenWhileBargersKeepTakingTheLock) {
  using parking = bit_lock<20, 21, no_spin_policy>;
  std::atomic<uint64_t> word{0};
  std::atomic<bool> stop{false};
  std::atomic<int> sleepers_done{0};
  uint64_t counter = 0;  // plain: protected by the lock
  const int sleepers = 8;
  const int rounds = 200 / work_scale;
  std::vector<std::thread> bargers;
  for (int b = 0; b < 2; ++b)
    bargers.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        if (parking::try_lock(word)) {  // never parks, never sets the waiters bit
          ++counter;
          parking::unlock(word);
        }
      }
    });
  std::vector<std::thread> waiters;
  for (int i = 0; i < sleepers; ++i)
    waiters.emplace_back([&] {
      for (int r = 0; r < rounds; ++r) {
        parking::lock(word);
        ++counter;
        parking::unlock(word);
      }
      sleepers_done.fetch_add(1);
    });
  const bool all_done =
      testing::eventually([&] { return sleepers_done.load() == sleepers; }, std::chrono::seconds(120));
  stop = true;
  for (auto& t : bargers) t.join();
  for (auto& t : waiters) t.join();
  EXPECT_TRUE(all_done) << "a parked thread was never woken";
  EXPECT_EQ(word.load() & parking::lock_mask, 0u);
  EXPECT_GE(counter, static_cast<uint64_t>(sleepers) * rounds);
}

}  // namespace
}  // namespace uswap
