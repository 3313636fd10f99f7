// Single-threaded behaviour of swap areas in every lock mode, with and without the slot cache:
// swap_map counts and flags, count continuation, errors that leave data intact, a full area,
// priorities, discard of freed clusters, the free list's column order, the freer tag.
#include "uswap/swap/swap_area.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "swap_test_util.h"
#include "uswap/swap/swap_system.h"

namespace uswap {

// Reaches into an area to break one invariant at a time.
struct swap_area_test_access {
  static std::atomic<unsigned char>& map(swap_area& a, uint64_t off) { return a.swap_map_[off]; }
  static std::atomic<uint64_t>& cluster(swap_area& a, uint32_t idx) {
    return a.cluster_info_[idx].data;
  }
  static std::atomic<uint64_t>& inuse(swap_area& a) { return a.inuse_pages_; }
  static std::atomic<uint64_t>& lowest(swap_area& a) { return a.lowest_bit_; }
  static void set_next(swap_area& a, uint32_t idx, uint32_t to) {
    a.list_next_[idx] = swap_area::encode_link(to);
  }
  static uint64_t freer(swap_area& a, uint32_t idx) {
    return a.cluster_info_[idx].data.load() & CLUSTER_FREER_MASK;
  }
};

namespace {

using testing::mode_and_cache;

TEST(SwapInvariants, TheCheckerFindsEachKindOfCorruption) {
  using acc = swap_area_test_access;
  auto fresh = [](swap_system& sys) {
    swap_area_options o;
    o.size_pages = 8 * SWAPFILE_CLUSTER;
    EXPECT_TRUE(sys.swapon(o).ok());
    swap_area* a = sys.area(0);
    // Some slots in use, so that counts and lists are not trivial.
    swap_entry e;
    for (int i = 0; i < 300; ++i) EXPECT_EQ(sys.get_swap_pages(1, &e), 1);
    EXPECT_TRUE(sys.check_invariants().ok()) << sys.check_invariants().to_string();
    return a;
  };
  auto expect_violation = [](const swap_system& sys, const char* words) {
    const status st = sys.check_invariants();
    ASSERT_FALSE(st.ok()) << "not detected: " << words;
    EXPECT_EQ(st.code(), EIO);
    EXPECT_NE(st.message().find(words), std::string::npos) << st.to_string();
  };
  {
    swap_system sys;
    swap_area* a = fresh(sys);
    acc::map(*a, 1000).store(1);  // a slot in use that no cluster count knows about
    expect_violation(sys, "slots in use");
  }
  {
    swap_system sys;
    swap_area* a = fresh(sys);
    acc::cluster(*a, 5).fetch_add(uint64_t{1} << CLUSTER_COUNT_SHIFT);  // a free cluster counts 1
    expect_violation(sys, "on the free list has count 1");
  }
  {
    swap_system sys;
    swap_area* a = fresh(sys);
    acc::inuse(*a).fetch_add(1);
    expect_violation(sys, "inuse_pages 301");
  }
  {
    swap_system sys;
    swap_area* a = fresh(sys);
    acc::lowest(*a).store(1500);
    expect_violation(sys, "outside lowest_bit 1500");
  }
  {
    swap_system sys;
    swap_area* a = fresh(sys);
    const std::vector<uint32_t> free = a->cluster_list(CLUSTER_FLAG_FREE);
    ASSERT_GE(free.size(), 2u);
    acc::set_next(*a, free[0], free[0]);  // a cycle
    expect_violation(sys, "free list");
  }
  {
    swap_system sys;
    swap_area* a = fresh(sys);
    acc::map(*a, 1).store(SWAP_HAS_CACHE | COUNT_CONTINUED | 1);  // continued, no table entry
    expect_violation(sys, "COUNT_CONTINUED");
  }
}

TEST(SwapEntry, EncodesTypeAndOffset) {
  const swap_entry e = swp_entry(5, 123456789);
  EXPECT_EQ(swp_type(e), 5u);
  EXPECT_EQ(swp_offset(e), 123456789u);
  EXPECT_FALSE(e.empty());
  EXPECT_TRUE(swap_entry{}.empty());
  EXPECT_TRUE(swp_entry(0, 0).empty()) << "type 0 offset 0 is the header: the empty entry";
  EXPECT_EQ(swp_type(swp_entry(MAX_SWAPFILES - 1, swp_offset_mask)), MAX_SWAPFILES - 1);
  EXPECT_EQ(swp_offset(swp_entry(MAX_SWAPFILES - 1, swp_offset_mask)), swp_offset_mask);
  EXPECT_EQ(to_string(e), "type 5 offset 123456789");
}

TEST(SwapEntry, SwapMapByteFormat) {
  EXPECT_EQ(swap_count(SWAP_HAS_CACHE | 3), 3);
  EXPECT_EQ(swap_count(SWAP_HAS_CACHE | COUNT_CONTINUED), COUNT_CONTINUED);
  EXPECT_LT(SWAP_MAP_MAX, SWAP_MAP_BAD);
  EXPECT_EQ(SWAP_MAP_BAD & (SWAP_HAS_CACHE | COUNT_CONTINUED), 0);
}

TEST(SwapOptions, ParseAndFormatModes) {
  for (swap_lock_mode m : testing::all_modes) {
    auto r = parse_swap_lock_mode(to_string(m));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(*r, m);
  }
  auto bad = parse_swap_lock_mode("spin");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), EINVAL);
  EXPECT_NE(bad.error().message().find("global, cluster, percpu"), std::string::npos);
  for (auto p : {slot_cache_policy::by_mode, slot_cache_policy::on, slot_cache_policy::alloc,
                 slot_cache_policy::off}) {
    auto r = parse_slot_cache_policy(to_string(p));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(*r, p);
  }
  EXPECT_STREQ(to_string(slot_cache_policy::alloc), "alloc");
  auto bad_cache = parse_slot_cache_policy("maybe");
  ASSERT_FALSE(bad_cache.ok());
  EXPECT_EQ(bad_cache.error().code(), EINVAL);
  EXPECT_NE(bad_cache.error().message().find("by-mode, on, alloc, off"), std::string::npos);
  // by_mode: each lock mode with its era's cache: 4.10 none, 4.11 both sides, 6.14 the
  // allocation side only.
  EXPECT_EQ(effective_slot_cache(slot_cache_policy::by_mode, swap_lock_mode::global),
            slot_cache_policy::off);
  EXPECT_EQ(effective_slot_cache(slot_cache_policy::by_mode, swap_lock_mode::cluster),
            slot_cache_policy::on);
  EXPECT_EQ(effective_slot_cache(slot_cache_policy::by_mode, swap_lock_mode::percpu),
            slot_cache_policy::alloc);
  EXPECT_FALSE(slot_cache_enabled(slot_cache_policy::by_mode, swap_lock_mode::global));
  EXPECT_TRUE(slot_cache_enabled(slot_cache_policy::by_mode, swap_lock_mode::cluster));
  EXPECT_TRUE(slot_cache_enabled(slot_cache_policy::by_mode, swap_lock_mode::percpu));
  EXPECT_FALSE(slot_cache_free_enabled(slot_cache_policy::by_mode, swap_lock_mode::global));
  EXPECT_TRUE(slot_cache_free_enabled(slot_cache_policy::by_mode, swap_lock_mode::cluster));
  EXPECT_FALSE(slot_cache_free_enabled(slot_cache_policy::by_mode, swap_lock_mode::percpu));
  // The explicit policies mean the same in every mode.
  for (swap_lock_mode m : testing::all_modes) {
    EXPECT_TRUE(slot_cache_enabled(slot_cache_policy::on, m));
    EXPECT_TRUE(slot_cache_free_enabled(slot_cache_policy::on, m));
    EXPECT_TRUE(slot_cache_enabled(slot_cache_policy::alloc, m));
    EXPECT_FALSE(slot_cache_free_enabled(slot_cache_policy::alloc, m));
    EXPECT_FALSE(slot_cache_enabled(slot_cache_policy::off, m));
    EXPECT_FALSE(slot_cache_free_enabled(slot_cache_policy::off, m));
    swap_options so;
    so.lock_mode = m;
    so.slot_cache = slot_cache_policy::alloc;
    swap_system sys(so);
    EXPECT_TRUE(sys.slot_cache_enabled());
    EXPECT_FALSE(sys.slot_cache_free_enabled());
  }
}

