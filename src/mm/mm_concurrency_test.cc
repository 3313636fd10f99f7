// The mm core under concurrency, with more threads than the machine's 2 cores: faults on one
// page resolve to one frame, threads of one mm and of several mms write and verify their own
// memory while others mmap / munmap / split, and rmap walkers (page_referenced) run against
// munmap. Each test checks contents and the frame / LRU / counter invariants at the end.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "mm_test_util.h"
#include "uswap/mm/machine.h"
#include "uswap/mm/mm_types.h"
#include "uswap/mm/rmap.h"
#include "uswap_testing/threads.h"

namespace uswap {
namespace {

// TSan's budget: an eighth of the rounds (work_scale_by(8)).
constexpr int scale = testing::work_scale_by(8);

using uswap::testing::run_threads;

using mm_test::make_machine;

uint64_t pattern(uint64_t tag, uint64_t page, uint64_t word) {
  return (tag << 40) ^ (page << 9) ^ word ^ 0x5bd1e995u;
}
constexpr mm_test::page_pattern pages_pattern{pattern};

TEST(MmConcurrency, RacingFirstTouchesOfOnePageMapOneFrame) {
  auto m = make_machine(1024);
  auto mm = m->mm_alloc();
  for (int round = 0; round < 50 / scale; ++round) {
    auto a = mm->mmap(page_size);
    ASSERT_TRUE(a.ok());
    std::atomic<uint32_t> seen_pfn{no_pfn};
    std::atomic<int> mismatches{0};
    run_threads(16, [&](int t) {
      const uint64_t v = static_cast<uint64_t>(t);
      ASSERT_TRUE(mm->write(*a + 8 * static_cast<uint64_t>(t), &v, 8).ok());
      const uint32_t pfn = pte_pfn(mm->pte_of(*a));
      uint32_t expect = no_pfn;
      if (!seen_pfn.compare_exchange_strong(expect, pfn) && expect != pfn) mismatches.fetch_add(1);
    });
    EXPECT_EQ(mismatches.load(), 0);
    for (uint64_t t = 0; t < 16; ++t) {
      uint64_t v = ~uint64_t{0};
      ASSERT_TRUE(mm->read(*a + 8 * t, &v, 8).ok());
      EXPECT_EQ(v, t);
    }
    EXPECT_EQ(mm->rss_anon(), 1u);
    ASSERT_TRUE(mm->munmap(*a, page_size).ok());
  }
  m->lru_add_drain_all();
  EXPECT_EQ(m->nr_free_pages(), 1024u);
}

// Threads of one address space (usemem -t) and of separate ones (usemem -n) each write their
// own region word by word, verify it, and unmap half of it in pieces while the others work.
void write_verify_unmap(int threads, bool shared_mm) {
  const uint64_t pages_per_thread = 96;
  auto m = make_machine(threads * pages_per_thread + 64);
  std::vector<std::unique_ptr<mm_struct>> mms;
  for (int i = 0; i < (shared_mm ? 1 : threads); ++i) mms.push_back(m->mm_alloc());
  std::atomic<int> bad{0};
  run_threads(threads, [&](int t) {
    mm_struct& mm = *mms[shared_mm ? 0 : t];
    for (int round = 0; round < 4 / testing::work_scale_by(2); ++round) {
      auto a = mm.mmap(pages_per_thread * page_size);
      if (!a.ok()) {
        bad.fetch_add(1);
        return;
      }
      const uint64_t tag = static_cast<uint64_t>(t) * 16 + static_cast<uint64_t>(round);
      if (!pages_pattern.fill(mm, *a, 0, pages_per_thread, tag).ok()) bad.fetch_add(1);
      // Unmap every third page (splitting the VMA repeatedly) and check the rest.
      for (uint64_t p = 1; p < pages_per_thread; p += 3)
        if (!mm.munmap(*a + p * page_size, page_size).ok()) bad.fetch_add(1);
      for (uint64_t p = 0; p < pages_per_thread; ++p)
        if (p % 3 != 1 && pages_pattern.mismatches(mm, *a, p, p + 1, tag) != 0) bad.fetch_add(1);
      if (!mm.munmap(*a, pages_per_thread * page_size).ok()) bad.fetch_add(1);
    }
  });
  EXPECT_EQ(bad.load(), 0);
  for (auto& mm : mms) {
    EXPECT_EQ(mm->rss_anon(), 0u);
    EXPECT_EQ(mm->map_count(), 0u);
  }
  mms.clear();
  m->lru_add_drain_all();
  EXPECT_EQ(m->nr_free_pages(), m->mem().nr_pages());
  EXPECT_EQ(m->lru_size(LRU_INACTIVE_ANON), 0u);
}

TEST(MmConcurrency, ThreadsSharingOneMmWriteVerifyAndSplit) { write_verify_unmap(16, true); }
TEST(MmConcurrency, ThreadsInSeparateMmsWriteVerifyAndSplit) { write_verify_unmap(16, false); }

// rmap walkers (page_referenced, as reclaim's aging runs it) race faults, munmap and exit: the
// walker only ever holds a page reference, and must never see a freed anon_vma or page table.
TEST(MmConcurrency, RmapWalksRaceMunmapAndExit) {
  const uint32_t ram = 2048;
  auto m = make_machine(ram);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> walks{0};
  std::thread walker([&] {
    while (!stop.load(std::memory_order_acquire)) {
      for (uint32_t pfn = 0; pfn < ram; ++pfn) {
        page* p = m->pfn_to_page(pfn);
        if (!p->get_unless_zero()) continue;
        page_referenced(p);
        walks.fetch_add(1, std::memory_order_relaxed);
        m->put_page(p);
      }
    }
  });
  std::atomic<int> bad{0};
  run_threads(8, [&](int t) {
    // At least 30 / scale rounds, and on until the walker has walked a few hundred of our
    // pages (it may be scheduled late on a loaded machine); bounded so a bug cannot hang.
    for (int round = 0;
         round < 30 / scale || (walks.load(std::memory_order_relaxed) < 256 && round < 20000);
         ++round) {
      auto mm = m->mm_alloc();
      auto a = mm->mmap(64 * page_size);
      if (!a.ok()) {
        bad.fetch_add(1);
        continue;
      }
      for (uint64_t p = 0; p < 64; ++p) {
        const uint64_t v = pattern(static_cast<uint64_t>(t), p, static_cast<uint64_t>(round));
        if (!mm->write(*a + p * page_size, &v, 8).ok()) bad.fetch_add(1);
      }
      if (!mm->munmap(*a + 16 * page_size, 16 * page_size).ok()) bad.fetch_add(1);
      for (uint64_t p = 0; p < 64; ++p) {
        if (p >= 16 && p < 32) continue;
        uint64_t v = 0;
        if (!mm->read(*a + p * page_size, &v, 8).ok() ||
            v != pattern(static_cast<uint64_t>(t), p, static_cast<uint64_t>(round)))
          bad.fetch_add(1);
      }
      // Half the rounds leave the rest to exit_mmap.
      if (round % 2 && !mm->munmap(*a, 64 * page_size).ok()) bad.fetch_add(1);
    }
  });
  stop.store(true, std::memory_order_release);
  walker.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GE(walks.load(), 256u);
  m->lru_add_drain_all();
  EXPECT_EQ(m->nr_free_pages(), ram);
}

// Every thread allocates until RAM runs out: each gets ENOMEM cleanly, the pages that were
// written keep their contents, and nothing hangs.
TEST(MmConcurrency, OutOfMemoryIsReportedToEveryThreadWithoutCorruption) {
  auto m = make_machine(512);
  auto mm = m->mm_alloc();
  std::atomic<int> bad{0};
  std::atomic<int> enomem{0};
  run_threads(16, [&](int t) {
    auto a = mm->mmap(64 * page_size);
    if (!a.ok()) {
      bad.fetch_add(1);
      return;
    }
    uint64_t p = 0;
    for (; p < 64; ++p) {
      const uint64_t v = pattern(static_cast<uint64_t>(t), p, 1);
      status st = mm->write(*a + p * page_size, &v, 8);
      if (st.code() == ENOMEM) {
        enomem.fetch_add(1);
        break;
      }
      if (!st.ok()) bad.fetch_add(1);
    }
    for (uint64_t q = 0; q < p; ++q) {
      uint64_t v = 0;
      if (!mm->read(*a + q * page_size, &v, 8).ok() || v != pattern(static_cast<uint64_t>(t), q, 1))
        bad.fetch_add(1);
    }
  });
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(enomem.load(), 0);  // 16 * 64 pages > 512 frames
  EXPECT_EQ(mm->rss_anon(), 512u);
  mm.reset();
  m->lru_add_drain_all();
  EXPECT_EQ(m->nr_free_pages(), 512u);
}

}  // namespace
}  // namespace uswap
