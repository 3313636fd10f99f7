// The zsmalloc fault-injection tests' shared checks: what a test holds, and the pool's
// accounting checked against it through the public statistics.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>

#include "uswap/zsmalloc/zsmalloc.h"
#include "zs_test_util.h"

namespace uswap::zs_test {

struct live_obj {
  size_t len;
  uint64_t seed;
};

// The header's invariants, from the public statistics: pages held are the classes' pages, no
// class uses more slots than it has, and the objects in use are the ones the caller holds.
inline void expect_pool_consistent(zs_pool& pool, uint64_t live) {
  uint64_t pages = 0, used = 0;
  for (const zs_class_stats& c : pool.class_stats()) {
    EXPECT_LE(c.obj_used, c.obj_allocated) << "class " << c.index;
    EXPECT_EQ(c.pages_used, c.obj_allocated / c.objs_per_zspage * c.pages_per_zspage)
        << "class " << c.index;
    pages += c.pages_used;
    used += c.obj_used;
  }
  EXPECT_EQ(pool.get_total_pages(), pages);
  EXPECT_EQ(used, live);
  EXPECT_EQ(pool.objects_in_use(), live);
}

}  // namespace uswap::zs_test
