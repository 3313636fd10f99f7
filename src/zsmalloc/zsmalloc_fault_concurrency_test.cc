// zsmalloc under fault injection with threads (more than the machine's cores): a run of zspages or
// table segments is refused while threads allocate, write, read and free; each call succeeds or
// says ENOMEM, and no object is damaged.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "uswap/base/fault_inject.h"
#include "uswap/base/hash.h"
#include "uswap/zsmalloc/zsmalloc.h"
#include "uswap_testing/threads.h"
#include "zs_fault_test_util.h"

namespace uswap {
namespace {

using zs_test::expect_pool_consistent;
using zs_test::live_obj;
using zs_test::read_ok;
using zs_test::write_obj;

TEST(ZsmallocFaultConcurrency, RefusalsUnderContentionLoseNoObject) {
  constexpr int threads = 8;
  const int per_thread = 3000 / uswap::testing::work_scale;
  for (fault_point p : {fault_point::zs_malloc_page, fault_point::zs_meta}) {
    auto pool_r = zs_create_pool("fault-mt");
    ASSERT_TRUE(pool_r.ok());
    zs_pool& pool = **pool_r;
    std::mutex mu;
    std::map<zs_handle, live_obj> live;
    std::atomic<uint64_t> ops{0}, failed{0};
    // A window of refusals in the middle of the run, so that objects are stored before, during
    // and after it.
    fault_inject_arm(p, 5, ENOMEM, p == fault_point::zs_meta ? 20 : 50);
    uswap::testing::run_threads(threads, [&](int t) {
      std::vector<std::pair<zs_handle, live_obj>> mine;
      for (int i = 0; i < per_thread; ++i) {
        const uint64_t x =
            mix64((uint64_t(t) << 32) + i + (p == fault_point::zs_meta ? 1u << 20 : 0));
        const size_t len = 1 + x % page_size;
        ops.fetch_add(1);
        auto h = pool.malloc(len);
        if (!h.ok()) {
          EXPECT_EQ(h.error().code(), ENOMEM);
          failed.fetch_add(1);
          continue;
        }
        EXPECT_TRUE(write_obj(pool, *h, len, x).ok());
        mine.push_back({*h, {len, x}});
        if (x % 3 == 0) {
          EXPECT_TRUE(
              read_ok(pool, mine.front().first, mine.front().second.len, mine.front().second.seed));
          EXPECT_TRUE(pool.free(mine.front().first).ok());
          mine.erase(mine.begin());
        }
      }
      std::lock_guard g(mu);
      for (auto& m : mine) live.insert(m);
    });
    fault_inject_disarm_all();
    EXPECT_GE(fault_inject_failures(p), 1u) << to_string(p);
    expect_pool_consistent(pool, live.size());
    uint64_t verified = 0;
    for (const auto& [h, o] : live) {
      EXPECT_TRUE(read_ok(pool, h, o.len, o.seed));
      ++verified;
    }
    for (const auto& [h, o] : live) EXPECT_TRUE(pool.free(h).ok());
    EXPECT_EQ(pool.get_total_pages(), 0u);
    EXPECT_EQ(failed.load(), fault_inject_failures(p));
    std::printf(
        "fault-injection zsmalloc-concurrency %s: %d threads, operations %llu (failed %llu), "
        "objects verified %llu\n",
        std::string(to_string(p)).c_str(), threads, static_cast<unsigned long long>(ops.load()),
        static_cast<unsigned long long>(failed.load()), static_cast<unsigned long long>(verified));
  }
}

}  // namespace
}  // namespace uswap
