// Reverse-map walks racing fork, munmap, exit and exec, in both rmap lock modes (spin, rwsem),
// with more threads than the machine's 2 cores, on a machine small enough that reclaim (kswapd
// and direct) walks the anon_vma and i_mmap trees all the time:
//   - forkers fork a parent, write copy-on-write pages, shared file pages and private file pages
//     in the child, verify them and the parent's pages, munmap part of the child (splitting
//     VMAs), and exit it or exec it;
//   - the parent is read back continuously: it never sees a child's write;
//   - a churner maps and partly unmaps the file again and again and invalidates it
//     (unmap_mapping_range dropping and retaking i_mmap_rwsem when contended);
//   - reclaimers shrink the machine.
// Afterwards every frame, swap slot, swap-cache page and zram object is free.
// A second case races walks of the anon_vma interval tree (rmap_walk and direct tree queries
// with invariant checks) against forks, grandchild forks, splitting munmaps and exits.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "mm_test_util.h"
#include "uswap/mm/filemap.h"
#include "uswap/mm/machine.h"
#include "uswap/mm/mm_types.h"
#include "uswap/mm/rmap.h"
#include "uswap/swap/swap_system.h"
#include "uswap_testing/param_names.h"
#include "uswap_testing/threads.h"

namespace uswap {
namespace {

using testing::run_threads;
// Fork iterations per forker: enough for several hundred forks racing reclaim; TSan runs ~10x
// slower, so it does a tenth (work_scale).
constexpr int iterations = 600 / testing::work_scale;

uint64_t word(uint64_t tag, uint64_t page, uint64_t i) { return (tag << 40) ^ (page << 12) ^ (i * 0x9e37); }

// Every eighth word only: hundreds of forks write and read these pages (a tenth as many under
// TSan), and one word in each cache line is enough to tell whose page it is.
constexpr mm_test::page_pattern pattern{word, 8};

// Failures the workers find, counted, with the first one's description kept for the report.
class failure_log {
 public:
  void operator()(const std::string& what) {
    count_.fetch_add(1);
    std::lock_guard lk(lock_);
    if (first_.empty()) first_ = what;
  }
  uint64_t count() const { return count_.load(); }
  std::string first() {
    std::lock_guard lk(lock_);
    return first_;
  }