// The allocation side alone (6.14): get_swap_page is served from a batch of 64 taken in one
// get_swap_pages, but a slot whose last reference goes is free at once, not parked.
TEST(SlotCache, AllocationSideOnlyFreesAtOnce) {
  for (swap_lock_mode m : testing::all_modes) {
    SCOPED_TRACE(to_string(m));
    swap_options so;
    so.lock_mode = m;
    so.slot_cache = slot_cache_policy::alloc;
    swap_system sys(so);
    swap_area_options o;
    o.size_pages = 16 * SWAPFILE_CLUSTER;
    ASSERT_TRUE(sys.swapon(o).ok());
    swap_area* a = sys.area(0);
    std::vector<swap_entry> got;
    for (unsigned i = 0; i < SWAP_SLOTS_CACHE_SIZE; ++i) got.push_back(sys.get_swap_page());
    ASSERT_TRUE(sys.slot_cache_active());
    EXPECT_EQ(a->inuse_pages(), SWAP_SLOTS_CACHE_SIZE) << "one refill of 64 serves 64 pages";
    for (unsigned i = 1; i < got.size(); ++i)
      EXPECT_EQ(swp_offset(got[i]), swp_offset(got[i - 1]) + 1) << "in the cache's order";
    // swap-out then munmap: the slot is free at once, with no drain.
    ASSERT_TRUE(sys.swap_duplicate(got[0]).ok());
    ASSERT_TRUE(sys.put_swap_page(got[0]).ok());
    auto r = sys.swap_free(got[0]);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(*r, 0);
    EXPECT_EQ(sys.swap_map_byte(got[0]), 0) << "freed, not parked in a return cache";
    EXPECT_EQ(a->inuse_pages(), SWAP_SLOTS_CACHE_SIZE - 1);
    for (unsigned i = 1; i < got.size(); ++i) ASSERT_TRUE(sys.put_swap_page(got[i]).ok());
    EXPECT_EQ(a->inuse_pages(), 0u);
    EXPECT_TRUE(sys.check_invariants().ok()) << sys.check_invariants().to_string();
    // The next get_swap_page refills again; the drain returns the 63 it did not hand out.
    const swap_entry e = sys.get_swap_page();
    ASSERT_FALSE(e.empty());
    EXPECT_EQ(a->inuse_pages(), SWAP_SLOTS_CACHE_SIZE);
    sys.drain_swap_slots_cache();
    EXPECT_EQ(a->inuse_pages(), 1u);
    EXPECT_EQ(sys.swap_map_byte(e), SWAP_HAS_CACHE);
    ASSERT_TRUE(sys.put_swap_page(e).ok());
    EXPECT_EQ(a->inuse_pages(), 0u);
    EXPECT_TRUE(sys.check_invariants().ok()) << sys.check_invariants().to_string();
  }
}

