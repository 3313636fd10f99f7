// Concurrency of pagers and regions, in both fault modes, with more threads than the machine's
// 2 cores: contents verified while eviction runs, writes racing evictions never lost, atomic
// counters shared by all threads exact, mapping churn leaking nothing, system calls into
// evicted buffers from many threads. Each case also runs under ThreadSanitizer (make tsan).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "uffd_test_util.h"
#include "uswap/uffd/region.h"
#include "uswap_testing/threads.h"

#if defined(USWAP_TSAN)
// The pager resolves faults inside the faulting thread's SIGBUS handler, where it may allocate
// (a zsmalloc zspage, a thread's first compression stream). TSan reports any malloc inside a
// signal handler as signal-unsafe, because an asynchronous signal may interrupt malloc itself.
// This SIGBUS is synchronous: it is raised by an access to pager memory, and no allocator
// touches pager memory while holding its locks (the arena is only ever handed out by the
// pager), so the interrupted code is never inside malloc. Every other TSan check stays on.
extern "C" const char* __tsan_default_options() { return "report_signal_unsafe=0"; }
#endif

namespace uswap {
namespace {

using namespace uffd_test;

// TSan's budget: half the region sizes and rounds (work_scale_by(2)); a region must stay a
// whole number of pages and several times its limit.
constexpr unsigned scale = testing::work_scale_by(2);

class RegionConcurrencyTest : public ::testing::TestWithParam<fault_mode> {
 protected:
  pager_options opts(uint64_t limit, uint64_t max_size) {
    pager_options o = options(GetParam(), limit, max_size);
    o.handler_threads = 2;
    o.background_reclaim = true;  // one more reclaimer beside the faults' own
    return o;
  }
};

INSTANTIATE_TEST_SUITE_P(Modes, RegionConcurrencyTest,
                         ::testing::Values(fault_mode::sigbus, fault_mode::handler_thread),
                         mode_name());

// A region four times its limit, written and verified by 8 threads in rounds while eviction
// (run by whichever thread's fault needs room, and by the pager's background reclaim thread)
// moves pages in and out under them.
TEST_P(RegionConcurrencyTest, EightThreadsVerifyARegionFourTimesItsLimit) {
  const uint64_t size = 16 * MiB / scale;
  auto rr = region::create(size, opts(size / 4, size));
  ASSERT_TRUE(rr.ok()) << rr.error().to_string();
  auto& r = *rr;
  auto* base = static_cast<uint8_t*>(r->data());
  const uint64_t pages = size / page_size;
  constexpr unsigned threads = 8;
  const unsigned rounds = scale == 1 ? 3 : 2;
  std::atomic<uint64_t> bad{0};
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      for (unsigned round = 0; round < rounds; ++round) {
        for (uint64_t p = t; p < pages; p += threads) fill_page(base + p * page_size, p, round);
        // Verify in a random order, so that faults from all threads hit all parts of the region.
        std::vector<uint64_t> mine;
        for (uint64_t p = t; p < pages; p += threads) mine.push_back(p);
        std::shuffle(mine.begin(), mine.end(), rng);
        for (uint64_t p : mine)
          if (!page_matches(base + p * page_size, p, round)) bad.fetch_add(1);
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad.load(), 0u);
  for (uint64_t p = 0; p < pages; ++p)
    ASSERT_TRUE(page_matches(base + p * page_size, p, rounds - 1)) << "page " << p;
  r->owner().stop_background_reclaim();  // its last pass counts its steals (wait_for_room)
  const pager_stats s = r->owner().stats();
  EXPECT_LE(s.peak_resident_pages, s.limit_pages) << describe(s);
  EXPECT_EQ(s.overcharges, 0u) << describe(s);
  EXPECT_GT(s.swap_outs, pages) << describe(s);
  EXPECT_GT(s.pgsteal_kswapd, 0u) << "background reclaim never ran beside the faults: "
                                  << describe(s);
  EXPECT_TRUE(r->owner().check_invariants().ok()) << r->owner().check_invariants().to_string();
}

// The pager's threads made again (restart_threads, as after a capset) while 6 threads write and
// verify a region four times its limit: faults that meanwhile find no handler thread (in
// handler_thread mode) or no background reclaim wait for the new ones; nothing is lost.
TEST_P(RegionConcurrencyTest, RestartingThePagersThreadsUnderFaultsLosesNothing) {
  const uint64_t size = 8 * MiB / scale;
  auto rr = region::create(size, opts(size / 4, size));
  ASSERT_TRUE(rr.ok()) << rr.error().to_string();
  auto& r = *rr;
  auto* base = static_cast<uint8_t*>(r->data());
  const uint64_t pages = size / page_size;
  constexpr unsigned threads = 6, rounds = 3;
  std::atomic<uint64_t> bad{0};
  std::atomic<unsigned> running{threads};
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      for (unsigned round = 0; round < rounds; ++round) {
        for (uint64_t p = t; p < pages; p += threads) fill_page(base + p * page_size, p, round);
        for (uint64_t p = t; p < pages; p += threads)
          if (!page_matches(base + p * page_size, p, round)) bad.fetch_add(1);
      }
      running.fetch_sub(1);
    });
  }
  // The race: restarts while the workers fault. Counted only when faults went on across it.
  unsigned restarts_under_faults = 0;
  while (running.load() != 0) {
    const uint64_t before = r->owner().stats().faults;
    r->owner().restart_threads();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (running.load() != 0 && r->owner().stats().faults > before) ++restarts_under_faults;
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad.load(), 0u);
  for (uint64_t p = 0; p < pages; ++p)
    ASSERT_TRUE(page_matches(base + p * page_size, p, rounds - 1)) << "page " << p;
  EXPECT_GE(restarts_under_faults, 3u) << "the restarts never overlapped the faults";
  const pager_stats s = r->owner().stats();
  EXPECT_EQ(s.overcharges, 0u) << describe(s);
  EXPECT_GT(s.swap_outs, pages) << describe(s);
  EXPECT_TRUE(r->owner().check_invariants().ok()) << r->owner().check_invariants().to_string();
}

