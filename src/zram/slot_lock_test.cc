// slot_lock.h: each lock mode's slot lock excludes, and assert_held ("with the slot locked")
// holds exactly while the calling thread holds the slot for the access asked (DCHECK builds).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

#include "slot_lock.h"
#include "uswap/zram/zram.h"

namespace uswap::zram_detail {
namespace {

class SlotLock : public ::testing::TestWithParam<zram_lock_mode> {};

INSTANTIATE_TEST_SUITE_P(Modes, SlotLock, ::testing::ValuesIn(all_zram_lock_modes),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST_P(SlotLock, WriteExcludesOtherThreadsAndKeepsTheFlags) {
  lock_class cls("slot_lock_test");
  slot_locks locks(GetParam(), &cls);
  std::atomic<uint64_t> word{0x50};  // data bits the lock must leave alone
  locks.lock(word, slot_access::write);
  locks.assert_held(word, slot_access::write);
  locks.assert_held(word, slot_access::read);
  bool other_got = true;
  std::thread([&] {
    other_got = locks.trylock(word, slot_access::write);
    if (other_got) locks.unlock(word, slot_access::write);
  }).join();
  EXPECT_FALSE(other_got);
  locks.unlock(word, slot_access::write);
  EXPECT_EQ(word.load() & ~lock_bits, 0x50u);
  ASSERT_TRUE(locks.trylock(word, slot_access::write));
  locks.unlock(word, slot_access::write);
}

#if USWAP_DCHECK_ON
TEST_P(SlotLock, AssertHeldFiresUnlessTheCallerHoldsTheSlot) {
  ::testing::GTEST_FLAG(death_test_style) = "threadsafe";
  slot_locks locks(GetParam(), nullptr);
  std::atomic<uint64_t> word{0};
  EXPECT_DEATH(locks.assert_held(word, slot_access::read), "invariant violated");
  EXPECT_DEATH(locks.assert_held(word, slot_access::write), "invariant violated");
  locks.lock(word, slot_access::read);
  locks.assert_held(word, slot_access::read);
  if (GetParam() == zram_lock_mode::global_rwlock) {
    // The table rwlock read-held is not "locked for write".
    EXPECT_DEATH(locks.assert_held(word, slot_access::write), "invariant violated");
  } else {
    locks.assert_held(word, slot_access::write);  // one exclusive lock for both accesses
  }
  locks.unlock(word, slot_access::read);
}
#endif

}  // namespace
}  // namespace uswap::zram_detail