TEST(Swapon, RejectsBadOptionsWithNamedErrors) {
  swap_system sys;
  auto expect_einval = [&](swap_area_options o, const char* words) {
    auto r = sys.swapon(std::move(o));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code(), EINVAL);
    EXPECT_NE(r.error().message().find(words), std::string::npos) << r.error().to_string();
  };
  swap_area_options o;
  o.size_pages = 0;
  expect_einval(o, "size_pages 0");
  o.size_pages = 1;
  expect_einval(o, "too small");
  o.size_pages = 1024;
  o.bad_pages = {0};
  expect_einval(o, "bad page 0");
  o.bad_pages = {1024};
  expect_einval(o, "bad page 1024");
  o.bad_pages = {7, 7};
  expect_einval(o, "listed twice");
  o.bad_pages = {};
  o.discard = true;
  expect_einval(o, "discard_fn");
  o.discard = false;
  o.priority = -5;
  expect_einval(o, "priority -5");
  o.priority = 40000;
  expect_einval(o, "priority 40000");
  o.size_pages = 3;
  o.priority.reset();
  o.bad_pages = {1, 2};
  expect_einval(o, "no usable slot");
  EXPECT_EQ(sys.nr_areas(), 0u) << "a refused swapon must not leave an area behind";

  swap_area_options ok;
  ok.size_pages = 2;
  for (unsigned i = 0; i < MAX_SWAPFILES; ++i) ASSERT_TRUE(sys.swapon(ok).ok()) << i;
  auto r = sys.swapon(ok);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ENOSPC);
}

TEST(Swapon, FreshAreaGeometryAndColumnOrderedFreeList) {
  swap_system sys;
  swap_area_options o;
  o.size_pages = 64 * SWAPFILE_CLUSTER - 100;  // 64 clusters, the last one short
  o.bad_pages = {300, 301};
  auto t = sys.swapon(o);
  ASSERT_TRUE(t.ok()) << t.error().to_string();
  swap_area* a = sys.area(*t);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->priority(), -1);
  EXPECT_EQ(a->max(), o.size_pages);
  EXPECT_EQ(a->pages(), o.size_pages - 1 - 2);
  EXPECT_EQ(a->inuse_pages(), 0u);
  EXPECT_EQ(a->lowest_bit(), 1u);
  EXPECT_EQ(a->highest_bit(), o.size_pages - 1);
  EXPECT_EQ(a->nr_clusters(), 64u);
  EXPECT_EQ(a->swap_map_byte(0), SWAP_MAP_BAD);
  EXPECT_EQ(a->swap_map_byte(300), SWAP_MAP_BAD);
  ASSERT_TRUE(a->check_invariants().ok()) << a->check_invariants().to_string();

  // Clusters 0 (header), 1 (bad pages) and 63 (short) are partly used; the others are free, in
  // column order: every run of SWAP_CLUSTER_COLS consecutive free clusters has its
  // cluster_info words in pairwise different cache lines.
  const std::vector<uint32_t> nonfull = a->cluster_list(CLUSTER_FLAG_NONFULL);
  EXPECT_EQ(std::set<uint32_t>(nonfull.begin(), nonfull.end()), (std::set<uint32_t>{0, 1, 63}));
  const std::vector<uint32_t> free = a->cluster_list(CLUSTER_FLAG_FREE);
  ASSERT_EQ(free.size(), 61u);
  EXPECT_EQ(free[0], 8u);
  EXPECT_EQ(free[1], 16u);
  // Two clusters sharing a line are a column apart in the list: 64 / 8 = 8 positions, less
  // one for each partly used cluster taken out of the list.
  std::map<uint32_t, size_t> pos;
  for (size_t i = 0; i < free.size(); ++i) pos[free[i]] = i;
  size_t closest = free.size();
  for (auto [a_idx, a_pos] : pos)
    for (auto [b_idx, b_pos] : pos)
      if (a_idx < b_idx && a_idx / SWAP_CLUSTER_COLS == b_idx / SWAP_CLUSTER_COLS)
        closest = std::min(closest, a_pos > b_pos ? a_pos - b_pos : b_pos - a_pos);
  EXPECT_GE(closest, 64 / SWAP_CLUSTER_COLS - 2);
}

// Swapon's free list is never written out (the links of clusters nobody moved are computed from
// the column order): taking clusters off its head and putting one back at its tail must read as
// the same list operations on a written-out list would.
TEST(Swapon, TheUnwrittenFreeListReadsAsTheListItStandsFor) {
  swap_system sys;
  swap_area_options o;
  o.size_pages = 64 * SWAPFILE_CLUSTER - 100;
  o.bad_pages = {300, 9 * SWAPFILE_CLUSTER + 5};
  auto t = sys.swapon(o);
  ASSERT_TRUE(t.ok()) << t.error().to_string();
  swap_area* a = sys.area(*t);
  std::vector<uint32_t> model = a->cluster_list(CLUSTER_FLAG_FREE);
  ASSERT_EQ(model.size(), 60u);  // 64 less the header's, two bad pages' and the short cluster
  // Allocate until two clusters have left the free list (partly used ones go first).
  std::vector<swap_entry> held;
  while (a->cluster_list(CLUSTER_FLAG_FREE).size() > model.size() - 2) {
    swap_entry e;
    ASSERT_EQ(sys.get_swap_pages(1, &e), 1);
    held.push_back(e);
  }
  const uint32_t first = model[0];
  model.erase(model.begin(), model.begin() + 2);
  EXPECT_EQ(a->cluster_list(CLUSTER_FLAG_FREE), model);
  ASSERT_TRUE(sys.check_invariants().ok()) << sys.check_invariants().to_string();
  // Emptying the first of them puts it back at the tail.
  for (const swap_entry& e : held) {
    if (swp_offset(e) / SWAPFILE_CLUSTER != first) continue;
    ASSERT_TRUE(sys.put_swap_page(e).ok());
  }
  model.push_back(first);
  EXPECT_EQ(a->cluster_list(CLUSTER_FLAG_FREE), model);
  ASSERT_TRUE(sys.check_invariants().ok()) << sys.check_invariants().to_string();
}

class SwapModesTest : public testing::mode_and_cache_test {};

INSTANTIATE_TEST_SUITE_P(ModesAndCaches, SwapModesTest,
                         ::testing::ValuesIn(testing::every_mode_and_cache()),
                         testing::mode_and_cache_name());

