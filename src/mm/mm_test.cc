// The mm core, one thread at a time: the frame pool, mmap / munmap and VMA splitting, the access
// API and first-touch faults, the anonymous reverse map (page_referenced through anon_vma after
// splits), the LRU and pagevecs, and out-of-memory without swap.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "mm_test_util.h"
#include "uswap/mm/machine.h"
#include "uswap/mm/mm_types.h"
#include "uswap/mm/phys_mem.h"
#include "uswap/mm/rmap.h"

namespace uswap {
namespace {

using mm_test::make_machine;
using mm_test::page_at;

TEST(PhysMem, HandsOutEveryFrameOnceAndTakesThemBack) {
  auto pm = phys_mem::create(64);
  ASSERT_TRUE(pm.ok());
  phys_mem& mem = **pm;
  EXPECT_EQ(mem.nr_free(), 64u);
  std::vector<page*> got;
  while (page* p = mem.alloc_page()) {
    EXPECT_EQ(p->refcount(), 1);
    got.push_back(p);
  }
  ASSERT_EQ(got.size(), 64u);
  EXPECT_EQ(mem.nr_free(), 0u);
  std::vector<uint32_t> pfns;
  for (page* p : got) pfns.push_back(p->pfn);
  std::sort(pfns.begin(), pfns.end());
  for (uint32_t i = 0; i < 64; ++i) EXPECT_EQ(pfns[i], i);
  // Frames are distinct memory.
  for (page* p : got) std::memset(mem.page_address(p), static_cast<int>(p->pfn), page_size);
  for (page* p : got) EXPECT_EQ(static_cast<uint8_t>(mem.page_address(p)[100]), p->pfn & 0xff);
  for (page* p : got) {
    p->_refcount.store(0);
    mem.free_page(p);
  }
  EXPECT_EQ(mem.nr_free(), 64u);
}

TEST(PhysMem, WatermarksFollowTheKernelShapeAndRejectBadSizes) {
  auto pm = phys_mem::create(65536);  // 256 MiB
  ASSERT_TRUE(pm.ok());
  const watermarks& w = (*pm)->wmark();
  EXPECT_EQ(w.min, 512u);  // min_free_kbytes = sqrt(262144 * 16) = 2048 KiB
  EXPECT_EQ(w.low, 640u);
  EXPECT_EQ(w.high, 768u);
  EXPECT_EQ(phys_mem::create(0).error().code(), EINVAL);
  auto custom = phys_mem::create(1024, watermarks{10, 20, 30});
  ASSERT_TRUE(custom.ok());
  EXPECT_EQ((*custom)->wmark().low, 20u);
  EXPECT_EQ(machine::create(machine_options{.ram = 4096}).error().code(), EINVAL);
}

TEST(Mmap, FindsGapsRejectsBadArgumentsAndOverlaps) {
  auto m = make_machine(256);
  auto mm = m->mm_alloc();
  auto a = mm->mmap(3 * page_size);
  auto b = mm->mmap(1);  // rounded up to one page
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*b, *a + 3 * page_size);
  EXPECT_EQ(mm->map_count(), 2u);
  EXPECT_EQ(mm->mmap(0).error().code(), EINVAL);
  EXPECT_EQ(mm->mmap(page_size, PROT_READ | PROT_WRITE, *a + 123).error().code(), EINVAL);
  EXPECT_EQ(mm->mmap(page_size, PROT_READ | PROT_WRITE, *a + page_size).error().code(), EEXIST);
  EXPECT_EQ(mm->mmap(page_size, 0x4).error().code(), EINVAL);
  EXPECT_EQ(mm->munmap(*a + 1, page_size).code(), EINVAL);
  EXPECT_EQ(mm->munmap(*a, 0).code(), EINVAL);
  // A hole is reused.
  ASSERT_TRUE(mm->munmap(*a, 3 * page_size).ok());
  auto c = mm->mmap(2 * page_size);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, *a);
  // Fixed placement in a free range.
  auto d = mm->mmap(page_size, PROT_READ | PROT_WRITE, uint64_t{1} << 40);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, uint64_t{1} << 40);
}

