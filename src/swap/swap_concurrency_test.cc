// Many more threads than cores allocate, duplicate, hand over and free swap slots in every lock
// mode, with and without slot caches; afterwards the invariant checker must pass (swap_map vs
// cluster counts vs inuse_pages, lists consistent), no slot may have been handed out twice,
// every freed slot must be allocatable again, and every freed cluster discarded exactly once.
#include <gtest/gtest.h>

#include <atomic>
#include <deque>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "swap_test_util.h"
#include "uswap/base/atomic_max.h"
#include "uswap/swap/swap_cache.h"
#include "uswap/swap/swap_system.h"

namespace uswap {
namespace {

using testing::mode_and_cache;
using testing::run_threads;
using testing::work_scale;

// What one thread knows about an entry it owns: the references it holds.
struct owned {
  swap_entry e;
  uint64_t count = 0;  // swap counts (page table references)
  bool cache = false;  // SWAP_HAS_CACHE
};

// A shadow of the swap_map: which slots are handed out. Setting a set flag means the allocator
// gave one slot to two owners.
struct shadow {
  explicit shadow(uint64_t slots) : taken(slots) {}
  std::vector<std::atomic<uint8_t>> taken;
  std::atomic<uint64_t> double_handouts{0};
  std::atomic<uint64_t> wrong_results{0};
  // Coverage: the highest count reached, allocations that found the area full.
  std::atomic<uint64_t> max_count{0};
  std::atomic<uint64_t> empty_results{0};

  void take(swap_entry e) {
    uint8_t expected = 0;
    if (!taken[swp_offset(e)].compare_exchange_strong(expected, 1)) double_handouts++;
  }
  void give_back(swap_entry e) { taken[swp_offset(e)].store(0); }
};

class SwapStressTest : public testing::mode_and_cache_test {
 protected:
  // Drops every reference of `o`. Before the last one goes the shadow flag is cleared: from
  // then on another thread may be handed the slot.
  static void release_all(swap_system& sys, shadow& sh, owned& o) {
    while (o.count > 0) {
      if (o.count == 1 && !o.cache) sh.give_back(o.e);
      auto r = sys.swap_free(o.e);
      if (!r.ok() || (*r == 0) != (o.count == 1 && !o.cache)) sh.wrong_results++;
      o.count--;
    }
    if (o.cache) {
      sh.give_back(o.e);
      if (!sys.put_swap_page(o.e).ok()) sh.wrong_results++;
      o.cache = false;
    }
  }

  // The stress body: random swap-out / fork / swap-in / munmap / hand-over steps.
  void stress(swap_system& sys, shadow& sh, int threads, int steps) {
    std::mutex handover_mu;
    std::deque<owned> handover;
    std::atomic<uint64_t> allocated{0};
    run_threads(threads, [&](int t) {
      std::mt19937_64 rng(static_cast<uint64_t>(t) * 7919 + 1);
      std::vector<owned> mine;
      swap_entry batch[16];
      for (int step = 0; step < steps; ++step) {
        const unsigned op = static_cast<unsigned>(rng() % 100);
        if (op < 25 || mine.empty()) {
          // swap-out: allocate one slot or a batch.
          int n = 0;
          if (op % 2) {
            batch[0] = sys.get_swap_page();
            n = batch[0].empty() ? 0 : 1;
          } else {
            n = sys.get_swap_pages(1 + static_cast<int>(rng() % 16), batch);
          }
          if (n == 0) sh.empty_results++;
          for (int i = 0; i < n; ++i) {
            sh.take(batch[i]);
            if (sys.swap_map_byte(batch[i]) != SWAP_HAS_CACHE) sh.wrong_results++;
            mine.push_back({batch[i], 0, true});
          }
          allocated += static_cast<uint64_t>(n);
          continue;
        }
        const size_t i = rng() % mine.size();
        owned& o = mine[i];
        if (op < 45) {
          // try_to_unmap / fork: more page table references; now and then a burst (a page
          // shared by many forked children) that goes past SWAP_MAP_MAX into the continuation.
          const int times = op < 27 ? 40 : 1;
          for (int k = 0; k < times && o.count < 400; ++k) {
            if (sys.swap_duplicate(o.e).ok()) {
              o.count++;
            } else {
              sh.wrong_results++;
            }
          }
          fetch_max(sh.max_count, o.count);
        } else if (op < 55) {
          // writeback done / swapcache_clear: drop the cache reference.
          if (o.cache && o.count > 0) {
            if (!sys.put_swap_page(o.e).ok()) sh.wrong_results++;
            o.cache = false;
          }
        } else if (op < 65) {
          // swap-in fault: claim SWAP_HAS_CACHE (EEXIST if held, ENOENT without a count).
          const status st = sys.swapcache_prepare(o.e);
          const int want = o.cache ? EEXIST : o.count ? 0 : ENOENT;
          if (st.code() != want) sh.wrong_results++;
          if (st.ok()) o.cache = true;
        } else if (op < 80) {
          // munmap of one mapping.
          if (o.count > 0) {
            const bool last = o.count == 1 && !o.cache;
            if (last) sh.give_back(o.e);
            auto r = sys.swap_free(o.e);
            if (!r.ok() || (*r == 0) != last) sh.wrong_results++;
            o.count--;
            if (last) {
              mine[i] = mine.back();
              mine.pop_back();
            }
          }
        } else if (op < 85) {
          // Exact count and cache flag.
          auto c = sys.swap_count(o.e);
          if (!c.ok() || *c != o.count) sh.wrong_results++;
          if (((sys.swap_map_byte(o.e) & SWAP_HAS_CACHE) != 0) != o.cache) sh.wrong_results++;
        } else if (op < 92) {
          // Hand the entry over to another thread (its cluster is now used by two threads).
          std::lock_guard g(handover_mu);
          handover.push_back(o);
          mine[i] = mine.back();
          mine.pop_back();
        } else if (op < 97) {
          std::lock_guard g(handover_mu);
          if (!handover.empty()) {
            mine.push_back(handover.front());
            handover.pop_front();
          }
        } else {
          release_all(sys, sh, o);
          mine[i] = mine.back();
          mine.pop_back();
        }
        // Keep each thread's holdings bounded so that the area fills but does not stay full.
        while (mine.size() > 96) {
          release_all(sys, sh, mine.front());
          mine.front() = mine.back();
          mine.pop_back();
        }
      }
      for (owned& o : mine) release_all(sys, sh, o);
    });
    for (owned& o : handover) release_all(sys, sh, o);
    EXPECT_GT(allocated.load(), 0u);
  }

