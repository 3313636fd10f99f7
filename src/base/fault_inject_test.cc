// fault_inject: which hits fail, counting, disarming, and USWAP_FAIL_INJECT's syntax.
#include "uswap/base/fault_inject.h"

#include <gtest/gtest.h>

#include <vector>

namespace uswap {
namespace {

// The errno of hits 1..n of p, in order.
std::vector<int> hit(fault_point p, int n) {
  std::vector<int> out;
  for (int i = 0; i < n; ++i) out.push_back(should_fail(p));
  return out;
}

class FaultInjectTest : public ::testing::Test {
 protected:
  void TearDown() override { fault_inject_disarm_all(); }
};

TEST_F(FaultInjectTest, DisarmedPointsNeverFailAndAreNotCounted) {
  fault_inject_count(fault_point::zs_meta);
  fault_inject_disarm_all();
  EXPECT_EQ(hit(fault_point::zs_meta, 5), std::vector<int>(5, 0));
  EXPECT_EQ(fault_inject_hits(fault_point::zs_meta), 0u);
}

TEST_F(FaultInjectTest, TheNthHitFailsOnce) {
  fault_inject_arm(fault_point::zs_malloc_page, 3, ENOMEM);
  EXPECT_EQ(hit(fault_point::zs_malloc_page, 6), (std::vector<int>{0, 0, ENOMEM, 0, 0, 0}));
  EXPECT_EQ(fault_inject_hits(fault_point::zs_malloc_page), 6u);
  EXPECT_EQ(fault_inject_failures(fault_point::zs_malloc_page), 1u);
}

TEST_F(FaultInjectTest, TimesFailsThatManyHitsAndForeverEveryOneAfter) {
  fault_inject_arm(fault_point::backing_write, 2, ENOSPC, 2);
  EXPECT_EQ(hit(fault_point::backing_write, 5), (std::vector<int>{0, ENOSPC, ENOSPC, 0, 0}));
  fault_inject_arm(fault_point::backing_read, 4, EIO, fault_inject_forever);
  EXPECT_EQ(hit(fault_point::backing_read, 6), (std::vector<int>{0, 0, 0, EIO, EIO, EIO}));
  EXPECT_EQ(fault_inject_failures(fault_point::backing_read), 3u);
}

TEST_F(FaultInjectTest, PointsAreIndependent) {
  fault_inject_arm(fault_point::swap_map, 1, ENOMEM);
  fault_inject_count(fault_point::cluster_info);
  EXPECT_EQ(hit(fault_point::cluster_info, 2), (std::vector<int>{0, 0}));
  EXPECT_EQ(hit(fault_point::pager_meta, 2), (std::vector<int>{0, 0}));
  EXPECT_EQ(hit(fault_point::swap_map, 2), (std::vector<int>{ENOMEM, 0}));
  EXPECT_EQ(fault_inject_hits(fault_point::cluster_info), 2u);
  EXPECT_EQ(fault_inject_hits(fault_point::pager_meta), 0u);
  fault_inject_disarm(fault_point::swap_map);
  EXPECT_EQ(fault_inject_hits(fault_point::swap_map), 2u);  // readable after disarming
  EXPECT_EQ(hit(fault_point::swap_map, 1), (std::vector<int>{0}));
  EXPECT_EQ(fault_inject_hits(fault_point::swap_map), 2u);
}

TEST_F(FaultInjectTest, ArmingAgainStartsCountingFromZero) {
  fault_inject_arm(fault_point::zram_table, 2, ENOMEM);
  EXPECT_EQ(hit(fault_point::zram_table, 1), (std::vector<int>{0}));
  fault_inject_arm(fault_point::zram_table, 2, ENOMEM);
  EXPECT_EQ(hit(fault_point::zram_table, 3), (std::vector<int>{0, ENOMEM, 0}));
}

TEST_F(FaultInjectTest, SetupParsesPointsCountsAndErrnos) {
  ASSERT_TRUE(
      fault_inject_setup("pager_map:2+,backing_read:1,backing_write:3:ENOSPC,zs_meta:2-3").ok());
  EXPECT_EQ(hit(fault_point::zs_meta, 4), (std::vector<int>{0, ENOMEM, ENOMEM, 0}));
  EXPECT_EQ(hit(fault_point::pager_map, 4), (std::vector<int>{0, ENOMEM, ENOMEM, ENOMEM}));
  EXPECT_EQ(hit(fault_point::backing_read, 2), (std::vector<int>{EIO, 0}));
  EXPECT_EQ(hit(fault_point::backing_write, 4), (std::vector<int>{0, 0, ENOSPC, 0}));
}

TEST_F(FaultInjectTest, SetupRejectsBadSpecificationsAndArmsNothing) {
  for (const char* bad : {"zs_meta", "zs_meta:0", "zs_meta:x", "nowhere:1", "zs_meta:1:EPERM",
                          "zs_meta:1:ENOMEM:extra", "zs_meta:1,pager_map:", "zs_meta:3-2",
                          "zs_meta:1-", "zs_meta:-2"}) {
    const status st = fault_inject_setup(bad);
    EXPECT_EQ(st.code(), EINVAL) << bad;
    EXPECT_NE(st.message().find("fault injection"), std::string_view::npos) << bad;
    EXPECT_EQ(should_fail(fault_point::zs_meta), 0) << bad;
  }
}

}  // namespace
}  // namespace uswap
