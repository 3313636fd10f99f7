// Anonymous memory through swap, one thread at a time: reclaim writes pages out and faults read
// them back on both swap devices; try_to_unmap leaves swap ptes; a page rewritten after swap-in
// is written again (a dirty page is never lost); munmap and exit free every slot and zram
// object; a full swap area or a zram mem_limit makes the fault fail with ENOMEM and nothing else.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "mm_test_util.h"
#include "uswap/mm/machine.h"
#include "uswap/mm/mm_types.h"
#include "uswap/mm/rmap.h"
#include "uswap/swap/swap_cache.h"
#include "uswap/swap/swap_system.h"
#include "uswap_testing/param_names.h"
#include "uswap_testing/threads.h"

namespace uswap {
namespace {

using mm_test::make_machine;

// Compressible, as most anonymous memory is: every other word is the tag itself.
uint64_t word(uint64_t tag, uint64_t page, uint64_t i) {
  return i % 2 ? tag : (tag << 48) ^ (page << 12) ^ (i * 0x9e37);
}
constexpr mm_test::page_pattern pattern{word};

// At the end of a test: nothing left in swap or zram.
void expect_swap_empty(machine& m) {
  m.kswapd_quiesce();
  m.lru_add_drain_all();
  m.swap_sys()->drain_swap_slots_cache();
  const swap_usage u = m.swap_stats();
  EXPECT_EQ(u.inuse, 0u);
  EXPECT_EQ(u.cached, 0u);
  EXPECT_EQ(u.free, u.total);
  const swap_backend_stats s = m.backend()->stats();
  EXPECT_EQ(s.device.stored_pages, 0u);
  if (const auto& st = s.device.mm_stat) {
    EXPECT_EQ(st->orig_data_size, 0u);
    EXPECT_EQ(st->compr_data_size, 0u);
    EXPECT_EQ(st->same_pages, 0u);
    EXPECT_EQ(st->huge_pages, 0u);
  }
  EXPECT_TRUE(m.backend()->check_invariants().ok()) << m.backend()->check_invariants().to_string();
}

class SwapDevTest : public ::testing::TestWithParam<swap_dev_kind> {};

TEST_P(SwapDevTest, PagesGoOutAndComeBackIntact) {
  auto m = make_machine(mm_test::options(64, 1024, GetParam()));
  ASSERT_TRUE(m);
  auto mm = m->mm_alloc();
  auto a = mm->mmap(400 * page_size);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(pattern.fill(*mm, *a, 0, 400, 1).ok());
  auto ev = m->events();
  EXPECT_GE(ev[PSWPOUT], 400u - 64u);
  EXPECT_GT(ev[PGSTEAL_DIRECT], 0u);
  EXPECT_GT(mm->swap_ents(), 0u);
  EXPECT_EQ(mm->swap_ents() + mm->rss_anon(), 400u);
  EXPECT_GT(m->backend()->stats().device.stored_pages, 0u);
  EXPECT_EQ(pattern.mismatches(*mm, *a, 0, 400, 1), 0u);
  ev = m->events();
  EXPECT_GT(ev[PSWPIN], 0u);
  EXPECT_EQ(ev[PGMAJFAULT], ev[PSWPIN]);
  mm.reset();  // exit_mmap
  expect_swap_empty(*m);
  m->lru_add_drain_all();
  EXPECT_EQ(m->nr_free_pages(), 64u);
}

TEST_P(SwapDevTest, TryToUnmapLeavesSwapPtesThatFaultBack) {
  auto m = make_machine(mm_test::options(256, 256, GetParam()));
  auto mm = m->mm_alloc();
  auto a = mm->mmap(64 * page_size);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(pattern.fill(*mm, *a, 0, 64, 7).ok());
  m->lru_add_drain_all();
  // The first pass finds the pages young and activates them; aging clears that, the next pass
  // writes them out.
  uint64_t freed = 0;
  for (int i = 0; i < 4 && freed < 64; ++i) freed += m->shrink(64);
  EXPECT_EQ(freed, 64u);
  EXPECT_EQ(mm->rss_anon(), 0u);
  EXPECT_EQ(mm->swap_ents(), 64u);
  const pte_t pte = mm->pte_of(*a + 5 * page_size);
  ASSERT_TRUE(is_swap_pte(pte));
  const swap_entry e{pte_to_swp_entry_val(pte)};
  EXPECT_EQ(swap_count(m->swap_sys()->swap_map_byte(e)), 1);
  EXPECT_EQ(pattern.mismatches(*mm, *a, 0, 64, 7), 0u);
  // Read back, the page is mapped again and still in the swap cache (clean, its slot kept).
  EXPECT_TRUE(pte_present(mm->pte_of(*a + 5 * page_size)));
  EXPECT_EQ(m->swap_stats().cached, 64u);
  EXPECT_EQ(m->swap_sys()->swap_map_byte(e), SWAP_HAS_CACHE);
  mm.reset();
  expect_swap_empty(*m);
}

TEST_P(SwapDevTest, APageWrittenAfterSwapInIsWrittenAgainNeverLost) {
  auto m = make_machine(mm_test::options(64, 1024, GetParam()));
  auto mm = m->mm_alloc();
  auto a = mm->mmap(300 * page_size);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(pattern.fill(*mm, *a, 0, 300, 1).ok());
  std::vector<uint64_t> tag(300, 1);
  for (uint64_t round = 2; round < 7; ++round) {
    // Read everything back (the pages come in clean and stay in the swap cache with their
    // slots), then rewrite a different half in 10-page runs: those pages are dirtied through
    // their ptes and must be written out again, the others must not lose their older contents.
    for (uint64_t p = 0; p < 300; p += 10)
      EXPECT_EQ(pattern.mismatches(*mm, *a, p, p + 10, tag[p]), 0u)
          << "round " << round << " page " << p;
    for (uint64_t p = (round % 2) * 10; p < 300; p += 20) {
      ASSERT_TRUE(pattern.fill(*mm, *a, p, p + 10, round).ok());
      for (uint64_t q = p; q < p + 10; ++q) tag[q] = round;
    }
  }
  EXPECT_GT(m->events()[PSWPIN], 300u);
  mm.reset();
  expect_swap_empty(*m);
}

TEST_P(SwapDevTest, MunmapOfSwappedRangesFreesTheirSlots) {
  auto m = make_machine(mm_test::options(64, 1024, GetParam()));
  auto mm = m->mm_alloc();
  auto a = mm->mmap(300 * page_size);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(pattern.fill(*mm, *a, 0, 300, 3).ok());
  const uint64_t ents = mm->swap_ents();
  ASSERT_GT(ents, 100u);
  // Unmap the middle (splitting the VMA): its swap ptes and cached pages go.
  ASSERT_TRUE(mm->munmap(*a + 50 * page_size, 100 * page_size).ok());
  EXPECT_EQ(mm->swap_ents() + mm->rss_anon(), 200u);
  EXPECT_EQ(pattern.mismatches(*mm, *a, 0, 50, 3), 0u);
  EXPECT_EQ(pattern.mismatches(*mm, *a, 150, 300, 3), 0u);
  ASSERT_TRUE(mm->munmap(*a, 300 * page_size).ok());
  EXPECT_EQ(mm->swap_ents(), 0u);
  expect_swap_empty(*m);
  mm.reset();
}

TEST_P(SwapDevTest, FullSwapGivesENOMEMToTheFaultAndKeepsEverythingElse) {
  auto m = make_machine(mm_test::options(64, 64, GetParam()));
  auto mm = m->mm_alloc();
  auto a = mm->mmap(400 * page_size);
  ASSERT_TRUE(a.ok());
  uint64_t p = 0;
  status st;
  for (; p < 400; ++p) {
    st = pattern.fill(*mm, *a, p, p + 1, 9);
    if (!st.ok()) break;
  }
  EXPECT_EQ(st.code(), ENOMEM) << st.to_string();
  EXPECT_GE(p, 64u + 64u - 2 * SWAP_CLUSTER_MAX);  // roughly RAM + swap were usable
  EXPECT_LE(p, 128u);
  EXPECT_GT(m->events()[OOM_KILL], 0u);
  // RAM and swap are both full: even reading a swapped-out page needs a frame, so it fails
  // the same clean way (the kernel would OOM-kill here).
  uint64_t v = 0;
  EXPECT_EQ(mm->read(*a, &v, 8).code(), ENOMEM);
  // Freeing memory lets the accesses through, and everything written before is intact.
  ASSERT_TRUE(mm->munmap(*a, 32 * page_size).ok());
  EXPECT_EQ(pattern.mismatches(*mm, *a, 32, p, 9), 0u);
  EXPECT_TRUE(pattern.fill(*mm, *a, p, p + 1, 9).ok());
  EXPECT_EQ(pattern.mismatches(*mm, *a, 32, p + 1, 9), 0u);
  mm.reset();
  expect_swap_empty(*m);
}

INSTANTIATE_TEST_SUITE_P(Devices, SwapDevTest,
                         ::testing::Values(swap_dev_kind::zram, swap_dev_kind::ram),
                         testing::to_string_name());

TEST(ZramSwap, AFullZramMemLimitFailsPageoutAndTheFaultGetsENOMEM) {
  machine_options o = mm_test::options(64, 4096, swap_dev_kind::zram);
  o.zram.mem_limit = 16 * page_size;
  auto m = make_machine(o);
  auto mm = m->mm_alloc();
  auto a = mm->mmap(1000 * page_size);
  ASSERT_TRUE(a.ok());
  // Incompressible pages: each takes a whole page of zram.
  uint64_t p = 0;
  status st;
  for (; p < 1000; ++p) {
    st = mm->access(*a + p * page_size, page_size, access_type::write,
                    [&](uint64_t, std::span<std::byte, page_size> pg) {
                      uint64_t x = 0x9e3779b97f4a7c15ull * (p + 1);
                      for (size_t i = 0; i < page_size; i += 8) {
                        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                        std::memcpy(pg.data() + i, &x, 8);
                      }
                    });
    if (!st.ok()) break;
  }
  EXPECT_EQ(st.code(), ENOMEM) << st.to_string();
  EXPECT_GT(m->swap_stats().write_errors, 0u);
  EXPECT_LT(p, 64u + 32u);
  // Lifting the limit lets reclaim write again; everything written before is intact.
  ASSERT_TRUE(m->backend()->device().set_mem_limit(0).ok());
  for (uint64_t q = 0; q < p; ++q) {
    uint64_t first = 0;
    ASSERT_TRUE(mm->read(*a + q * page_size, &first, 8).ok());
    uint64_t x = 0x9e3779b97f4a7c15ull * (q + 1);
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    EXPECT_EQ(first, x) << q;
  }
  mm.reset();
  expect_swap_empty(*m);
}

TEST(Kswapd, ReclaimsInTheBackgroundBetweenTheWatermarks) {
  auto m = make_machine(mm_test::options(512, 2048, swap_dev_kind::ram, /*kswapd=*/true));
  auto mm = m->mm_alloc();
  auto a = mm->mmap(1500 * page_size);
  ASSERT_TRUE(a.ok());
  // The writer pauses the first time free memory is below the low watermark (kswapd woken, no
  // direct reclaim above min) until kswapd has reclaimed something: without the pause, a fill
  // that outruns kswapd's first wake-up reaches min and direct reclaim does all of the work (one
  // CI run on resident memory, where first touches are no longer slow).
  // (The pause starts at kswapd's first wake-up, which an allocation below the low watermark
  // does, rather than at free memory seen below it: a kswapd on the other CPU may already have
  // lifted it again when the writer looks.)
  bool paused = false;
  for (uint64_t p = 0; p < 1500; ++p) {
    ASSERT_TRUE(pattern.fill(*mm, *a, p, p + 1, 4).ok()) << p;
    if (!paused && m->events()[KSWAPD_WAKEUP] > 0) {
      paused = true;
      EXPECT_TRUE(uswap::testing::eventually([&] { return m->events()[PGSTEAL_KSWAPD] > 0; }))
          << "kswapd reclaimed nothing while free memory stayed below the low watermark";
    }
  }
  EXPECT_TRUE(paused);
  m->kswapd_quiesce();
  const auto ev = m->events();
  EXPECT_GT(ev[KSWAPD_WAKEUP], 0u);
  EXPECT_GT(ev[PGSTEAL_KSWAPD], 0u);
  EXPECT_EQ(pattern.mismatches(*mm, *a, 0, 1500, 4), 0u);
  mm.reset();
  expect_swap_empty(*m);
}

TEST(Machine, RejectsBadSwapOptions) {
  machine_options o = mm_test::options(64, 0, swap_dev_kind::zram);
  o.swap = 100;  // less than a page
  EXPECT_EQ(machine::create(o).error().code(), EINVAL);
  o.swap = pages_to_bytes(64);
  o.zram.comp_algorithm = "nonesuch";
  EXPECT_FALSE(machine::create(o).ok());
  EXPECT_EQ(parse_swap_dev_kind("disk").error().code(), EINVAL);
  EXPECT_EQ(*parse_swap_dev_kind("ram"), swap_dev_kind::ram);
}

}  // namespace
}  // namespace uswap
