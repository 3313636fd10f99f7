// The pool worker (job_member.cc, zswap's shrink_worker): in a job with a pool limit and a
// backing device, cold pages go to the backing device from a thread of their own, so that a
// slow or stalled server delays writeback, not the program's faults on resident or pooled pages.
// The server is nbdkit memory, stopped (SIGSTOP) while the worker has a batch in flight to it;
// the program's faults go on, every page reads back as written, and once the server answers
// again writeback completes.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "../zram/backing_nbd_test.h"
#include "uffd_test_util.h"
#include "uswap/uffd/job.h"
#include "uswap/uffd/pager.h"
#include "uswap_testing/threads.h"

#if defined(USWAP_TSAN)
// report_signal_unsafe=0: see region_concurrency_test.cc (a SIGBUS raised by an access to pager
// memory never interrupts malloc). Every other check stays on: the worker's writeback races the
// faults' stores, swap-ins and frees on the same device.
extern "C" const char* __tsan_default_options() { return "report_signal_unsafe=0"; }
#endif

namespace uswap {
namespace {

using namespace uffd_test;

zram_backing_stat backing_of(const pager& pg) { return pg.backing_stat(); }

// A sigbus pager of 256 MiB with a resident limit, writing back to the NBD export at `uri`, in
// a job of its own with that limit and `pool_limit` (*j). nullptr, the failure reported, if any
// step fails.
std::shared_ptr<pager> pager_in_job(uint64_t limit, uint64_t pool_limit, const std::string& uri,
                                    std::shared_ptr<job>* j) {
  job_options jo;
  jo.limit_pages = limit / page_size;
  jo.pool_limit_bytes = pool_limit;
  auto jc = job::create(jo);
  if (!jc.ok()) {
    ADD_FAILURE() << jc.error().to_string();
    return nullptr;
  }
  *j = std::move(jc).value();
  pager_options o = options(fault_mode::sigbus, limit, 256 * MiB);
  o.backing_dev = uri;
  auto pg = make_pager(o);
  if (!pg) return nullptr;  // make_pager reported why
  if (status st = pg->join_job(*j); !st.ok()) {
    ADD_FAILURE() << "join_job: " << st.to_string();
    return nullptr;
  }
  return pg;
}

TEST(PoolWorker, AStalledServerDelaysWritebackNotFaults) {
  zram_test::nbdkit_memory server("256M");
  ASSERT_TRUE(server.ready());
  // A resident limit of 512 KiB and a pool of 4 MiB: most of what the program holds is pooled
  // or written back.
  constexpr uint64_t limit = 512 * 1024, pool_limit = 4 * MiB;
  std::shared_ptr<job> j;
  auto pg = pager_in_job(limit, pool_limit, server.uri(), &j);
  ASSERT_TRUE(pg);

  // 24 MiB written with the server answering: six times the pool (three times, compressed), so
  // the worker writes back.
  constexpr uint64_t a_pages = 24 * MiB / page_size;
  auto ma = pg->map(a_pages * page_size);
  ASSERT_TRUE(ma.ok()) << ma.error().to_string();
  auto* a = static_cast<uint8_t*>(*ma);
  for (uint64_t i = 0; i < a_pages; ++i) fill_page(a + i * page_size, i, 0);
  ASSERT_TRUE(testing::eventually([&] { return pg->stats().bd_writes > 0; }, std::chrono::seconds(30)))
      << describe(pg->stats());
  // Then the worker settles: no write in flight and no round started for 200 ms (nothing kicks
  // it while the program does not fault).
  uint64_t rounds = pg->stats().pool_worker_rounds;
  auto quiet_since = std::chrono::steady_clock::now();
  ASSERT_TRUE(testing::eventually([&] {
    const uint64_t r = pg->stats().pool_worker_rounds;
    const auto now = std::chrono::steady_clock::now();
    if (r != rounds || backing_of(*pg).in_flight != 0) {
      rounds = r;
      quiet_since = now;
    }
    return now - quiet_since > std::chrono::milliseconds(200);
  }, std::chrono::seconds(30)));
  // The later half of it goes (its pooled pages with it), so that the pool has room for many
  // new pages before the worker's high watermark.
  constexpr uint64_t a_kept = a_pages / 2;
  ASSERT_TRUE(pg->unmap(a + a_kept * page_size, (a_pages - a_kept) * page_size).ok());

  // The server stops. New pages push the pool past the worker's high watermark, until the
  // worker's next batch is in flight to the stopped server.
  server.stop();
  // From here on nothing the program does may wait for the server: a watchdog resumes it
  // after 20 s if something did (and when the test ends, however it ends).
  std::atomic<bool> done{false}, waited{false};
  std::thread watchdog([&] {
    if (!testing::eventually([&] { return done.load(); }, std::chrono::seconds(20))) {
      waited = true;
      server.resume();
    }
  });
  struct resume_on_exit {
    zram_test::nbdkit_memory& s;
    std::atomic<bool>& done;
    std::thread& watchdog;
    ~resume_on_exit() {
      done = true;
      if (watchdog.joinable()) watchdog.join();
      s.resume();
    }
  } resume{server, done, watchdog};
  constexpr uint64_t b_max = 16 * MiB / page_size;
  auto mb = pg->map(b_max * page_size);
  ASSERT_TRUE(mb.ok()) << mb.error().to_string();
  auto* b = static_cast<uint8_t*>(*mb);
  uint64_t b_pages = 0;
  // The worker is kicked an eighth of the pool limit below it: from there, each new page waits
  // a moment for it, so that the pool stays clear of the limit (where a store would wait).
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (; b_pages < b_max && backing_of(*pg).in_flight == 0 &&
         std::chrono::steady_clock::now() < give_up;
       ++b_pages) {
    fill_page(b + b_pages * page_size, 1000000 + b_pages, 0);
    if (pg->stats().zram_mem_used_total + pool_limit / 8 > pool_limit)
      (void)testing::eventually([&] { return backing_of(*pg).in_flight > 0; },
                       std::chrono::milliseconds(200));
  }
  const zram_backing_stat stalled = backing_of(*pg);
  ASSERT_FALSE(waited) << "writing new pages waited for the stalled server";
  ASSERT_GT(stalled.in_flight, 0u) << "the worker never sent a batch after " << b_pages
                                   << " new pages: " << describe(pg->stats());
  ASSERT_GT(b_pages, limit / page_size + 64) << "too few new pages to cycle through the pool";
  const pager_stats before = pg->stats();

  // Faults on the new pages, resident and pooled (none was written back: the server stopped
  // before they were written), three rounds over more than the limit.
  uint64_t bad = 0;
  for (int round = 0; round < 3; ++round)
    for (uint64_t i = 0; i < b_pages; ++i)
      bad += !page_matches(b + i * page_size, 1000000 + i, 0);
  const zram_backing_stat during = backing_of(*pg);
  const pager_stats after = pg->stats();
  done = true;
  watchdog.join();
  EXPECT_FALSE(waited) << "faults on resident and pooled pages waited for the stalled server";
  EXPECT_EQ(bad, 0u);
  EXPECT_GT(after.swap_ins - before.swap_ins, b_pages) << describe(after);
  // The worker's batch was in flight the whole time: nothing was acknowledged meanwhile.
  EXPECT_GT(during.in_flight, 0u);
  EXPECT_EQ(after.bd_writes, before.bd_writes);

  // The server answers again: the batch completes, writeback goes on, every page reads back.
  server.resume();
  EXPECT_TRUE(testing::eventually([&] { return pg->stats().bd_writes > before.bd_writes; },
                         std::chrono::seconds(30)))
      << describe(pg->stats());
  for (uint64_t i = 0; i < a_kept; ++i)
    if (!page_matches(a + i * page_size, i, 0)) ++bad;
  for (uint64_t i = 0; i < b_pages; ++i)
    if (!page_matches(b + i * page_size, 1000000 + i, 0)) ++bad;
  EXPECT_EQ(bad, 0u);
  const pager_stats end = pg->stats();
  EXPECT_GT(end.pool_worker_rounds, 0u);
  EXPECT_GT(end.bd_reads, 0u) << "no page came back from the server: " << describe(end);
  EXPECT_EQ(end.overcharges, 0u) << describe(end);
  EXPECT_TRUE(pg->check_invariants().ok()) << pg->check_invariants().to_string();
  ASSERT_TRUE(pg->unmap(a, a_kept * page_size).ok());
  ASSERT_TRUE(pg->unmap(b, b_max * page_size).ok());
  pg->leave_job();
}

// Many threads storing into a pool at its limit while the worker writes back: the stores take
// the room each of its batches leaves, so the pool is no smaller at the round's end although
// hundreds of its pages went to the server. That is room made (the pages now on the server),
// not a pool that cannot shrink: a fault that finds the pool full and waits for such a round
// must not count it towards the job's stop (three in a row stopped the job, "its compressed
// pools reached --pool-limit", though the server had room for all of it).
TEST(PoolWorker, PagesFlowingThroughAFullPoolDoNotStopTheJob) {
  zram_test::nbdkit_memory server("1G");
  ASSERT_TRUE(server.ready());
  constexpr uint64_t limit = 1 * MiB, pool_limit = 2 * MiB;
  std::shared_ptr<job> j;
  auto pg = pager_in_job(limit, pool_limit, server.uri(), &j);
  ASSERT_TRUE(pg);

  // Many more threads than cores, each writing its own 2 MiB and reading it back twice: 48
  // threads hold 96 times the resident limit, 24 times the pool's (compressed to about half).
  const unsigned nthreads = 24 * std::max(2u, std::thread::hardware_concurrency());
  constexpr uint64_t per_thread = 2 * MiB / page_size / testing::work_scale_by(4);
  auto m = pg->map(nthreads * per_thread * page_size);
  ASSERT_TRUE(m.ok()) << m.error().to_string();
  auto* base = static_cast<uint8_t*>(*m);
  std::atomic<uint64_t> bad{0};
  testing::run_threads(static_cast<int>(nthreads), [&](int t) {
    const uint64_t first = static_cast<uint64_t>(t) * per_thread;
    uint8_t* mine = base + first * page_size;
    for (uint64_t i = 0; i < per_thread; ++i) fill_page(mine + i * page_size, first + i, 0);
    for (int round = 0; round < 2; ++round)
      for (uint64_t i = 0; i < per_thread; ++i)
        if (!page_matches(mine + i * page_size, first + i, 0)) bad.fetch_add(1);
  });
  const pager_stats s = pg->stats();
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_EQ(j->stop_reason(), job_stop_none)
      << "the job was asked to stop though every page could go to the server: " << describe(s);
  // The pages went through the pool to the server and came back from it.
  EXPECT_GT(s.bd_writes, nthreads * per_thread / 4) << describe(s);
  EXPECT_GT(s.bd_reads, 0u) << describe(s);
  EXPECT_GT(s.pool_full_waits, 0u) << "no store found the pool full: " << describe(s);
  // A batch of victims stops storing at the first refusal: the rest of it is not compressed
  // only to be refused too (every one was, 186 515 refusals beside 67 180 swap-outs, in a sort
  // under --pool-limit).
  EXPECT_GT(s.store_refusals, 0u) << describe(s);
  EXPECT_LE(s.store_refusals, s.eviction_batches) << describe(s);
  EXPECT_TRUE(pg->check_invariants().ok()) << pg->check_invariants().to_string();
  ASSERT_TRUE(pg->unmap(base, nthreads * per_thread * page_size).ok());
  pg->leave_job();
}

}  // namespace
}  // namespace uswap
