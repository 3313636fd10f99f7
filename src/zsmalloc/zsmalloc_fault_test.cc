// zsmalloc under fault injection (uswap/base/fault_inject.h): the N-th zspage or table segment
// refused, for every N a workload reaches. A refused zs_malloc returns ENOMEM and changes
// nothing; every object allocated before or after reads back as written; the pool's accounting
// (get_total_pages against the class statistics) holds, and freeing everything leaves 0 pages.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "uswap/base/fault_inject.h"
#include "uswap/base/hash.h"
#include "uswap/zsmalloc/zsmalloc.h"
#include "uswap_testing/fault_sweep.h"
#include "zs_fault_test_util.h"

namespace uswap {
namespace {

using uswap::testing::fault_run;
using uswap::testing::fault_sweep;
using zs_test::expect_pool_consistent;
using zs_test::live_obj;
using zs_test::read_ok;
using zs_test::write_obj;

// Sizes over every class, from the seed; some objects freed as it goes, then compaction.
fault_run pool_workload() {
  fault_run r;
  auto pool_r = zs_create_pool("fault");
  EXPECT_TRUE(pool_r.ok());
  if (!pool_r.ok()) return r;
  zs_pool& pool = **pool_r;
  std::map<zs_handle, live_obj> live;
  constexpr int nr_ops = 1500;
  for (int i = 0; i < nr_ops; ++i) {
    const uint64_t x = mix64(i);
    const size_t len = 1 + x % page_size;
    ++r.ops;
    auto h = pool.malloc(len);
    if (!h.ok()) {
      EXPECT_EQ(h.error().code(), ENOMEM) << h.error().to_string();
      ++r.failed;
      continue;
    }
    EXPECT_TRUE(write_obj(pool, *h, len, x).ok());
    live[*h] = {len, x};
    if (x % 5 == 0) {  // free an older one
      auto it = live.begin();
      std::advance(it, static_cast<long>((x >> 8) % live.size()));
      EXPECT_TRUE(pool.free(it->first).ok());
      live.erase(it);
    }
  }
  fault_inject_disarm_all();
  expect_pool_consistent(pool, live.size());
  pool.compact();
  expect_pool_consistent(pool, live.size());
  // After disarming the work completes: as many objects again, all of them succeed.
  for (int i = 0; i < 200; ++i) {
    const uint64_t x = mix64(nr_ops + i);
    const size_t len = 1 + x % page_size;
    auto h = pool.malloc(len);
    EXPECT_TRUE(h.ok()) << h.error().to_string();
    if (!h.ok()) continue;
    EXPECT_TRUE(write_obj(pool, *h, len, x).ok());
    live[*h] = {len, x};
  }
  for (const auto& [h, o] : live) {
    EXPECT_TRUE(read_ok(pool, h, o.len, o.seed)) << "handle " << h;
    ++r.pages_verified;
  }
  for (const auto& [h, o] : live) EXPECT_TRUE(pool.free(h).ok());
  expect_pool_consistent(pool, 0);
  EXPECT_EQ(pool.get_total_pages(), 0u);
  return r;
}

TEST(ZsmallocFault, RefusedZspagePagesFailOnlyTheirAllocation) {
  const auto rep = fault_sweep("zsmalloc", fault_point::zs_malloc_page, ENOMEM, pool_workload);
  EXPECT_EQ(rep.failed, rep.tried);  // each refused zspage is one zs_malloc's ENOMEM
}

TEST(ZsmallocFault, RefusedTableSegmentsFailOnlyTheirAllocation) {
  const auto rep = fault_sweep("zsmalloc", fault_point::zs_meta, ENOMEM, pool_workload);
  EXPECT_EQ(rep.failed, rep.tried);
}

}  // namespace
}  // namespace uswap