TEST(Access, ReadsBackWhatWasWrittenAcrossPagesAndNewPagesAreZero) {
  auto m = make_machine(256);
  auto mm = m->mm_alloc();
  auto a = mm->mmap(8 * page_size);
  ASSERT_TRUE(a.ok());
  std::vector<uint8_t> buf(3 * page_size + 100);
  std::iota(buf.begin(), buf.end(), 7);
  ASSERT_TRUE(mm->write(*a + 1000, buf.data(), buf.size()).ok());
  std::vector<uint8_t> back(buf.size());
  ASSERT_TRUE(mm->read(*a + 1000, back.data(), back.size()).ok());
  EXPECT_EQ(back, buf);
  std::vector<uint8_t> zeros(page_size, 0xff);
  ASSERT_TRUE(mm->read(*a + 6 * page_size, zeros.data(), zeros.size()).ok());
  EXPECT_TRUE(std::all_of(zeros.begin(), zeros.end(), [](uint8_t x) { return x == 0; }));
  EXPECT_EQ(mm->rss_anon(), 5u);  // pages 0..3 written, page 6 read
  EXPECT_EQ(m->events()[PGFAULT], 5u);
}

TEST(Access, FaultsOutsideMappingsAndWritesToReadOnlyMappingsFailCleanly) {
  auto m = make_machine(256);
  auto mm = m->mm_alloc();
  auto a = mm->mmap(2 * page_size);
  auto ro = mm->mmap(page_size, PROT_READ);
  ASSERT_TRUE(a.ok() && ro.ok());
  uint64_t v = 42;
  ASSERT_TRUE(mm->write(*a + page_size, &v, 8).ok());
  EXPECT_EQ(mm->write(*a + 2 * page_size + 8 * page_size, &v, 8).code(), EFAULT);
  EXPECT_EQ(mm->touch(0x1000, access_type::read).code(), EFAULT);
  EXPECT_EQ(mm->write(*ro, &v, 8).code(), EFAULT);
  EXPECT_EQ(mm->read(TASK_SIZE - 4, &v, 8).code(), EFAULT);
  uint64_t r = 1;
  ASSERT_TRUE(mm->read(*ro, &r, 8).ok());
  EXPECT_EQ(r, 0u);
  ASSERT_TRUE(mm->read(*a + page_size, &r, 8).ok());
  EXPECT_EQ(r, 42u);
}

TEST(Mmap, PartialMunmapSplitsAndKeepsTheRestIntact) {
  auto m = make_machine(256);
  auto mm = m->mm_alloc();
  auto a = mm->mmap(10 * page_size);
  ASSERT_TRUE(a.ok());
  for (uint64_t i = 0; i < 10; ++i) {
    const uint64_t v = 1000 + i;
    ASSERT_TRUE(mm->write(*a + i * page_size + 8, &v, 8).ok());
  }
  const uint64_t free_before = m->nr_free_pages();
  ASSERT_TRUE(mm->munmap(*a + 3 * page_size, 2 * page_size).ok());
  EXPECT_EQ(mm->map_count(), 2u);
  EXPECT_EQ(mm->rss_anon(), 8u);
  m->lru_add_drain_all();
  EXPECT_EQ(m->nr_free_pages(), free_before + 2);
  uint64_t v = 0;
  EXPECT_EQ(mm->read(*a + 3 * page_size, &v, 8).code(), EFAULT);
  for (uint64_t i : {0, 1, 2, 5, 6, 7, 8, 9}) {
    ASSERT_TRUE(mm->read(*a + i * page_size + 8, &v, 8).ok());
    EXPECT_EQ(v, 1000 + i);
  }
  // Both halves still reach their pages through the shared anon_vma.
  for (uint64_t i : {0, 9}) {
    page* p = page_at(*m, *mm, *a + i * page_size);
    ASSERT_NE(p, nullptr);
    // Written, then read back above: its one pte is young.
    EXPECT_EQ(page_referenced(p), 1) << "page " << i;
    ASSERT_TRUE(mm->touch(*a + i * page_size, access_type::read).ok());
    EXPECT_EQ(page_referenced(p), 1);
    EXPECT_EQ(page_referenced(p), 0);
  }
  // Unmapping the middle of the tail splits once more; unmapping everything empties the mm.
  ASSERT_TRUE(mm->munmap(*a + 7 * page_size, page_size).ok());
  EXPECT_EQ(mm->map_count(), 3u);
  ASSERT_TRUE(mm->munmap(*a, 10 * page_size).ok());
  EXPECT_EQ(mm->map_count(), 0u);
  EXPECT_EQ(mm->rss_anon(), 0u);
  m->lru_add_drain_all();
  EXPECT_EQ(m->nr_free_pages(), m->mem().nr_pages());
}

