// The reverse map with fork, files and exec, one thread at a time, in both rmap lock modes:
// parent and child see only their own writes after fork, also after both were swapped out and
// back; one try_to_unmap unmaps a page shared by many forks from all of them; exit frees every
// frame, slot and zram object; shared file mappings see each other's writes, also across
// reclaim, which writes dirty file pages back; private file mappings copy on write; exec
// replaces the mappings; the i_mmap and anon_vma interval trees answer as a brute-force search
// does, and anon walks find exactly the VMAs covering a page after fork, splits and exits; bad
// input is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <random>
#include <set>
#include <vector>

#include "mm_test_util.h"
#include "uswap/mm/filemap.h"
#include "uswap/mm/machine.h"
#include "uswap/mm/mm_types.h"
#include "uswap/mm/rmap.h"
#include "uswap/swap/swap_system.h"
#include "uswap/sync/lockstat.h"
#include "uswap_testing/param_names.h"
#include "uswap_testing/threads.h"

namespace uswap {
namespace {

std::unique_ptr<machine> make(uint64_t ram_pages, uint64_t swap_pages, rmap_lock_mode mode,
                              swap_dev_kind dev = swap_dev_kind::zram) {
  machine_options o = mm_test::options(ram_pages, swap_pages, dev);
  o.rmap_lock = mode;
  return mm_test::make_machine(o);
}

uint64_t word(uint64_t tag, uint64_t page, uint64_t i) { return (tag << 40) ^ (page << 12) ^ (i * 0x9e37); }

// Every word of a page distinct for its (tag, page).
constexpr mm_test::page_pattern pattern{word};

// Everything freed: frames, swap slots, swap cache, zram objects.
void expect_clean(machine& m) {
  m.lru_add_drain_all();
  if (m.swap_sys()) m.swap_sys()->drain_swap_slots_cache();
  const swap_usage u = m.swap_stats();
  EXPECT_EQ(u.inuse, 0u);
  EXPECT_EQ(u.cached, 0u);
  EXPECT_EQ(m.nr_free_pages(), m.mem().nr_pages());
  if (swap_backend* b = m.backend()) {
    EXPECT_EQ(b->stats().device.stored_pages, 0u);
    EXPECT_TRUE(b->check_invariants().ok()) << b->check_invariants().to_string();
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
                         testing::to_string_name());

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
  EXPECT_TRUE(testing::eventually([&] { return spin.is_contended() || in.load(); }))
      << "the second walker neither got in nor parked";
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

// The same tree instantiated over anon_vma_chain (anon_vma->rb_root), keyed through each avc's
// VMA: it answers as a brute-force search, also after a VMA's range changes through
// pre_update_vma / post_update_vma.
TEST(AnonVmaIntervalTree, AgreesWithBruteForceUnderRandomInsertsRemovesAndRangeChanges) {
  std::mt19937_64 rng(7);
  std::vector<std::unique_ptr<vm_area_struct>> vmas;
  std::vector<std::unique_ptr<anon_vma_chain>> pool;
  std::vector<anon_vma_chain*> in;
  anon_vma_chain* root = nullptr;
  for (int step = 0; step < 3000; ++step) {
    const unsigned op = static_cast<unsigned>(rng() % 4);
    if (in.empty() || op < 2) {
      auto v = std::make_unique<vm_area_struct>();
      v->vm_pgoff = rng() % 500;
      v->vm_start = 0;
      v->vm_end = (1 + rng() % 40) * page_size;
      auto avc = std::make_unique<anon_vma_chain>();
      avc->vma = v.get();
      anon_vma_interval_tree_insert(avc.get(), &root);
      in.push_back(avc.get());
      pool.push_back(std::move(avc));
      vmas.push_back(std::move(v));
    } else if (op == 2) {
      const size_t i = rng() % in.size();
      anon_vma_interval_tree_remove(in[i], &root);
      in.erase(in.begin() + static_cast<long>(i));
    } else {
      // A range change (split / vma_adjust): out of the tree, new end, back in.
      anon_vma_chain* avc = in[rng() % in.size()];
      anon_vma_interval_tree_remove(avc, &root);
      avc->vma->vm_end = (1 + rng() % 40) * page_size;
      anon_vma_interval_tree_insert(avc, &root);
    }
    ASSERT_EQ(anon_vma_interval_tree_check(root), static_cast<int64_t>(in.size())) << "step " << step;
    const uint64_t first = rng() % 560, last = first + rng() % 30;
    std::set<anon_vma_chain*> want, got;
    for (anon_vma_chain* a : in)
      if (avc_start_pgoff(a) <= last && avc_last_pgoff(a) >= first) want.insert(a);
    uint64_t prev = 0;
    bool ordered = true;
    anon_vma_interval_tree_foreach(root, first, last, [&](anon_vma_chain* a) {
      ordered = ordered && avc_start_pgoff(a) >= prev;
      prev = avc_start_pgoff(a);
      got.insert(a);
      return true;
    });
    ASSERT_EQ(got, want) << "step " << step;
    ASSERT_TRUE(ordered);
  }
  // A range changed behind the tree's back is caught by check(): the augmentation is stale.
  if (!in.empty()) {
    anon_vma_chain* widest = in.front();
    for (anon_vma_chain* a : in)
      if (avc_last_pgoff(a) > avc_last_pgoff(widest)) widest = a;
    widest->vma->vm_end += 1000 * page_size;
    EXPECT_EQ(anon_vma_interval_tree_check(root), -1);
  }
}

// What anon_vma_interval_tree_foreach returns for [pgoff, pgoff], and what a brute-force search
// of every VMA of the given mms finds: those linked to `av` (on their own avc lists) whose range
// covers pgoff. Also checks the tree's invariants and that it holds every linked VMA.
struct anon_walk_sets {
  std::set<vm_area_struct*> tree, brute;
  int64_t tree_nodes = 0, linked = 0;
};

anon_walk_sets anon_walk_sets_of(anon_vma* av, uint64_t pgoff, uint64_t lo, uint64_t hi,
                                 const std::vector<mm_struct*>& mms) {
  anon_walk_sets s;
  for (mm_struct* mm : mms) {
    mm->mmap_lock.down_read();
    for (vm_area_struct* v = mm->find_vma(lo); v && v->vm_start < hi; v = mm->find_vma(v->vm_end)) {
      bool on_av = false;
      for (anon_vma_chain* avc = v->anon_vma_chain_head; avc; avc = avc->same_vma_next)
        on_av = on_av || avc->anon_vma == av;
      if (!on_av) continue;
      ++s.linked;
      if (pgoff >= vma_start_pgoff(v) && pgoff <= vma_last_pgoff(v)) s.brute.insert(v);
    }
    mm->mmap_lock.up_read();
  }
  anon_vma_lock_read(av);
  s.tree_nodes = anon_vma_interval_tree_check(av->rb_root);
  anon_vma_interval_tree_foreach(av->rb_root, pgoff, pgoff, [&](anon_vma_chain* avc) {
    s.tree.insert(avc->vma);
    return true;
  });
  anon_vma_unlock_read(av);
  return s;
}

// The VMAs in which rmap_walk finds p mapped (rmap_one runs only where the pte maps p).
std::set<vm_area_struct*> walked_vmas(machine& m, page* p) {
  std::set<vm_area_struct*> out;
  rmap_walk_control rwc;
  rwc.arg = &out;
  rwc.rmap_one = [](page*, vm_area_struct* vma, uint64_t, std::atomic<pte_t>*, void* arg) {
    static_cast<std::set<vm_area_struct*>*>(arg)->insert(vma);
    return true;
  };
  mm_test::locked_rmap_walk(m, p, rwc);
  return out;
}

// After fork (children and a grandchild), munmap of parts of VMAs in the parent and in
// children (splits: the halves keep the anon_vma, their avcs are re-keyed), and exits, a walk of
// each of the parent's pages asks the anon_vma tree for exactly the VMAs covering the page and
// finds the page mapped in exactly those (nothing in the tree is stale, nothing is missing).
TEST_P(RmapTest, AnonWalksFindExactlyTheVmasCoveringThePageAfterForkSplitsAndExit) {
  auto m = make(1024, 0, GetParam());
  auto parent = m->mm_alloc();
  constexpr uint64_t n = 64;
  auto a = parent->mmap(n * page_size);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(pattern.fill(*parent, *a, 0, n, 1).ok());
  const uint64_t lo = *a, hi = *a + n * page_size;
  // The parent's frames (never written again by the parent, so they stay its and stay put).
  std::vector<page*> pages;
  for (uint64_t i = 0; i < n; ++i) {
    pages.push_back(mm_test::page_at(*m, *parent, lo + i * page_size));
    ASSERT_NE(pages.back(), nullptr) << "page " << i;
  }
  anon_vma* av = pages[0]->anon_vma_of();
  ASSERT_NE(av, nullptr);
  std::vector<std::unique_ptr<mm_struct>> kids;
  for (int i = 0; i < 6; ++i) {
    auto c = parent->fork();
    ASSERT_TRUE(c.ok());
    kids.push_back(std::move(*c));
  }
  auto g = kids[0]->fork();  // a grandchild: its VMA is linked to the parent's anon_vma too
  ASSERT_TRUE(g.ok());
  kids.push_back(std::move(*g));

  // Each of the parent's pages is mapped where the pte still maps the parent's frame: in every
  // mm that has not unmapped the page or copied it on write. Checks all pages against both the
  // tree and the brute force, and the node count against the linked VMAs.
  auto verify = [&](const char* when) {
    std::vector<mm_struct*> mms{parent.get()};
    for (auto& k : kids)
      if (k) mms.push_back(k.get());
    for (uint64_t i = 0; i < n; ++i) {
      page* p = pages[i];
      std::set<vm_area_struct*> mapped;
      for (mm_struct* mm : mms) {
        const pte_t pte = mm->pte_of(lo + i * page_size);
        if (pte_present(pte) && pte_pfn(pte) == p->pfn) {
          mm->mmap_lock.down_read();
          mapped.insert(mm->find_vma(lo + i * page_size));
          mm->mmap_lock.up_read();
        }
      }
      if (mapped.empty()) continue;  // unmapped everywhere: the frame is free, not ours to walk
      const uint64_t pgoff = p->index.load();
      ASSERT_EQ(pgoff, linear_page_index(*mapped.begin(), lo + i * page_size));
      const anon_walk_sets s = anon_walk_sets_of(av, pgoff, lo, hi, mms);
      ASSERT_EQ(s.tree_nodes, s.linked) << when << ", page " << i;
      ASSERT_EQ(s.tree, s.brute) << when << ", page " << i;
      ASSERT_EQ(walked_vmas(*m, p), mapped) << when << ", page " << i;
      // Every VMA the walk visited covers the page (the tree query returned no other).
      for (vm_area_struct* v : mapped) ASSERT_TRUE(s.tree.count(v)) << when << ", page " << i;
    }
  };
  verify("after fork");
  EXPECT_EQ(walked_vmas(*m, pages[5]).size(), 8u);  // parent, 6 children, 1 grandchild

  // Splits: the parent punches a hole (its VMA becomes two), children unmap other parts, one
  // writes (COW: its pte no longer maps the parent's frame, but its VMA still covers the page).
  ASSERT_TRUE(parent->munmap(lo + 10 * page_size, 4 * page_size).ok());
  ASSERT_TRUE(kids[1]->munmap(lo, 8 * page_size).ok());
  ASSERT_TRUE(kids[2]->munmap(lo + 20 * page_size, page_size).ok());
  ASSERT_TRUE(kids[2]->munmap(lo + 40 * page_size, 3 * page_size).ok());
  ASSERT_TRUE(kids[3]->munmap(lo + 50 * page_size, 14 * page_size).ok());
  ASSERT_TRUE(pattern.fill(*kids[4], *a, 30, 34, 4).ok());
  EXPECT_EQ(parent->map_count(), 2u);
  EXPECT_EQ(kids[2]->map_count(), 3u);
  verify("after splits");
  // A page the parent no longer maps is still found in the children that do.
  EXPECT_EQ(walked_vmas(*m, pages[11]).size(), 7u);
  EXPECT_EQ(walked_vmas(*m, pages[20]).size(), 7u);  // all but kids[2]
  EXPECT_EQ(walked_vmas(*m, pages[31]).size(), 7u);  // all but kids[4], which copied it

  // Exits: a child in the middle, the grandchild's parent before the grandchild.
  kids[2].reset();
  kids[0].reset();
  verify("after exits");
  EXPECT_EQ(walked_vmas(*m, pages[20]).size(), 6u);  // parent, kids 1, 3, 4, 5, grandchild
  kids.clear();
  verify("after every child exited");
  EXPECT_EQ(walked_vmas(*m, pages[20]).size(), 1u);
  anon_vma_lock_read(av);
  EXPECT_EQ(anon_vma_interval_tree_check(av->rb_root), 2);  // the parent's two halves
  anon_vma_unlock_read(av);
  parent.reset();
  expect_clean(*m);
}

TEST_P(RmapTest, ParentAndChildSeeOnlyTheirOwnWritesAfterFork) {
  auto m = make(512, 0, GetParam());
  auto parent = m->mm_alloc();
  constexpr uint64_t n = 64;
  auto a = parent->mmap(n * page_size);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(pattern.fill(*parent, *a, 0, n, 1).ok());
  auto cr = parent->fork();
  ASSERT_TRUE(cr.ok()) << cr.error().to_string();
  auto child = std::move(*cr);
  EXPECT_EQ(child->rss_anon(), n);
  EXPECT_EQ(m->nr_free_pages(), m->mem().nr_pages() - n);  // shared, not copied
  ASSERT_TRUE(pattern.fill(*parent, *a, 0, n / 2, 2).ok());
  ASSERT_TRUE(pattern.fill(*child, *a, n / 4, n, 3).ok());
  EXPECT_EQ(pattern.mismatches(*parent, *a, 0, n / 2, 2), 0u);
  EXPECT_EQ(pattern.mismatches(*parent, *a, n / 2, n, 1), 0u);
  EXPECT_EQ(pattern.mismatches(*child, *a, 0, n / 4, 1), 0u);
  EXPECT_EQ(pattern.mismatches(*child, *a, n / 4, n, 3), 0u);
  // Pages [0, n/4) are still shared; the others were copied once (by whichever wrote second
  // the last sharer reuses its page).
  EXPECT_LE(m->mem().nr_pages() - m->nr_free_pages(), 2 * n);
  child.reset();
  EXPECT_EQ(pattern.mismatches(*parent, *a, 0, n / 2, 2), 0u);
  EXPECT_EQ(pattern.mismatches(*parent, *a, n / 2, n, 1), 0u);
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
    ASSERT_TRUE(pattern.fill(*parent, *a, 0, n, 1).ok());
    reclaim_all(*m);
    ASSERT_GT(parent->swap_ents(), n / 2);  // most of it is out
    const uint64_t inuse = m->swap_stats().inuse;
    auto cr = parent->fork();
    ASSERT_TRUE(cr.ok()) << cr.error().to_string();
    auto child = std::move(*cr);
    EXPECT_EQ(child->swap_ents(), parent->swap_ents());
    EXPECT_EQ(m->swap_stats().inuse, inuse);  // swap_duplicate: counts, not new slots
    // Each writes its half after swapping in; then everything goes out again and comes back.
    ASSERT_TRUE(pattern.fill(*parent, *a, 0, n / 2, 2).ok());
    ASSERT_TRUE(pattern.fill(*child, *a, n / 2, n, 3).ok());
    reclaim_all(*m);
    EXPECT_GT(m->events()[PSWPOUT], 0u);
    EXPECT_EQ(pattern.mismatches(*parent, *a, 0, n / 2, 2), 0u);
    EXPECT_EQ(pattern.mismatches(*parent, *a, n / 2, n, 1), 0u);
    EXPECT_EQ(pattern.mismatches(*child, *a, 0, n / 2, 1), 0u);
    EXPECT_EQ(pattern.mismatches(*child, *a, n / 2, n, 3), 0u);
    // A grandchild forked from the child after all that sees the child's view.
    reclaim_all(*m);
    auto gr = child->fork();
    ASSERT_TRUE(gr.ok());
    auto grand = std::move(*gr);
    child.reset();
    EXPECT_EQ(pattern.mismatches(*grand, *a, 0, n / 2, 1), 0u);
    EXPECT_EQ(pattern.mismatches(*grand, *a, n / 2, n, 3), 0u);
    EXPECT_EQ(pattern.mismatches(*parent, *a, n / 2, n, 1), 0u);
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
  ASSERT_TRUE(pattern.fill(*parent, *a, 0, 4, 7).ok());
  std::vector<std::unique_ptr<mm_struct>> kids;
  for (int i = 0; i < 12; ++i) {
    auto c = (i % 2 ? kids.back().get() : parent.get())->fork();  // children and grandchildren
    ASSERT_TRUE(c.ok());
    kids.push_back(std::move(*c));
  }
  const uint64_t addr = *a + page_size;
  page* p = mm_test::page_at(*m, *parent, addr);
  ASSERT_NE(p, nullptr);
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
  EXPECT_EQ(pattern.mismatches(*parent, *a, 0, 4, 7), 0u);
  for (auto& k : kids) EXPECT_EQ(pattern.mismatches(*k, *a, 0, 4, 7), 0u);
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
  ASSERT_TRUE(pattern.fill(*mms[0], *a, 0, 200, 1).ok());
  for (int i = 0; i < 6; ++i) {
    reclaim_all(*m);
    auto c = mms[static_cast<size_t>(i) / 2]->fork();
    ASSERT_TRUE(c.ok());
    mms.push_back(std::move(*c));
    const uint64_t first = static_cast<uint64_t>(i) * 20;
    ASSERT_TRUE(pattern.fill(*mms.back(), *a, first, first + 30, 10 + i).ok());
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
  ASSERT_TRUE(pattern.fill(*mm1, *a1, 0, n, 5).ok());
  EXPECT_EQ(pattern.mismatches(*mm2, *a2, 0, n, 5), 0u);
  ASSERT_TRUE(pattern.fill(*mm2, *a2, n / 2, n, 6).ok());
  EXPECT_EQ(pattern.mismatches(*mm1, *a1, n / 2, n, 6), 0u);
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
    if (!pattern.matches(disk.data(), p, p < n / 2 ? 5 : 6)) ++on_disk_bad;
  }
  // Pages still cached may not have reached the disk yet; all others must have.
  EXPECT_LE(on_disk_bad, f->nr_cached());
  EXPECT_EQ(pattern.mismatches(*mm2, *a2, 0, n / 2, 5), 0u);
  EXPECT_EQ(pattern.mismatches(*mm1, *a1, n / 2, n, 6), 0u);
  // Written after reclaim, read by the other after another reclaim.
  ASSERT_TRUE(pattern.fill(*mm2, *a2, 0, 10, 8).ok());
  reclaim_all(*m);
  EXPECT_EQ(pattern.mismatches(*mm1, *a1, 0, 10, 8), 0u);
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
      pattern.write(w.data(), p, 4);
      ASSERT_TRUE(f->write_backing(p * page_size, w.data(), page_size).ok());
    }
  }
  auto mm = m->mm_alloc();
  auto a = mm->mmap_file(f, 0, n * page_size, /*shared=*/false);
  auto s = mm->mmap_file(f, 0, n * page_size, /*shared=*/true, PROT_READ);
  ASSERT_TRUE(a.ok() && s.ok());
  EXPECT_EQ(pattern.mismatches(*mm, *a, 0, n, 4), 0u);   // reads map the cache pages
  ASSERT_TRUE(pattern.fill(*mm, *a, 0, n / 2, 9).ok());  // writes copy them
  EXPECT_EQ(mm->rss_anon(), n / 2);
  EXPECT_EQ(pattern.mismatches(*mm, *s, 0, n, 4), 0u);  // the file did not change
  EXPECT_EQ(mm->write(*s, "x", 1).code(), EFAULT);  // read-only mapping
  auto cr = mm->fork();
  ASSERT_TRUE(cr.ok());
  auto child = std::move(*cr);
  ASSERT_TRUE(pattern.fill(*child, *a, 0, 4, 11).ok());
  EXPECT_EQ(pattern.mismatches(*mm, *a, 0, 4, 9), 0u);
  EXPECT_EQ(pattern.mismatches(*child, *a, 4, n / 2, 9), 0u);
  EXPECT_EQ(pattern.mismatches(*child, *a, n / 2, n, 4), 0u);
  reclaim_all(*m);
  EXPECT_EQ(pattern.mismatches(*child, *a, 0, 4, 11), 0u);
  EXPECT_EQ(pattern.mismatches(*mm, *a, 0, n / 2, 9), 0u);
  EXPECT_EQ(pattern.mismatches(*mm, *a, n / 2, n, 4), 0u);
  // munmap of part of a file VMA splits it; both halves stay in i_mmap.
  EXPECT_EQ(f->nr_mappings(), 4u);
  ASSERT_TRUE(mm->munmap(*a + 8 * page_size, 4 * page_size).ok());
  EXPECT_EQ(f->nr_mappings(), 5u);
  EXPECT_EQ(pattern.mismatches(*mm, *a, 12, n / 2, 9), 0u);
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
    pattern.write(w.data(), p, 3);
    ASSERT_TRUE(prog->write_backing(p * page_size, w.data(), page_size).ok());
  }
  auto parent = m->mm_alloc();
  auto a = parent->mmap(64 * page_size);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(pattern.fill(*parent, *a, 0, 64, 1).ok());
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
  EXPECT_EQ(pattern.mismatches(*child, (*addrs)[0], 0, 8, 3), 0u);
  EXPECT_EQ(pattern.mismatches(*child, (*addrs)[1], 0, 8, 3, nullptr, /*page_bias=*/8), 0u);
  ASSERT_TRUE(pattern.fill(*child, (*addrs)[2], 0, 16, 2).ok());
  EXPECT_EQ(pattern.mismatches(*parent, *a, 0, 64, 1), 0u);
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
  ASSERT_TRUE(pattern.fill(*mm1, *a1, 0, 64, 12).ok());
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
  EXPECT_TRUE(pattern.matches(disk.data(), 20, 12));
  // mm2 maps file pages [16, 48): it faults the written-back data in again.
  EXPECT_EQ(pattern.mismatches(*mm2, *a2, 0, 32, 12, nullptr, /*page_bias=*/16), 0u);
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