// Writers increment counters in their pages while reclaimer threads evict those very pages as
// fast as they can: every increment must survive. A write racing an eviction hits the
// write-protection, waits for the page, and lands in the swapped-in copy. (With the
// write-protection step removed from eviction, the handler_thread case fails in every run and
// the sigbus case in about one run of four; AWriteInsideTheEvictionWindowIsNotLost below forces
// the race.)
TEST_P(RegionConcurrencyTest, WritesRacingEvictionAreNeverLost) {
  const uint64_t size = 1 * MiB;
  auto rr = region::create(size, opts(256 * 1024, size));
  ASSERT_TRUE(rr.ok()) << rr.error().to_string();
  auto& r = *rr;
  auto* base = static_cast<uint8_t*>(r->data());
  constexpr unsigned writers = 8, pages_per_writer = 32, bursts = 16;
  const unsigned iterations = 600 / scale;
  std::atomic<bool> stop{false};
  std::vector<std::thread> reclaimers;
  for (int i = 0; i < 2; ++i)
    reclaimers.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) r->owner().reclaim(32);
    });
  std::vector<std::thread> ws;
  for (unsigned w = 0; w < writers; ++w) {
    ws.emplace_back([&, w] {
      for (unsigned it = 0; it < iterations; ++it) {
        for (unsigned k = 0; k < pages_per_writer; ++k) {
          auto* word = reinterpret_cast<volatile uint64_t*>(
              base + (w * pages_per_writer + k) * page_size);
          // A burst of writes per visit keeps writers inside resident pages, which is where an
          // eviction in progress can race them. The second word moves over the page so that
          // evictions catch writes at every offset.
          for (unsigned b = 0; b < bursts; ++b) {
            word[0] = word[0] + 1;
            word[1 + (it * 8 + b) % (page_size / 8 - 1)] = word[0] * 0x9e3779b97f4a7c15ull;
          }
        }
      }
    });
  }
  for (auto& t : ws) t.join();
  stop = true;
  for (auto& t : reclaimers) t.join();
  const uint64_t total = uint64_t{iterations} * bursts;
  for (unsigned p = 0; p < writers * pages_per_writer; ++p) {
    const auto* word = reinterpret_cast<const uint64_t*>(base + p * page_size);
    ASSERT_EQ(word[0], total) << "page " << p << " lost writes";
    const unsigned last = ((iterations - 1) * 8 + bursts - 1) % (page_size / 8 - 1);
    ASSERT_EQ(word[1 + last], total * 0x9e3779b97f4a7c15ull) << "page " << p;
  }
  const pager_stats s = r->owner().stats();
  EXPECT_GT(s.swap_outs, 0u) << describe(s);
  EXPECT_GT(s.wp_faults + s.swap_ins, 0u) << describe(s);
  EXPECT_TRUE(r->owner().check_invariants().ok()) << r->owner().check_invariants().to_string();
}