 private:
  std::atomic<uint64_t> count_{0};
  std::mutex lock_;
  std::string first_;
};

class RmapConcurrencyTest : public ::testing::TestWithParam<rmap_lock_mode> {};

INSTANTIATE_TEST_SUITE_P(Modes, RmapConcurrencyTest, ::testing::ValuesIn(all_rmap_lock_modes),
                         testing::to_string_name());

TEST_P(RmapConcurrencyTest, WalksRaceForkMunmapExitAndExec) {
  machine_options o = mm_test::options(320, 8192, swap_dev_kind::zram, /*kswapd=*/true);
  o.rmap_lock = GetParam();
  auto mp = mm_test::make_machine(o);
  ASSERT_TRUE(mp);
  machine& m = *mp;

  constexpr uint64_t anon_pages = 192;
  constexpr uint64_t file_pages = 96;
  constexpr uint64_t shared_per_forker = 16;  // forker i writes file pages [16 i, 16 i + 16)
  constexpr uint64_t private_first = 64;      // file pages [64, 96): only ever COWed
  constexpr int forkers = 3;
  auto fr = file::create(m, file_pages * page_size, "shared");
  ASSERT_TRUE(fr.ok());
  std::shared_ptr<file> f = std::move(*fr);
  for (uint64_t p = private_first; p < file_pages; ++p) {
    std::vector<uint64_t> w(page_size / 8);
    pattern.write(w.data(), p, 77);
    ASSERT_TRUE(f->write_backing(p * page_size, w.data(), page_size).ok());
  }

  auto parent = m.mm_alloc();
  auto anon = parent->mmap(anon_pages * page_size);
  auto shared = parent->mmap_file(f, 0, file_pages * page_size, true);
  auto priv = parent->mmap_file(f, private_first * page_size, (file_pages - private_first) * page_size, false);
  ASSERT_TRUE(anon.ok() && shared.ok() && priv.ok());
  ASSERT_TRUE(pattern.fill(*parent, *anon, 0, anon_pages, 1).ok());

  std::atomic<bool> stop{false};
  failure_log fail;
  std::atomic<int> forkers_left{forkers};

  // threads: 0..forkers-1 fork; then a parent reader, a churner, two reclaimers.
  run_threads(forkers + 4, [&](int id) {
    if (id < forkers) {
      for (int it = 0; it < iterations; ++it) {
        auto cr = parent->fork();
        if (!cr.ok()) {
          fail("fork: " + cr.error().to_string());
          break;
        }
        std::unique_ptr<mm_struct> child = std::move(*cr);
        const uint64_t tag = 100 + static_cast<uint64_t>(id) * 1000 + static_cast<uint64_t>(it);
        const uint64_t mine = static_cast<uint64_t>(id) * 48;  // anon pages [mine, mine + 48)
        status st;
        if (!pattern.fill(*child, *anon, mine, mine + 32, tag).ok()) fail("child anon write");
        if (pattern.mismatches(*child, *anon, mine, mine + 32, tag, &st))
          fail("child sees other data " + st.to_string());
        if (pattern.mismatches(*child, *anon, mine + 32, mine + 48, 1, &st))
          fail("child lost parent data " + st.to_string());
        const uint64_t sfirst = static_cast<uint64_t>(id) * shared_per_forker;
        if (!pattern.fill(*child, *shared, sfirst, sfirst + shared_per_forker, tag).ok())
          fail("child file write");
        if (pattern.mismatches(*child, *shared, sfirst, sfirst + shared_per_forker, tag, &st))
          fail("shared file " + st.to_string());
        // Private file pages: copy on write, the file keeps its contents.
        const uint64_t pp = static_cast<uint64_t>(id) * 8;
        if (!pattern.fill(*child, *priv, pp, pp + 8, tag, private_first).ok())
          fail("child private write");
        if (pattern.mismatches(*child, *priv, pp, pp + 8, tag, &st, private_first))
          fail("private cow " + st.to_string());
        // Split the child's VMAs, then check what is left still reads right.
        if (!child->munmap(*anon + (mine + 8) * page_size, 8 * page_size).ok()) fail("munmap");
        if (!child->munmap(*shared + (sfirst + 4) * page_size, 4 * page_size).ok()) fail("munmap file");
        if (pattern.mismatches(*child, *anon, mine, mine + 8, tag, &st))
          fail("after split " + st.to_string());
        if (pattern.mismatches(*child, *shared, sfirst, sfirst + 4, tag, &st))
          fail("after file split " + st.to_string());
        if (it % 3 == 2) {
          auto addrs = child->exec({{f, private_first * page_size, 8 * page_size, false, PROT_READ, 0},
                                    {nullptr, 0, 8 * page_size, false, PROT_READ | PROT_WRITE, 0}});
          if (!addrs.ok()) {
            fail("exec: " + addrs.error().to_string());
          } else {
            if (pattern.mismatches(*child, (*addrs)[0], 0, 8, 77, &st, private_first))
              fail("exec text " + st.to_string());
            if (!pattern.fill(*child, (*addrs)[1], 0, 8, tag).ok()) fail("exec stack");
          }
        }
        child.reset();  // exit
      }
      forkers_left.fetch_sub(1);
      return;
    }
    const int role = id - forkers;
    status st;
    while (forkers_left.load() > 0 && !stop.load()) {
      if (role == 0) {
        if (pattern.mismatches(*parent, *anon, 0, anon_pages, 1, &st))
          fail("parent sees a child's write " + st.to_string());
        if (pattern.mismatches(*parent, *priv, 0, file_pages - private_first, 77, &st,
                               private_first))
          fail("private file pages changed " + st.to_string());
      } else if (role == 1) {
        auto a = parent->mmap_file(f, 0, file_pages * page_size, true, PROT_READ);
        if (!a.ok()) {
          fail("churn mmap");
          continue;
        }
        if (pattern.mismatches(*parent, *a, private_first, private_first + 8, 77, &st))
          fail("churn read " + st.to_string());
        if (!parent->munmap(*a + 16 * page_size, 16 * page_size).ok()) fail("churn split");
        if (!parent->munmap(*a, file_pages * page_size).ok()) fail("churn munmap");
        if (!f->invalidate(0, file_pages * page_size).ok()) fail("invalidate");
      } else {
        m.shrink(64);
        std::this_thread::yield();
      }
    }
  });
  EXPECT_EQ(fail.count(), 0u) << fail.first();
  EXPECT_EQ(parent->map_count(), 3u);
  EXPECT_EQ(pattern.mismatches(*parent, *anon, 0, anon_pages, 1), 0u);
  EXPECT_GT(m.events()[PSWPOUT], 0u);
  parent.reset();
  EXPECT_EQ(f->nr_mappings(), 0u);
  f.reset();
  m.kswapd_quiesce();
  m.lru_add_drain_all();
  m.swap_sys()->drain_swap_slots_cache();
  const swap_usage u = m.swap_stats();
  EXPECT_EQ(u.inuse, 0u);
  EXPECT_EQ(u.cached, 0u);
  EXPECT_EQ(m.nr_free_pages(), m.mem().nr_pages());
  EXPECT_EQ(m.backend()->stats().device.stored_pages, 0u);
  EXPECT_TRUE(m.backend()->check_invariants().ok()) << m.backend()->check_invariants().to_string();
}

// The anon_vma interval tree under churn: forkers fork the parent (and sometimes a grandchild
// from the child), split the child's VMA with munmaps of random parts, copy some pages on write,
// verify contents and exit; walkers walk random pages of the parent, which never changes its own
// mapping: every walk must find the page in the parent's VMA (its pte always maps the page),
// every VMA a walk or a tree query returns must cover the page, and the tree's invariants (order,
// heap, augmentation matching every VMA's current range) must hold whenever a walker holds the
// lock. RAM is large enough that nothing is reclaimed, so the parent's frames stay put.
TEST_P(RmapConcurrencyTest, AnonVmaTreeStaysExactWhileWalksRaceForksSplitsAndExits) {
  machine_options o = mm_test::options(4096);
  o.rmap_lock = GetParam();
  auto mp = mm_test::make_machine(o);
  ASSERT_TRUE(mp);
  machine& m = *mp;
  constexpr uint64_t n = 64;
  constexpr int forkers = 3, walkers = 4;
  const int rounds = 1500 / testing::work_scale;
  auto parent = m.mm_alloc();
  auto a = parent->mmap(n * page_size);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(pattern.fill(*parent, *a, 0, n, 1).ok());
  std::vector<page*> pages;
  for (uint64_t i = 0; i < n; ++i) {
    pages.push_back(mm_test::page_at(m, *parent, *a + i * page_size));
    ASSERT_NE(pages.back(), nullptr) << "page " << i;
  }
  parent->mmap_lock.down_read();
  vm_area_struct* pvma = parent->find_vma(*a);
  parent->mmap_lock.up_read();
  anon_vma* av = pages[0]->anon_vma_of();
  ASSERT_NE(av, nullptr);

  failure_log fail;
  std::atomic<uint64_t> walks{0};
  std::atomic<int> forkers_left{forkers};
  struct walk_state {
    vm_area_struct* pvma;
    uint64_t pgoff;
    bool saw_parent = false, stray = false;
  };

  run_threads(forkers + walkers, [&](int id) {
    std::mt19937_64 rng(static_cast<uint64_t>(id) * 7919 + 1);
    if (id < forkers) {
      for (int it = 0; it < rounds; ++it) {
        auto cr = parent->fork();
        if (!cr.ok()) {
          fail("fork: " + cr.error().to_string());
          break;
        }
        std::unique_ptr<mm_struct> child = std::move(*cr);
        std::unique_ptr<mm_struct> grandchild;
        if (it % 4 == 1) {
          auto gr = child->fork();
          if (!gr.ok()) fail("grandchild fork");
          else grandchild = std::move(*gr);
        }
        // Two holes at random places (0 to 2 splits each), then a COW write between them.
        const uint64_t h1 = rng() % 20, h2 = 40 + rng() % 20;
        if (!child->munmap(*a + h1 * page_size, (1 + rng() % 4) * page_size).ok()) fail("munmap 1");
        if (!child->munmap(*a + h2 * page_size, (1 + rng() % 4) * page_size).ok()) fail("munmap 2");
        const uint64_t tag = 1000 + static_cast<uint64_t>(id) * 1000 + static_cast<uint64_t>(it);
        status st;
        if (!pattern.fill(*child, *a, 30, 34, tag).ok()) fail("child write");
        if (pattern.mismatches(*child, *a, 30, 34, tag, &st))
          fail("child reads back " + st.to_string());
        if (pattern.mismatches(*child, *a, 24, 30, 1, &st))
          fail("child lost the parent's data " + st.to_string());
        if (grandchild && pattern.mismatches(*grandchild, *a, 30, 34, 1, &st))
          fail("grandchild sees child's write " + st.to_string());
        if (it % 2) {
          child.reset();  // the parent of a grandchild may exit first
          grandchild.reset();
        } else {
          grandchild.reset();
          child.reset();
        }
      }
      forkers_left.fetch_sub(1);
      return;
    }
    while (forkers_left.load() > 0) {
      page* p = pages[rng() % n];
      walk_state ws{pvma, p->index.load()};
      rmap_walk_control rwc;
      rwc.arg = &ws;
      rwc.rmap_one = [](page* pg, vm_area_struct* vma, uint64_t addr, std::atomic<pte_t>*, void* arg) {
        auto* w = static_cast<walk_state*>(arg);
        w->saw_parent = w->saw_parent || vma == w->pvma;
        w->stray = w->stray || vma_address(pg, vma) != addr || addr == ~uint64_t{0};
        return true;
      };
      mm_test::locked_rmap_walk(m, p, rwc);
      if (!ws.saw_parent) fail("a walk missed the parent's mapping");
      if (ws.stray) fail("a walk visited a VMA at the wrong address");
      if (id % 2) {
        anon_vma_lock_read(av);
        const int64_t nodes = anon_vma_interval_tree_check(av->rb_root);
        bool covers = true;
        anon_vma_interval_tree_foreach(av->rb_root, ws.pgoff, ws.pgoff, [&](anon_vma_chain* avc) {
          covers = covers && vma_start_pgoff(avc->vma) <= ws.pgoff && vma_last_pgoff(avc->vma) >= ws.pgoff;
          return true;
        });
        anon_vma_unlock_read(av);
        if (nodes < 1) fail("anon_vma tree invariant broken: " + std::to_string(nodes));
        if (!covers) fail("a tree query returned a VMA not covering the page");
      }
      walks.fetch_add(1);
      std::this_thread::yield();
    }
  });
  EXPECT_EQ(fail.count(), 0u) << fail.first();
  EXPECT_GT(walks.load(), 0u);
  anon_vma_lock_read(av);
  EXPECT_EQ(anon_vma_interval_tree_check(av->rb_root), 1);  // only the parent's VMA is left
  anon_vma_unlock_read(av);
  EXPECT_EQ(pattern.mismatches(*parent, *a, 0, n, 1), 0u);
  parent.reset();
  m.lru_add_drain_all();
  EXPECT_EQ(m.nr_free_pages(), m.mem().nr_pages());
}

}  // namespace
}  // namespace uswap
