// A job member's thread for the others' requests for room (kswapd.cc): once a member holds
// enough to be asked, the thread evicts for a requester while the member's own threads are
// blocked (the case a signal cannot serve without failing their calls with EINTR) or busy
// faulting on the same pages. Two pagers of one process are the two members here; every page
// of both reads back as written, and the job's charge never passes its limit.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "uffd_test_util.h"
#include "uswap/base/fault_inject.h"
#include "uswap/uffd/job.h"
#include "uswap/uffd/pager.h"

#if defined(USWAP_TSAN)
// report_signal_unsafe=0: see region_concurrency_test.cc (a SIGBUS raised by an access to pager
// memory never interrupts malloc).
// die_after_fork=0: a test forks with the pager's threads running (fork_test.cc says why that is
// safe here).
extern "C" const char* __tsan_default_options() {
  return "report_signal_unsafe=0 die_after_fork=0";
}
#endif

namespace uswap {
namespace {

using namespace uffd_test;

// The job's signal reaches this process when a member without a listening thread is asked
// (both members are this process): counted, never served, so that what the test sees served
// was the thread's.
std::atomic<int> job_signals_seen{0};
void count_job_signal(int) { job_signals_seen.fetch_add(1, std::memory_order_relaxed); }

struct two_members {
  static constexpr uint64_t limit = 8 * MiB, limit_pages = limit / page_size;
  // What a member holds in these tests: more than a sixteenth of the limit and its fair share.
  static constexpr uint64_t held_pages = limit_pages * 3 / 4;
  std::shared_ptr<job> j;
  std::shared_ptr<pager> a, b;
  struct sigaction old {};