// Writers hammer counters in pages scattered over a region (page (w * pages_per_writer + k) *
// stride % pages for writer w's k-th counter) while two reclaimers evict `reclaim_batch` pages at
// a time; afterwards every increment must have survived and every other page must hold its
// fill. Returns the pager's statistics for the caller's own expectations.
struct counter_race {
  uint64_t size;
  unsigned writers, pages_per_writer, bursts, iterations;
  uint64_t stride;
  unsigned reclaim_batch;
};

pager_stats run_counter_race(region& r, const counter_race& c) {
  auto* base = static_cast<uint8_t*>(r.data());
  const uint64_t pages = c.size / page_size;
  for (uint64_t p = 0; p < pages; ++p) fill_page(base + p * page_size, p, 0);
  auto counter_page = [&](unsigned w, unsigned k) {
    return (uint64_t{w} * c.pages_per_writer + k) * c.stride % pages;
  };
  std::atomic<bool> stop{false};
  std::vector<std::thread> reclaimers;
  for (int i = 0; i < 2; ++i)
    reclaimers.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) r.owner().reclaim(c.reclaim_batch);
    });
  std::vector<std::thread> ws;
  for (unsigned w = 0; w < c.writers; ++w) {
    ws.emplace_back([&, w] {
      for (unsigned it = 0; it < c.iterations; ++it)
        for (unsigned k = 0; k < c.pages_per_writer; ++k) {
          auto* word = reinterpret_cast<volatile uint64_t*>(base + counter_page(w, k) * page_size);
          for (unsigned b = 0; b < c.bursts; ++b) word[0] = word[0] + 1;
        }
    });
  }
  for (auto& t : ws) t.join();
  stop = true;
  for (auto& t : reclaimers) t.join();
  // Counted rather than asserted page by page: a broken protocol loses writes on many pages.
  std::vector<bool> is_counter(pages);
  uint64_t lost = 0, damaged = 0, first_bad = pages;
  for (unsigned w = 0; w < c.writers; ++w)
    for (unsigned k = 0; k < c.pages_per_writer; ++k) {
      const uint64_t p = counter_page(w, k);
      is_counter[p] = true;
      uint8_t expect[page_size];
      fill_page(expect, p, 0);
      const uint64_t first = reinterpret_cast<const uint64_t*>(expect)[0];
      const auto* words = reinterpret_cast<const uint64_t*>(base + p * page_size);
      const bool ok_count = words[0] == first + uint64_t{c.iterations} * c.bursts;
      const bool ok_rest = std::memcmp(expect + 8, base + p * page_size + 8, page_size - 8) == 0;
      lost += !ok_count;
      damaged += !ok_rest;
      if ((!ok_count || !ok_rest) && p < first_bad) first_bad = p;
    }
  for (uint64_t p = 0; p < pages; ++p)
    if (!is_counter[p] && !page_matches(base + p * page_size, p, 0)) {
      ++damaged;
      first_bad = std::min(first_bad, p);
    }
  EXPECT_EQ(lost, 0u) << "counter pages that lost writes, first bad page " << first_bad;
  EXPECT_EQ(damaged, 0u) << "pages with wrong contents, first bad page " << first_bad;
  EXPECT_TRUE(r.owner().check_invariants().ok()) << r.owner().check_invariants().to_string();
  return r.owner().stats();
}