TEST_P(SwapModesTest, ReferenceCountsFollowTheKernel) {
  swap_system sys(opts());
  swap_area_options o;
  o.size_pages = 4096;
  ASSERT_TRUE(sys.swapon(o).ok());

  // swap-out: the allocator's reference is SWAP_HAS_CACHE.
  const swap_entry e = sys.get_swap_page();
  ASSERT_FALSE(e.empty());
  EXPECT_EQ(sys.swap_map_byte(e), SWAP_HAS_CACHE);
  EXPECT_EQ(sys.swapcache_prepare(e).code(), EEXIST);
  // try_to_unmap: a page table entry now holds it.
  ASSERT_TRUE(sys.swap_duplicate(e).ok());
  EXPECT_EQ(sys.swap_map_byte(e), SWAP_HAS_CACHE | 1);
  // written out, the page leaves the swap cache.
  ASSERT_TRUE(sys.put_swap_page(e).ok());
  EXPECT_EQ(sys.swap_map_byte(e), 1);
  EXPECT_EQ(*sys.swap_count(e), 1u);
  // fork copies the swap PTE.
  ASSERT_TRUE(sys.swap_duplicate(e).ok());
  EXPECT_EQ(*sys.swap_count(e), 2u);
  // swap-in: one fault claims the cache reference, a second one sees EEXIST.
  ASSERT_TRUE(sys.swapcache_prepare(e).ok());
  EXPECT_EQ(sys.swapcache_prepare(e).code(), EEXIST);
  EXPECT_EQ(sys.swap_map_byte(e), SWAP_HAS_CACHE | 2);
  // both PTEs map the page now.
  auto r = sys.swap_free(e);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, SWAP_HAS_CACHE | 1);
  r = sys.swap_free(e);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, SWAP_HAS_CACHE) << "only the swap cache holds it: the page may leave the cache";
  ASSERT_TRUE(sys.swapcache_clear(e).ok());
  // Parked in the return cache (the freeing side, 4.11-6.13) or freed at once.
  if (sys.slot_cache_free_enabled() && sys.slot_cache_active()) {
    EXPECT_EQ(sys.swap_map_byte(e), SWAP_HAS_CACHE) << "parked until the batch is freed";
  } else {
    EXPECT_EQ(sys.swap_map_byte(e), 0) << "freed at once";
  }
  sys.drain_swap_slots_cache();
  EXPECT_EQ(sys.swap_map_byte(e), 0) << "freed";
  EXPECT_EQ(sys.area(0)->inuse_pages(), 0u);
  EXPECT_TRUE(sys.check_invariants().ok()) << sys.check_invariants().to_string();
}

TEST_P(SwapModesTest, BadRequestsFailClearlyAndChangeNothing) {
  swap_system sys(opts());
  swap_area_options o;
  o.size_pages = 1024;
  o.bad_pages = {700};
  ASSERT_TRUE(sys.swapon(o).ok());
  const swap_entry e = sys.get_swap_page();
  ASSERT_FALSE(e.empty());
  const swap_entry unused = swp_entry(0, swp_offset(e) + 1 == 700 ? 701 : 900);
  ASSERT_EQ(sys.swap_map_byte(unused), 0);

  auto expect = [&](const status& st, int code, const char* words) {
    EXPECT_EQ(st.code(), code) << st.to_string();
    EXPECT_NE(st.message().find(words), std::string::npos) << st.to_string();
  };
  expect(sys.swap_duplicate(swap_entry{}), EINVAL, "empty swap entry");
  expect(sys.swap_duplicate(swp_entry(3, 5)), EINVAL, "bad swap entry");
  expect(sys.swap_duplicate(swp_entry(0, 1024)), EINVAL, "bad swap offset 1024");
  expect(sys.swap_duplicate(swp_entry(0, 700)), EINVAL, "bad slot");
  expect(sys.swap_duplicate(unused), ENOENT, "not in use");
  expect(sys.swapcache_prepare(unused), ENOENT, "no users");
  expect(sys.swap_free(unused).error(), ENOENT, "not in use");
  expect(sys.put_swap_page(unused), ENOENT, "not in use");
  expect(sys.swap_free(e).error(), ENOENT, "no swap count");  // only SWAP_HAS_CACHE held
  expect(sys.swap_free(swp_entry(0, 0)).error(), EINVAL, "empty swap entry");
  EXPECT_EQ(sys.swap_map_byte(e), SWAP_HAS_CACHE);
  EXPECT_EQ(sys.swap_map_byte(unused), 0);
  EXPECT_EQ(sys.swap_map_byte(swp_entry(0, 700)), SWAP_MAP_BAD);
  ASSERT_TRUE(sys.swap_duplicate(e).ok());
  ASSERT_TRUE(sys.put_swap_page(e).ok());
  expect(sys.put_swap_page(e), ENOENT, "no SWAP_HAS_CACHE");
  EXPECT_EQ(sys.swap_map_byte(e), 1);
  EXPECT_EQ(sys.area(0)->inuse_pages(), sys.slot_cache_active() ? 64u : 1u);
  EXPECT_TRUE(sys.check_invariants().ok()) << sys.check_invariants().to_string();
}

