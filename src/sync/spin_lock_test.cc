// Behaviour specific to the spin baselines (mutual exclusion is in mutex_test.cc).
#include "uswap/sync/spin_lock.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "uswap_testing/threads.h"

namespace uswap {
namespace {

TEST(TicketSpinLock, ServesInTicketOrder) {
  ticket_spin_lock lock;
  lock.lock();
  std::vector<int> order;
  std::vector<std::thread> threads;
  // Start each waiter only after the previous one has taken its ticket, so ticket order is known.
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      lock.lock();
      order.push_back(i);
      lock.unlock();
    });
    // Holder + the i+1 waiters started so far have taken tickets.
    ASSERT_TRUE(testing::eventually([&] { return lock.queued() == static_cast<uint32_t>(i + 2); }));
  }
  lock.unlock();
  for (auto& t : threads) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
}

TEST(CasSpinLock, StatesAreIdleAndAccess) {
  cas_spin_lock l;
  EXPECT_TRUE(l.try_lock());
  EXPECT_FALSE(l.try_lock());
  l.unlock();
  EXPECT_TRUE(l.try_lock());
  l.unlock();
}

}  // namespace
}  // namespace uswap