// The same race with whole eviction passes: under a 32 MiB limit a pass takes 256 pages (32 in
// the TSan build), write-protected by runs and dropped with one madvise. Counters sit in every
// 37th page, so a pass's victims form many runs.
TEST_P(RegionConcurrencyTest, WritesRacingLargeEvictionPassesAreNeverLost) {
  const uint64_t limit = 32 * MiB / scale, size = limit + limit / 2;
  const counter_race c{size, 6, 24, 8, 300 / scale, 37, 256};
  auto rr = region::create(size, opts(limit, size));
  ASSERT_TRUE(rr.ok()) << rr.error().to_string();
  const pager_stats s = run_counter_race(**rr, c);
  EXPECT_GT(s.swap_outs, size / page_size / 2) << describe(s);
  EXPECT_GT(s.wp_faults + s.swap_ins, 0u) << describe(s);
}

// Writes racing the write-protect sweeps themselves: reclaimers evict so fast that the hand laps
// again and again, and every half lap a sweep write-protects all resident pages under the
// writers' feet. A write that a sweep protected takes a write-protect fault and lands; a victim a
// sweep covered is evicted without a write-protect of its own and a racing write waits for its
// page lock; a victim written since the sweep (rare: every write references its page) is
// protected by eviction. Sweeps, write-protect faults and victims covered by a sweep must all
// have occurred.
TEST_P(RegionConcurrencyTest, WritesRacingSweepsAreNeverLost) {
  const uint64_t limit = 2 * MiB, size = 3 * limit;
  const counter_race c{size, 6, 16, 4, 400 / scale, 7, 64};
  auto rr = region::create(size, opts(limit, size));
  ASSERT_TRUE(rr.ok()) << rr.error().to_string();
  const pager_stats s = run_counter_race(**rr, c);
  // Several sweeps, not a fixed rate: the writers rewrite their counters all the time, so write
  // tracking backs off (pager_impl.h, wp_fault_share) after a few sweeps in some runs (5 to 20
  // under TSan on an idle machine) and not in others (hundreds).
  EXPECT_GE(s.wp_sweeps, 3u) << describe(s);
  EXPECT_GT(s.wp_faults, 0u) << "no write met a sweep's protection: " << describe(s);
  EXPECT_GT(s.swap_outs, s.evict_wp_pages) << "no victim was covered by a sweep: " << describe(s);
}

// pin() racing sweeps: a write pin promises pages a system call may write without a fault. With
// a UFFD_USER_MODE_ONLY descriptor a kernel-mode write to a write-protected page fails with
// EFAULT in both fault modes, so a sweep that protected a pinned page would show as a failed
// pread(2). Pinners pin, pread a file into their buffer, unpin and check it, over and over, while
// reclaimers and streaming writers keep sweeps and evictions going.
TEST_P(RegionConcurrencyTest, PinRacingSweepsKeepsPinnedPagesWritable) {
  const std::vector<uint8_t> file = pages_of(4, 7000, 2);
  const int fd = unlinked_file_with(file);
  ASSERT_GE(fd, 0) << std::strerror(errno);

  const uint64_t size = 4 * MiB;
  pager_options o = opts(1 * MiB, size);
  o.access = uffd_access::user_mode_only;
  auto rr = region::create(size, o);
  ASSERT_TRUE(rr.ok()) << rr.error().to_string();
  auto& r = *rr;
  ASSERT_FALSE(r->owner().kernel_faults());
  auto* base = static_cast<uint8_t*>(r->data());
  constexpr unsigned pinners = 4, streamers = 2;
  const unsigned iterations = 1500 / scale;
  const uint64_t slice = size / 8;  // pinners use the first four slices, streamers the rest
  std::atomic<uint64_t> efaults{0}, bad{0};
  std::atomic<unsigned> pinners_left{pinners};
  // On a starved machine the pinners can finish their iterations before any page with content
  // was evicted (the race never ran): they go on until one was, or for 60 s at most.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  auto go_on = [&](unsigned it) {
    if (it < iterations || it % 64 != 0) return true;
    return r->owner().stats().swap_outs == 0 && std::chrono::steady_clock::now() < deadline;
  };
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < pinners; ++t) {
    ts.emplace_back([&, t] {
      for (unsigned it = 0; go_on(it); ++it) {
        // Move over the slice so that pins meet pages in every state: resident and writable,
        // swept, evicted.
        uint8_t* at = base + t * slice + (it % (slice / file.size())) * file.size();
        if (!r->pin(at, file.size(), true).ok()) {
          bad.fetch_add(1);
          continue;
        }
        const ssize_t n = ::pread(fd, at, file.size(), 0);
        if (n < 0 && errno == EFAULT) efaults.fetch_add(1);
        if (n != static_cast<ssize_t>(file.size())) bad.fetch_add(1);
        if (!r->unpin(at, file.size()).ok()) bad.fetch_add(1);
        if (std::memcmp(at, file.data(), file.size()) != 0) bad.fetch_add(1);
        std::memset(at, 0, file.size());  // so that the next pread into it must really write
      }
      pinners_left.fetch_sub(1);
    });
  }
  for (int i = 0; i < 2; ++i)
    ts.emplace_back([&] {
      while (pinners_left.load(std::memory_order_relaxed)) r->owner().reclaim(32);
    });
  for (unsigned t = 0; t < streamers; ++t)
    ts.emplace_back([&, t] {
      uint8_t* s = base + (pinners + 2 * t) * slice;
      const uint64_t np = 2 * slice / page_size;
      for (unsigned v = 0; pinners_left.load(std::memory_order_relaxed); ++v)
        for (uint64_t i = 0; i < np; ++i) fill_page(s + i * page_size, i, v);
    });
  for (auto& t : ts) t.join();
  ::close(fd);
  EXPECT_EQ(efaults.load(), 0u) << "a sweep write-protected a pinned page";
  EXPECT_EQ(bad.load(), 0u);
  const pager_stats s = r->owner().stats();
  EXPECT_GT(s.wp_sweeps, 10u) << describe(s);
  EXPECT_GT(s.swap_outs, 0u) << describe(s);
  EXPECT_TRUE(r->owner().check_invariants().ok()) << r->owner().check_invariants().to_string();
}

