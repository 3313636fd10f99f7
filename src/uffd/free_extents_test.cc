// free_extent_map: the arena's free space stays sorted and merged through inserts and removals,
// and first fit places a run at the lowest page with room, at the alignment of the address.
#include "free_extents.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <random>
#include <set>
#include <utility>
#include <vector>

namespace uswap {
namespace {

using extents = std::vector<std::pair<uint64_t, uint64_t>>;

extents as_vector(const free_extent_map& f) {
  return extents(f.extents().begin(), f.extents().end());
}

TEST(FreeExtents, InsertMergesWithTheRunsItTouches) {
  free_extent_map f;
  f.insert(10, 5);  // [10, 15)
  f.insert(20, 5);  // [20, 25)
  EXPECT_EQ(as_vector(f), (extents{{10, 5}, {20, 5}}));
  f.insert(15, 5);  // fills the gap: one extent [10, 25)
  EXPECT_EQ(as_vector(f), (extents{{10, 15}}));
  f.insert(5, 5);   // touches the front
  f.insert(25, 1);  // touches the back
  EXPECT_EQ(as_vector(f), (extents{{5, 21}}));
  f.insert(40, 2);  // apart
  EXPECT_EQ(as_vector(f), (extents{{5, 21}, {40, 2}}));
  EXPECT_EQ(f.pages(), 23u);
  EXPECT_TRUE(f.well_formed());
}

TEST(FreeExtents, RemoveSplitsTheExtentsAtItsEnds) {
  free_extent_map f;
  f.insert(0, 100);
  f.remove(10, 20);  // a hole in the middle
  EXPECT_EQ(as_vector(f), (extents{{0, 10}, {20, 80}}));
  f.remove(5, 25);  // spans the hole: pages that are not free stay as they are
  EXPECT_EQ(as_vector(f), (extents{{0, 5}, {25, 75}}));
  f.remove(0, 5);  // a whole extent
  EXPECT_EQ(as_vector(f), (extents{{25, 75}}));
  f.remove(90, 200);  // past the end
  EXPECT_EQ(as_vector(f), (extents{{25, 65}}));
  f.remove(0, 10);  // nothing free there
  EXPECT_EQ(as_vector(f), (extents{{25, 65}}));
  EXPECT_TRUE(f.well_formed());
}

TEST(FreeExtents, RunAtCountsToTheEndOfTheExtent) {
  free_extent_map f;
  f.insert(10, 5);
  EXPECT_EQ(f.run_at(9), 0u);
  EXPECT_EQ(f.run_at(10), 5u);
  EXPECT_EQ(f.run_at(12), 3u);
  EXPECT_EQ(f.run_at(14), 1u);
  EXPECT_EQ(f.run_at(15), 0u);
  EXPECT_EQ(f.run_at(1000), 0u);
  EXPECT_EQ(free_extent_map().run_at(0), 0u);
}

TEST(FreeExtents, FirstFitTakesTheLowestExtentWithRoom) {
  free_extent_map f;
  f.insert(0, 3);
  f.insert(10, 8);
  f.insert(30, 100);
  EXPECT_EQ(f.first_fit(3), 0u);
  EXPECT_EQ(f.first_fit(4), 10u);
  EXPECT_EQ(f.first_fit(8), 10u);
  EXPECT_EQ(f.first_fit(9), 30u);
  EXPECT_EQ(f.first_fit(100), 30u);
  EXPECT_FALSE(f.first_fit(101).has_value());
  EXPECT_FALSE(free_extent_map().first_fit(1).has_value());
}

TEST(FreeExtents, FirstFitAlignsTheAddressNotTheIndex) {
  free_extent_map f;
  f.insert(0, 64);
  // An arena starting at page 3 (address 3 * 4096): the first page whose address is 16-page
  // aligned is index 13.
  EXPECT_EQ(f.first_fit(16, 16, 3), 13u);
  EXPECT_EQ(f.first_fit(16, 16, 0), 0u);
  EXPECT_EQ(f.first_fit(16, 16, 16), 0u);
  // Aligned start, but no room after it in this extent: the next extent.
  f.remove(40, 64);
  f.insert(100, 60);
  EXPECT_EQ(f.first_fit(32, 32, 3), 125u);  // 3 + 125 = 128
  EXPECT_EQ(f.first_fit(27, 1, 3), 0u);
  EXPECT_FALSE(f.first_fit(64, 64, 3).has_value());
}

// Against a set of free pages: after any mix of inserts (of pages not free) and removals the
// extents are exactly the maximal runs of the set, and first fit finds the lowest fitting run.
TEST(FreeExtents, MatchesASetOfPagesUnderRandomOperations) {
  constexpr uint64_t nr = 512;
  std::mt19937_64 rng(20);
  free_extent_map f;
  std::set<uint64_t> free;
  for (int step = 0; step < 4000; ++step) {
    const uint64_t a = rng() % nr;
    const uint64_t n = 1 + rng() % 24;
    if (rng() % 2) {
      // Insert the longest run from a that is not free (and stays inside the arena).
      uint64_t len = 0;
      while (len < n && a + len < nr && !free.count(a + len)) ++len;
      if (len == 0) continue;
      f.insert(a, len);
      for (uint64_t i = a; i < a + len; ++i) free.insert(i);
    } else {
      f.remove(a, a + n);
      for (uint64_t i = a; i < a + n; ++i) free.erase(i);
    }
    ASSERT_TRUE(f.well_formed()) << "step " << step;
    extents runs;
    for (uint64_t p : free) {
      if (!runs.empty() && runs.back().first + runs.back().second == p)
        ++runs.back().second;
      else
        runs.emplace_back(p, 1);
    }
    ASSERT_EQ(as_vector(f), runs) << "step " << step;
    const uint64_t want = 1 + rng() % 16;
    std::optional<uint64_t> expect;
    for (const auto& [s, len] : runs)
      if (len >= want) {
        expect = s;
        break;
      }
    ASSERT_EQ(f.first_fit(want), expect) << "step " << step;
    const uint64_t probe = rng() % nr;
    uint64_t run = 0;
    while (free.count(probe + run)) ++run;
    ASSERT_EQ(f.run_at(probe), run) << "step " << step;
  }
}

}  // namespace
}  // namespace uswap