  two_members() {
    job_options jo;
    jo.limit_pages = limit_pages;
    auto jc = job::create(jo);
    EXPECT_TRUE(jc.ok()) << jc.error().to_string();
    if (!jc.ok()) return;
    j = std::move(jc).value();
    struct sigaction sa {};
    sa.sa_handler = count_job_signal;
    sigemptyset(&sa.sa_mask);
    ::sigaction(j->signal(), &sa, &old);
    const pager_options o = options(fault_mode::sigbus, limit, 256 * MiB);
    a = make_pager(o);
    b = make_pager(o);
  }
  ~two_members() {
    a.reset();
    b.reset();
    if (j) ::sigaction(j->signal(), &old, nullptr);
  }
};

// Writes version v of pages [first, first + n) of `mem` from `threads` threads, interleaved.
void fill_from(uint8_t* mem, uint64_t n, uint64_t v, unsigned threads) {
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < threads; ++t)
    ts.emplace_back([=] {
      for (uint64_t i = t; i < n; i += threads) fill_page(mem + i * page_size, i, v);
    });
  for (std::thread& t : ts) t.join();
}

uint64_t mismatches(const uint8_t* mem, uint64_t n, uint64_t v) {
  uint64_t bad = 0;
  for (uint64_t i = 0; i < n; ++i) bad += !page_matches(mem + i * page_size, i, v);
  return bad;
}

// A new mapping of `pg`, its first `filled` of `pages` written (version v, from `threads`
// threads); nullptr after recording why it could not be mapped.
uint8_t* map_filled(pager& pg, uint64_t pages, uint64_t filled, uint64_t v, unsigned threads) {
  auto m = pg.map(pages * page_size);
  EXPECT_TRUE(m.ok()) << (m.ok() ? std::string() : m.error().to_string());
  if (!m.ok()) return nullptr;
  auto* p = static_cast<uint8_t*>(*m);
  fill_from(p, filled, v, threads);
  return p;
}

TEST(JobRequests, AMembersThreadServesThemWhileItsOwnThreadsBlockOrFault) {
  two_members m;
  ASSERT_TRUE(m.j && m.a && m.b);
  ASSERT_TRUE(m.b->join_job(m.j).ok());
  ASSERT_TRUE(m.a->join_job(m.j).ok());
  // A fills three quarters of the limit: more than a sixteenth, with another member to ask it,
  // so it wants its thread.
  constexpr uint64_t a_pages = two_members::held_pages;
  uint8_t* a = map_filled(*m.a, a_pages, a_pages, 1, 1);
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(m.a->kswapd_wanted().load());
  m.a->start_wanted_threads();
  EXPECT_FALSE(m.a->kswapd_wanted().load()) << "the thread was not started";
  const pager_stats a0 = m.a->stats();
  EXPECT_EQ(a0.swap_outs, 0u) << describe(a0);

  // B's three threads fill as much while nothing of A's runs but its thread: under its fair
  // share, B asks A for room, and only A's thread can give it (A never faults meanwhile).
  constexpr uint64_t b_pages = a_pages;
  uint8_t* b = map_filled(*m.b, b_pages, b_pages, 2, 3);
  ASSERT_NE(b, nullptr);
  const pager_stats a1 = m.a->stats();
  EXPECT_GE(a1.job_requests_served, 1u) << describe(a1);
  EXPECT_GT(a1.swap_outs, 0u) << "A's idle member gave no room: " << describe(a1);
  EXPECT_EQ(a1.job_signals, 0u);

  // Then both at once, with more threads than cores: B starts again from nothing (a new
  // mapping) and its three threads fill it while two of A's read A's pages back, so that A's
  // thread evicts while A's own faults map and evict the same pages.
  ASSERT_TRUE(m.b->unmap(b, b_pages * page_size).ok());
  b = map_filled(*m.b, b_pages, 0, 3, 3);
  ASSERT_NE(b, nullptr);
  std::atomic<uint64_t> a_bad{0};
  std::thread ra([&] {
    for (int round = 0; round < 2; ++round) a_bad += mismatches(a, a_pages, 1);
  });
  std::thread rb([&] { a_bad += mismatches(a, a_pages, 1); });
  fill_from(b, b_pages, 3, 3);
  ra.join();
  rb.join();
  EXPECT_EQ(a_bad.load(), 0u) << "pages of A read back wrong";
  EXPECT_EQ(mismatches(b, b_pages, 3), 0u) << "pages of B read back wrong";
  EXPECT_EQ(mismatches(a, a_pages, 1), 0u);

  const job_view v = m.j->view();
  const pager_stats a2 = m.a->stats(), b2 = m.b->stats();
  // Requests in this phase depend on who is under its fair share when the job fills: counted,
  // not required.
  std::printf("requests served: A %llu, B %llu (phase 1: A %llu)\n",
              static_cast<unsigned long long>(a2.job_requests_served),
              static_cast<unsigned long long>(b2.job_requests_served),
              static_cast<unsigned long long>(a1.job_requests_served));
  EXPECT_EQ(a2.overcharges + b2.overcharges, 0u) << describe(a2) << " / " << describe(b2);
  EXPECT_LE(v.peak_charge, two_members::limit_pages);
  EXPECT_TRUE(m.a->check_invariants().ok());
  EXPECT_TRUE(m.b->check_invariants().ok());
  ASSERT_TRUE(m.a->unmap(a, a_pages * page_size).ok());
  ASSERT_TRUE(m.b->unmap(b, b_pages * page_size).ok());
}

int threads_of_this_process() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  return -1;
}

// The program's threads all reach the shim's hooks at once while its faults keep charging (and
// asking for the thread again): exactly one thread is made.
TEST(JobRequests, ThreadsStartingTheThreadAtOnceMakeOne) {
  two_members m;
  ASSERT_TRUE(m.j && m.a && m.b);
  ASSERT_TRUE(m.b->join_job(m.j).ok());
  ASSERT_TRUE(m.a->join_job(m.j).ok());
  constexpr uint64_t a_pages = two_members::held_pages;
  uint8_t* a = map_filled(*m.a, a_pages, a_pages / 2, 1, 1);
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(m.a->kswapd_wanted().load());
  const int before = threads_of_this_process();
  constexpr unsigned starters = 8, writers = 2;
  std::atomic<unsigned> ready{0};
  std::atomic<uint64_t> tried{0};
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < starters; ++t)
    ts.emplace_back([&] {
      ready.fetch_add(1);
      while (ready.load() < starters + writers) {
      }
      for (int i = 0; i < 1000; ++i, tried.fetch_add(1)) m.a->start_wanted_threads();
    });
  for (unsigned t = 0; t < writers; ++t)
    ts.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < starters + writers) {
      }
      for (uint64_t i = a_pages / 2 + t; i < a_pages; i += writers) fill_page(a + i * page_size, i, 1);
    });
  for (std::thread& t : ts) t.join();
  EXPECT_EQ(tried.load(), uint64_t{starters} * 1000);
  EXPECT_FALSE(m.a->kswapd_wanted().load());
  EXPECT_EQ(threads_of_this_process(), before + 1) << "not exactly one thread was made";
  EXPECT_EQ(mismatches(a, a_pages, 1), 0u);
  ASSERT_TRUE(m.a->unmap(a, a_pages * page_size).ok());
}

