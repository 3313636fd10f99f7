// Anonymous memory through swap and zram under concurrency, with more threads than the
// machine's 2 cores, in every combination of swap lock mode (global, cluster, percpu) and swap
// device (zram in each of its lock modes, and the uncompressed RAM device):
//   - usemem-style: every thread writes its pages (several times RAM in total), reads every page
//     back after it went out and came in again, rewrites half, verifies again; threads share one
//     mm (usemem -t) or have one each (usemem -n); at the end every slot and zram object is free;
//   - racing faults on one swapped-out page map a single frame and read it from swap once;
//   - reclaim under pressure never loses a dirty page, while other threads mmap and munmap;
//   - running out of RAM and swap together is reported to every thread, without corruption.
#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <functional>
#include <thread>
#include <vector>

#include "mm_test_util.h"
#include "uswap/mm/machine.h"
#include "uswap/mm/mm_types.h"
#include "uswap/swap/swap_system.h"
#include "uswap_testing/threads.h"

namespace uswap {
namespace {

// TSan's budget: a quarter of the pages and writes (work_scale_by(4)), so that the machine
// stays large enough for reclaim to have choices.
constexpr uint64_t scale = testing::work_scale_by(4);

using uswap::testing::run_threads;

// Three words in four are the tag itself: compressible, as most anonymous memory is.
uint64_t word(uint64_t tag, uint64_t page, uint64_t i) {
  return i % 4 ? tag : (tag << 48) ^ (page << 12) ^ (i * 0x9e3779b97f4a7c15ull >> 20);
}
constexpr mm_test::page_pattern pattern{word};

void expect_swap_empty(machine& m) {
  m.kswapd_quiesce();
  m.lru_add_drain_all();
  m.swap_sys()->drain_swap_slots_cache();
  const swap_usage u = m.swap_stats();
  EXPECT_EQ(u.inuse, 0u);
  EXPECT_EQ(u.cached, 0u);
  const swap_backend_stats s = m.backend()->stats();
  EXPECT_EQ(s.device.stored_pages, 0u);
  if (s.device.mm_stat) {
    EXPECT_EQ(s.device.mm_stat->compr_data_size, 0u);
  }
  EXPECT_TRUE(m.backend()->check_invariants().ok()) << m.backend()->check_invariants().to_string();
  EXPECT_EQ(m.nr_free_pages(), m.mem().nr_pages());
}

struct combo {
  swap_lock_mode swap_lock;
  swap_dev_kind dev;
  zram_lock_mode zram_lock;
};

std::string combo_name(const combo& c) {
  std::string s = std::string(to_string(c.swap_lock)) + "_" + to_string(c.dev);
  if (c.dev == swap_dev_kind::zram) s += "_" + std::string(to_string(c.zram_lock));
  return s;
}

std::vector<combo> all_combos() {
  std::vector<combo> out;
  for (swap_lock_mode s : {swap_lock_mode::global, swap_lock_mode::cluster, swap_lock_mode::percpu}) {
    for (zram_lock_mode z : all_zram_lock_modes) out.push_back({s, swap_dev_kind::zram, z});
    out.push_back({s, swap_dev_kind::ram, zram_lock_mode::slot_bitlock});
  }
  return out;
}

machine_options options_for(const combo& c, uint64_t ram_pages, uint64_t swap_pages) {
  machine_options o = mm_test::options(ram_pages, swap_pages, c.dev, /*kswapd=*/true);
  o.swap_lock = c.swap_lock;
  o.zram.lock_mode = c.zram_lock;
  o.zram.comp_algorithm = "lz4";
  return o;
}

class LockComboTest : public ::testing::TestWithParam<combo> {};

void usemem_verify(const combo& c, bool shared_mm) {
  const int threads = 16;
  const uint64_t pages = 64 / scale;  // per thread; 4x RAM in total
  auto mr = machine::create(options_for(c, threads * pages / 4, threads * pages * 2));
  ASSERT_TRUE(mr.ok()) << mr.error().to_string();
  machine& m = **mr;
  std::vector<std::unique_ptr<mm_struct>> mms;
  for (int i = 0; i < (shared_mm ? 1 : threads); ++i) mms.push_back(m.mm_alloc());
  std::atomic<uint64_t> bad{0}, errors{0};
  // Every thread has written all its pages before any reads back: 4x RAM is live at once.
  std::barrier all_written(threads);
  run_threads(threads, [&](int t) {
    mm_struct& mm = *mms[shared_mm ? 0 : t];
    auto a = mm.mmap(pages * page_size);
    if (!a.ok()) errors.fetch_add(1);
    const uint64_t tag1 = static_cast<uint64_t>(t) * 8 + 1, tag2 = tag1 + 1;
    if (a.ok() && !pattern.fill(mm, *a, 0, pages, tag1).ok()) errors.fetch_add(1);
    all_written.arrive_and_wait();
    if (!a.ok()) return;
    bad.fetch_add(pattern.mismatches(mm, *a, 0, pages, tag1));
    // Rewrite the odd pages: swapped-in clean pages become dirty and go out again.
    for (uint64_t p = 1; p < pages; p += 2)
      if (!pattern.fill(mm, *a, p, p + 1, tag2).ok()) errors.fetch_add(1);
    bad.fetch_add(
        pattern.mismatches(mm, *a, 0, pages, [&](uint64_t p) { return p % 2 ? tag2 : tag1; }));
    if (!mm.munmap(*a, pages * page_size).ok()) errors.fetch_add(1);
  });
  EXPECT_EQ(errors.load(), 0u);
  EXPECT_EQ(bad.load(), 0u);
  const auto ev = m.events();
  EXPECT_GT(ev[PSWPOUT], 0u);
  EXPECT_GT(ev[PSWPIN], 0u);
  mms.clear();
  expect_swap_empty(m);
}

TEST_P(LockComboTest, ThreadsInOneMmVerifyEveryPageThroughSwap) {
  usemem_verify(GetParam(), true);
}
TEST_P(LockComboTest, SeparateMmsVerifyEveryPageThroughSwap) {
  usemem_verify(GetParam(), false);
}

INSTANTIATE_TEST_SUITE_P(Combos, LockComboTest, ::testing::ValuesIn(all_combos()),
                         [](const auto& info) { return combo_name(info.param); });

TEST(SwapConcurrency, RacingFaultsOnOneSwappedOutPageMapOneFrame) {
  auto m = machine::create(mm_test::options(256, 1024)).value();
  auto mm = m->mm_alloc();
  const uint64_t n = 64 / scale;
  auto a = mm->mmap(n * page_size);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(pattern.fill(*mm, *a, 0, n, 5).ok());
  m->lru_add_drain_all();
  for (int i = 0; i < 8 && mm->swap_ents() < n; ++i) m->shrink(n);
  ASSERT_EQ(mm->swap_ents(), n);
  const uint64_t majfault_before = m->events()[PGMAJFAULT];
  for (uint64_t p = 0; p < n; ++p) {
    const uint64_t addr = *a + p * page_size;
    std::atomic<uint32_t> seen{no_pfn};
    std::atomic<int> different{0}, bad{0};
    run_threads(16, [&](int t) {
      // Half read, half write the same word back: every kind of fault races.
      uint64_t v = 0;
      if (!mm->read(addr + 8, &v, 8).ok() || v != 5) bad.fetch_add(1);  // word 1 is the tag
      if (t % 2 && !mm->write(addr + 8, &v, 8).ok()) bad.fetch_add(1);
      const pte_t pte = mm->pte_of(addr);
      uint32_t expect = no_pfn;
      if (!seen.compare_exchange_strong(expect, pte_pfn(pte)) && expect != pte_pfn(pte))
        different.fetch_add(1);
    });
    EXPECT_EQ(bad.load(), 0) << p;
    EXPECT_EQ(different.load(), 0) << p;
  }
  EXPECT_EQ(m->events()[PGMAJFAULT] - majfault_before, n);  // each page read from zram once
  EXPECT_EQ(mm->rss_anon(), n);
  EXPECT_EQ(mm->swap_ents(), 0u);
  mm.reset();
  expect_swap_empty(*m);
}

// Writers keep bumping a version in each of their pages while reclaim (kswapd and direct)
// pushes them out, and churners mmap / write / munmap beside them: the last version written
// must be what comes back.
TEST(SwapConcurrency, ReclaimUnderPressureNeverLosesADirtyPage) {
  for (swap_lock_mode mode : {swap_lock_mode::global, swap_lock_mode::percpu}) {
    combo c{mode, swap_dev_kind::zram, zram_lock_mode::slot_bitlock};
    auto m = machine::create(options_for(c, 256, 2048)).value();
    auto mm = m->mm_alloc();
    const int writers = 8, churners = 4;
    const uint64_t pages = 96;
    std::vector<uint64_t> bases(writers);
    for (auto& b : bases) b = *mm->mmap(pages * page_size);
    std::atomic<uint64_t> bad{0};
    std::atomic<int> writers_done{0};
    run_threads(writers + churners, [&](int t) {
      if (t >= writers) {
        auto own = m->mm_alloc();
        for (int r = 0; writers_done.load() < writers; ++r) {
          auto a = own->mmap(32 * page_size);
          if (!a.ok()) {
            bad.fetch_add(1);
            continue;
          }
          if (!pattern.fill(*own, *a, 0, 32, 99).ok()) bad.fetch_add(1);
          if (!own->munmap(*a, 32 * page_size).ok()) bad.fetch_add(1);
        }
        return;
      }
      std::vector<uint64_t> version(pages, 0);
      uint64_t x = static_cast<uint64_t>(t) + 1;
      for (uint64_t i = 0; i < 1500 / scale; ++i) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        const uint64_t p = x % pages;
        const uint64_t addr = bases[t] + p * page_size;
        uint64_t v = 0;
        if (!mm->read(addr, &v, 8).ok() || v != version[p]) bad.fetch_add(1);
        ++version[p];
        if (!mm->write(addr, &version[p], 8).ok()) bad.fetch_add(1);
      }
      for (uint64_t p = 0; p < pages; ++p) {
        uint64_t v = 0;
        if (!mm->read(bases[t] + p * page_size, &v, 8).ok() || v != version[p]) bad.fetch_add(1);
      }
      writers_done.fetch_add(1);
    });
    EXPECT_EQ(bad.load(), 0u) << to_string(mode);
    EXPECT_GT(m->events()[PSWPOUT], 0u);
    mm.reset();
    expect_swap_empty(*m);
  }
}

TEST(SwapConcurrency, RunningOutOfRamAndSwapIsReportedToEveryThread) {
  combo c{swap_lock_mode::cluster, swap_dev_kind::ram, zram_lock_mode::slot_bitlock};
  auto m = machine::create(options_for(c, 128, 256)).value();
  auto mm = m->mm_alloc();
  std::atomic<int> enomem{0};
  std::atomic<uint64_t> written{0}, other{0};
  std::vector<uint64_t> base(16), got(16);
  run_threads(16, [&](int t) {
    base[t] = *mm->mmap(64 * page_size);
    uint64_t p = 0;
    for (; p < 64; ++p) {
      status st = pattern.fill(*mm, base[t], p, p + 1, static_cast<uint64_t>(t) + 100);
      if (st.code() == ENOMEM) {
        enomem.fetch_add(1);
        break;
      }
      if (!st.ok()) other.fetch_add(1);
    }
    got[t] = p;
    written.fetch_add(p);
  });
  EXPECT_EQ(other.load(), 0u);
  EXPECT_GT(enomem.load(), 0);            // 16 * 64 > 128 + 256
  EXPECT_LE(written.load(), 128u + 256u);
  // Free half of every thread's pages, then every page written is still intact.
  for (int t = 0; t < 16; ++t)
    ASSERT_TRUE(mm->munmap(base[t] + 32 * page_size, 32 * page_size).ok());
  for (int t = 0; t < 16; ++t) {
    const uint64_t keep = std::min<uint64_t>(got[t], 32);
    EXPECT_EQ(pattern.mismatches(*mm, base[t], 0, keep, static_cast<uint64_t>(t) + 100), 0u) << t;
  }
  mm.reset();
  expect_swap_empty(*m);
}

}  // namespace
}  // namespace uswap