TEST_P(SwapModesTest, CountsPastSwapMapMaxContinue) {
  swap_system sys(opts());
  swap_area_options o;
  o.size_pages = 1024;
  ASSERT_TRUE(sys.swapon(o).ok());
  const swap_entry e = sys.get_swap_page();
  ASSERT_FALSE(e.empty());
  // Up through several carries and back down through several borrows, checking the exact count
  // and the byte's COUNT_CONTINUED flag at every step.
  const uint64_t top = 3 * (SWAP_MAP_MAX + 1) + 5;
  for (uint64_t c = 1; c <= top; ++c) {
    ASSERT_TRUE(sys.swap_duplicate(e).ok()) << c;
    ASSERT_EQ(*sys.swap_count(e), c);
    ASSERT_EQ((sys.swap_map_byte(e) & COUNT_CONTINUED) != 0, c > SWAP_MAP_MAX) << c;
    ASSERT_TRUE(sys.swap_map_byte(e) & SWAP_HAS_CACHE);
  }
  EXPECT_EQ(sys.area(0)->stats().continued_slots, 1u);
  EXPECT_TRUE(sys.check_invariants().ok()) << sys.check_invariants().to_string();
  ASSERT_TRUE(sys.put_swap_page(e).ok());
  for (uint64_t c = top; c >= 1; --c) {
    auto r = sys.swap_free(e);
    ASSERT_TRUE(r.ok()) << c;
    if (c > 1) {
      ASSERT_EQ(*sys.swap_count(e), c - 1);
      ASSERT_EQ((sys.swap_map_byte(e) & COUNT_CONTINUED) != 0, c - 1 > SWAP_MAP_MAX) << c;
    } else {
      EXPECT_EQ(*r, 0);
    }
  }
  sys.drain_swap_slots_cache();
  EXPECT_EQ(sys.swap_map_byte(e), 0);
  EXPECT_EQ(sys.area(0)->stats().continued_slots, 0u);
  EXPECT_TRUE(sys.check_invariants().ok()) << sys.check_invariants().to_string();
}

TEST_P(SwapModesTest, CountsPastSwapMapMaxFailWithoutContinuation) {
  swap_system sys(opts());
  swap_area_options o;
  o.size_pages = 1024;
  o.count_continuation = false;
  ASSERT_TRUE(sys.swapon(o).ok());
  const swap_entry e = sys.get_swap_page();
  for (unsigned c = 1; c <= SWAP_MAP_MAX; ++c) ASSERT_TRUE(sys.swap_duplicate(e).ok()) << c;
  const status st = sys.swap_duplicate(e);
  EXPECT_EQ(st.code(), ENOMEM);
  EXPECT_NE(st.message().find("SWAP_MAP_MAX"), std::string::npos) << st.to_string();
  EXPECT_EQ(*sys.swap_count(e), SWAP_MAP_MAX) << "a refused duplicate leaves the count";
  EXPECT_EQ(sys.swap_map_byte(e), SWAP_HAS_CACHE | SWAP_MAP_MAX);
  EXPECT_TRUE(sys.check_invariants().ok()) << sys.check_invariants().to_string();
}

TEST_P(SwapModesTest, FullAreaReturnsTheEmptyEntryAndEverySlotIsReusable) {
  swap_system sys(opts());
  swap_area_options o;
  o.size_pages = 5 * SWAPFILE_CLUSTER + 17;
  o.bad_pages = {3, 600};
  ASSERT_TRUE(sys.swapon(o).ok());
  swap_area* a = sys.area(0);
  for (int round = 0; round < 2; ++round) {
    std::set<uint64_t> got;
    for (;;) {
      const swap_entry e = sys.get_swap_page();
      if (e.empty()) break;
      ASSERT_EQ(swp_type(e), 0u);
      ASSERT_NE(swp_offset(e), 0u);
      ASSERT_NE(swp_offset(e), 3u);
      ASSERT_NE(swp_offset(e), 600u);
      ASSERT_TRUE(got.insert(swp_offset(e)).second) << "slot handed out twice: " << to_string(e);
      ASSERT_LE(got.size(), a->pages());
    }
    EXPECT_EQ(got.size(), a->pages()) << "round " << round;
    EXPECT_TRUE(sys.get_swap_page().empty()) << "still full";
    swap_entry batch[8];
    EXPECT_EQ(sys.get_swap_pages(8, batch), 0);
    EXPECT_EQ(a->inuse_pages(), a->pages());
    EXPECT_EQ(sys.nr_swap_pages(), 0u);
    EXPECT_TRUE(sys.check_invariants().ok()) << sys.check_invariants().to_string();
    // One slot freed is the one handed out next.
    const swap_entry one = swp_entry(0, *std::next(got.begin(), 100));
    ASSERT_TRUE(sys.put_swap_page(one).ok());
    sys.drain_swap_slots_cache();
    EXPECT_EQ(sys.get_swap_page(), one);
    for (uint64_t off : got) ASSERT_TRUE(sys.put_swap_page(swp_entry(0, off)).ok());
    sys.drain_swap_slots_cache();
    EXPECT_EQ(a->inuse_pages(), 0u);
    EXPECT_EQ(sys.nr_swap_pages(), a->pages());
    EXPECT_EQ(a->lowest_bit(), 1u);
    EXPECT_EQ(a->highest_bit(), o.size_pages - 1);
    ASSERT_TRUE(sys.check_invariants().ok()) << sys.check_invariants().to_string();
    const swap_area_stats s = a->stats();
    EXPECT_EQ(s.full_clusters + s.frag_clusters, 0u);
  }
}

TEST_P(SwapModesTest, BatchedAllocationTakesConsecutiveSlotsOfOneCluster) {
  swap_system sys(opts());
  swap_area_options o;
  o.size_pages = 16 * SWAPFILE_CLUSTER;
  ASSERT_TRUE(sys.swapon(o).ok());
  swap_entry out[SWAP_BATCH];
  ASSERT_EQ(sys.get_swap_pages(SWAP_BATCH, out), static_cast<int>(SWAP_BATCH));
  for (unsigned i = 1; i < SWAP_BATCH; ++i) {
    EXPECT_EQ(swp_offset(out[i]), swp_offset(out[i - 1]) + 1);
    EXPECT_EQ(swp_offset(out[i]) / SWAPFILE_CLUSTER, swp_offset(out[0]) / SWAPFILE_CLUSTER);
  }
  // A request larger than what is left of the current cluster continues in another cluster.
  std::vector<swap_entry> big(600);
  int got = 0;
  while (got < 600) {
    const int n = sys.get_swap_pages(600 - got, big.data() + got);
    ASSERT_GT(n, 0);
    got += n;
  }
  std::set<uint64_t> seen;
  for (auto e : out) seen.insert(e.val);
  for (auto e : big) ASSERT_TRUE(seen.insert(e.val).second);
  EXPECT_EQ(sys.area(0)->inuse_pages(), 600 + SWAP_BATCH);
  EXPECT_TRUE(sys.check_invariants().ok()) << sys.check_invariants().to_string();
}

