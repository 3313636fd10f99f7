// The reverse map with fork, files and exec, one thread at a time, in both rmap lock modes:
// parent and child see only their own writes after fork, also after both were swapped out and
// back; one try_to_unmap unmaps a page shared by many forks from all of them; exit frees every
// frame, slot and zram object; shared file mappings see each other's writes, also across
// reclaim, which writes dirty file pages back; private file mappings copy on write; exec
// replaces the mappings; the i_mmap interval tree answers as a brute-force search does; bad
// input is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <random>
#include <set>
#include <vector>

#include "uswap/mm/filemap.h"
#include "uswap/mm/machine.h"
#include "uswap/mm/mm_types.h"
#include "uswap/mm/rmap.h"
#include "uswap/swap/swap_system.h"
#include "uswap/sync/lockstat.h"

namespace uswap {
namespace {

std::unique_ptr<machine> make(uint64_t ram_pages, uint64_t swap_pages, rmap_lock_mode mode,
                              swap_dev_kind dev = swap_dev_kind::zram) {
  machine_options o;
  o.ram = pages_to_bytes(ram_pages);
  o.swap = pages_to_bytes(swap_pages);
  o.swap_dev = dev;
  o.kswapd = false;
  o.rmap_lock = mode;
  auto m = machine::create(o);
  EXPECT_TRUE(m.ok()) << m.error().to_string();
  return m.ok() ? std::move(*m) : nullptr;
}

uint64_t word(uint64_t tag, uint64_t page, uint64_t i) { return (tag << 40) ^ (page << 12) ^ (i * 0x9e37); }

status fill(mm_struct& mm, uint64_t base, uint64_t first, uint64_t last, uint64_t tag) {
  return mm.access(base + first * page_size, (last - first) * page_size, access_type::write,
                   [&](uint64_t a, std::span<std::byte, page_size> pg) {
                     auto* w = reinterpret_cast<uint64_t*>(pg.data());
                     const uint64_t p = (a - base) >> page_shift;
                     for (uint64_t i = 0; i < page_size / 8; ++i) w[i] = word(tag, p, i);
                   });
}

// Pages of [first, last) whose contents differ from fill's pattern for tag (all pages on error).
uint64_t mismatches(mm_struct& mm, uint64_t base, uint64_t first, uint64_t last, uint64_t tag) {
  uint64_t bad = 0;
  status st = mm.access(base + first * page_size, (last - first) * page_size, access_type::read,
                        [&](uint64_t a, std::span<std::byte, page_size> pg) {
                          const auto* w = reinterpret_cast<const uint64_t*>(pg.data());
                          const uint64_t p = (a - base) >> page_shift;
                          for (uint64_t i = 0; i < page_size / 8; ++i)
                            if (w[i] != word(tag, p, i)) {
                              ++bad;
                              break;
                            }
                        });
  EXPECT_TRUE(st.ok()) << st.to_string();
  return st.ok() ? bad : last - first;
}

// Everything freed: frames, swap slots, swap cache, zram objects.
void expect_clean(machine& m) {
  m.lru_add_drain_all();
  if (m.swap_sys()) m.swap_sys()->drain_swap_slots_cache();
  const swap_usage u = m.swap_stats();
  EXPECT_EQ(u.inuse, 0u);
  EXPECT_EQ(u.cached, 0u);
  EXPECT_EQ(m.nr_free_pages(), m.mem().nr_pages());
  if (m.zram()) {
    EXPECT_EQ(m.zram()->mm_stat().orig_data_size, 0u);
  }
}

// Reclaims until nothing more goes (every anonymous page out, file pages dropped): passes until
// two in a row free nothing (one pass may only age the lists).
void reclaim_all(machine& m) {
  m.lru_add_drain_all();
  for (int i = 0, idle = 0; i < 64 && idle < 2; ++i) idle = m.shrink(1u << 20) ? 0 : idle + 1;
}

class RmapTest : public ::testing::TestWithParam<rmap_lock_mode> {};

INSTANTIATE_TEST_SUITE_P(Modes, RmapTest, ::testing::ValuesIn(all_rmap_lock_modes),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST(RmapLockMode, ParsesAndNamesLockClassesAsTheKernel) {
  for (rmap_lock_mode md : all_rmap_lock_modes) {
    auto r = parse_rmap_lock_mode(to_string(md));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(*r, md);
  }
  auto bad = parse_rmap_lock_mode("mutex");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), EINVAL);
  EXPECT_NE(bad.error().message().find("spin, rwsem"), std::string::npos);
  auto spin = make(64, 0, rmap_lock_mode::spin);
  auto rw = make(64, 0, rmap_lock_mode::rwsem);
  EXPECT_EQ(spin->anon_vma_class()->name(), "anon_vma->lock");
  EXPECT_EQ(spin->i_mmap_class()->name(), "i_mmap_lock");
  EXPECT_EQ(rw->anon_vma_class()->name(), "anon_vma->rwsem");
  EXPECT_EQ(rw->i_mmap_class()->name(), "i_mmap_rwsem");
}

TEST(RmapLock, SpinModeIsExclusiveForWalksRwsemShares) {
  lock_class cls("test.rmap_lock");
  rmap_lock spin(rmap_lock_mode::spin, &cls), rw(rmap_lock_mode::rwsem, &cls);
  rw.lock_read();
  // A second reader gets in only in rwsem mode: try from another thread with a deadline.
  std::atomic<bool> got{false};
  std::thread t([&] {
    rw.lock_read();
    got = true;
    rw.unlock_read();
  });
  t.join();
  EXPECT_TRUE(got.load());
  rw.unlock_read();
  spin.lock_read();
  EXPECT_FALSE(spin.is_contended());
  std::atomic<bool> in{false};
  std::thread t2([&] {
    spin.lock_read();
    in = true;
    spin.unlock_read();
  });
  // The second walker must wait; it parks, so the lock reads as contended.
  for (int i = 0; i < 2000 && !spin.is_contended(); ++i) std::this_thread::sleep_for(std::chrono::microseconds(500));
  EXPECT_TRUE(spin.is_contended());
  EXPECT_FALSE(in.load());
  spin.unlock_read();
  t2.join();
  EXPECT_TRUE(in.load());
}

TEST(VmaIntervalTree, AgreesWithBruteForceUnderRandomInsertsAndRemoves) {
  std::mt19937_64 rng(42);
  std::vector<std::unique_ptr<vm_area_struct>> pool;
  std::vector<vm_area_struct*> in;
  vm_area_struct* root = nullptr;
  for (int step = 0; step < 3000; ++step) {
    if (in.empty() || rng() % 3) {
      auto v = std::make_unique<vm_area_struct>();
      v->vm_pgoff = rng() % 500;
      v->vm_start = 0;
      v->vm_end = (1 + rng() % 40) * page_size;
      vma_interval_tree_insert(v.get(), &root);
      in.push_back(v.get());
      pool.push_back(std::move(v));
    } else {
      const size_t i = rng() % in.size();
      vma_interval_tree_remove(in[i], &root);
      in.erase(in.begin() + static_cast<long>(i));
    }
    ASSERT_EQ(vma_interval_tree_check(root), static_cast<int64_t>(in.size())) << "step " << step;
    const uint64_t first = rng() % 560, last = first + rng() % 30;
    std::set<vm_area_struct*> want, got;
    for (vm_area_struct* v : in)
      if (vma_start_pgoff(v) <= last && vma_last_pgoff(v) >= first) want.insert(v);
    uint64_t prev = 0;
    bool ordered = true;
    vma_interval_tree_foreach(root, first, last, [&](vm_area_struct* v) {
      ordered = ordered && v->vm_pgoff >= prev;
      prev = v->vm_pgoff;
      got.insert(v);
      return true;
    });
    ASSERT_EQ(got, want) << "step " << step;
    ASSERT_TRUE(ordered);
  }
}

TEST_P(RmapTest, ParentAndChildSeeOnlyTheirOwnWritesAfterFork) {
  auto m = make(512, 0, GetParam());
  auto parent = m->mm_alloc();
  constexpr uint64_t n = 64;
  auto a = parent->mmap(n * page_size);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(fill(*parent, *a, 0, n, 1).ok());
  auto cr = parent->fork();
  ASSERT_TRUE(cr.ok()) << cr.error().to_string();
  auto child = std::move(*cr);
  EXPECT_EQ(child->rss_anon(), n);
  EXPECT_EQ(m->nr_free_pages(), m->mem().nr_pages() - n);  // shared, not copied
  ASSERT_TRUE(fill(*parent, *a, 0, n / 2, 2).ok());
  ASSERT_TRUE(fill(*child, *a, n / 4, n, 3).ok());
  EXPECT_EQ(mismatches(*parent, *a, 0, n / 2, 2), 0u);
  EXPECT_EQ(mismatches(*parent, *a, n / 2, n, 1), 0u);
  EXPECT_EQ(mismatches(*child, *a, 0, n / 4, 1), 0u);
  EXPECT_EQ(mismatches(*child, *a, n / 4, n, 3), 0u);
  // Pages [0, n/4) are still shared; the others were copied once (by whichever wrote second
  // the last sharer reuses its page).
  EXPECT_LE(m->mem().nr_pages() - m->nr_free_pages(), 2 * n);
  child.reset();
  EXPECT_EQ(mismatches(*parent, *a, 0, n / 2, 2), 0u);
  EXPECT_EQ(mismatches(*parent, *a, n / 2, n, 1), 0u);
  parent.reset();
  expect_clean(*m);
}

TEST_P(RmapTest, ForkSharesSwappedOutPagesAndBothSeeOwnWritesAfterSwapInAndOut) {
  for (swap_dev_kind dev : {swap_dev_kind::zram, swap_dev_kind::ram}) {
    auto m = make(256, 1024, GetParam(), dev);
    auto parent = m->mm_alloc();
    constexpr uint64_t n = 128;
    auto a = parent->mmap(n * page_size);
    ASSERT_TRUE(a.ok());
    ASSERT_TRUE(fill(*parent, *a, 0, n, 1).ok());
    reclaim_all(*m);
    ASSERT_GT(parent->swap_ents(), n / 2);  // most of it is out
    const uint64_t inuse = m->swap_stats().inuse;
    auto cr = parent->fork();
    ASSERT_TRUE(cr.ok()) << cr.error().to_string();
    auto child = std::move(*cr);
    EXPECT_EQ(child->swap_ents(), parent->swap_ents());
    EXPECT_EQ(m->swap_stats().inuse, inuse);  // swap_duplicate: counts, not new slots
    // Each writes its half after swapping in; then everything goes out again and comes back.
    ASSERT_TRUE(fill(*parent, *a, 0, n / 2, 2).ok());
    ASSERT_TRUE(fill(*child, *a, n / 2, n, 3).ok());
    reclaim_all(*m);
    EXPECT_GT(m->events()[PSWPOUT], 0u);
    EXPECT_EQ(mismatches(*parent, *a, 0, n / 2, 2), 0u);
    EXPECT_EQ(mismatches(*parent, *a, n / 2, n, 1), 0u);
    EXPECT_EQ(mismatches(*child, *a, 0, n / 2, 1), 0u);
    EXPECT_EQ(mismatches(*child, *a, n / 2, n, 3), 0u);
    // A grandchild forked from the child after all that sees the child's view.
    reclaim_all(*m);
    auto gr = child->fork();
    ASSERT_TRUE(gr.ok());
    auto grand = std::move(*gr);
    child.reset();
    EXPECT_EQ(mismatches(*grand, *a, 0, n / 2, 1), 0u);
    EXPECT_EQ(mismatches(*grand, *a, n / 2, n, 3), 0u);
    EXPECT_EQ(mismatches(*parent, *a, n / 2, n, 1), 0u);
    grand.reset();
    parent.reset();
    expect_clean(*m);
  }
}

TEST_P(RmapTest, OneTryToUnmapUnmapsAPageSharedByManyForks) {
  auto m = make(512, 256, GetParam());
  auto parent = m->mm_alloc();
  auto a = parent->mmap(4 * page_size);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(fill(*parent, *a, 0, 4, 7).ok());
  std::vector<std::unique_ptr<mm_struct>> kids;
  for (int i = 0; i < 12; ++i) {
    auto c = (i % 2 ? kids.back().get() : parent.get())->fork();  // children and grandchildren
    ASSERT_TRUE(c.ok());
    kids.push_back(std::move(*c));
  }
  const uint64_t addr = *a + page_size;
  const pte_t pte = parent->pte_of(addr);
  ASSERT_TRUE(pte_present(pte));
  page* p = m->pfn_to_page(pte_pfn(pte));
  EXPECT_EQ(p->mapcount(), 13);
  m->lru_add_drain_all();
  p->get();
  p->lock(m->page_lock_class());
  EXPECT_EQ(page_referenced(p), 13);  // every pte was young
  EXPECT_EQ(page_referenced(p), 0);
  ASSERT_TRUE(m->add_to_swap(p));
  ASSERT_TRUE(try_to_unmap(p));
  EXPECT_EQ(p->mapcount(), 0);
  const uint64_t entry = p->private_.load();
  for (mm_struct* mm : {parent.get()}) EXPECT_EQ(mm->pte_of(addr), swp_entry_to_pte_val(entry));
  for (auto& k : kids) EXPECT_EQ(k->pte_of(addr), swp_entry_to_pte_val(entry));
  EXPECT_EQ(m->swap_sys()->swap_map_byte(swap_entry{entry}) & ~SWAP_HAS_CACHE, 13);
  p->unlock();
  m->put_page(p);
  // Everyone faults it back (from the swap cache) and still sees the original contents.
  EXPECT_EQ(mismatches(*parent, *a, 0, 4, 7), 0u);
  for (auto& k : kids) EXPECT_EQ(mismatches(*k, *a, 0, 4, 7), 0u);
  kids.clear();
  parent.reset();
  expect_clean(*m);
}

TEST_P(RmapTest, ExitFreesEverySlotAndObjectOfAForkTree) {
  auto m = make(256, 2048, GetParam());
  std::vector<std::unique_ptr<mm_struct>> mms;
  mms.push_back(m->mm_alloc());
  auto a = mms[0]->mmap(200 * page_size);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(fill(*mms[0], *a, 0, 200, 1).ok());
  for (int i = 0; i < 6; ++i) {
    reclaim_all(*m);
    auto c = mms[static_cast<size_t>(i) / 2]->fork();
    ASSERT_TRUE(c.ok());
    mms.push_back(std::move(*c));
    ASSERT_TRUE(fill(*mms.back(), *a, static_cast<uint64_t>(i) * 20, static_cast<uint64_t>(i) * 20 + 30, 10 + i).ok());
  }
  reclaim_all(*m);
  EXPECT_GT(m->swap_stats().inuse, 0u);
  // Exit in an order that is not the fork order: parents before children.
  for (auto& mm : mms) mm.reset();
  expect_clean(*m);
}

TEST_P(RmapTest, SharedFileMappingsSeeEachOthersWritesAlsoAcrossReclaim) {
  auto m = make(256, 0, GetParam());  // no swap: only file pages can be reclaimed
  constexpr uint64_t n = 200;
  auto fr = file::create(*m, n * page_size, "data");
  ASSERT_TRUE(fr.ok());
  std::shared_ptr<file> f = std::move(*fr);
  auto mm1 = m->mm_alloc(), mm2 = m->mm_alloc();
  auto a1 = mm1->mmap_file(f, 0, n * page_size, /*shared=*/true);
  auto a2 = mm2->mmap_file(f, 0, n * page_size, /*shared=*/true);
  ASSERT_TRUE(a1.ok() && a2.ok());
  EXPECT_EQ(f->nr_mappings(), 2u);
  ASSERT_TRUE(fill(*mm1, *a1, 0, n, 5).ok());
  EXPECT_EQ(mismatches(*mm2, *a2, 0, n, 5), 0u);
  ASSERT_TRUE(fill(*mm2, *a2, n / 2, n, 6).ok());
  EXPECT_EQ(mismatches(*mm1, *a1, n / 2, n, 6), 0u);
  EXPECT_EQ(f->nr_cached(), n);
  EXPECT_EQ(mm1->rss_file() + mm2->rss_file(), 2 * n);
  // Reclaim: every page is unmapped from both, written back, dropped from the cache.
  for (int i = 0; i < 3; ++i) reclaim_all(*m);
  EXPECT_LT(f->nr_cached(), n / 4);
  EXPECT_GT(m->events()[NR_WRITTEN], n / 2);
  std::vector<uint64_t> disk(page_size / 8);
  uint64_t on_disk_bad = 0;
  for (uint64_t p = 0; p < n; ++p) {
    ASSERT_TRUE(f->read_backing(p * page_size, disk.data(), page_size).ok());
    for (uint64_t i = 0; i < page_size / 8; ++i)
      if (disk[i] != word(p < n / 2 ? 5 : 6, p, i)) {
        ++on_disk_bad;
        break;
      }
  }
  // Pages still cached may not have reached the disk yet; all others must have.
  EXPECT_LE(on_disk_bad, f->nr_cached());
  EXPECT_EQ(mismatches(*mm2, *a2, 0, n / 2, 5), 0u);
  EXPECT_EQ(mismatches(*mm1, *a1, n / 2, n, 6), 0u);
  // Written after reclaim, read by the other after another reclaim.
  ASSERT_TRUE(fill(*mm2, *a2, 0, 10, 8).ok());
  reclaim_all(*m);
  EXPECT_EQ(mismatches(*mm1, *a1, 0, 10, 8), 0u);
  mm1.reset();
  mm2.reset();
  EXPECT_EQ(f->nr_mappings(), 0u);
  f.reset();
  expect_clean(*m);
}

TEST_P(RmapTest, PrivateFileMappingsCopyOnWriteAndForkShareTheCopies) {
  auto m = make(512, 256, GetParam());
  constexpr uint64_t n = 32;
  auto fr = file::create(*m, n * page_size, "text");
  ASSERT_TRUE(fr.ok());
  std::shared_ptr<file> f = std::move(*fr);
  {
    std::vector<uint64_t> w(page_size / 8);
    for (uint64_t p = 0; p < n; ++p) {
      for (uint64_t i = 0; i < w.size(); ++i) w[i] = word(4, p, i);
      ASSERT_TRUE(f->write_backing(p * page_size, w.data(), page_size).ok());
    }
  }
  auto mm = m->mm_alloc();
  auto a = mm->mmap_file(f, 0, n * page_size, /*shared=*/false);
  auto s = mm->mmap_file(f, 0, n * page_size, /*shared=*/true, PROT_READ);
  ASSERT_TRUE(a.ok() && s.ok());
  EXPECT_EQ(mismatches(*mm, *a, 0, n, 4), 0u);  // reads map the cache pages
  ASSERT_TRUE(fill(*mm, *a, 0, n / 2, 9).ok());  // writes copy them
  EXPECT_EQ(mm->rss_anon(), n / 2);
  EXPECT_EQ(mismatches(*mm, *s, 0, n, 4), 0u);  // the file did not change
  EXPECT_EQ(mm->write(*s, "x", 1).code(), EFAULT);  // read-only mapping
  auto cr = mm->fork();
  ASSERT_TRUE(cr.ok());
  auto child = std::move(*cr);
  ASSERT_TRUE(fill(*child, *a, 0, 4, 11).ok());
  EXPECT_EQ(mismatches(*mm, *a, 0, 4, 9), 0u);
  EXPECT_EQ(mismatches(*child, *a, 4, n / 2, 9), 0u);
  EXPECT_EQ(mismatches(*child, *a, n / 2, n, 4), 0u);
  reclaim_all(*m);
  EXPECT_EQ(mismatches(*child, *a, 0, 4, 11), 0u);
  EXPECT_EQ(mismatches(*mm, *a, 0, n / 2, 9), 0u);
  EXPECT_EQ(mismatches(*mm, *a, n / 2, n, 4), 0u);
  // munmap of part of a file VMA splits it; both halves stay in i_mmap.
  EXPECT_EQ(f->nr_mappings(), 4u);
  ASSERT_TRUE(mm->munmap(*a + 8 * page_size, 4 * page_size).ok());
  EXPECT_EQ(f->nr_mappings(), 5u);
  EXPECT_EQ(mismatches(*mm, *a, 12, n / 2, 9), 0u);
  EXPECT_EQ(mm->touch(*a + 9 * page_size, access_type::read).code(), EFAULT);
  child.reset();
  mm.reset();
  f.reset();
  expect_clean(*m);
}

TEST_P(RmapTest, ExecReplacesTheMappingsAndFreesTheOldOnes) {
  auto m = make(512, 256, GetParam());
  auto fr = file::create(*m, 16 * page_size, "prog");
  ASSERT_TRUE(fr.ok());
  std::shared_ptr<file> prog = std::move(*fr);
  std::vector<uint64_t> w(page_size / 8);
  for (uint64_t p = 0; p < 16; ++p) {
    for (uint64_t i = 0; i < w.size(); ++i) w[i] = word(3, p, i);
    ASSERT_TRUE(prog->write_backing(p * page_size, w.data(), page_size).ok());
  }
  auto parent = m->mm_alloc();
  auto a = parent->mmap(64 * page_size);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(fill(*parent, *a, 0, 64, 1).ok());
  auto cr = parent->fork();
  ASSERT_TRUE(cr.ok());
  auto child = std::move(*cr);
  auto addrs = child->exec({{prog, 0, 8 * page_size, false, PROT_READ, 0},
                            {prog, 8 * page_size, 8 * page_size, false, PROT_READ | PROT_WRITE, 0},
                            {nullptr, 0, 16 * page_size, false, PROT_READ | PROT_WRITE, 0}});
  ASSERT_TRUE(addrs.ok()) << addrs.error().to_string();
  ASSERT_EQ(addrs->size(), 3u);
  EXPECT_EQ(child->map_count(), 3u);
  EXPECT_EQ(child->rss_anon(), 0u);
  EXPECT_EQ(child->swap_ents(), 0u);
  // text and data come from the file; the page relative to the mapping start is p + 8 for data.
  EXPECT_EQ(mismatches(*child, (*addrs)[0], 0, 8, 3), 0u);
  uint64_t bad = 0;
  ASSERT_TRUE(child->access((*addrs)[1], 8 * page_size, access_type::read,
                            [&](uint64_t ad, std::span<std::byte, page_size> pg) {
                              const uint64_t p = ((ad - (*addrs)[1]) >> page_shift) + 8;
                              const auto* x = reinterpret_cast<const uint64_t*>(pg.data());
                              if (x[5] != word(3, p, 5)) ++bad;
                            }).ok());
  EXPECT_EQ(bad, 0u);
  ASSERT_TRUE(fill(*child, (*addrs)[2], 0, 16, 2).ok());
  EXPECT_EQ(mismatches(*parent, *a, 0, 64, 1), 0u);
  auto bad_exec = child->exec({{prog, 0, 32 * page_size, false, PROT_READ, 0}});
  EXPECT_EQ(bad_exec.error().code(), EINVAL);
  EXPECT_EQ(child->map_count(), 3u);  // refused before the point of no return
  child.reset();
  parent.reset();
  prog.reset();
  expect_clean(*m);
}

TEST_P(RmapTest, InvalidateZapsEveryMappingWritesBackAndDrops) {
  auto m = make(512, 0, GetParam());
  auto fr = file::create(*m, 64 * page_size);
  ASSERT_TRUE(fr.ok());
  std::shared_ptr<file> f = std::move(*fr);
  auto mm1 = m->mm_alloc(), mm2 = m->mm_alloc();
  auto a1 = mm1->mmap_file(f, 0, 64 * page_size, true);
  auto a2 = mm2->mmap_file(f, 16 * page_size, 32 * page_size, true);
  ASSERT_TRUE(a1.ok() && a2.ok());
  ASSERT_TRUE(fill(*mm1, *a1, 0, 64, 12).ok());
  EXPECT_EQ(mm2->touch(*a2, access_type::read).code(), 0);
  auto dropped = f->invalidate(0, 64 * page_size);
  ASSERT_TRUE(dropped.ok());
  EXPECT_EQ(*dropped, 64u);
  EXPECT_EQ(f->nr_cached(), 0u);
  EXPECT_EQ(mm1->rss_file(), 0u);
  EXPECT_EQ(mm2->rss_file(), 0u);
  EXPECT_FALSE(pte_present(mm1->pte_of(*a1)));
  std::vector<uint64_t> disk(page_size / 8);
  ASSERT_TRUE(f->read_backing(20 * page_size, disk.data(), page_size).ok());
  EXPECT_EQ(disk[3], word(12, 20, 3));
  // mm2 maps file pages [16, 48): it faults the written-back data in again.
  uint64_t bad = 0;
  ASSERT_TRUE(mm2->access(*a2, 32 * page_size, access_type::read,
                          [&](uint64_t ad, std::span<std::byte, page_size> pg) {
                            const uint64_t p = ((ad - *a2) >> page_shift) + 16;
                            const auto* x = reinterpret_cast<const uint64_t*>(pg.data());
                            for (uint64_t i = 0; i < page_size / 8; ++i)
                              if (x[i] != word(12, p, i)) {
                                ++bad;
                                break;
                              }
                          }).ok());
  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(f->invalidate(60 * page_size, 8 * page_size).error().code(), EINVAL);
  mm1.reset();
  mm2.reset();
  f.reset();
  expect_clean(*m);
}

TEST_P(RmapTest, BadFileMappingsAreRefusedAndChangeNothing) {
  auto m = make(64, 0, GetParam());
  auto fr = file::create(*m, 8 * page_size);
  ASSERT_TRUE(fr.ok());
  EXPECT_EQ(file::create(*m, 0).error().code(), EINVAL);
  auto mm = m->mm_alloc();
  EXPECT_EQ(mm->mmap_file(*fr, 0, 9 * page_size, true).error().code(), EINVAL);
  EXPECT_EQ(mm->mmap_file(*fr, 100, page_size, true).error().code(), EINVAL);
  EXPECT_EQ(mm->mmap_file(*fr, 0, 0, true).error().code(), EINVAL);
  EXPECT_EQ(mm->mmap_file(nullptr, 0, page_size, true).error().code(), EINVAL);
  EXPECT_EQ(mm->map_count(), 0u);
  EXPECT_EQ((*fr)->nr_mappings(), 0u);
  EXPECT_EQ((*fr)->read_backing(7 * page_size, nullptr, 2 * page_size).code(), EINVAL);
}

}  // namespace
}  // namespace uswap
