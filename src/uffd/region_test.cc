// Single-threaded behaviour of pagers and regions, in both fault modes: contents survive
// eviction, the limit holds, zero pages cost nothing, clean pages are not compressed twice, the
// clock keeps written pages, system calls reach evicted pages (or fail as documented), memory
// is returned, bad input is refused without damage.
#include "uswap/uffd/region.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "uffd_test_util.h"

namespace uswap {
namespace {

using namespace uffd_test;

class RegionTest : public ::testing::TestWithParam<fault_mode> {
 protected:
  std::unique_ptr<region> make(uint64_t size, uint64_t limit, pager_options o = {}) {
    o.mode = GetParam();
    o.limit = limit;
    auto r = region::create(size, o);
    EXPECT_TRUE(r.ok()) << r.error().to_string();
    return r.ok() ? std::move(r).value() : nullptr;
  }
};

INSTANTIATE_TEST_SUITE_P(Modes, RegionTest,
                         ::testing::Values(fault_mode::sigbus, fault_mode::handler_thread),
                         mode_name());

TEST_P(RegionTest, SequentialWriteOfFourTimesTheLimitReadsBack) {
  auto r = make(16 * MiB, 4 * MiB);
  ASSERT_TRUE(r);
  auto* base = static_cast<uint8_t*>(r->data());
  const uint64_t pages = r->size() / page_size;
  for (uint64_t i = 0; i < pages; ++i) fill_page(base + i * page_size, i, 0);
  for (uint64_t i = 0; i < pages; ++i)
    ASSERT_TRUE(page_matches(base + i * page_size, i, 0)) << "page " << i;
  const pager_stats s = r->owner().stats();
  EXPECT_LE(s.peak_resident_pages, s.limit_pages) << describe(s);
  EXPECT_EQ(s.overcharges, 0u) << describe(s);
  EXPECT_GE(s.swap_outs, pages - s.limit_pages) << describe(s);
  EXPECT_GE(s.swap_ins, pages - s.limit_pages) << describe(s);
  EXPECT_GT(s.compressed_bytes, 0u);
  EXPECT_LT(s.compressed_bytes, s.swap_out_bytes) << "50%-compressible pages must shrink";
  EXPECT_LE(resident_pages(base, r->size()), s.limit_pages);
  EXPECT_TRUE(r->owner().check_invariants().ok()) << r->owner().check_invariants().to_string();
}

// Readahead follows a stream going down as well as one going up (CPython frees a list from its
// end): reading a swapped-out region either way costs a fraction of a fault per page.
TEST_P(RegionTest, ReadaheadFollowsStreamsGoingDownAndUp) {
  auto r = make(16 * MiB, 2 * MiB);
  ASSERT_TRUE(r);
  auto* base = static_cast<uint8_t*>(r->data());
  const uint64_t pages = r->size() / page_size;
  for (uint64_t i = 0; i < pages; ++i) fill_page(base + i * page_size, i, 0);
  for (const bool down : {true, false}) {
    const pager_stats before = r->owner().stats();
    for (uint64_t k = 0; k < pages; ++k) {
      const uint64_t i = down ? pages - 1 - k : k;
      ASSERT_TRUE(page_matches(base + i * page_size, i, 0)) << "page " << i;
    }
    const pager_stats after = r->owner().stats();
    const uint64_t ins = after.swap_ins - before.swap_ins;
    const uint64_t faults = after.faults - before.faults;
    EXPECT_GE(ins, pages / 2) << (down ? "down: " : "up: ") << describe(after);
    EXPECT_LT(faults * 3, ins) << (down ? "down: " : "up: ") << describe(after);
  }
  EXPECT_TRUE(r->owner().check_invariants().ok()) << r->owner().check_invariants().to_string();
}

// Swap-in fault-around: a fault on a swapped-out page of a cluster that took another swap-in
// fault shortly before reads the cluster's swapped pages around it with the same call; faults
// that never come back to a cluster read nothing ahead.
TEST_P(RegionTest, FaultAroundReadsARecentClusterOnly) {
  auto r = make(32 * MiB, 2 * MiB);
  ASSERT_TRUE(r);
  auto* base = static_cast<uint8_t*>(r->data());
  const uint64_t pages = r->size() / page_size;
  for (uint64_t i = 0; i < pages; ++i) fill_page(base + i * page_size, i, 0);
  std::mt19937_64 rng(7);
  auto shuffled = [&](uint64_t first, uint64_t n) {
    std::vector<uint64_t> v(n);
    for (uint64_t i = 0; i < n; ++i) v[i] = first + i;
    std::shuffle(v.begin(), v.end(), rng);
    return v;
  };
  // One page of each of 512 clusters, each cluster once: nothing is read ahead.
  pager_stats before = r->owner().stats();
  for (uint64_t c : shuffled(0, 512)) {
    const uint64_t i = c * 8 + 3;
    ASSERT_TRUE(page_matches(base + i * page_size, i, 0)) << "page " << i;
  }
  pager_stats after = r->owner().stats();
  EXPECT_GE(after.swap_ins - before.swap_ins, 500u) << describe(after);
  EXPECT_EQ(after.readahead_pages, before.readahead_pages) << describe(after);
  // Every page of 256 other clusters, scattered within each: the third fault in a cluster (on
  // page 3, after pages 0 and 7) reads its swapped neighbours, pages 1-6.
  before = after;
  constexpr uint64_t clusters = 256;
  for (uint64_t c : shuffled(512, clusters)) {
    for (uint64_t off : {0, 7, 3, 5, 1, 6, 2, 4}) {
      const uint64_t i = c * 8 + off;
      ASSERT_TRUE(page_matches(base + i * page_size, i, 0)) << "page " << i;
    }
  }
  after = r->owner().stats();
  const uint64_t ins = after.swap_ins - before.swap_ins;
  const uint64_t faults = after.faults - before.faults;
  EXPECT_GE(ins, clusters * 8 - 8) << describe(after);
  EXPECT_LE(faults, clusters * 3 + 8) << describe(after);
  EXPECT_GE(after.readahead_pages - before.readahead_pages, clusters * 5 - 8) << describe(after);
  for (uint64_t i = 0; i < pages; ++i)
    ASSERT_TRUE(page_matches(base + i * page_size, i, 0)) << "page " << i;
  EXPECT_TRUE(r->owner().check_invariants().ok()) << r->owner().check_invariants().to_string();
}

TEST_P(RegionTest, RandomReadsAndWritesMatchAShadowCopy) {
  auto r = make(8 * MiB, 1 * MiB);
  ASSERT_TRUE(r);
  auto* base = static_cast<uint8_t*>(r->data());
  const uint64_t pages = r->size() / page_size;
  std::vector<uint64_t> version(pages, UINT64_MAX);  // UINT64_MAX: never written (zeros)
  std::mt19937_64 rng(42);
  const int ops = 6000;
  for (int k = 0; k < ops; ++k) {
    const uint64_t p = rng() % pages;
    uint8_t* addr = base + p * page_size;
    if (rng() % 3 == 0) {
      version[p] = version[p] == UINT64_MAX ? 0 : version[p] + 1;
      fill_page(addr, p, version[p]);
    } else if (version[p] == UINT64_MAX) {
      for (size_t w = 0; w < page_size; w += 512) ASSERT_EQ(addr[w], 0) << "page " << p;
    } else {
      ASSERT_TRUE(page_matches(addr, p, version[p])) << "page " << p << " op " << k;
    }
  }
  const pager_stats s = r->owner().stats();
  EXPECT_LE(s.peak_resident_pages, s.limit_pages) << describe(s);
  EXPECT_GT(s.swap_ins, 0u) << describe(s);
  EXPECT_TRUE(r->owner().check_invariants().ok()) << r->owner().check_invariants().to_string();
}

TEST_P(RegionTest, NeverWrittenPagesReadAsZerosAndTakeNoSwap) {
  auto r = make(8 * MiB, 1 * MiB);
  ASSERT_TRUE(r);
  const auto* base = static_cast<const volatile uint64_t*>(r->data());
  uint64_t sum = 0;
  for (uint64_t i = 0; i < r->size() / 8; i += 64) sum |= base[i];
  EXPECT_EQ(sum, 0u);
  const pager_stats s = r->owner().stats();
  EXPECT_EQ(s.zero_fills, r->size() / page_size) << describe(s);
  EXPECT_EQ(s.swap_outs, 0u) << describe(s);
  EXPECT_GT(s.zero_evictions, 0u) << describe(s);
  EXPECT_EQ(s.swap_pages_used, 0u);
  EXPECT_TRUE(r->owner().check_invariants().ok()) << r->owner().check_invariants().to_string();
}

// The pager's tables grow with what it pages: metadata_bytes counts each 2 MiB chunk of the arena
// touched once (its state words, handles and clock links) and each swap slot seen in use, and
// keeps the most slots even when they are freed (the table pages stay).
TEST_P(RegionTest, MetadataBytesFollowTouchedChunksAndTheMostSlotsUsed) {
  auto r = make(16 * MiB, 1 * MiB);
  ASSERT_TRUE(r);
  const uint64_t before = r->owner().metadata_bytes();
  auto* base = static_cast<uint8_t*>(r->data());
  const uint64_t pages = r->size() / page_size;
  for (uint64_t i = 0; i < pages; ++i) fill_page(base + i * page_size, i, 0);
  const pager_stats s = r->owner().stats();
  ASSERT_GT(s.swap_pages_used, pages / 2) << describe(s);
  const uint64_t per_chunk = 512 * (8 + 8 + 4 + 4), chunks = r->size() / (2 * MiB);
  const uint64_t grown = r->owner().metadata_bytes() - before;
  EXPECT_GE(grown, chunks * per_chunk + s.swap_pages_used * 16);
  EXPECT_LE(grown, (chunks + 2) * per_chunk + s.swap_pages_used * 17);
  // Every page read back and rewritten: the slots are freed, the figure stays.
  for (uint64_t i = 0; i < pages; ++i) fill_page(base + i * page_size, i, 1);
  EXPECT_GE(r->owner().metadata_bytes(), before + grown);
  for (uint64_t i = 0; i < pages; ++i) ASSERT_TRUE(page_matches(base + i * page_size, i, 1));
}

TEST_P(RegionTest, CleanRefaultedPagesAreDroppedWithoutCompression) {
  auto r = make(4 * MiB, 1 * MiB);
  ASSERT_TRUE(r);
  auto* base = static_cast<uint8_t*>(r->data());
  const uint64_t pages = r->size() / page_size;
  for (uint64_t i = 0; i < pages; ++i) fill_page(base + i * page_size, i, 0);
  // Read-only passes: pages come back write-protected with their zram copy kept. After the
  // first pass (which still compresses the dirty pages left from the fill), evicting them again
  // compresses nothing.
  for (uint64_t i = 0; i < pages; ++i) ASSERT_TRUE(page_matches(base + i * page_size, i, 0));
  const uint64_t outs_after_first = r->owner().stats().swap_outs;
  for (uint64_t i = 0; i < pages; ++i) ASSERT_TRUE(page_matches(base + i * page_size, i, 0));
  pager_stats s = r->owner().stats();
  EXPECT_GT(s.clean_evictions, 0u) << describe(s);
  EXPECT_EQ(s.swap_outs, outs_after_first) << "a read-only pass must not compress: " << describe(s);
  // The last page read is still mapped, clean and write-protected: a write to it faults once on
  // the write-protection, frees its zram copy, and sticks.
  const uint64_t last = pages - 1;
  ASSERT_EQ(resident_pages(base + last * page_size, page_size), 1u);
  const uint64_t wp_before = s.wp_faults, used_before = s.swap_pages_used;
  fill_page(base + last * page_size, last, 1);
  s = r->owner().stats();
  EXPECT_EQ(s.wp_faults, wp_before + 1) << describe(s);
  EXPECT_EQ(s.swap_pages_used, used_before - 1);
  EXPECT_TRUE(page_matches(base + last * page_size, last, 1));
  for (uint64_t i = 0; i < last; ++i) ASSERT_TRUE(page_matches(base + i * page_size, i, 0));
  EXPECT_TRUE(page_matches(base + last * page_size, last, 1));
  EXPECT_TRUE(r->owner().check_invariants().ok()) << r->owner().check_invariants().to_string();
}

// The swap cache turned off by a phase of writes comes back when the program only reads again
// (redis-server's BGSAVE child after its parent's writes): a phase's verdict must not stand
// for the rest of the process's life.
TEST_P(RegionTest, SwapCacheComesBackWhenWritesStop) {
  pager_options o;
  o.readahead_max = 1;  // one read refault per page, the unit the verdict fades by
  auto r = make(4 * MiB, 1 * MiB, o);
  ASSERT_TRUE(r);
  auto* base = static_cast<uint8_t*>(r->data());
  const uint64_t pages = r->size() / page_size;
  for (uint64_t i = 0; i < pages; ++i) fill_page(base + i * page_size, i, 0);
  // Every page read, then written: the read refaults that kept their slots did so for nothing,
  // and after some 64 of them the others keep none. (Fewer than swapcache_fade read refaults
  // from here to the second read-only pass's end: the verdict has not faded yet.)
  for (uint64_t i = 0; i < pages; ++i) {
    ASSERT_TRUE(page_matches(base + i * page_size, i, 0)) << "page " << i;
    fill_page(base + i * page_size, i, 1);
  }
  const uint64_t version = 1;
  auto read_pass = [&] {
    const uint64_t outs = r->owner().stats().swap_outs;
    for (uint64_t i = 0; i < pages; ++i)
      if (!page_matches(base + i * page_size, i, version)) return UINT64_MAX;
    return r->owner().stats().swap_outs - outs;
  };
  // The first read-only pass evicts what the writes left dirty; the second shows the verdict:
  // its pages were mapped without their slots, so evicting them compresses them again.
  ASSERT_NE(read_pass(), UINT64_MAX);
  pager_stats s = r->owner().stats();
  const uint64_t second = read_pass();
  ASSERT_NE(second, UINT64_MAX);
  EXPECT_GE(second, pages / 2) << "the writes did not turn the swap cache off: " << describe(s);
  // Read-only passes until one compresses nothing: the verdict faded (4096 read refaults
  // without the cache halve its counters, and one halving turns it back on; 48 passes allowed).
  int passes = 0;
  uint64_t outs = second;
  while (outs != 0 && passes < 48) {
    outs = read_pass();
    ASSERT_NE(outs, UINT64_MAX) << "contents differ after " << passes << " passes";
    ++passes;
  }
  const pager_stats t = r->owner().stats();
  EXPECT_EQ(outs, 0u) << "the swap cache never came back: " << describe(t);
  EXPECT_GT(t.clean_evictions, s.clean_evictions) << describe(t);
  for (uint64_t i = 0; i < pages; ++i)
    ASSERT_TRUE(page_matches(base + i * page_size, i, version)) << "page " << i;
  EXPECT_TRUE(r->owner().check_invariants().ok()) << r->owner().check_invariants().to_string();
}

// The clock with write tracking keeps a page that is written all the time, while a stream of
// other pages passes through; without tracking the hot page is evicted whenever the hand finds
// it unreferenced (its refault then activates it, which buys it one more lap).
TEST_P(RegionTest, WriteTrackingKeepsAHotPageResident) {
  auto run = [&](bool track) {
    pager_options o;
    o.track_writes = track;
    o.readahead_max = 1;
    auto r = make(8 * MiB, 1 * MiB, o);
    auto* base = static_cast<volatile uint64_t*>(r->data());
    const uint64_t pages = r->size() / page_size;
    for (int lap = 0; lap < 3; ++lap) {
      for (uint64_t i = 1; i < pages; ++i) {
        base[i * (page_size / 8)] = i;
        base[0] = base[0] + 1;  // the hot page
      }
    }
    EXPECT_EQ(base[0], 3 * (pages - 1));
    // Every stream page is written once per lap: laps 2 and 3 swap each of them in once.
    // What remains are the hot page's own swap-ins.
    return r->owner().stats().swap_ins - 2 * (pages - 1);
  };
  const uint64_t with = run(true), without = run(false);
  EXPECT_LT(with, without) << "hot page swap-ins: tracked " << with << " untracked " << without;
  EXPECT_LE(with, 2u) << "the hot page should stay resident";
}

// Write tracking must pay for itself: a program that writes a little into every page it touches
// (reference counts), at random over twice its limit, would take a write-protect fault for
// nearly every resident page after each sweep while the references buy almost nothing (the
// working set does not fit). The sweep interval backs off until write-protect faults are a small
// share of the paging's own faults (12,923 against 21,128 faults when the rule allowed one per
// fault, 1,876 with 1/16, and the same swap-ins).
TEST_P(RegionTest, WriteTrackingBacksOffWhenTheWorkingSetDoesNotFit) {
  pager_options o;
  o.readahead_max = 1;
  auto r = make(4 * MiB, 2 * MiB, o);
  auto* base = static_cast<volatile uint64_t*>(r->data());
  const uint64_t pages = r->size() / page_size;
  std::mt19937_64 rng(7);
  for (uint64_t i = 0; i < 40 * pages; ++i) {
    const uint64_t p = rng() % pages;
    const uint64_t w = p * (page_size / 8) + (i % 8);
    base[w] = base[w] + 1;
  }
  const pager_stats s = r->owner().stats();
  EXPECT_GT(s.swap_ins, 10 * pages) << describe(s);
  EXPECT_GT(s.wp_sweeps, 1u) << describe(s);
  EXPECT_LE(s.wp_faults * 8, s.faults) << describe(s);
}

// The swap cache must pay too: a read refault keeps the page's slot (mapped write-protected) so
// that evicting it again unchanged costs nothing, but a program that writes what it has just read
// (reference counts again) turns every such refault into a write-protect fault as well. Once
// writes to swap-cache pages outnumber the evictions the kept copies spared, read refaults map
// pages writable.
TEST_P(RegionTest, ReadRefaultsStopKeepingSlotsWhenTheyAreWrittenAnyway) {
  pager_options o;
  o.track_writes = false;  // only the swap cache write-protects pages here
  o.readahead_max = 1;
  auto r = make(4 * MiB, 1 * MiB, o);
  auto* base = static_cast<volatile uint64_t*>(r->data());
  const uint64_t pages = r->size() / page_size;
  for (int lap = 0; lap < 6; ++lap)
    for (uint64_t p = 0; p < pages; ++p) {
      const uint64_t w = p * (page_size / 8);
      const uint64_t v = base[w];  // a read fault first
      base[w] = v + 1;             // then the write
    }
  for (uint64_t p = 0; p < pages; ++p) ASSERT_EQ(base[p * (page_size / 8)], 6u) << p;
  const pager_stats s = r->owner().stats();
  EXPECT_GT(s.swap_ins, 2 * pages) << describe(s);
  EXPECT_LT(s.wp_faults, s.swap_ins / 4) << describe(s);
}

// Write tracking by sweeps: random writes over a region four times its limit, each page written
// once. A page's victim turn comes two visits of the hand after its write, with sweeps in
// between, so its PTE is write-protected already and eviction needs no write-protect call of
// its own. Without write tracking there are no sweeps and every victim is protected by
// eviction itself. Contents survive either way.
TEST_P(RegionTest, VictimsCoveredByASweepNeedNoWriteProtectOfTheirOwn) {
  auto run = [&](bool track) {
    pager_options o;
    o.track_writes = track;
    o.reclaim_cluster = 1;  // victims the clock picked, not their neighbours mapped since
    auto r = make(8 * MiB, 1 * MiB, o);
    auto* base = static_cast<uint8_t*>(r->data());
    const uint64_t pages = r->size() / page_size;
    std::vector<uint64_t> order(pages);
    for (uint64_t i = 0; i < pages; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), std::mt19937_64(track ? 1 : 2));
    for (uint64_t p : order) fill_page(base + p * page_size, p, 0);
    for (uint64_t p = 0; p < pages; ++p) EXPECT_TRUE(page_matches(base + p * page_size, p, 0)) << p;
    EXPECT_TRUE(r->owner().check_invariants().ok()) << r->owner().check_invariants().to_string();
    return r->owner().stats();
  };
  const pager_stats with = run(true), without = run(false);
  EXPECT_GT(with.wp_sweeps, 2u) << describe(with);
  EXPECT_GT(with.swap_outs, 1000u) << describe(with);
  EXPECT_LT(with.evict_wp_pages * 8, with.swap_outs) << describe(with);
  EXPECT_EQ(without.wp_sweeps, 0u) << describe(without);
  EXPECT_GE(without.evict_wp_pages, without.swap_outs) << describe(without);
}

// Eviction takes a victim's neighbours in its window (reclaim_cluster) and write-protects the
// victims of a window with one ioctl, across the holes between them: pages written in random
// order over four times the limit, without write tracking (so every victim needs protecting),
// cost about one call per victim page by page and a fraction of that in windows of 16.
TEST_P(RegionTest, EvictionWriteProtectsAWindowsVictimsWithOneCall) {
  auto run = [&](unsigned cluster) {
    pager_options o;
    o.track_writes = false;
    o.reclaim_cluster = cluster;
    o.readahead_max = 1;  // no fault-around: the victims of the shuffled writes are scattered
    auto r = make(16 * MiB, 4 * MiB, o);
    auto* base = static_cast<uint8_t*>(r->data());
    const uint64_t pages = r->size() / page_size;
    std::vector<uint64_t> order(pages);
    for (uint64_t i = 0; i < pages; ++i) order[i] = i;
    std::mt19937_64 rng(cluster);
    for (int lap = 0; lap < 2; ++lap) {
      std::shuffle(order.begin(), order.end(), rng);
      for (uint64_t p : order) fill_page(base + p * page_size, p, lap);
    }
    for (uint64_t p = 0; p < pages; ++p) EXPECT_TRUE(page_matches(base + p * page_size, p, 1)) << p;
    EXPECT_TRUE(r->owner().check_invariants().ok()) << r->owner().check_invariants().to_string();
    return r->owner().stats();
  };
  const pager_stats single = run(1), windows = run(16);
  EXPECT_GT(single.swap_outs, 4000u) << describe(single);
  EXPECT_GT(windows.swap_outs, 4000u) << describe(windows);
  EXPECT_GE(single.evict_wp_pages, single.swap_outs) << describe(single);
  EXPECT_GE(single.evict_wp_calls * 4, single.evict_wp_pages * 3) << describe(single);
  EXPECT_LE(windows.evict_wp_calls * 4, windows.evict_wp_pages)
      << describe(windows) << " calls " << windows.evict_wp_calls;
}

// Waits (up to 30 s) until background reclaim has left at least `room` pages under the limit,
// then stops the thread and returns the statistics. The thread counts a pass's steals after the
// pass has uncharged its pages, so room can show before pgsteal_kswapd does (a thread preempted
// in between, as under a loaded CI): joining it settles every count.
pager_stats wait_for_room(pager& pg, uint64_t room) {
  pager_stats s = pg.stats();
  for (int ms = 0; ms < 30'000 && s.resident_pages + room > s.limit_pages; ++ms) {
    const timespec one_ms{0, 1000 * 1000};
    ::nanosleep(&one_ms, nullptr);
    s = pg.stats();
  }
  pg.stop_background_reclaim();
  return pg.stats();
}

// Background reclaim: a writer that stops inside the low watermark (a few pages under the limit)
// never reaches the limit, so no fault reclaims; the pager's thread evicts below the watermark
// on its own, and every page reads back.
TEST_P(RegionTest, BackgroundReclaimMakesRoomBeforeTheLimitIsReached) {
  pager_options o;
  o.background_reclaim = true;
  o.readahead_max = 1;  // exactly one page per fault: nothing maps ahead towards the limit
  auto r = make(8 * MiB, 4 * MiB, o);
  ASSERT_TRUE(r);
  auto* base = static_cast<uint8_t*>(r->data());
  // 1024 pages: a reclaim pass of 32, the low watermark 32 pages of room, the high one 64.
  const uint64_t limit = r->owner().stats().limit_pages, filled = limit - 8;
  for (uint64_t i = 0; i < filled; ++i) fill_page(base + i * page_size, i, 0);
  const pager_stats s = wait_for_room(r->owner(), 32);
  EXPECT_LE(s.resident_pages + 32, limit) << describe(s);
  EXPECT_GE(s.kswapd_wakeups, 1u) << describe(s);
  EXPECT_GE(s.pgsteal_kswapd, 24u) << describe(s);
  EXPECT_EQ(s.pgsteal_direct, 0u) << "a fault reclaimed under the limit: " << describe(s);
  EXPECT_LE(s.peak_resident_pages, filled) << describe(s);
  EXPECT_EQ(s.swap_outs + s.clean_evictions + s.zero_evictions, s.pgsteal_kswapd) << describe(s);
  for (uint64_t i = 0; i < filled; ++i)
    ASSERT_TRUE(page_matches(base + i * page_size, i, 0)) << "page " << i;
  EXPECT_TRUE(r->owner().check_invariants().ok()) << r->owner().check_invariants().to_string();
}

// The thread is the pager's only one in sigbus mode, and stop_background_reclaim ends it for
// good (what unshare(CLONE_NEWUSER) needs): the process has its threads of before, and faults
// over the limit reclaim for themselves.
TEST_P(RegionTest, BackgroundReclaimIsOneThreadAndStopsForGood) {
  auto tasks = [] {
    uint64_t n = 0;
    if (DIR* d = ::opendir("/proc/self/task")) {
      while (const dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
      ::closedir(d);
    }
    return n;
  };
  uint64_t without = 0;
  {
    auto r = make(8 * MiB, 1 * MiB);
    ASSERT_TRUE(r);
    without = tasks();
  }
  pager_options on;
  on.background_reclaim = true;
  auto r = make(8 * MiB, 1 * MiB, on);
  ASSERT_TRUE(r);
  EXPECT_EQ(tasks(), without + 1);
  r->owner().stop_background_reclaim();
  r->owner().stop_background_reclaim();  // idempotent
  EXPECT_EQ(tasks(), without);
  auto* base = static_cast<uint8_t*>(r->data());
  const uint64_t pages = r->size() / page_size;
  for (uint64_t i = 0; i < pages; ++i) fill_page(base + i * page_size, i, 0);
  for (uint64_t i = 0; i < pages; ++i)
    ASSERT_TRUE(page_matches(base + i * page_size, i, 0)) << "page " << i;
  const pager_stats s = r->owner().stats();
  EXPECT_EQ(s.pgsteal_kswapd, 0u) << describe(s);
  EXPECT_GE(s.pgsteal_direct, pages - s.limit_pages) << describe(s);
  EXPECT_LE(s.peak_resident_pages, s.limit_pages) << describe(s);
  EXPECT_EQ(tasks(), without);
}

// A fork()ed child's pager starts a background reclaim thread of its own (the parent's is not
// copied): it makes room in the child, the parent's copy of the pages untouched.
TEST_P(RegionTest, AForkedChildReclaimsInTheBackgroundToo) {
  pager_options o;
  o.background_reclaim = true;
  o.readahead_max = 1;
  auto r = make(8 * MiB, 4 * MiB, o);
  ASSERT_TRUE(r);
  auto* base = static_cast<uint8_t*>(r->data());
  const uint64_t limit = r->owner().stats().limit_pages, filled = limit - 8;
  for (uint64_t i = 0; i < 64; ++i) fill_page(base + i * page_size, i, 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    for (uint64_t i = 0; i < filled; ++i) fill_page(base + i * page_size, i, 1);
    const pager_stats s = wait_for_room(r->owner(), 32);
    if (s.pgsteal_kswapd < 24 || s.pgsteal_direct != 0)
      std::fprintf(stderr, "child: %s\n", describe(s).c_str());
    if (s.pgsteal_kswapd < 24) ::_exit(1);
    if (s.pgsteal_direct != 0) ::_exit(2);
    for (uint64_t i = 0; i < filled; ++i)
      if (!page_matches(base + i * page_size, i, 1)) ::_exit(3);
    ::_exit(r->owner().check_invariants().ok() ? 0 : 4);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child died of signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "see the _exit codes in the child";
  for (uint64_t i = 0; i < 64; ++i)
    ASSERT_TRUE(page_matches(base + i * page_size, i, 0)) << "page " << i;
  EXPECT_EQ(r->owner().stats().pgsteal_kswapd, 0u);
}

TEST_P(RegionTest, DiscardReadsZerosAndFreesSlots) {
  auto r = make(4 * MiB, 1 * MiB);
  ASSERT_TRUE(r);
  auto* base = static_cast<uint8_t*>(r->data());
  const uint64_t pages = r->size() / page_size;
  for (uint64_t i = 0; i < pages; ++i) fill_page(base + i * page_size, i, 0);
  const uint64_t used = r->owner().stats().swap_pages_used;
  ASSERT_GT(used, 0u);
  // Discard the first half: evicted and resident pages alike.
  ASSERT_TRUE(r->discard(base, r->size() / 2).ok());
  EXPECT_LT(r->owner().stats().swap_pages_used, used);
  for (uint64_t i = 0; i < pages / 2; ++i)
    for (size_t w = 0; w < page_size; w += 256) ASSERT_EQ(base[i * page_size + w], 0) << i;
  for (uint64_t i = pages / 2; i < pages; ++i) ASSERT_TRUE(page_matches(base + i * page_size, i, 0));
  EXPECT_TRUE(r->owner().check_invariants().ok()) << r->owner().check_invariants().to_string();
  // Bad ranges change nothing.
  EXPECT_EQ(r->discard(base + 100, page_size).code(), EINVAL);
  EXPECT_EQ(r->discard(base, r->size() + page_size).code(), EINVAL);
  EXPECT_TRUE(page_matches(base + (pages - 1) * page_size, pages - 1, 0));
}

TEST_P(RegionTest, UnmapAndDestructionReturnAllZramAndSwapMemory) {
  auto pg = make_pager(options(GetParam(), 1 * MiB, 64 * MiB));
  ASSERT_TRUE(pg);
  {
    auto a = region::create(pg, 4 * MiB);
    auto b = region::create(pg, 4 * MiB);
    ASSERT_TRUE(a.ok() && b.ok());
    auto* pa = static_cast<uint8_t*>((*a)->data());
    auto* pb = static_cast<uint8_t*>((*b)->data());
    for (uint64_t i = 0; i < 1024; ++i) {
      fill_page(pa + i * page_size, i, 0);
      fill_page(pb + i * page_size, i + 1024, 0);
    }
    pager_stats s = pg->stats();
    ASSERT_GT(s.swap_pages_used, 0u);
    ASSERT_GT(s.zram_mem_used_total, 0u);
    EXPECT_LE(s.peak_resident_pages, s.limit_pages) << describe(s);
    // Unmap the middle of b: its pages go, the rest of b keeps its contents.
    ASSERT_TRUE(pg->unmap(pb + 256 * page_size, 512 * page_size).ok());
    EXPECT_EQ(pg->mapping_of(pb + 300 * page_size).error().code(), ENOENT);
    // What is left of b ends at the hole (a and b are adjacent mappings alike, so the record
    // that holds b's head may start at a: records merge as the kernel merges VMAs).
    ASSERT_TRUE(pg->mapping_of(pb).ok());
    EXPECT_EQ(static_cast<uint8_t*>(pg->mapping_of(pb)->first) + pg->mapping_of(pb)->second,
              pb + 256 * page_size);
    for (uint64_t i = 0; i < 256; ++i) ASSERT_TRUE(page_matches(pb + i * page_size, i + 1024, 0));
    for (uint64_t i = 768; i < 1024; ++i)
      ASSERT_TRUE(page_matches(pb + i * page_size, i + 1024, 0));
    for (uint64_t i = 0; i < 1024; ++i) ASSERT_TRUE(page_matches(pa + i * page_size, i, 0));
    EXPECT_TRUE(pg->check_invariants().ok()) << pg->check_invariants().to_string();
    // Region b's destructor unmaps its whole range, including the hole: allowed, as munmap.
  }
  expect_holds_nothing(*pg);
}

// read(2) from a file into evicted pages, and write(2) from them. A kernel-mode fault reaches
// the pager only in handler_thread mode with a descriptor that takes kernel faults; otherwise the
// system call fails with EFAULT, and pinning the buffer first is what makes it work.
TEST_P(RegionTest, ReadSyscallIntoEvictedPages) {
  const std::vector<uint8_t> file = pages_of(64, 5000, 7);
  const int fd = unlinked_file_with(file);
  ASSERT_GE(fd, 0) << std::strerror(errno);

  auto r = make(4 * MiB, 1 * MiB);
  ASSERT_TRUE(r);
  auto* base = static_cast<uint8_t*>(r->data());
  const uint64_t pages = r->size() / page_size;
  for (uint64_t i = 0; i < pages; ++i) fill_page(base + i * page_size, i, 0);
  // The first 64 pages were evicted long ago.
  ASSERT_EQ(resident_pages(base, 64 * page_size), 0u);

  if (r->owner().kernel_faults()) {
    ASSERT_EQ(::pread(fd, base, file.size(), 0), static_cast<ssize_t>(file.size()));
  } else {
    errno = 0;
    EXPECT_EQ(::pread(fd, base, file.size(), 0), -1);
    EXPECT_EQ(errno, EFAULT);
    ASSERT_TRUE(r->pin(base, file.size(), true).ok());
    ASSERT_EQ(::pread(fd, base, file.size(), 0), static_cast<ssize_t>(file.size()));
    ASSERT_TRUE(r->unpin(base, file.size()).ok());
  }
  EXPECT_EQ(std::memcmp(base, file.data(), file.size()), 0);

  // Now push the file's copy out again and write(2) it back from the evicted pages.
  for (uint64_t i = 64; i < pages; ++i) fill_page(base + i * page_size, i, 1);
  ASSERT_EQ(resident_pages(base, 64 * page_size), 0u);
  ASSERT_EQ(::ftruncate(fd, 0), 0);
  if (r->owner().kernel_faults()) {
    ASSERT_EQ(::pwrite(fd, base, file.size(), 0), static_cast<ssize_t>(file.size()));
  } else {
    ASSERT_TRUE(r->pin(base, file.size(), false).ok());
    ASSERT_EQ(::pwrite(fd, base, file.size(), 0), static_cast<ssize_t>(file.size()));
    ASSERT_TRUE(r->unpin(base, file.size()).ok());
  }
  std::vector<uint8_t> back(file.size());
  ASSERT_EQ(::pread(fd, back.data(), back.size(), 0), static_cast<ssize_t>(back.size()));
  EXPECT_EQ(back, file);
  ::close(fd);
  EXPECT_TRUE(r->owner().check_invariants().ok()) << r->owner().check_invariants().to_string();
}

TEST_P(RegionTest, PinnedPagesStayResidentAndErrorsLeaveDataIntact) {
  auto r = make(4 * MiB, 1 * MiB);
  ASSERT_TRUE(r);
  auto* base = static_cast<uint8_t*>(r->data());
  const uint64_t pages = r->size() / page_size;
  fill_page(base, 0, 3);
  ASSERT_TRUE(r->pin(base, page_size, true).ok());
  for (uint64_t i = 1; i < pages; ++i) fill_page(base + i * page_size, i, 0);
  EXPECT_EQ(resident_pages(base, page_size), 1u);
  EXPECT_TRUE(page_matches(base, 0, 3));

  EXPECT_EQ(r->pin(base - page_size, page_size, false).code(), EINVAL);
  EXPECT_EQ(r->unpin(base + page_size, page_size).code(), EINVAL);
  EXPECT_EQ(r->pin(base, r->size(), false).code(), ENOMEM);  // more than half the limit
  EXPECT_EQ(r->owner().pin(nullptr, page_size, false).code(), EINVAL);
  ASSERT_TRUE(r->unpin(base, page_size).ok());
  EXPECT_EQ(r->unpin(base, page_size).code(), EINVAL);
  for (uint64_t i = 1; i < pages; ++i) ASSERT_TRUE(page_matches(base + i * page_size, i, 0));
  EXPECT_TRUE(page_matches(base, 0, 3));
  EXPECT_TRUE(r->owner().check_invariants().ok()) << r->owner().check_invariants().to_string();
}

TEST_P(RegionTest, MapRefusesBadInputAndResizeGrowsInPlace) {
  auto pg = make_pager(options(GetParam(), 1 * MiB, 16 * MiB));
  ASSERT_TRUE(pg);
  EXPECT_EQ(pg->map(0).error().code(), EINVAL);
  EXPECT_EQ(pg->map(page_size, 3000).error().code(), EINVAL);
  EXPECT_EQ(pg->map(32 * MiB).error().code(), ENOMEM);
  auto a = pg->map(2 * MiB, 2 * MiB);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*a) % (2 * MiB), 0u);
  auto* pa = static_cast<uint8_t*>(*a);
  fill_page(pa, 1, 1);
  ASSERT_TRUE(pg->resize(pa, 2 * MiB, 4 * MiB).ok());
  fill_page(pa + 3 * MiB, 2, 2);
  EXPECT_TRUE(page_matches(pa, 1, 1));
  EXPECT_TRUE(page_matches(pa + 3 * MiB, 2, 2));
  auto b = pg->map(1 * MiB);
  ASSERT_TRUE(b.ok());
  if (static_cast<uint8_t*>(*b) == pa + 4 * MiB) {
    EXPECT_EQ(pg->resize(pa, 4 * MiB, 5 * MiB).code(), ENOMEM);
  }
  // A range that does not end its mapping cannot grow in place (mremap's ENOMEM).
  EXPECT_EQ(pg->resize(pa + page_size, 2 * MiB, 3 * MiB).code(), ENOMEM);
  ASSERT_TRUE(pg->resize(pa, 4 * MiB, 1 * MiB).ok());
  EXPECT_TRUE(page_matches(pa, 1, 1));
  EXPECT_EQ(pg->mapping_of(pa)->second, 1 * MiB);
  EXPECT_EQ(pg->unmap(pa + 1, page_size).code(), EINVAL);
  ASSERT_TRUE(pg->unmap(pa, 1 * MiB).ok());
  ASSERT_TRUE(pg->unmap(*b, 1 * MiB).ok());
  EXPECT_EQ(pg->stats().mapped_bytes, 0u);
  EXPECT_TRUE(pg->check_invariants().ok()) << pg->check_invariants().to_string();
}

TEST(PagerOptions, BadOptionsAreRefused) {
  pager_options o;
  o.limit = 63 * page_size;
  EXPECT_EQ(pager::create(o).error().code(), EINVAL);
  o.limit = 1 * MiB;
  o.handler_threads = 65;
  EXPECT_EQ(pager::create(o).error().code(), EINVAL);
  o.handler_threads = 1;
  o.reclaim_batch = 33;
  EXPECT_EQ(pager::create(o).error().code(), EINVAL);
  o.reclaim_batch = 32;
  o.readahead_max = 0;
  EXPECT_EQ(pager::create(o).error().code(), EINVAL);
  o.readahead_max = 8;
  o.comp_algorithm = "gzip";
  EXPECT_EQ(pager::create(o).error().code(), EINVAL);
  o.comp_algorithm = "lz4";
  o.max_size = 0;
  EXPECT_EQ(pager::create(o).error().code(), EINVAL);
  EXPECT_EQ(region::create(0, pager_options{.limit = MiB}).error().code(), EINVAL);

  EXPECT_EQ(*parse_fault_mode("sigbus"), fault_mode::sigbus);
  EXPECT_EQ(*parse_fault_mode("handler-thread"), fault_mode::handler_thread);
  EXPECT_EQ(parse_fault_mode("signal").error().code(), EINVAL);
  EXPECT_EQ(*parse_uffd_access("user-mode-only"), uffd_access::user_mode_only);
  EXPECT_EQ(parse_uffd_access("root").error().code(), EINVAL);
}

// UFFD_USER_MODE_ONLY, as an unprivileged process gets it: paging works in both modes, but a
// kernel-mode access to an evicted page fails with EFAULT even with handler threads.
TEST(Unprivileged, UserModeOnlyPagesButKernelAccessNeedsPinning) {
  for (fault_mode mode : {fault_mode::sigbus, fault_mode::handler_thread}) {
    pager_options o;
    o.mode = mode;
    o.limit = 1 * MiB;
    o.access = uffd_access::user_mode_only;
    auto rr = region::create(4 * MiB, o);
    ASSERT_TRUE(rr.ok()) << rr.error().to_string();
    auto& r = *rr;
    EXPECT_FALSE(r->owner().kernel_faults());
    EXPECT_STREQ(r->owner().uffd_origin(), "userfaultfd(2) UFFD_USER_MODE_ONLY");
    auto* base = static_cast<uint8_t*>(r->data());
    for (uint64_t i = 0; i < 1024; ++i) fill_page(base + i * page_size, i, 0);
    for (uint64_t i = 0; i < 1024; ++i) ASSERT_TRUE(page_matches(base + i * page_size, i, 0));
    const int fd = ::open("/dev/zero", O_RDONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(resident_pages(base + 2 * MiB, page_size), 0u);
    errno = 0;
    EXPECT_EQ(::read(fd, base + 2 * MiB, page_size), -1);
    EXPECT_EQ(errno, EFAULT);
    ASSERT_TRUE(r->pin(base + 2 * MiB, page_size, true).ok());
    EXPECT_EQ(::read(fd, base + 2 * MiB, page_size), static_cast<ssize_t>(page_size));
    ASSERT_TRUE(r->unpin(base + 2 * MiB, page_size).ok());
    EXPECT_EQ(base[2 * MiB + 17], 0);
    ::close(fd);
  }
}

// A real unprivileged process (uid nobody): the pager falls back to UFFD_USER_MODE_ONLY by
// itself and pages as above; asking for kernel-mode faults is EPERM.
TEST(Unprivileged, NobodyGetsUserModeOnlyAutomatically) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to become nobody";
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(10);
    pager_options o;
    o.limit = 1 * MiB;
    o.access = uffd_access::full;
    if (pager::create(o).error().code() != EPERM) ::_exit(11);
    o.access = uffd_access::automatic;
    auto r = region::create(4 * MiB, o);
    if (!r.ok()) ::_exit(12);
    if (std::strcmp((*r)->owner().uffd_origin(), "userfaultfd(2) UFFD_USER_MODE_ONLY") != 0)
      ::_exit(13);
    auto* base = static_cast<uint8_t*>((*r)->data());
    for (uint64_t i = 0; i < 1024; ++i) fill_page(base + i * page_size, i, 0);
    for (uint64_t i = 0; i < 1024; ++i)
      if (!page_matches(base + i * page_size, i, 0)) ::_exit(14);
    if ((*r)->owner().stats().swap_outs == 0) ::_exit(15);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child died of signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "see the _exit codes in the child";
}

// fork_policy::detach: a forked child does not inherit the arena (an access is SIGSEGV, never
// zeros) and its copy of the pager refuses to work. (fork_policy::copy: fork_test.cc.)
TEST(Fork, DetachedChildDoesNotInheritTheArena) {
  pager_options o;
  o.limit = 1 * MiB;
  o.on_fork = fork_policy::detach;
  auto r = region::create(4 * MiB, o);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  auto* base = static_cast<volatile uint8_t*>((*r)->data());
  base[0] = 42;
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if ((*r)->owner().map(page_size).error().code() != EPERM) ::_exit(1);
    if ((*r)->owner().reclaim(10) != 0) ::_exit(2);
    // The default action: AddressSanitizer's handler would report the fault and exit(1).
    ::signal(SIGSEGV, SIG_DFL);
    (void)base[0];  // SIGSEGV
    ::_exit(3);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit code " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGSEGV);
  EXPECT_EQ(base[0], 42);
}

}  // namespace
}  // namespace uswap