TEST_P(SwapModesTest, HigherPriorityAreasAreUsedFirstEqualOnesInTurn) {
  swap_system sys(opts());
  swap_area_options low, high, a1, a2;
  low.size_pages = 2 * SWAPFILE_CLUSTER;
  low.priority = 5;
  high.size_pages = 2 * SWAPFILE_CLUSTER;
  high.priority = 10;
  ASSERT_EQ(*sys.swapon(low), 0u);
  ASSERT_EQ(*sys.swapon(high), 1u);
  // Every slot of the priority 10 area goes first, then the priority 5 area.
  std::vector<swap_entry> all;
  for (;;) {
    const swap_entry e = sys.get_swap_page();
    if (e.empty()) break;
    all.push_back(e);
  }
  ASSERT_EQ(all.size(), sys.area(0)->pages() + sys.area(1)->pages());
  // With a slot cache, a refill may take a batch from the first area before the second fills;
  // without one the switch is exact.
  const size_t first_low = static_cast<size_t>(
      std::find_if(all.begin(), all.end(), [](swap_entry e) { return swp_type(e) == 0; }) -
      all.begin());
  EXPECT_GE(first_low + SWAP_SLOTS_CACHE_SIZE, sys.area(1)->pages());
  if (!sys.slot_cache_enabled()) {
    EXPECT_EQ(first_low, sys.area(1)->pages());
  }

  swap_system eq(opts());
  a1.size_pages = a2.size_pages = 64 * SWAPFILE_CLUSTER;
  a1.priority = a2.priority = 7;
  ASSERT_TRUE(eq.swapon(a1).ok());
  ASSERT_TRUE(eq.swapon(a2).ok());
  std::map<unsigned, int> per_type;
  for (int i = 0; i < 2000; ++i) per_type[swp_type(eq.get_swap_page())]++;
  EXPECT_GE(per_type[0], 600) << "equal priorities share the load";
  EXPECT_GE(per_type[1], 600);

  // Without -p, areas get -1, -2, ...: the first one is used first.
  swap_system dflt(opts());
  swap_area_options d1, d2;
  d1.size_pages = d2.size_pages = 4 * SWAPFILE_CLUSTER;
  ASSERT_TRUE(dflt.swapon(d1).ok());
  ASSERT_TRUE(dflt.swapon(d2).ok());
  EXPECT_EQ(dflt.area(0)->priority(), -1);
  EXPECT_EQ(dflt.area(1)->priority(), -2);
  EXPECT_EQ(swp_type(dflt.get_swap_page()), 0u);
}

TEST_P(SwapModesTest, FreedClustersAreDiscardedExactlyOnce) {
  swap_system sys(opts());
  std::map<uint64_t, int> discards;  // cluster start -> calls
  std::vector<std::pair<uint64_t, uint64_t>> calls;
  swap_area_options o;
  o.size_pages = 4 * SWAPFILE_CLUSTER + 10;  // clusters 0..4, the last one short
  o.discard = true;
  swap_area* a = nullptr;
  o.discard_fn = [&](uint64_t off, uint64_t nr) {
    calls.emplace_back(off, nr);
    discards[off]++;
    // No slot of a cluster being discarded is in use.
    for (uint64_t s = off; s < off + nr; ++s) EXPECT_EQ(a->swap_map_byte(s), 0) << s;
  };
  ASSERT_TRUE(sys.swapon(o).ok());
  a = sys.area(0);
  std::vector<swap_entry> held;
  for (swap_entry e = sys.get_swap_page(); !e.empty(); e = sys.get_swap_page()) held.push_back(e);
  ASSERT_EQ(held.size(), a->pages());
  EXPECT_TRUE(calls.empty());
  // Free every slot of cluster 2: exactly one discard of [512, 768).
  for (swap_entry e : held)
    if (swp_offset(e) / SWAPFILE_CLUSTER == 2) {
      ASSERT_TRUE(sys.put_swap_page(e).ok());
    }
  sys.drain_swap_slots_cache();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0], std::make_pair(uint64_t{512}, uint64_t{SWAPFILE_CLUSTER}));
  EXPECT_TRUE(sys.check_invariants().ok()) << sys.check_invariants().to_string();
  // Free the rest: clusters 1 and 3 are discarded once each; cluster 0 (header) and cluster 4
  // (short) never become empty and are never discarded.
  for (swap_entry e : held)
    if (swp_offset(e) / SWAPFILE_CLUSTER != 2) {
      ASSERT_TRUE(sys.put_swap_page(e).ok());
    }
  sys.drain_swap_slots_cache();
  EXPECT_EQ(discards, (std::map<uint64_t, int>{{256, 1}, {512, 1}, {768, 1}}));
  swap_area_stats s = a->stats();
  EXPECT_EQ(s.clusters_discarded, 3u);
  EXPECT_EQ(s.clusters_freed, 3u);
  EXPECT_EQ(s.discard_clusters, 0u);
  EXPECT_EQ(s.free_clusters, 3u);
  EXPECT_EQ(a->inuse_pages(), 0u);
  ASSERT_TRUE(sys.check_invariants().ok()) << sys.check_invariants().to_string();
  // The discarded clusters are allocated again, and discarded again once freed again.
  held.clear();
  for (swap_entry e = sys.get_swap_page(); !e.empty(); e = sys.get_swap_page()) held.push_back(e);
  EXPECT_EQ(held.size(), a->pages());
  for (swap_entry e : held) ASSERT_TRUE(sys.put_swap_page(e).ok());
  sys.drain_swap_slots_cache();
  EXPECT_EQ(discards, (std::map<uint64_t, int>{{256, 2}, {512, 2}, {768, 2}}));
  s = a->stats();
  EXPECT_EQ(s.clusters_discarded, s.clusters_freed);
  ASSERT_TRUE(sys.check_invariants().ok()) << sys.check_invariants().to_string();
}