  // After all references are gone: nothing in use, invariants hold, and every usable slot is
  // handed out exactly once more before the area reports full.
  static void verify_empty_and_reusable(swap_system& sys) {
    sys.drain_swap_slots_cache();
    for (unsigned t = 0; t < sys.nr_areas(); ++t) sys.area(t)->swap_do_scheduled_discard();
    ASSERT_TRUE(sys.check_invariants().ok()) << sys.check_invariants().to_string();
    for (unsigned t = 0; t < sys.nr_areas(); ++t) {
      EXPECT_EQ(sys.area(t)->inuse_pages(), 0u) << "area " << t;
      EXPECT_EQ(sys.area(t)->stats().continued_slots, 0u);
    }
    EXPECT_EQ(sys.nr_swap_pages(), sys.total_swap_pages());
    std::set<uint64_t> all;
    for (swap_entry e = sys.get_swap_page(); !e.empty(); e = sys.get_swap_page())
      ASSERT_TRUE(all.insert(e.val).second) << "handed out twice: " << to_string(e);
    EXPECT_EQ(all.size(), sys.total_swap_pages()) << "a freed slot was not reusable";
    for (uint64_t v : all) ASSERT_TRUE(sys.put_swap_page(swap_entry{v}).ok());
    sys.drain_swap_slots_cache();
    EXPECT_TRUE(sys.check_invariants().ok()) << sys.check_invariants().to_string();
  }
};

INSTANTIATE_TEST_SUITE_P(ModesAndCaches, SwapStressTest,
                         ::testing::ValuesIn(testing::every_mode_and_cache()),
                         testing::mode_and_cache_name());

TEST_P(SwapStressTest, SixteenThreadsShareOneArea) {
  swap_system sys(opts());
  swap_area_options o;
  o.size_pages = 24 * SWAPFILE_CLUSTER + 77;
  o.bad_pages = {5, 4000};
  ASSERT_TRUE(sys.swapon(o).ok());
  shadow sh(o.size_pages);
  stress(sys, sh, 16, 60000 / work_scale);
  EXPECT_EQ(sh.double_handouts.load(), 0u);
  EXPECT_EQ(sh.wrong_results.load(), 0u);
  EXPECT_GT(sh.max_count.load(), SWAP_MAP_MAX) << "no count went through the continuation";
  verify_empty_and_reusable(sys);
}

TEST_P(SwapStressTest, SixtyFourThreadsFillASmallArea) {
  // 64 threads holding up to 96 slots each want more than the area has: allocation fails
  // often, and must then return the empty entry rather than a used slot.
  swap_system sys(opts());
  swap_area_options o;
  o.size_pages = 12 * SWAPFILE_CLUSTER;
  ASSERT_TRUE(sys.swapon(o).ok());
  shadow sh(o.size_pages);
  stress(sys, sh, 64, 12000 / work_scale);
  EXPECT_EQ(sh.double_handouts.load(), 0u);
  EXPECT_EQ(sh.wrong_results.load(), 0u);
  EXPECT_GT(sh.empty_results.load(), 0u) << "the area never filled";
  verify_empty_and_reusable(sys);
}

TEST_P(SwapStressTest, AreasOfEqualAndDifferentPriority) {
  swap_system sys(opts());
  swap_area_options hi, eq1, eq2;
  hi.size_pages = 4 * SWAPFILE_CLUSTER;
  hi.priority = 20;
  eq1.size_pages = eq2.size_pages = 8 * SWAPFILE_CLUSTER;
  eq1.priority = eq2.priority = 3;
  ASSERT_TRUE(sys.swapon(hi).ok());
  ASSERT_TRUE(sys.swapon(eq1).ok());
  ASSERT_TRUE(sys.swapon(eq2).ok());
  std::atomic<uint64_t> wrong{0};
  std::atomic<uint64_t> by_type[3] = {};
  std::vector<std::vector<swap_entry>> held(16);
  run_threads(16, [&](int t) {
    std::mt19937 rng(static_cast<unsigned>(t));
    for (int step = 0; step < 6000 / work_scale; ++step) {
      if (held[t].size() < 120 && rng() % 3) {
        const swap_entry e = sys.get_swap_page();
        if (!e.empty()) {
          held[t].push_back(e);
          by_type[swp_type(e)]++;
        }
      } else if (!held[t].empty()) {
        const size_t i = rng() % held[t].size();
        if (!sys.put_swap_page(held[t][i]).ok()) wrong++;
        held[t][i] = held[t].back();
        held[t].pop_back();
      }
    }
  });
  EXPECT_EQ(wrong.load(), 0u);
  std::set<uint64_t> distinct;
  size_t total = 0;
  for (auto& h : held)
    for (swap_entry e : h) {
      distinct.insert(e.val);
      ++total;
    }
  EXPECT_EQ(distinct.size(), total) << "a slot is held by two threads";
  // What the threads hold is exactly what the areas count once the slot caches are drained.
  sys.drain_swap_slots_cache();
  EXPECT_EQ(sys.area(0)->inuse_pages() + sys.area(1)->inuse_pages() + sys.area(2)->inuse_pages(),
            total);
  EXPECT_TRUE(sys.check_invariants().ok()) << sys.check_invariants().to_string();
  // The threads want up to 1920 slots: the priority 20 area (1023) overflows into both equal
  // areas.
  EXPECT_GE(by_type[0].load(), sys.area(0)->pages());
  EXPECT_GT(by_type[1].load(), 0u);
  EXPECT_GT(by_type[2].load(), 0u);
  for (auto& h : held)
    for (swap_entry e : h) ASSERT_TRUE(sys.put_swap_page(e).ok());
  verify_empty_and_reusable(sys);
}

TEST_P(SwapStressTest, EveryFreedClusterIsDiscardedExactlyOnce) {
  swap_system sys(opts());
  const uint64_t clusters = 16;
  std::vector<std::atomic<int>> in_discard(clusters);
  std::vector<std::atomic<uint64_t>> discards(clusters);
  std::atomic<uint64_t> overlapping{0}, busy_slots{0};
  swap_area* a = nullptr;
  swap_area_options o;
  o.size_pages = clusters * SWAPFILE_CLUSTER;
  o.discard = true;
  o.discard_fn = [&](uint64_t off, uint64_t nr) {
    const uint64_t c = off / SWAPFILE_CLUSTER;
    int expected = 0;
    if (!in_discard[c].compare_exchange_strong(expected, 1)) overlapping++;
    for (uint64_t s = off; s < off + nr; ++s)
      if (a->swap_map_byte(s) != 0) busy_slots++;
    std::this_thread::yield();  // widen the window in which a second discard would overlap
    discards[c]++;
    in_discard[c].store(0);
  };
  ASSERT_TRUE(sys.swapon(o).ok());
  a = sys.area(0);
  // Threads allocate whole batches and free them soon, so clusters empty and refill all the
  // time.
  run_threads(16, [&](int t) {
    std::mt19937 rng(static_cast<unsigned>(t));
    std::vector<swap_entry> held;
    swap_entry batch[32];
    for (int step = 0; step < 3000 / work_scale; ++step) {
      if (held.size() < 200 && rng() % 2) {
        const int n = sys.get_swap_pages(32, batch);
        held.insert(held.end(), batch, batch + n);
      } else {
        for (int k = 0; k < 32 && !held.empty(); ++k) {
          ASSERT_TRUE(sys.put_swap_page(held.back()).ok());
          held.pop_back();
        }
      }
    }
    for (swap_entry e : held) ASSERT_TRUE(sys.put_swap_page(e).ok());
  });
  sys.drain_swap_slots_cache();
  a->swap_do_scheduled_discard();
  const swap_area_stats s = a->stats();
  uint64_t total = 0;
  for (auto& d : discards) total += d.load();
  EXPECT_EQ(overlapping.load(), 0u) << "a cluster was discarded by two threads at once";
  EXPECT_EQ(busy_slots.load(), 0u) << "a slot was allocated in a cluster being discarded";
  EXPECT_GT(s.clusters_freed, clusters) << "the test did not cycle clusters";
  EXPECT_EQ(s.clusters_discarded, s.clusters_freed);
  EXPECT_EQ(total, s.clusters_freed);
  EXPECT_EQ(discards[0].load(), 0u) << "the header's cluster is never free";
  EXPECT_EQ(s.discard_clusters, 0u);
  verify_empty_and_reusable(sys);
}

struct frame {
  std::atomic<int> refs{0};
  uint64_t contents = 0;
};

TEST_P(SwapStressTest, ConcurrentFaultsOnOneEntryReadItOnce) {
  swap_system sys(opts());
  swap_area_options o;
  o.size_pages = 16 * SWAPFILE_CLUSTER;
  ASSERT_TRUE(sys.swapon(o).ok());
  swap_cache<frame> cache(sys);
  const int entries = 200 / work_scale + 8;
  const int threads = 16;
  std::vector<swap_entry> es;
  for (int i = 0; i < entries; ++i) {
    const swap_entry e = sys.get_swap_page();
    ASSERT_FALSE(e.empty());
    // Swapped out, mapped by `threads` page tables.
    for (int k = 0; k < threads; ++k) ASSERT_TRUE(sys.swap_duplicate(e).ok());
    ASSERT_TRUE(sys.put_swap_page(e).ok());
    es.push_back(e);
  }
  std::vector<std::unique_ptr<frame>> frames;
  std::mutex frames_mu;
  std::vector<std::atomic<int>> reads(entries);
  std::vector<std::vector<frame*>> seen(threads, std::vector<frame*>(entries));
  std::atomic<uint64_t> failures{0};
  run_threads(threads, [&](int t) {
    for (int i = 0; i < entries; ++i) {
      struct source {
        std::vector<std::unique_ptr<frame>>& frames;
        std::mutex& frames_mu;
        std::atomic<int>& reads;
        bool pin(frame* f) {
          f->refs++;
          return true;
        }
        result<frame*> alloc() {
          auto f = std::make_unique<frame>();
          f->refs = 1;
          std::lock_guard g(frames_mu);
          frames.push_back(std::move(f));
          return frames.back().get();
        }
        status read(swap_entry e, frame* f) {
          reads++;
          f->contents = e.val;  // "read from the backing store"
          return {};
        }
        void release(frame* f) { f->refs = 0; }  // unused: stays in `frames` until the end
        bool stale() const { return false; }
      } src{frames, frames_mu, reads[i]};
      auto r = cache.read_swap_cache_async(es[i], src);
      if (!r.ok() || (*r)->contents != es[i].val) {
        failures++;
        continue;
      }
      seen[t][i] = *r;
      // This thread's PTE now maps the page.
      if (!sys.swap_free(es[i]).ok()) failures++;
    }
  });
  EXPECT_EQ(failures.load(), 0u);
  for (int i = 0; i < entries; ++i) {
    EXPECT_EQ(reads[i].load(), 1) << "entry " << i << " read more than once";
    for (int t = 1; t < threads; ++t) EXPECT_EQ(seen[t][i], seen[0][i]) << i;
    EXPECT_EQ(seen[0][i]->refs.load(), threads) << "one reference from the read, one per hit";
    // All mappings are gone: only the cache holds the slot; the page leaves the cache.
    EXPECT_EQ(sys.swap_map_byte(es[i]), SWAP_HAS_CACHE);
    ASSERT_TRUE(cache.delete_from_swap_cache(es[i], seen[0][i]).ok());
  }
  EXPECT_EQ(cache.size(), 0u);
  verify_empty_and_reusable(sys);
}

}  // namespace
}  // namespace uswap
