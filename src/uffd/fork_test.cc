// fork() with fork_policy::copy (fork.cc): the child gets a pager of its own over a copy of the
// arena, resident and swapped-out pages alike; the parent's other threads keep faulting through
// the fork; fork advice (dontfork / wipeonfork) holds; a raw clone() child gets no arena.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "uffd_test_util.h"
#include "uswap/uffd/job.h"

#if defined(USWAP_TSAN)
// report_signal_unsafe=0: see region_concurrency_test.cc (a SIGBUS raised by an access to pager
// memory never interrupts malloc). die_after_fork=0: a child of these multi-threaded tests
// starts threads of its own (its handler threads), which TSan refuses by default because the
// copied state of the parent's other threads might hold runtime locks; the fork here happens
// with every pager operation quiesced (map_lock held for writing), and the child's reports are
// still checked.
extern "C" const char* __tsan_default_options() {
  return "report_signal_unsafe=0 die_after_fork=0";
}
#endif

namespace uswap {
namespace {

using namespace uffd_test;

// Runs f in a fork()ed child; its exit status (0: f returned 0), or 100 + signal if it died.
template <class F>
int in_child(F f) {
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) ::_exit(f());
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return -2;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

// A prepare handler registered before any pager exists runs after the pagers' own (glibc runs
// prepare handlers in reverse order): it reads pages while the forking thread holds map_lock for
// writing, as glibc's fork reads its NSS state there. The pages it reads and what it found.
constexpr uint64_t prepare_pages = 16;
std::atomic<const uint8_t*> read_in_prepare{nullptr};
std::atomic<uint64_t> prepare_mismatches{0};
std::atomic<uint64_t> prepare_runs{0};
[[maybe_unused]] const bool prepare_registered = [] {
  ::pthread_atfork(
      [] {
        const uint8_t* p = read_in_prepare.load();
        if (!p) return;
        for (uint64_t i = 0; i < prepare_pages; ++i)
          if (!page_matches(p + i * page_size, i, 0)) prepare_mismatches.fetch_add(1);
        prepare_runs.fetch_add(1);
      },
      nullptr, nullptr);
  return true;
}();

class ForkTest : public ::testing::TestWithParam<fault_mode> {
 protected:
  std::shared_ptr<pager> make(uint64_t limit, uint64_t max) {
    return make_pager(options(GetParam(), limit, max));
  }
  // A pager (64 MiB of arena) that is the only member of a job limited to `limit`, which it
  // also has as its own limit; nullptr (the test has failed) otherwise.
  std::shared_ptr<pager> make_in_job(uint64_t limit) {
    job_options jo;
    jo.limit_pages = limit / page_size;
    auto jc = job::create(jo);
    EXPECT_TRUE(jc.ok()) << jc.error().to_string();
    if (!jc.ok()) return nullptr;
    auto pg = make(limit, 64 * MiB);
    if (!pg || !pg->join_job(std::move(jc).value()).ok()) return nullptr;
    return pg;
  }
  // A pager with a 1 MiB limit and 2048 pages mapped, written with version 0: most of them
  // swapped out, some resident. nullptr (the test has failed) otherwise.
  uint8_t* map_mostly_swapped(std::shared_ptr<pager>& pg) {
    pg = make(1 * MiB, 64 * MiB);
    EXPECT_TRUE(pg);
    if (!pg) return nullptr;
    auto m = pg->map(8 * MiB);
    EXPECT_TRUE(m.ok());
    if (!m.ok()) return nullptr;
    auto* a = static_cast<uint8_t*>(*m);
    for (uint64_t i = 0; i < 2048; ++i) fill_page(a + i * page_size, i, 0);
    const pager_stats s = pg->stats();
    EXPECT_GT(s.swap_pages_used, 1500u) << "most pages must be swapped out at the fork";
    EXPECT_GT(s.resident_pages, 100u);
    return s.swap_pages_used > 1500 && s.resident_pages > 100 ? a : nullptr;
  }
};

TEST_P(ForkTest, ChildReadsResidentAndSwappedPagesThenPagesOnItsOwn) {
  std::shared_ptr<pager> pg;
  uint8_t* a = map_mostly_swapped(pg);
  ASSERT_NE(a, nullptr);

  const int rc = in_child([&] {
    for (uint64_t i = 0; i < 2048; ++i)
      if (!page_matches(a + i * page_size, i, 0)) return 10;
    // The child pages by itself: new versions over its 1 MiB limit, read back.
    for (uint64_t i = 0; i < 2048; ++i) fill_page(a + i * page_size, i, 1);
    for (uint64_t i = 0; i < 2048; ++i)
      if (!page_matches(a + i * page_size, i, 1)) return 11;
    const pager_stats s = pg->stats();
    if (s.swap_outs < 1500 || s.peak_resident_pages > s.limit_pages) return 12;
    if (!pg->check_invariants().ok()) return 13;
    // Its arena operations work too.
    auto n = pg->map(MiB);
    if (!n.ok() || !pg->unmap(*n, MiB).ok()) return 14;
    return 0;
  });
  EXPECT_EQ(rc, 0) << "see the child's return codes";
  // The parent's pages are its own: version 0 still.
  for (uint64_t i = 0; i < 2048; ++i) ASSERT_TRUE(page_matches(a + i * page_size, i, 0)) << i;
  EXPECT_EQ(pg->stats().forks, 1u);
  EXPECT_TRUE(pg->check_invariants().ok()) << pg->check_invariants().to_string();
}

// In a job, a forked child charges nothing for the pages it inherited resident: they are frames
// its parent charged, shared copy-on-write (pager_impl.h, "Fork-shared pages"), and the parent
// evicts nothing at the fork to make room for them. The child charges a page when it writes it,
// and when pagemap shows it maps the frame alone (here: the parent unmapped its copy).
TEST_P(ForkTest, InAJobAChildChargesOnlyThePagesThatBecomeItsOwn) {
  auto pg = make_in_job(8 * MiB);
  ASSERT_TRUE(pg);
  constexpr uint64_t n = 1024;  // 4 MiB: all resident under the 8 MiB limit
  auto m = pg->map(n * page_size);
  ASSERT_TRUE(m.ok());
  auto* a = static_cast<uint8_t*>(*m);
  for (uint64_t i = 0; i < n; ++i) fill_page(a + i * page_size, i, 0);
  ASSERT_EQ(pg->stats().resident_pages, n);
  int to_child[2], to_parent[2];
  ASSERT_EQ(::pipe(to_child), 0);
  ASSERT_EQ(::pipe(to_parent), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto check = [&]() -> int {
      pager_stats s = pg->stats();
      if (s.shared_pages != n || s.resident_pages != 0) return 10;
      if (!pg->check_invariants().ok()) return 11;
      for (uint64_t i = 0; i < n; ++i)
        if (!page_matches(a + i * page_size, i, 0)) return 12;
      if (pg->stats().resident_pages != 0) return 13;  // reading charges nothing
      // Written: a frame of its own each (the kernel copies them), charged here. A write
      // makes its window of 16 this process's own, so that the others cost no fault of ours.
      for (uint64_t i = 0; i < n / 4; ++i) fill_page(a + i * page_size, i, 1);
      s = pg->stats();
      if (s.resident_pages != n / 4 || s.shared_pages != n - n / 4) return 14;
      if (s.shared_write_around < n / 8 || s.wp_faults > n / 16) return 21;
      if (!pg->check_invariants().ok()) return 15;
      char c = 'u';
      if (::write(to_parent[1], &c, 1) != 1 || ::read(to_child[0], &c, 1) != 1) return 16;
      // The parent unmapped its copy: the frames left are this process's alone. A fault (a
      // page of a new mapping) lets the pager look again (at most every 20 ms, further apart
      // when a look is slow).
      uint64_t extras = 0;
      for (; extras < 100 && pg->stats().shared_pages != 0; ++extras) {
        ::usleep(30 * 1000);
        auto extra = pg->map(page_size);
        if (!extra.ok()) return 17;
        fill_page(static_cast<uint8_t*>(*extra), 0, 2);
      }
      s = pg->stats();
      if (s.shared_pages != 0 || s.resident_pages != n + extras) return 18;
      for (uint64_t i = 0; i < n; ++i)
        if (!page_matches(a + i * page_size, i, i < n / 4 ? 1 : 0)) return 19;
      if (!pg->check_invariants().ok()) return 20;
      return 0;
    };
    ::_exit(check());
  }
  char c = 0;
  ASSERT_EQ(::read(to_parent[0], &c, 1), 1) << "the child stopped early";
  // Nothing was evicted in the parent for the child: its pages are all still resident.
  EXPECT_EQ(pg->stats().swap_outs, 0u);
  EXPECT_EQ(pg->stats().resident_pages, n);
  for (uint64_t i = 0; i < n; ++i) ASSERT_TRUE(page_matches(a + i * page_size, i, 0)) << i;
  ASSERT_TRUE(pg->unmap(a, n * page_size).ok());
  ASSERT_EQ(::write(to_child[1], &c, 1), 1);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the child's return code " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1)
      << " (see the test)";
  for (int fd : {to_child[0], to_child[1], to_parent[0], to_parent[1]}) ::close(fd);
  EXPECT_TRUE(pg->check_invariants().ok()) << pg->check_invariants().to_string();
}

// The walks over the arena's pages at a fork skip 64 untouched chunks (128 MiB) at a time: pages
// in chunks far apart, at either end of a bitmap word and in the arena's last chunk, are all
// found, in the child as in the parent.
TEST_P(ForkTest, InAJobTheForkFindsPagesInChunksFarApart) {
  job_options jo;
  jo.limit_pages = 16 * MiB / page_size;
  auto jc = job::create(jo);
  ASSERT_TRUE(jc.ok()) << jc.error().to_string();
  auto pg = make(16 * MiB, 1024 * MiB);
  ASSERT_TRUE(pg);
  ASSERT_TRUE(pg->join_job(std::move(jc).value()).ok());
  const uint64_t len = pg->arena_size() - 64 * page_size;
  auto m = pg->map(len);
  ASSERT_TRUE(m.ok()) << m.error().to_string();
  auto* a = static_cast<uint8_t*>(*m);
  const uint64_t word = uint64_t{1} << 15;  // pages under one word of the chunk bitmap
  std::vector<uint64_t> at = {0, word - 1, word, 3 * word + 600, len / page_size - 1};
  for (uint64_t i : at) fill_page(a + i * page_size, i, 0);
  // The pages written, and any the fault mode maps around them: every one shared at the fork.
  const uint64_t held = pg->stats().resident_pages;
  ASSERT_GE(held, at.size());
  const int rc = in_child([&] {
    const pager_stats s = pg->stats();
    if (s.shared_pages != held || s.resident_pages != 0) return 10;
    if (!pg->check_invariants().ok()) return 11;
    for (uint64_t i : at)
      if (!page_matches(a + i * page_size, i, 0)) return 12;
    for (uint64_t i : at) fill_page(a + i * page_size, i, 1);
    if (pg->stats().resident_pages < at.size() || !pg->check_invariants().ok()) return 13;
    return 0;
  });
  EXPECT_EQ(rc, 0) << "see the test for the child's return codes";
  for (uint64_t i : at) EXPECT_TRUE(page_matches(a + i * page_size, i, 0)) << i;
  EXPECT_TRUE(pg->check_invariants().ok()) << pg->check_invariants().to_string();
}

// A parent in a job cannot unmap its children's copies of a frame, so evicting a page its child
// still maps would free nothing: reclaim passes over such victims while it finds others, and
// takes them only when a lap found nothing else.
TEST_P(ForkTest, AParentPassesOverVictimsItsChildStillMaps) {
  auto pg = make_in_job(16 * MiB);
  ASSERT_TRUE(pg);
  constexpr uint64_t n = 512;
  auto ma = pg->map(n * page_size);
  ASSERT_TRUE(ma.ok());
  auto* a = static_cast<uint8_t*>(*ma);  // inherited by the child: the older half of the clock
  for (uint64_t i = 0; i < n; ++i) fill_page(a + i * page_size, i, 0);
  int to_child[2], to_parent[2];
  ASSERT_EQ(::pipe(to_child), 0);
  ASSERT_EQ(::pipe(to_parent), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto check = [&]() -> int {
      for (uint64_t i = 0; i < n; ++i)
        if (!page_matches(a + i * page_size, i, 0)) return 10;
      char c = 'r';
      if (::write(to_parent[1], &c, 1) != 1 || ::read(to_child[0], &c, 1) != 1) return 11;
      for (uint64_t i = 0; i < n; ++i)
        if (!page_matches(a + i * page_size, i, 0)) return 12;
      return pg->check_invariants().ok() ? 0 : 13;
    };
    ::_exit(check());
  }
  char c = 0;
  ASSERT_EQ(::read(to_parent[0], &c, 1), 1) << "the child stopped early";
  auto mb = pg->map(n * page_size);
  ASSERT_TRUE(mb.ok());
  auto* b = static_cast<uint8_t*>(*mb);  // this process's alone
  for (uint64_t i = 0; i < n; ++i) fill_page(b + i * page_size, n + i, 0);
  ASSERT_EQ(resident_pages(a, n * page_size), n);

  // The hand meets the shared pages first: they are put back, the pages of b go.
  EXPECT_GE(pg->reclaim(n / 2), n / 2);
  EXPECT_GT(pg->stats().shared_spared, 0u);
  EXPECT_EQ(resident_pages(a, n * page_size), n) << "a page the child maps was evicted";
  EXPECT_LE(resident_pages(b, n * page_size), n / 2);
  // Nothing else left: after a lap of them, the shared pages go too.
  pg->reclaim(2 * n);
  EXPECT_LT(resident_pages(a, n * page_size), n / 4);
  EXPECT_LT(pg->stats().resident_pages, n / 4);
  for (uint64_t i = 0; i < n; ++i) {
    ASSERT_TRUE(page_matches(a + i * page_size, i, 0)) << i;
    ASSERT_TRUE(page_matches(b + i * page_size, n + i, 0)) << i;
  }
  ASSERT_EQ(::write(to_child[1], &c, 1), 1);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the child's return code " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1)
      << " (see the test)";
  for (int fd : {to_child[0], to_child[1], to_parent[0], to_parent[1]}) ::close(fd);
  EXPECT_TRUE(pg->check_invariants().ok()) << pg->check_invariants().to_string();
}

// The forking thread faults between the pagers' prepare handler and the clone, on pages swapped
// out: in sigbus mode it resolves them itself, in handler_thread mode a handler thread does for
// it, without map_lock (which the forking thread holds; waiting for it never ended).
TEST_P(ForkTest, TheForkingThreadsFaultsBetweenTheHandlersAreResolved) {
  std::shared_ptr<pager> pg;
  uint8_t* a = map_mostly_swapped(pg);
  ASSERT_NE(a, nullptr);
  const uint64_t ins = pg->stats().swap_ins;
  prepare_runs.store(0);
  prepare_mismatches.store(0);
  read_in_prepare.store(a);
  const int rc = in_child([&] {
    for (uint64_t i = 0; i < 2048; ++i)
      if (!page_matches(a + i * page_size, i, 0)) return 10;
    return 0;
  });
  read_in_prepare.store(nullptr);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(prepare_runs.load(), 1u);
  EXPECT_EQ(prepare_mismatches.load(), 0u);
  EXPECT_GT(pg->stats().swap_ins, ins) << "the pages read inside the fork were all resident";
  EXPECT_TRUE(pg->check_invariants().ok()) << pg->check_invariants().to_string();
}

TEST_P(ForkTest, ParentThreadsKeepFaultingAcrossForks) {
  // Two threads per core rewrite and verify their own pages (each page carries its version)
  // while the main thread forks; every child checks that every page holds one whole version.
  auto pg = make(1 * MiB, 64 * MiB);
  ASSERT_TRUE(pg);
  const unsigned nthreads = 2 * std::max(2u, std::thread::hardware_concurrency());
  constexpr uint64_t per_thread = 256;  // pages: together several times the limit
  auto m = pg->map(nthreads * per_thread * page_size);
  ASSERT_TRUE(m.ok());
  auto* a = static_cast<uint8_t*>(*m);
  for (uint64_t i = 0; i < nthreads * per_thread; ++i) fill_page(a + i * page_size, i, 0);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> bad{0}, rounds{0};
  // The page each thread is writing (or none): a fork's copy of a page another thread is in the
  // middle of writing is torn, with or without a pager (fork copies page by page while other
  // threads run). The marker is set before the page's first byte is written and cleared after
  // its last, so a child that finds it set skips that page; every other page must be whole.
  std::vector<std::atomic<uint64_t>> writing(nthreads);
  for (auto& w : writing) w.store(UINT64_MAX);
  std::vector<std::thread> ts;
  std::atomic<unsigned> running{0};
  for (unsigned t = 0; t < nthreads; ++t)
    ts.emplace_back([&, t] {
      running.fetch_add(1);
      for (uint64_t v = 1; !stop.load(); ++v) {
        for (uint64_t i = t * per_thread; i < (t + 1) * per_thread; ++i) {
          if (!page_matches(a + i * page_size, i, v - 1)) bad.fetch_add(1);
          writing[t].store(i);
          fill_page(a + i * page_size, i, v);
          writing[t].store(UINT64_MAX);
        }
        rounds.fetch_add(1);
      }
    });
  // The first fork waits for every thread to run: a thread still starting may hold the lock of
  // an allocator that fork does not take (AddressSanitizer's in GCC 12), and the child would
  // wait on that copy forever.
  while (running.load() < nthreads) std::this_thread::yield();
  int forks = 0, failed = 0;
  while (forks < 8 || rounds.load() < 4 * nthreads) {
    const int rc = in_child([&] {
      for (uint64_t i = 0; i < nthreads * per_thread; ++i) {
        if (writing[i / per_thread].load() == i) continue;  // torn by fork itself
        uint64_t version;
        std::memcpy(&version, a + i * page_size + 8, sizeof version);
        if (!page_matches(a + i * page_size, i, version)) return 20;
      }
      return 0;
    });
    failed += rc != 0;
    ++forks;
    if (forks > 200) break;
  }
  stop.store(true);
  for (auto& t : ts) t.join();
  EXPECT_EQ(failed, 0) << "children that saw a torn or zeroed page";
  EXPECT_EQ(bad.load(), 0u) << "pages the parent's threads found changed";
  EXPECT_GE(rounds.load(), 4u * nthreads) << "the threads must have run through the forks";
  EXPECT_GT(pg->stats().swap_outs, 0u);
  EXPECT_TRUE(pg->check_invariants().ok()) << pg->check_invariants().to_string();
}

sigjmp_buf segv_jump;
void on_segv(int) { siglongjmp(segv_jump, 1); }
bool read_faults(const volatile uint8_t* p) {
  struct sigaction sa {}, old{};
  sa.sa_handler = on_segv;
  sigaction(SIGSEGV, &sa, &old);
  bool faulted = false;
  if (sigsetjmp(segv_jump, 1) == 0)
    (void)*p;
  else
    faulted = true;
  sigaction(SIGSEGV, &old, nullptr);
  return faulted;
}

TEST_P(ForkTest, ForkAdviceDontforkAndWipeonfork) {
  auto pg = make(1 * MiB, 64 * MiB);
  ASSERT_TRUE(pg);
  auto m = pg->map(6 * MiB);
  ASSERT_TRUE(m.ok());
  auto* a = static_cast<uint8_t*>(*m);
  for (uint64_t i = 0; i < 1536; ++i) fill_page(a + i * page_size, i, 0);
  ASSERT_TRUE(pg->set_fork_advice(a + 2 * MiB, 2 * MiB, pager::fork_advice::dontfork).ok());
  ASSERT_TRUE(pg->set_fork_advice(a + 4 * MiB, 2 * MiB, pager::fork_advice::wipeonfork).ok());
  const int rc = in_child([&] {
    for (uint64_t i = 0; i < 512; ++i)
      if (!page_matches(a + i * page_size, i, 0)) return 30;
    if (!read_faults(a + 2 * MiB) || !read_faults(a + 4 * MiB - 1)) return 31;
    for (uint64_t i = 1024; i < 1536; ++i)
      if (a[i * page_size + 123] != 0) return 32;
    if (!pg->check_invariants().ok()) return 33;
    return 0;
  });
  EXPECT_EQ(rc, 0);
  for (uint64_t i = 0; i < 1536; ++i) ASSERT_TRUE(page_matches(a + i * page_size, i, 0)) << i;
}

TEST_P(ForkTest, RawCloneChildGetsNoArenaAndExecDropsIt) {
#if defined(USWAP_TSAN)
  // TSan's runtime cannot follow a raw clone() and turns the child's SIGSEGV into its own abort.
  GTEST_SKIP() << "raw clone() under ThreadSanitizer";
#endif
  auto pg = make(1 * MiB, 16 * MiB);
  ASSERT_TRUE(pg);
  auto m = pg->map(4 * MiB);
  ASSERT_TRUE(m.ok());
  auto* a = static_cast<volatile uint8_t*>(*m);
  a[0] = 7;
  // clone() without the C library's fork: no pthread_atfork handler runs, so the arena must not
  // be there at all (never zeros where a swapped-out page was).
  const long pid = ::syscall(SYS_clone, SIGCHLD, nullptr, nullptr, nullptr, nullptr);
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The default action: AddressSanitizer's handler would report the fault and exit(1).
    ::signal(SIGSEGV, SIG_DFL);
    (void)a[0];
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(static_cast<pid_t>(pid), &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the raw clone child read the arena";
  EXPECT_EQ(WTERMSIG(status), SIGSEGV);
  // A child that execs drops its copy of the pager with its address space.
  EXPECT_EQ(in_child([] {
              execl("/bin/true", "true", static_cast<char*>(nullptr));
              return 99;
            }),
            0);
  EXPECT_EQ(a[0], 7);
}

TEST_P(ForkTest, VforkChildSharesTheParentsPager) {
#if defined(USWAP_TSAN)
  // TSan intercepts vfork as fork (the child would not share memory, and the test's premise).
  GTEST_SKIP() << "vfork under ThreadSanitizer";
#endif
  auto pg = make(1 * MiB, 16 * MiB);
  ASSERT_TRUE(pg);
  auto m = pg->map(4 * MiB);
  ASSERT_TRUE(m.ok());
  auto* a = static_cast<uint8_t*>(*m);
  for (uint64_t i = 0; i < 1024; ++i) fill_page(a + i * page_size, i, 0);
  volatile int ok = 0;
  const pid_t pid = ::vfork();
  if (pid == 0) {
    // Shared memory, shared pager: reading swapped pages faults them in for the parent too.
    int good = 1;
    for (uint64_t i = 0; i < 1024; i += 64) good &= page_matches(a + i * page_size, i, 0);
    ok = good;
    ::_exit(0);
  }
  ASSERT_GT(pid, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_EQ(ok, 1);
  EXPECT_EQ(pg->stats().forks, 0u);
}

INSTANTIATE_TEST_SUITE_P(Modes, ForkTest,
                         ::testing::Values(fault_mode::sigbus, fault_mode::handler_thread),
                         mode_name());

}  // namespace
}  // namespace uswap