TEST_P(SwapModesTest, SlotFreeNotifyReportsEachFreedSlot) {
  swap_system sys(opts());
  std::vector<uint64_t> notified;
  swap_area_options o;
  o.size_pages = 8 * SWAPFILE_CLUSTER;
  o.slot_free_notify = [&](uint64_t off) { notified.push_back(off); };
  ASSERT_TRUE(sys.swapon(o).ok());
  std::vector<uint64_t> offs;
  for (int i = 0; i < 10; ++i) {
    const swap_entry e = sys.get_swap_page();
    ASSERT_TRUE(sys.swap_duplicate(e).ok());
    ASSERT_TRUE(sys.put_swap_page(e).ok());
    offs.push_back(swp_offset(e));
  }
  for (uint64_t off : offs) {
    auto r = sys.swap_free(swp_entry(0, off));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(*r, 0);
  }
  if (!sys.slot_cache_free_enabled()) {
    // No return cache: every slot was freed, and notified, by its swap_free.
    EXPECT_EQ(notified, offs);
  }
  sys.drain_swap_slots_cache();
  // Each freed slot once; with a slot cache the drain also frees (and notifies) the slots the
  // cache held but never handed out.
  std::map<uint64_t, int> times;
  for (uint64_t off : notified) times[off]++;
  for (uint64_t off : offs) EXPECT_EQ(times[off], 1) << off;
  for (auto [off, n] : times) {
    EXPECT_EQ(n, 1) << off;
    EXPECT_EQ(sys.swap_map_byte(swp_entry(0, off)), 0) << off;
  }
  if (!sys.slot_cache_enabled()) {
    EXPECT_EQ(notified.size(), offs.size());
  }
}

TEST_P(SwapModesTest, CurrentClustersOfDifferentThreadsStartInDifferentCacheLines) {
  swap_options so = opts();
  so.slot_cache = slot_cache_policy::off;  // one slot per thread, not a batch of 64
  swap_system sys(so);
  swap_area_options o;
  o.size_pages = 64 * SWAPFILE_CLUSTER;
  ASSERT_TRUE(sys.swapon(o).ok());
  // Threads that run one after another all hold their thread slot while the others exist, so
  // each gets its own current cluster.
  std::vector<uint32_t> clusters;
  std::vector<std::thread> threads;
  std::atomic<bool> release{false};
  std::atomic<int> done{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      while (done.load() != t) std::this_thread::yield();
      const swap_entry e = sys.get_swap_page();
      clusters.push_back(static_cast<uint32_t>(swp_offset(e) / SWAPFILE_CLUSTER));
      done.fetch_add(1);
      while (!release.load()) std::this_thread::yield();
    });
  }
  while (done.load() != 8) std::this_thread::yield();
  release.store(true);
  for (auto& th : threads) th.join();
  std::set<uint32_t> lines;
  for (uint32_t c : clusters) lines.insert(c / SWAP_CLUSTER_COLS);
  EXPECT_EQ(lines.size(), clusters.size()) << "first clusters share a cluster_info cache line";
}