// The race forced: while eviction holds a victim between copying it out and dropping it (the
// evict_hook), another thread writes to it. The write must wait (it hits the write-protection)
// and then land in the swapped-in page; without the write-protection it would land in the page
// about to be dropped and be lost.
//
// The hook does not return until the write has been tried: the writer says it is about to store,
// and the hook waits until either the store has completed (the write got into the window: the
// test fails) or the writer sleeps, which after that announcement it can only do inside the
// fault its store raised (in the kernel in handler_thread mode, on the page lock in its SIGBUS
// handler in sigbus mode). So every run exercises the race, however the threads are scheduled.
struct hook_state {
  std::atomic<uint64_t*> target{nullptr};
  std::atomic<pid_t> writer_tid{0};
  std::atomic<bool> fired{false};
  std::atomic<bool> storing{false};
  std::atomic<bool> written{false};
  std::atomic<bool> write_tried{false};
  std::atomic<bool> written_during_hook{false};
};

// The scheduler state of a thread of this process ('R' running, 'S' sleeping, 'D' in
// uninterruptible sleep...), from /proc; 0 if it cannot be read.
char thread_state(pid_t tid) {
  const std::string path = "/proc/self/task/" + std::to_string(tid) + "/stat";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[512];
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  // "tid (comm) S ...": comm may hold spaces and parentheses, the state follows the last ')'.
  const char* close_paren = std::strrchr(buf, ')');
  return close_paren && close_paren[1] == ' ' ? close_paren[2] : 0;
}

void racing_write_hook(void* arg, void* page) {
  auto* h = static_cast<hook_state*>(arg);
  if (h->fired.exchange(true)) return;
  h->target.store(static_cast<uint64_t*>(page));
  const bool tried = uswap::testing::eventually([&] {
    if (h->written.load()) return true;
    if (!h->storing.load()) return false;
    const char st = thread_state(h->writer_tid.load());
    return st == 'S' || st == 'D';
  });
  h->write_tried.store(tried);
  h->written_during_hook.store(h->written.load());
}

