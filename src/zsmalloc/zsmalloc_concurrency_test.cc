// zsmalloc under many threads (more than the machine's 2 cores) with compaction running: objects
// of every size class allocated, written, read back and freed; shared objects read by every
// thread while compaction moves them; a memory limit hit from many threads at once.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "uswap/zsmalloc/zsmalloc.h"
#include "uswap_testing/threads.h"
#include "zs_test_util.h"

namespace uswap {
namespace {

using zs_test::read_ok;
using zs_test::write_obj;

constexpr int ops_per_thread = 20000 / testing::work_scale_by(6);

struct obj {
  zs_handle h;
  size_t n;
  uint64_t seed;
};

TEST(ZsmallocConcurrency, SixteenThreadsAllocWriteReadFreeEveryClassWhileCompacting) {
  auto p = zs_create_pool("stress");
  ASSERT_TRUE(p.ok());
  zs_pool& pool = **p;
  constexpr int nr_threads = 16;
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::atomic<uint64_t> compactions{0}, pages_compacted{0};

  // The compactor and a statistics reader run until the workers finish.
  std::thread compactor([&] {
    while (!stop.load()) {
      pages_compacted += pool.compact();
      ++compactions;
      std::this_thread::yield();
    }
  });
  std::thread observer([&] {
    while (!stop.load()) {
      for (const auto& c : pool.class_stats()) {
        if (c.obj_used > c.obj_allocated || c.obj_allocated % c.objs_per_zspage) ++failures;
      }
      std::this_thread::yield();
    }
  });

  std::vector<std::thread> workers;
  for (int t = 0; t < nr_threads; ++t) {
    workers.emplace_back([&, t] {
      std::vector<obj> mine;
      uint64_t rng = mix64(t + 1);
      for (int op = 0; op < ops_per_thread; ++op) {
        rng = mix64(rng);
        const unsigned what = rng % 100;
        if (what < 45 || mine.empty()) {
          // Walk sizes so that every size class is hit by every thread.
          const size_t n = 1 + (uint64_t(op) * 16 + t * 7 + (rng >> 40) % 16) % page_size;
          auto h = pool.malloc(n);
          if (!h.ok()) { ++failures; continue; }
          const uint64_t seed = rng;
          if (!write_obj(pool, *h, n, seed).ok()) ++failures;
          mine.push_back({*h, n, seed});
        } else if (what < 80) {
          const obj& o = mine[(rng >> 20) % mine.size()];
          if (!read_ok(pool, o.h, o.n, o.seed)) ++failures;
        } else {
          const size_t k = (rng >> 20) % mine.size();
          if (!read_ok(pool, mine[k].h, mine[k].n, mine[k].seed)) ++failures;
          if (!pool.free(mine[k].h).ok()) ++failures;
          mine[k] = mine.back();
          mine.pop_back();
        }
      }
      for (const obj& o : mine) {
        if (!read_ok(pool, o.h, o.n, o.seed)) ++failures;
        if (!pool.free(o.h).ok()) ++failures;
      }
    });
  }
  for (auto& w : workers) w.join();
  stop = true;
  compactor.join();
  observer.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GT(compactions.load(), 0u);
  EXPECT_EQ(pool.objects_in_use(), 0u);
  EXPECT_EQ(pool.get_total_pages(), 0u);  // everything freed: no page left behind
  EXPECT_EQ(pool.pool_stats().pages_compacted, pages_compacted.load());
}

TEST(ZsmallocConcurrency, SharedObjectsReadByEveryThreadWhileCompactionMovesThem) {
  auto p = zs_create_pool("readers");
  ASSERT_TRUE(p.ok());
  zs_pool& pool = **p;
  constexpr int nr_readers = 16;
  // Under TSan, 3 rounds of half the objects: 16 spinning readers starve the compactor on 2 cores.
  constexpr int rounds = 20 / testing::work_scale_by(6);
  constexpr int objects = 3000 / testing::work_scale_by(2);
  std::atomic<int> failures{0};
  std::atomic<uint64_t> freed_total{0};

  for (int round = 0; round < rounds; ++round) {
    // Shared objects interleaved with filler; freeing the filler leaves sparse zspages, so the
    // compaction below has to move the shared objects while they are being read.
    std::vector<obj> shared, filler;
    for (int i = 0; i < objects; ++i) {
      const size_t n = 100 + (i * 131 + round) % 3000;
      auto h = pool.malloc(n);
      ASSERT_TRUE(h.ok());
      ASSERT_TRUE(write_obj(pool, *h, n, i * 7 + round).ok());
      (i % 3 == 0 ? shared : filler).push_back({*h, n, uint64_t(i * 7 + round)});
    }
    for (const obj& o : filler) ASSERT_TRUE(pool.free(o.h).ok());

    std::atomic<bool> done{false};
    std::vector<std::thread> readers;
    for (int t = 0; t < nr_readers; ++t) {
      readers.emplace_back([&, t] {
        size_t k = t * 97;
        while (!done.load(std::memory_order_relaxed)) {
          const obj& o = shared[k++ % shared.size()];
          if (!read_ok(pool, o.h, o.n, o.seed)) ++failures;
        }
        for (const obj& o : shared)
          if (!read_ok(pool, o.h, o.n, o.seed)) ++failures;
      });
    }
    freed_total += pool.compact();
    done = true;
    for (auto& r : readers) r.join();
    for (const obj& o : shared) ASSERT_TRUE(pool.free(o.h).ok());
  }
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GT(freed_total.load(), 0u);  // compaction did move objects under the readers
  EXPECT_EQ(pool.get_total_pages(), 0u);
}

TEST(ZsmallocConcurrency, MemoryLimitFromManyThreadsNeverOvershootsAndKeepsObjects) {
  const uint64_t limit = 256;
  auto p = zs_create_pool("limited", {.mem_limit_pages = limit});
  ASSERT_TRUE(p.ok());
  zs_pool& pool = **p;
  constexpr int nr_threads = 12;
  std::atomic<int> failures{0}, enospc{0};
  std::atomic<bool> stop{false};
  std::thread watcher([&] {
    while (!stop.load())
      if (pool.get_total_pages() > limit) ++failures;
  });
  std::vector<std::vector<obj>> kept(nr_threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < nr_threads; ++t) {
    workers.emplace_back([&, t] {
      for (int i = 0;; ++i) {
        const size_t n = 300 + (i * 53 + t * 11) % 3500;
        auto h = pool.malloc(n);
        if (!h.ok()) {
          if (h.error().code() != ENOSPC) ++failures;
          ++enospc;
          break;
        }
        if (!write_obj(pool, *h, n, t * 100000 + i).ok()) ++failures;
        kept[t].push_back({*h, n, uint64_t(t * 100000 + i)});
      }
    });
  }
  for (auto& w : workers) w.join();
  stop = true;
  watcher.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(enospc.load(), nr_threads);
  EXPECT_LE(pool.get_total_pages(), limit);
  for (auto& v : kept)
    for (const obj& o : v) {
      EXPECT_TRUE(read_ok(pool, o.h, o.n, o.seed));
      ASSERT_TRUE(pool.free(o.h).ok());
    }
  EXPECT_EQ(pool.get_total_pages(), 0u);
}

}  // namespace
}  // namespace uswap