// A second thread that stays alive, and so keeps its own thread slot (its "CPU"), while the test
// hands it one step at a time.
class other_cpu {
 public:
  other_cpu() : thread_([this] { loop(); }) {}
  ~other_cpu() {
    {
      std::lock_guard g(m_);
      quit_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void run(std::function<void()> fn) {
    std::unique_lock g(m_);
    job_ = std::move(fn);
    cv_.notify_all();
    cv_.wait(g, [&] { return !job_; });
  }

 private:
  void loop() {
    std::unique_lock g(m_);
    for (;;) {
      cv_.wait(g, [&] { return quit_ || job_; });
      if (quit_) return;
      job_();
      job_ = nullptr;
      cv_.notify_all();
    }
  }
  std::mutex m_;
  std::condition_variable cv_;
  std::function<void()> job_;
  bool quit_ = false;
  std::thread thread_;
};

uint32_t cluster_of(swap_entry e) {
  return static_cast<uint32_t>(swp_offset(e) / SWAPFILE_CLUSTER);
}

// n slots through get_swap_pages, in allocation order.
std::vector<swap_entry> take(swap_system& sys, int n) {
  std::vector<swap_entry> out(static_cast<size_t>(n));
  int got = 0;
  while (got < n) {
    const int k = sys.get_swap_pages(n - got, out.data() + got);
    if (k == 0) break;
    got += k;
  }
  out.resize(static_cast<size_t>(got));
  return out;
}

// Two CPUs on one area with the slot cache off, so that clusters are chosen call by call: this
// thread, and cpu_a.
struct two_cpus {
  two_cpus(swap_lock_mode m, bool freer_tag, unsigned clusters) : sys(options(m, freer_tag)) {
    swap_area_options o;
    o.size_pages = uint64_t{clusters} * SWAPFILE_CLUSTER;
    swapon = sys.swapon(o).ok();
    a = sys.area(0);
  }
  static swap_options options(swap_lock_mode m, bool freer_tag) {
    swap_options so;
    so.lock_mode = m;
    so.slot_cache = slot_cache_policy::off;
    so.freer_tag = freer_tag;
    return so;
  }
  // This CPU fills cluster 0 (the header's), so that its next allocation needs a new cluster;
  // CPU A fills two free clusters W and X, then frees X's first ten slots, as a swap-in would.
  void a_starts_draining_x() {
    ASSERT_TRUE(swapon);
    ASSERT_EQ(take(sys, SWAPFILE_CLUSTER - 1).size(), size_t{SWAPFILE_CLUSTER - 1});
    cpu_a.run([&] {
      a_slots = take(sys, 2 * SWAPFILE_CLUSTER);
      for (size_t i = x_first; i < x_first + 10 && i < a_slots.size(); ++i)
        ASSERT_TRUE(sys.put_swap_page(a_slots[i]).ok());
    });
    ASSERT_EQ(a_slots.size(), 2u * SWAPFILE_CLUSTER);
    x = cluster_of(a_slots[x_first]);
    ASSERT_EQ(cluster_of(a_slots.back()), x);
    ASSERT_NE(cluster_of(a_slots[0]), x);
    ASSERT_EQ(a->cluster_list(CLUSTER_FLAG_NONFULL), std::vector<uint32_t>{x});
  }

  static constexpr size_t x_first = SWAPFILE_CLUSTER;  // a_slots[x_first ..] are X's
  swap_system sys;
  bool swapon = false;
  swap_area* a = nullptr;
  other_cpu cpu_a;  // after sys: its thread ends first
  std::vector<swap_entry> a_slots;
  uint32_t x = 0;
};

// Swap-in on one CPU frees slots front to back in the cluster it made nonfull; an allocator on
// another CPU that needs a new cluster takes a free one rather than allocate behind the freer,
// and takes the partly used one once its freer stopped freeing into it, or when no free cluster
// is left. The freeing CPU itself reuses its own nonfull cluster first.
TEST(FreerTag, ANewClusterIsNotOneAnotherCpuIsFreeingInto) {
  for (swap_lock_mode m : testing::all_modes) {
    SCOPED_TRACE(to_string(m));
    two_cpus t(m, true, 8);
    ASSERT_NO_FATAL_FAILURE(t.a_starts_draining_x());
    const uint32_t x = t.x;
    const size_t x_first = two_cpus::x_first;
    ASSERT_NE(swap_area_test_access::freer(*t.a, x), 0u);

    // This CPU needs a new cluster: not X, which A is freeing into; X loses its tag.
    std::vector<swap_entry> b = take(t.sys, SWAPFILE_CLUSTER);
    ASSERT_EQ(b.size(), size_t{SWAPFILE_CLUSTER});
    const uint32_t f = cluster_of(b.back());
    for (swap_entry e : b) EXPECT_NE(cluster_of(e), x);
    EXPECT_EQ(t.a->cluster_list(CLUSTER_FLAG_NONFULL), std::vector<uint32_t>{x});
    EXPECT_EQ(swap_area_test_access::freer(*t.a, x), 0u);
    // A frees into X again: passed over again.
    t.cpu_a.run([&] { ASSERT_TRUE(t.sys.put_swap_page(t.a_slots[x_first + 10]).ok()); });
    std::vector<swap_entry> c = take(t.sys, SWAPFILE_CLUSTER);
    for (swap_entry e : c) {
      EXPECT_NE(cluster_of(e), x);
      EXPECT_NE(cluster_of(e), f) << "F is full";
    }
    // A has not freed into X since it was last passed over: now it is taken, its freed slots
    // first.
    std::vector<swap_entry> d = take(t.sys, 11);
    ASSERT_EQ(d.size(), 11u);
    for (size_t i = 0; i < d.size(); ++i) EXPECT_EQ(d[i].val, t.a_slots[x_first + i].val);

    // A frees into W and needs a new cluster: its own nonfull one, though free ones are left.
    ASSERT_GT(t.a->cluster_list(CLUSTER_FLAG_FREE).size(), 0u);
    t.cpu_a.run([&] {
      ASSERT_TRUE(t.sys.put_swap_page(t.a_slots[0]).ok());
      std::vector<swap_entry> again = take(t.sys, 1);
      ASSERT_EQ(again.size(), 1u);
      EXPECT_EQ(again[0].val, t.a_slots[0].val);
    });
    EXPECT_TRUE(t.sys.check_invariants().ok()) << t.sys.check_invariants().to_string();
  }
}

TEST(FreerTag, WithNoFreeClusterLeftATaggedOneIsTaken) {
  for (swap_lock_mode m : testing::all_modes) {
    SCOPED_TRACE(to_string(m));
    two_cpus t(m, true, 3);
    ASSERT_TRUE(t.swapon);
    std::vector<swap_entry> all;
    t.cpu_a.run([&] { all = take(t.sys, 3 * SWAPFILE_CLUSTER); });
    ASSERT_EQ(all.size(), 3u * SWAPFILE_CLUSTER - 1) << "every slot but the header";
    ASSERT_TRUE(t.sys.get_swap_page().empty());
    t.cpu_a.run([&] { ASSERT_TRUE(t.sys.put_swap_page(all.back()).ok()); });
    ASSERT_EQ(t.a->cluster_list(CLUSTER_FLAG_NONFULL).size(), 1u);
    const swap_entry e = t.sys.get_swap_page();
    EXPECT_EQ(e.val, all.back().val) << "the area is not full: the tagged cluster is taken";
    EXPECT_TRUE(t.sys.check_invariants().ok()) << t.sys.check_invariants().to_string();
  }
}

TEST(FreerTag, OffGivesTheKernelsOrder) {
  for (swap_lock_mode m : testing::all_modes) {
    SCOPED_TRACE(to_string(m));
    two_cpus t(m, false, 8);
    ASSERT_NO_FATAL_FAILURE(t.a_starts_draining_x());
    EXPECT_EQ(swap_area_test_access::freer(*t.a, t.x), 0u) << "no tag is written";
    std::vector<swap_entry> b = take(t.sys, SWAPFILE_CLUSTER);
    ASSERT_EQ(b.size(), size_t{SWAPFILE_CLUSTER});
    EXPECT_EQ(b[0].val, t.a_slots[two_cpus::x_first].val)
        << "the nonfull cluster first, whoever frees into it";
    EXPECT_TRUE(t.sys.check_invariants().ok()) << t.sys.check_invariants().to_string();
  }
}

}  // namespace
}  // namespace uswap