TEST(Rmap, PageReferencedReportsAndClearsYoungPtes) {
  auto m = make_machine(256);
  auto mm = m->mm_alloc();
  auto a = mm->mmap(4 * page_size);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(mm->touch(*a, access_type::write).ok());
  page* p = page_at(*m, *mm, *a);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(p->anon());
  EXPECT_EQ(p->mapcount(), 1);
  EXPECT_EQ(p->index.load(), *a >> page_shift);
  EXPECT_TRUE(pte_dirty(mm->pte_of(*a)));
  EXPECT_EQ(page_referenced(p), 1);
  EXPECT_FALSE(pte_young(mm->pte_of(*a)));
  EXPECT_EQ(page_referenced(p), 0);
  ASSERT_TRUE(mm->touch(*a, access_type::read).ok());
  EXPECT_EQ(page_referenced(p), 1);
  // A page without a mapping is not walked.
  page* loose = m->mem().alloc_page();
  ASSERT_NE(loose, nullptr);
  EXPECT_EQ(page_referenced(loose), 0);
  m->put_page(loose);
}

TEST(Lru, NewPagesReachTheInactiveListThroughPagevecs) {
  auto m = make_machine(512);
  auto mm = m->mm_alloc();
  auto a = mm->mmap(100 * page_size);
  ASSERT_TRUE(a.ok());
  for (uint64_t i = 0; i < 100; ++i) ASSERT_TRUE(mm->touch(*a + i * page_size, access_type::write).ok());
  // All but the last partial pagevec are on the list already.
  EXPECT_EQ(m->lru_size(LRU_INACTIVE_ANON), 100u / PAGEVEC_SIZE * PAGEVEC_SIZE);
  m->lru_add_drain_all();
  EXPECT_EQ(m->lru_size(LRU_INACTIVE_ANON), 100u);
  EXPECT_EQ(m->lru_size(LRU_ACTIVE_ANON), 0u);
  page* p = page_at(*m, *mm, *a);
  EXPECT_TRUE(p->test(PG_lru));
  EXPECT_EQ(p->refcount(), 1);  // the pte's; the LRU holds none
  ASSERT_TRUE(mm->munmap(*a, 100 * page_size).ok());
  EXPECT_EQ(m->lru_size(LRU_INACTIVE_ANON), 0u);
  EXPECT_EQ(m->nr_free_pages(), 512u);
}

TEST(Oom, WithoutSwapTheFaultThatFindsNoFrameGetsENOMEMAndDataSurvives) {
  auto m = make_machine(64);
  auto mm = m->mm_alloc();
  auto a = mm->mmap(100 * page_size);
  ASSERT_TRUE(a.ok());
  uint64_t i = 0;
  status st;
  for (; i < 100; ++i) {
    const uint64_t v = 0xabc000 + i;
    st = mm->write(*a + i * page_size, &v, 8);
    if (!st.ok()) break;
  }
  EXPECT_EQ(st.code(), ENOMEM) << st.to_string();
  EXPECT_EQ(i, 64u);
  EXPECT_EQ(m->events()[OOM_KILL], 1u);
  for (uint64_t j = 0; j < i; ++j) {
    uint64_t v = 0;
    ASSERT_TRUE(mm->read(*a + j * page_size, &v, 8).ok());
    EXPECT_EQ(v, 0xabc000 + j);
  }
  // Freeing memory makes the failed access succeed.
  ASSERT_TRUE(mm->munmap(*a, page_size).ok());
  m->lru_add_drain_all();
  const uint64_t v = 7;
  EXPECT_TRUE(mm->write(*a + i * page_size, &v, 8).ok());
}

TEST(Mm, TeardownReturnsEveryFrameAndAnonVma) {
  auto m = make_machine(256);
  {
    auto mm = m->mm_alloc();
    for (int r = 0; r < 5; ++r) {
      auto a = mm->mmap(16 * page_size);
      ASSERT_TRUE(a.ok());
      for (uint64_t i = 0; i < 16; i += 2) ASSERT_TRUE(mm->touch(*a + i * page_size, access_type::write).ok());
      ASSERT_TRUE(mm->munmap(*a + 4 * page_size, page_size).ok());
    }
    EXPECT_EQ(mm->map_count(), 10u);
  }
  m->lru_add_drain_all();
  EXPECT_EQ(m->nr_free_pages(), 256u);
  EXPECT_EQ(m->lru_size(LRU_INACTIVE_ANON), 0u);
}

}  // namespace
}  // namespace uswap
