// The swap layer under fault injection (uswap/base/fault_inject.h): for every N a workload
// reaches, the N-th swap_map (at swapon, or a count continuation) or cluster_info allocation
// fails. swapon returns ENOMEM and adds no area; swap_duplicate returns ENOMEM and leaves the
// count as it was; check_invariants holds; every count acknowledged reads back (swap_count), and
// the failed work completes once the point is disarmed.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "uswap/base/fault_inject.h"
#include "uswap/swap/swap_system.h"
#include "uswap_testing/fault_sweep.h"
#include "uswap_testing/param_names.h"

namespace uswap {
namespace {

using uswap::testing::fault_run;
using uswap::testing::fault_sweep;

constexpr uint64_t area_pages[] = {1100, 700, 300};
constexpr int deep_entries = 4;  // entries whose count goes past SWAP_MAP_MAX
constexpr int deep_count = 200;  // their count: three carries into the continuation

fault_run swap_workload(swap_lock_mode mode) {
  fault_run r;
  swap_options so;
  so.lock_mode = mode;
  swap_system sys(so);
  std::vector<size_t> missing;  // areas whose swapon failed
  for (size_t a = 0; a < std::size(area_pages); ++a) {
    swap_area_options o;
    o.size_pages = area_pages[a];
    ++r.ops;
    auto t = sys.swapon(o);
    if (!t.ok()) {
      EXPECT_EQ(t.error().code(), ENOMEM) << t.error().to_string();
      ++r.failed;
      missing.push_back(a);
    }
  }
  // Every slot there is, each mapped once (count 1) after leaving the swap cache.
  std::map<swap_entry, uint64_t> counts;
  for (swap_entry e = sys.get_swap_page(); !e.empty(); e = sys.get_swap_page()) {
    EXPECT_TRUE(sys.swap_duplicate(e).ok());
    EXPECT_TRUE(sys.put_swap_page(e).ok());
    counts[e] = 1;
  }
  // A few entries shared by many page tables: past SWAP_MAP_MAX, into the continuation.
  int deep = 0;
  for (auto& [e, c] : counts) {
    if (deep++ == deep_entries) break;
    for (int i = 1; i < deep_count; ++i) {
      ++r.ops;
      const status st = sys.swap_duplicate(e);
      if (st.ok()) {
        ++c;
        continue;
      }
      EXPECT_EQ(st.code(), ENOMEM) << st.to_string();
      ++r.failed;
    }
  }
  fault_inject_disarm_all();
  {
    const status inv = sys.check_invariants();
    EXPECT_TRUE(inv.ok()) << inv.to_string();
  }
  for (const auto& [e, c] : counts) {
    auto n = sys.swap_count(e);
    EXPECT_TRUE(n.ok() && *n == c) << "entry " << e.val;
    ++r.pages_verified;
  }
  // The work completes: the areas refused come up, the counts reach what was asked.
  for (size_t a : missing) {
    swap_area_options o;
    o.size_pages = area_pages[a];
    EXPECT_TRUE(sys.swapon(o).ok());
  }
  uint64_t usable = 0;
  for (uint64_t p : area_pages) usable += p - 1;  // slot 0 is the header
  EXPECT_EQ(sys.total_swap_pages(), usable);
  for (swap_entry e = sys.get_swap_page(); !e.empty(); e = sys.get_swap_page()) {
    EXPECT_TRUE(sys.swap_duplicate(e).ok());
    EXPECT_TRUE(sys.put_swap_page(e).ok());
    counts[e] = 1;
  }
  EXPECT_EQ(counts.size(), usable);
  deep = 0;
  for (auto& [e, c] : counts) {
    if (deep++ == deep_entries) break;
    for (; c < deep_count; ++c) EXPECT_TRUE(sys.swap_duplicate(e).ok());
  }
  for (auto& [e, c] : counts) {
    auto n = sys.swap_count(e);
    EXPECT_TRUE(n.ok() && *n == c) << "entry " << e.val;
    for (; c > 0; --c) EXPECT_TRUE(sys.swap_free(e).ok());
  }
  sys.drain_swap_slots_cache();
  const status inv = sys.check_invariants();
  EXPECT_TRUE(inv.ok()) << inv.to_string();
  EXPECT_EQ(sys.nr_swap_pages(), usable);
  return r;
}

class SwapFaultTest : public ::testing::TestWithParam<swap_lock_mode> {};

TEST_P(SwapFaultTest, RefusedSwapMapFailsOnlyItsSwaponOrDuplicate) {
  const auto rep =
      fault_sweep(std::string("swap-") + std::string(to_string(GetParam())), fault_point::swap_map,
                  ENOMEM, [&] { return swap_workload(GetParam()); });
  EXPECT_EQ(rep.failed, rep.tried);
}

TEST_P(SwapFaultTest, RefusedClusterInfoFailsOnlyItsSwapon) {
  const auto rep =
      fault_sweep(std::string("swap-") + std::string(to_string(GetParam())),
                  fault_point::cluster_info, ENOMEM, [&] { return swap_workload(GetParam()); });
  EXPECT_EQ(rep.failed, rep.tried);
}

INSTANTIATE_TEST_SUITE_P(Modes, SwapFaultTest,
                         ::testing::Values(swap_lock_mode::global, swap_lock_mode::cluster,
                                           swap_lock_mode::percpu),
                         uswap::testing::to_string_name{});

}  // namespace
}  // namespace uswap
