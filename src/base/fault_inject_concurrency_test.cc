// fault_inject under threads: every hit is counted once and exactly the armed range fails,
// whichever threads make the hits.
#include <gtest/gtest.h>

#include <atomic>

#include "uswap/base/fault_inject.h"
#include "uswap_testing/threads.h"

namespace uswap {
namespace {

TEST(FaultInjectConcurrency, EveryHitIsCountedAndExactlyTheArmedOnesFail) {
  constexpr int threads = 16;
  const int per_thread = 20000 / uswap::testing::work_scale;
  const uint64_t total = uint64_t{threads} * per_thread;
  fault_inject_arm(fault_point::backing_write, total / 3, ENOSPC, 100);
  std::atomic<uint64_t> failed{0};
  uswap::testing::run_threads(threads, [&](int) {
    for (int i = 0; i < per_thread; ++i) {
      if (const int e = should_fail(fault_point::backing_write)) {
        EXPECT_EQ(e, ENOSPC);
        failed.fetch_add(1);
      }
    }
  });
  fault_inject_disarm_all();
  EXPECT_EQ(fault_inject_hits(fault_point::backing_write), total);
  EXPECT_EQ(fault_inject_failures(fault_point::backing_write), 100u);
  EXPECT_EQ(failed.load(), 100u);
}

}  // namespace
}  // namespace uswap