// A member alone in its job has nobody to ask it for room: however much it holds, it never
// wants the thread (a single program under uswap run stays as threaded as it was).
TEST(JobRequests, AMemberAloneNeverWantsTheThread) {
  two_members m;
  ASSERT_TRUE(m.j && m.a);
  ASSERT_TRUE(m.a->join_job(m.j).ok());
  constexpr uint64_t a_pages = two_members::held_pages;
  uint8_t* a = map_filled(*m.a, a_pages, a_pages, 1, 2);
  ASSERT_NE(a, nullptr);
  EXPECT_FALSE(m.a->kswapd_wanted().load());
  EXPECT_EQ(mismatches(a, a_pages, 1), 0u);
  ASSERT_TRUE(m.a->unmap(a, a_pages * page_size).ok());
}

// A member that grew alone gets company by forking (its child is in the job from its first
// instruction): from then on it wants the thread.
TEST(JobRequests, AMemberThatForksWantsTheThread) {
  two_members m;
  ASSERT_TRUE(m.j && m.a);
  ASSERT_TRUE(m.a->join_job(m.j).ok());
  constexpr uint64_t a_pages = two_members::held_pages;
  uint8_t* a = map_filled(*m.a, a_pages, a_pages, 1, 1);
  ASSERT_NE(a, nullptr);
  ASSERT_FALSE(m.a->kswapd_wanted().load());
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) ::_exit(mismatches(a, a_pages, 1) == 0 ? 0 : 1);
  m.a->fork_returned(pid);  // as the shim's fork() does once the parent is back
  EXPECT_TRUE(m.a->kswapd_wanted().load());
  int st = 0;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "the child read its copy wrong";
  EXPECT_EQ(mismatches(a, a_pages, 1), 0u);
  ASSERT_TRUE(m.a->unmap(a, a_pages * page_size).ok());
}

// Where the thread cannot listen (no futex_waitv: an old kernel, a sandbox's filter), it leaves
// requests to the job's signal: it serves none, and the idle member is signalled instead.
TEST(JobRequests, WithoutFutexWaitvTheThreadLeavesRequestsToTheSignal) {
  two_members m;
  ASSERT_TRUE(m.j && m.a && m.b);
  ASSERT_TRUE(m.b->join_job(m.j).ok());
  ASSERT_TRUE(m.a->join_job(m.j).ok());
  constexpr uint64_t a_pages = two_members::held_pages;
  uint8_t* a = map_filled(*m.a, a_pages, a_pages, 1, 1);
  ASSERT_NE(a, nullptr);
  fault_inject_arm(fault_point::futex_waitv, 1, ENOSYS, fault_inject_forever);
  EXPECT_TRUE(m.a->kswapd_wanted().load());
  m.a->start_wanted_threads();
  const int seen0 = job_signals_seen.load();
  uint8_t* b = map_filled(*m.b, a_pages, a_pages, 2, 1);
  ASSERT_NE(b, nullptr);
  EXPECT_GE(fault_inject_failures(fault_point::futex_waitv), 1u);
  fault_inject_disarm(fault_point::futex_waitv);
  const pager_stats a1 = m.a->stats();
  EXPECT_EQ(a1.job_requests_served, 0u) << "the thread served a request it could not hear";
  EXPECT_EQ(a1.swap_outs, 0u) << describe(a1);
  EXPECT_GT(job_signals_seen.load(), seen0) << "the idle member was never signalled";
  EXPECT_EQ(mismatches(a, a_pages, 1), 0u);
  EXPECT_EQ(mismatches(b, a_pages, 2), 0u);
  ASSERT_TRUE(m.a->unmap(a, a_pages * page_size).ok());
  ASSERT_TRUE(m.b->unmap(b, a_pages * page_size).ok());
}

}  // namespace
}  // namespace uswap
