// The swap cache's contract with the swap_map: only a SWAP_HAS_CACHE holder adds, deleting drops
// SWAP_HAS_CACHE (freeing the slot when no count is left), a swap-in reads a page once and
// finds it in the cache afterwards, and failures leave nothing claimed.
#include "uswap/swap/swap_cache.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "swap_test_util.h"
#include "uswap_testing/param_names.h"

namespace uswap {
namespace {

struct page {
  uint64_t data = 0;
  int refs = 0;
};

class SwapCacheModesTest : public ::testing::TestWithParam<swap_lock_mode> {};
INSTANTIATE_TEST_SUITE_P(Modes, SwapCacheModesTest, ::testing::ValuesIn(testing::all_modes),
                         testing::to_string_name());

TEST_P(SwapCacheModesTest, SwapOutThenSwapInThroughTheCache) {
  swap_options so;
  so.lock_mode = GetParam();
  swap_system sys(so);
  swap_area_options o;
  o.size_pages = 4096;
  ASSERT_TRUE(sys.swapon(o).ok());
  swap_cache<page> cache(sys, 16);
  EXPECT_EQ(cache.nr_shards(), 16u);

  // swap-out (add_to_swap + try_to_unmap + pageout + __remove_mapping).
  page p{42};
  const swap_entry e = sys.get_swap_page();
  ASSERT_FALSE(e.empty());
  ASSERT_TRUE(cache.add_to_swap_cache(e, &p).ok());
  EXPECT_EQ(cache.add_to_swap_cache(e, &p).code(), EEXIST);
  EXPECT_EQ(cache.lookup_swap_cache(e), &p);
  ASSERT_TRUE(sys.swap_duplicate(e).ok());
  page other;
  EXPECT_EQ(cache.delete_from_swap_cache(e, &other).code(), ENOENT);
  EXPECT_EQ(cache.lookup_swap_cache(e), &p) << "a refused delete leaves the entry";
  ASSERT_TRUE(cache.delete_from_swap_cache(e, &p).ok());
  EXPECT_EQ(cache.lookup_swap_cache(e), nullptr);
  EXPECT_EQ(sys.swap_map_byte(e), 1) << "delete_from_swap_cache dropped SWAP_HAS_CACHE";
  EXPECT_EQ(cache.delete_from_swap_cache(e, &p).code(), ENOENT);

  // Adding without holding SWAP_HAS_CACHE is refused.
  const status st = cache.add_to_swap_cache(e, &p);
  EXPECT_EQ(st.code(), EINVAL);
  EXPECT_NE(st.message().find("SWAP_HAS_CACHE"), std::string::npos);
  EXPECT_EQ(cache.add_to_swap_cache(e, nullptr).code(), EINVAL);

  // swap-in: the first fault reads, the second finds the page.
  page in;
  struct source {
    page& in;
    int reads = 0, allocs = 0, released = 0;
    bool pin(page* pg) {
      pg->refs++;
      return true;
    }
    result<page*> alloc() {
      ++allocs;
      return &in;
    }
    status read(swap_entry, page* pg) {
      ++reads;
      pg->data = 42;
      return {};
    }
    void release(page*) { ++released; }
    bool stale() const { return false; }
  } src{in};
  bool allocated = false;
  auto r = cache.read_swap_cache_async(e, src, &allocated);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(*r, &in);
  EXPECT_EQ(in.data, 42u);
  EXPECT_TRUE(allocated);
  EXPECT_EQ(sys.swap_map_byte(e), SWAP_HAS_CACHE | 1);
  r = cache.read_swap_cache_async(e, src, &allocated);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, &in);
  EXPECT_FALSE(allocated);
  EXPECT_EQ(src.reads, 1);
  EXPECT_EQ(src.allocs, 1) << "a hit allocates nothing";
  EXPECT_EQ(src.released, 0);
  EXPECT_EQ(in.refs, 1) << "pin runs on a hit";
  // The PTE maps the page; only the cache holds the slot; the page leaves the cache.
  auto left = sys.swap_free(e);
  ASSERT_TRUE(left.ok());
  EXPECT_EQ(*left, SWAP_HAS_CACHE);
  ASSERT_TRUE(cache.delete_from_swap_cache(e, &in).ok());
  sys.drain_swap_slots_cache();
  EXPECT_EQ(sys.swap_map_byte(e), 0);
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_TRUE(sys.check_invariants().ok()) << sys.check_invariants().to_string();
}

TEST_P(SwapCacheModesTest, FailedSwapInLeavesNothingClaimed) {
  swap_options so;
  so.lock_mode = GetParam();
  swap_system sys(so);
  swap_area_options o;
  o.size_pages = 1024;
  ASSERT_TRUE(sys.swapon(o).ok());
  swap_cache<page> cache(sys);
  const swap_entry e = sys.get_swap_page();
  ASSERT_TRUE(sys.swap_duplicate(e).ok());
  ASSERT_TRUE(sys.put_swap_page(e).ok());
  // The read fails: the object goes back, SWAP_HAS_CACHE too.
  page in;
  struct source {
    page& in;
    status read_result;
    bool is_stale = false;
    int allocs = 0, reads = 0, released = 0;
    bool pin(page*) { return true; }
    result<page*> alloc() {
      ++allocs;
      return &in;
    }
    status read(swap_entry, page*) {
      ++reads;
      return read_result;
    }
    void release(page*) { ++released; }
    bool stale() const { return is_stale; }
  } src{in, error(EIO, "backing store: read failed")};
  auto r = cache.read_swap_cache_async(e, src);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), EIO);
  EXPECT_EQ(src.released, src.allocs) << "the unused object was not given back";
  EXPECT_EQ(sys.swap_map_byte(e), 1) << "SWAP_HAS_CACHE was given back";
  EXPECT_EQ(cache.size(), 0u);
  // A caller whose PTE changed stops at once with EAGAIN, reading nothing.
  src.is_stale = true;
  src.reads = 0;
  r = cache.read_swap_cache_async(e, src);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), EAGAIN);
  EXPECT_EQ(src.reads, 0);
  src.is_stale = false;
  // A fault on an entry that was freed meanwhile gets ENOENT.
  ASSERT_EQ(*sys.swap_free(e), 0);
  sys.drain_swap_slots_cache();
  src.reads = 0;
  r = cache.read_swap_cache_async(e, src);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ENOENT);
  EXPECT_EQ(src.reads, 0) << "read ran for a freed entry";
  EXPECT_EQ(src.released, src.allocs);
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_TRUE(sys.check_invariants().ok()) << sys.check_invariants().to_string();
}

TEST(SwapCache, EntriesSpreadOverShards) {
  swap_system sys;
  swap_area_options o;
  o.size_pages = 64 * SWAPFILE_CLUSTER;
  ASSERT_TRUE(sys.swapon(o).ok());
  swap_cache<page> cache(sys, 10);
  EXPECT_EQ(cache.nr_shards(), 16u) << "rounded up to a power of two";
  std::vector<page> pages(64 * SWAPFILE_CLUSTER);
  size_t n = 0;
  for (swap_entry e = sys.get_swap_page(); !e.empty(); e = sys.get_swap_page())
    ASSERT_TRUE(cache.add_to_swap_cache(e, &pages[n++]).ok());
  EXPECT_EQ(cache.size(), n);
  EXPECT_EQ(n, sys.area(0)->pages());
  // Clusters, including those the column-ordered free list hands out first (all multiples of 8
  // at the start), land in every shard, none holding more than twice its share.
  const std::vector<size_t> sizes = cache.shard_sizes();
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_GT(sizes[i], 0u) << "shard " << i;
    EXPECT_LE(sizes[i], 2 * n / sizes.size()) << "shard " << i;
  }
}

}  // namespace
}  // namespace uswap