TEST_P(RegionConcurrencyTest, AWriteInsideTheEvictionWindowIsNotLost) {
  hook_state h;
  pager_options o = opts(1 * MiB, 1 * MiB);
  o.evict_hook = racing_write_hook;
  o.evict_hook_arg = &h;
  o.track_writes = false;  // so that eviction's own write-protection is what holds the write
  auto rr = region::create(1 * MiB, o);
  ASSERT_TRUE(rr.ok()) << rr.error().to_string();
  auto& r = *rr;
  auto* base = static_cast<uint8_t*>(r->data());
  const uint64_t pages = r->size() / page_size;
  for (uint64_t p = 0; p < pages; ++p) fill_page(base + p * page_size, p, 0);
  std::thread writer([&] {
    h.writer_tid.store(static_cast<pid_t>(::gettid()));
    uint64_t* t = nullptr;
    if (!uswap::testing::eventually([&] { return (t = h.target.load()) != nullptr; }))
      return;  // the hook never fired
    h.storing.store(true);
    // Nothing of the store may move above the announcement (a compiler barrier suffices: the
    // hook only needs to see `storing` before this thread can sleep in the store's fault).
    std::atomic_signal_fence(std::memory_order_seq_cst);
    *reinterpret_cast<volatile uint64_t*>(t + 100) = 0xfeedfacecafebeefull;
    h.written.store(true);
  });
  EXPECT_GT(r->owner().reclaim(16), 0u);
  writer.join();
  ASSERT_TRUE(h.fired.load());
  ASSERT_TRUE(h.write_tried.load()) << "the writer neither wrote nor blocked while eviction waited";
  EXPECT_FALSE(h.written_during_hook.load()) << "the write was not held back by write-protection";
  const uint64_t idx = (reinterpret_cast<uint8_t*>(h.target.load()) - base) / page_size;
  const auto* words = reinterpret_cast<const uint64_t*>(base + idx * page_size);
  EXPECT_EQ(words[100], 0xfeedfacecafebeefull) << "the write into the eviction window was lost";
  // The rest of the page is as it was.
  uint8_t expect[page_size];
  fill_page(expect, idx, 0);
  reinterpret_cast<uint64_t*>(expect)[100] = 0xfeedfacecafebeefull;
  EXPECT_EQ(std::memcmp(expect, base + idx * page_size, page_size), 0);
  EXPECT_TRUE(r->owner().check_invariants().ok()) << r->owner().check_invariants().to_string();
}

// All threads increment the same counters (atomic read-modify-write on pager memory) while a
// stream of other pages keeps the pager evicting: the total must be exact.
TEST_P(RegionConcurrencyTest, SharedAtomicCountersStayExactUnderEviction) {
  const uint64_t size = 4 * MiB;
  auto rr = region::create(size, opts(512 * 1024, size));
  ASSERT_TRUE(rr.ok()) << rr.error().to_string();
  auto& r = *rr;
  auto* base = static_cast<uint8_t*>(r->data());
  constexpr unsigned threads = 8, counter_pages = 64;
  const unsigned iterations = 2000 / scale;
  const uint64_t stream_pages = size / page_size - counter_pages;
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      std::mt19937_64 rng(t + 100);
      for (unsigned it = 0; it < iterations; ++it) {
        const uint64_t p = rng() % counter_pages;
        std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(base + p * page_size + 8 * t))
            .fetch_add(1, std::memory_order_relaxed);
        // Touch a stream page (each thread its own) to keep evictions going.
        const uint64_t sp = counter_pages + (rng() % (stream_pages / threads)) * threads + t;
        fill_page(base + sp * page_size, sp, it);
      }
    });
  }
  for (auto& t : ts) t.join();
  uint64_t total = 0;
  for (unsigned p = 0; p < counter_pages; ++p)
    for (unsigned t = 0; t < threads; ++t)
      total += *reinterpret_cast<const uint64_t*>(base + p * page_size + 8 * t);
  EXPECT_EQ(total, uint64_t{threads} * iterations);
  const pager_stats s = r->owner().stats();
  EXPECT_GT(s.swap_outs, 0u) << describe(s);
  EXPECT_TRUE(r->owner().check_invariants().ok()) << r->owner().check_invariants().to_string();
}

// Threads map, fill, verify, discard and unmap regions of a shared pager over and over; at the
// end nothing is left: no resident page, no zram object, no swap slot, no mapping.
TEST_P(RegionConcurrencyTest, MappingChurnReturnsEverything) {
  auto pg = make_pager(opts(1 * MiB, 64 * MiB));
  ASSERT_TRUE(pg);
  constexpr unsigned threads = 8;
  const unsigned iterations = 24 / scale;
  std::atomic<uint64_t> bad{0};
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      std::mt19937_64 rng(t + 7);
      for (unsigned it = 0; it < iterations; ++it) {
        const uint64_t npages = 16 + rng() % 240;
        auto r = region::create(pg, npages * page_size);
        if (!r.ok()) {
          bad.fetch_add(1);
          continue;
        }
        auto* b = static_cast<uint8_t*>((*r)->data());
        const uint64_t tag = t * 1000000 + it * 1000;
        for (uint64_t i = 0; i < npages; ++i) fill_page(b + i * page_size, tag + i, 0);
        if (rng() % 2) {
          const uint64_t half = npages / 2;
          if (!(*r)->discard(b, half * page_size).ok()) bad.fetch_add(1);
          for (uint64_t i = 0; i < half; ++i)
            if (b[i * page_size + 100] != 0) bad.fetch_add(1);
          for (uint64_t i = half; i < npages; ++i)
            if (!page_matches(b + i * page_size, tag + i, 0)) bad.fetch_add(1);
        } else {
          for (uint64_t i = 0; i < npages; ++i)
            if (!page_matches(b + i * page_size, tag + i, 0)) bad.fetch_add(1);
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad.load(), 0u);
  expect_holds_nothing(*pg);
  EXPECT_GT(pg->stats().swap_outs, 0u) << describe(pg->stats());
}

// Many threads read(2) a file into evicted parts of one region (pinning the buffer first where
// kernel-mode faults are not delivered) while others keep the pager evicting.
TEST_P(RegionConcurrencyTest, ReadSyscallsIntoEvictedPagesFromManyThreads) {
  const std::vector<uint8_t> file = pages_of(16, 9000, 1);
  const int fd = unlinked_file_with(file);
  ASSERT_GE(fd, 0) << std::strerror(errno);

  const uint64_t size = 8 * MiB / scale;
  auto rr = region::create(size, opts(size / 4, size));
  ASSERT_TRUE(rr.ok()) << rr.error().to_string();
  auto& r = *rr;
  auto* base = static_cast<uint8_t*>(r->data());
  const bool direct = r->owner().kernel_faults();
  constexpr unsigned readers = 4, streamers = 4;
  const unsigned iterations = 40 / scale;
  const uint64_t slice = size / (readers + streamers);
  std::atomic<uint64_t> bad{0};
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < readers; ++t) {
    ts.emplace_back([&, t] {
      uint8_t* buf = base + t * slice;
      for (unsigned it = 0; it < iterations; ++it) {
        uint8_t* at = buf + (it % (slice / file.size())) * file.size();
        if (!direct && !r->pin(at, file.size(), true).ok()) {
          bad.fetch_add(1);
          continue;
        }
        if (::pread(fd, at, file.size(), 0) != static_cast<ssize_t>(file.size())) bad.fetch_add(1);
        if (!direct && !r->unpin(at, file.size()).ok()) bad.fetch_add(1);
        if (std::memcmp(at, file.data(), file.size()) != 0) bad.fetch_add(1);
      }
    });
  }
  for (unsigned t = 0; t < streamers; ++t) {
    ts.emplace_back([&, t] {
      uint8_t* s = base + (readers + t) * slice;
      const uint64_t np = slice / page_size;
      for (unsigned it = 0; it < iterations / 4 + 1; ++it)
        for (uint64_t i = 0; i < np; ++i) fill_page(s + i * page_size, i, it);
    });
  }
  for (auto& t : ts) t.join();
  ::close(fd);
  EXPECT_EQ(bad.load(), 0u);
  const pager_stats s = r->owner().stats();
  EXPECT_GT(s.swap_outs, 0u) << describe(s);
  EXPECT_TRUE(r->owner().check_invariants().ok()) << r->owner().check_invariants().to_string();
}

}  // namespace
}  // namespace uswap
