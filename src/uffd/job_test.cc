// The job segment: reservations within the limit across processes, leaving and reaping,
// recovery from a member killed holding the job lock, pressure requests, and statistics.
#include "uswap/uffd/job.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "sigbus.h"
#include "uswap_testing/proc.h"
#include "uswap_testing/threads.h"

namespace uswap {
namespace {

std::unique_ptr<job> make_job(uint64_t limit_pages, uint64_t pool_limit = 0) {
  job_options o;
  o.limit_pages = limit_pages;
  o.pool_limit_bytes = pool_limit;
  auto j = job::create(o);
  return j ? std::move(*j) : nullptr;
}

// Forks a member that joins `j`, reserves `pages` and waits in pause() until killed; returns its
// pid once it holds them, or -1.
pid_t fork_member_holding(job& j, uint64_t pages) {
  int ready[2];
  if (::pipe(ready) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    auto s = j.join(::getpid(), "victim");
    if (!s || j.try_reserve(*s, pages, pages) != pages) ::_exit(1);
    char c = 1;
    (void)!::write(ready[1], &c, 1);
    ::pause();
    ::_exit(0);
  }
  char c = 0;
  const bool held = pid > 0 && ::read(ready[0], &c, 1) == 1;
  ::close(ready[0]);
  ::close(ready[1]);
  return held ? pid : -1;
}

// Runs fn in a child process; returns its exit status (fn's return value).
template <class F>
int in_child(F fn) {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(fn());
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// A forked child doing `what` until killed; its pid once /proc says it is in system call `nr`
// (-2: just running).
template <class F>
pid_t child_in(long nr, F what) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    what();
    ::_exit(0);
  }
  for (int i = 0; i < 20'000; ++i) {
    if (testing::syscall_of(pid, pid) == (nr == -2 ? std::string("running") : std::to_string(nr)))
      return pid;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ADD_FAILURE() << "the child never reached system call " << nr;
  return pid;
}

void end_child(pid_t pid) {
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

// The job's signal goes only where it cannot disturb a call of the program's: a member asleep in
// read(2) or wait4(2) restarts them untouched (SA_RESTART); one blocked writing into a full pipe
// would return short, one in poll(2) with EINTR; one running takes it in user mode.
TEST(Job, TheSignalOnlyGoesWhereItCannotCutACallShort) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  const pid_t reader = child_in(SYS_read, [&] {
    char c;
    (void)!::read(p[0], &c, 1);
  });
  EXPECT_TRUE(quiet_to_interrupt(reader));
  end_child(reader);
  const pid_t waiter = child_in(SYS_wait4, [] {
    const pid_t parent = ::getpid();
    const pid_t grandchild = ::fork();
    if (grandchild == 0) {
      // The waiter may be killed before this line: then nothing would end the grandchild, which
      // would hold ctest's output pipe open until the test's timeout.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(0);
      ::pause();
      ::_exit(0);
    }
    ::waitpid(grandchild, nullptr, 0);
  });
  EXPECT_TRUE(quiet_to_interrupt(waiter));
  end_child(waiter);
  const pid_t writer = child_in(SYS_write, [&] {
    std::vector<char> big(1 << 20, 'x');
    (void)!::write(p[1], big.data(), big.size());
  });
  EXPECT_FALSE(quiet_to_interrupt(writer));
  end_child(writer);
  int q[2];
  ASSERT_EQ(::pipe(q), 0);
  const pid_t poller = child_in(SYS_poll, [&] {
    struct pollfd pf{q[0], POLLIN, 0};
    ::syscall(SYS_poll, &pf, 1, -1);
  });
  EXPECT_FALSE(quiet_to_interrupt(poller));
  end_child(poller);
  ::close(q[0]);
  ::close(q[1]);
  const pid_t spinner = child_in(-2, [] {
    for (;;) asm volatile("" ::: "memory");
  });
  EXPECT_TRUE(quiet_to_interrupt(spinner));
  end_child(spinner);
  EXPECT_FALSE(quiet_to_interrupt(spinner));  // gone
  ::close(p[0]);
  ::close(p[1]);
}

TEST(Job, RejectsALimitUnder64Pages) {
  job_options o;
  o.limit_pages = 63;
  auto j = job::create(o);
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.error().code(), EINVAL);
}

TEST(Job, AttachRefusesADescriptorThatIsNoJob) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  auto j = job::attach(p[0]);
  EXPECT_FALSE(j.ok());
  ::close(p[0]);
  ::close(p[1]);
}

TEST(Job, ReservationsStopAtTheLimitAndComeBackOnLeave) {
  auto j = make_job(1000);
  ASSERT_TRUE(j);
  auto a = j->join(::getpid(), "a");
  auto b = j->join(::getpid(), "b");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(j->try_reserve(*a, 600, 600), 600u);
  // b wants 300 and would take 500: it gets what is left, 400.
  EXPECT_EQ(j->try_reserve(*b, 300, 500), 400u);
  EXPECT_EQ(j->try_reserve(*b, 1, 1), 0u) << "a reservation past the limit";
  EXPECT_EQ(j->charge(), 1000u);
  j->force_reserve(*b, 5);
  EXPECT_EQ(j->charge(), 1005u);
  j->unreserve(*a, 100);
  EXPECT_EQ(j->usage(*a), 500u);
  j->leave(*a);
  EXPECT_EQ(j->charge(), 405u);
  j->leave(*b);
  EXPECT_EQ(j->charge(), 0u);
  const job_view v = j->view();
  EXPECT_TRUE(v.members.empty());
  EXPECT_EQ(v.peak_charge, 1005u);
  EXPECT_EQ(v.members_joined, 2u);
}

TEST(Job, AnotherProcessSeesTheSameJob) {
  auto j = make_job(500);
  ASSERT_TRUE(j);
  const int rc = in_child([&] {
    auto mine = job::attach(j->fd());
    if (!mine) return 10;
    auto s = (*mine)->join(::getpid(), "child");
    if (!s) return 11;
    if ((*mine)->try_reserve(*s, 200, 200) != 200) return 12;
    (*mine)->leave(*s);
    return (*mine)->charge() == 0 ? 0 : 13;
  });
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(j->view().members_joined, 1u);
  EXPECT_EQ(j->charge(), 0u);
}

// Members are named by pid: a process in another pid namespace (a sandbox's CLONE_NEWPID
// child, pid 1 there) is told so.
TEST(Job, AProcessInAnotherPidNamespaceIsNotInTheJobs) {
  auto j = make_job(500);
  ASSERT_TRUE(j);
  EXPECT_TRUE(j->in_pid_namespace());
  EXPECT_EQ(in_child([&] { return j->in_pid_namespace() ? 0 : 1; }), 0);
  // A new pid namespace needs CAP_SYS_ADMIN, or a user namespace of its own first.
  const int rc = in_child([&] {
    if (::unshare(CLONE_NEWPID) != 0 && ::unshare(CLONE_NEWUSER | CLONE_NEWPID) != 0) return 77;
    return in_child([&] {
      if (::getpid() != 1) return 2;
      return j->in_pid_namespace() ? 3 : 0;
    });
  });
  if (rc == 77) GTEST_SKIP() << "no pid namespace can be made here";
  EXPECT_EQ(rc, 0);
}

// It then joins as a guest: unnamed until the supervisor reads its announcement, whose
// credentials the kernel gave in the supervisor's numbering, and named by that pid, so that its
// death is seen and its charge comes back. A guest reaps nobody by pid: a live member's pid
// names no process in the guest's namespace.
TEST(Job, AGuestInAnotherPidNamespaceIsNamedByItsAnnouncement) {
  auto j = make_job(500);
  ASSERT_TRUE(j);
  ASSERT_GE(j->guest_socket(), 0);
  auto self = j->join(::getpid(), "parent");
  ASSERT_TRUE(self);
  ASSERT_EQ(j->try_reserve(*self, 50, 50), 50u);
  int pid_pipe[2], slot_pipe[2];
  ASSERT_EQ(::pipe(pid_pipe), 0);
  ASSERT_EQ(::pipe(slot_pipe), 0);
  const pid_t mid = ::fork();
  ASSERT_GE(mid, 0);
  if (mid == 0) {
    ::close(pid_pipe[0]);
    ::close(slot_pipe[0]);
    if (::unshare(CLONE_NEWPID) != 0 && ::unshare(CLONE_NEWUSER | CLONE_NEWPID) != 0) ::_exit(77);
    const pid_t g = ::fork();
    if (g == 0) {
      auto mine = job::attach(j->fd());
      if (!mine) ::_exit(10);
      if (::getpid() != 1 || (*mine)->in_pid_namespace()) ::_exit(11);
      auto none = (*mine)->join_guest("guest");  // no socket: no way to be named
      if (none || none.error().code() != EXDEV) ::_exit(12);
      (*mine)->set_guest_socket(j->guest_socket());
      auto s = (*mine)->join_guest("guest");
      if (!s || !(*mine)->guest()) ::_exit(13);
      if ((*mine)->try_reserve(*s, 100, 100) != 100) ::_exit(14);
      if ((*mine)->reap_ended_members(*s) != 0) ::_exit(15);
      const unsigned slot = *s;
      if (::write(slot_pipe[1], &slot, sizeof slot) != sizeof slot) ::_exit(16);
      ::pause();
      ::_exit(0);
    }
    // fork() answers in this process's namespace, the job's: the guest's pid there.
    if (g < 0 || ::write(pid_pipe[1], &g, sizeof g) != sizeof g) ::_exit(30);
    int st = 0;
    ::waitpid(g, &st, 0);
    ::_exit(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL ? 0 : WIFEXITED(st) ? WEXITSTATUS(st) : 31);
  }
  ::close(pid_pipe[1]);
  ::close(slot_pipe[1]);
  pid_t outer = 0;
  unsigned slot = 0;
  const bool got = ::read(pid_pipe[0], &outer, sizeof outer) == sizeof outer &&
                   ::read(slot_pipe[0], &slot, sizeof slot) == sizeof slot;
  ::close(pid_pipe[0]);
  ::close(slot_pipe[0]);
  if (!got) {
    int st = 0;
    ::waitpid(mid, &st, 0);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 77) GTEST_SKIP() << "no pid namespace can be made here";
    FAIL() << "the guest failed: status " << st;
  }
  // The parent, a live member whose pid means nothing in the guest's namespace, is still in.
  EXPECT_EQ(j->usage(*self), 50u);
  const std::vector<job_announcement> a = j->read_messages().announced;
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].pid, outer);
  EXPECT_GE(a[0].pidfd, 0);  // Linux 6.5's SO_PASSPIDFD
  const job_view before = j->view();
  const auto guest = std::find_if(before.members.begin(), before.members.end(),
                                  [&](const job_member_view& m) { return m.slot == slot; });
  ASSERT_NE(guest, before.members.end());
  EXPECT_EQ(guest->pid, 0);
  EXPECT_EQ(guest->guest_key, a[0].key);
  EXPECT_EQ(guest->usage, 100u);
  EXPECT_FALSE(j->still_alive(slot));  // unnamed: nothing to look at yet
  EXPECT_FALSE(j->name_guest(slot, a[0].key + 1, outer));
  EXPECT_FALSE(j->name_guest(*self, a[0].key, outer));
  ASSERT_TRUE(j->name_guest(slot, a[0].key, outer));
  EXPECT_FALSE(j->name_guest(slot, a[0].key, outer));  // once
  EXPECT_EQ(j->member_pid(slot), outer);
  EXPECT_TRUE(j->still_alive(slot));
  EXPECT_EQ(j->charge(), 150u);
  // Killed, it is seen by its pid here, and its share comes back.
  ASSERT_EQ(::kill(outer, SIGKILL), 0);
  int st = 0;
  ASSERT_EQ(::waitpid(mid, &st, 0), mid);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  pollfd p{a[0].pidfd, POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 0), 1);
  ::close(a[0].pidfd);
  EXPECT_FALSE(j->still_alive(slot));
  j->reap_guest(slot, a[0].key + 1);  // another guest's key: not this slot's
  EXPECT_EQ(j->charge(), 150u);
  j->reap_guest(slot, a[0].key);
  EXPECT_EQ(j->charge(), 50u);
  EXPECT_EQ(j->view().members_reaped, 1u);
  j->leave(*self);
}

TEST(JobConcurrency, ProcessesReservingTogetherNeverPassTheLimit) {
  constexpr uint64_t limit = 4096;
  constexpr int children = 8;  // more processes than the machine's cores
  const int rounds = 50000 / testing::work_scale;
  // Counted by the children in shared memory: reservations made while another process held
  // one (the race really happened), and charges seen above the limit (must stay 0).
  auto* shared_counts = static_cast<std::atomic<uint64_t>*>(
      ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(shared_counts, MAP_FAILED);
  std::atomic<uint64_t>& overlaps = shared_counts[0];
  std::atomic<uint64_t>& over_limit = shared_counts[1];
  std::atomic<uint64_t>& refusals = shared_counts[2];
  // A child runs a few milliseconds: on a loaded machine the children of one attempt may all run
  // one after another, so attempts repeat (each fully checked) until they overlapped.
  for (int attempt = 0; attempt < 20 && overlaps.load() == 0; ++attempt) {
    auto j = make_job(limit);
    ASSERT_TRUE(j);
    int go[2];
    ASSERT_EQ(::pipe(go), 0);
    std::vector<pid_t> pids;
    for (int c = 0; c < children; ++c) {
      const pid_t pid = ::fork();
      if (pid == 0) {
        ::close(go[1]);
        char x;
        (void)!::read(go[0], &x, 1);  // released together when the parent closes its end
        auto s = j->join(::getpid(), "worker");
        if (!s) ::_exit(10);
        std::mt19937_64 rng(static_cast<uint64_t>(c) + 1 + static_cast<uint64_t>(attempt) * 100);
        uint64_t mine = 0;
        for (int r = 0; r < rounds; ++r) {
          // Reserving three times as often as giving back: the job fills, and reservations
          // are refused at the limit.
          if (rng() % 4 != 0) {
            const uint64_t need = 1 + rng() % 64;
            const uint64_t got = j->try_reserve(*s, need, need + rng() % 64);
            if (got == 0) refusals.fetch_add(1);
            mine += got;
          } else if (mine) {
            const uint64_t back = 1 + rng() % std::min<uint64_t>(mine, 128);
            j->unreserve(*s, back);
            mine -= back;
          }
          if (j->usage(*s) != mine) ::_exit(11);
          const uint64_t all = j->charge();
          if (all > limit) over_limit.fetch_add(1);
          if (all > mine) overlaps.fetch_add(1);
        }
        j->leave(*s);
        ::_exit(0);
      }
      pids.push_back(pid);
    }
    ::close(go[0]);
    ::close(go[1]);
    for (pid_t pid : pids) {
      int st;
      ::waitpid(pid, &st, 0);
      EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "a worker saw its usage change under it";
    }
    EXPECT_EQ(over_limit.load(), 0u);
    EXPECT_GT(refusals.load(), 0u) << "no reservation met the limit";
    EXPECT_EQ(j->charge(), 0u);
    const job_view v = j->view();
    EXPECT_EQ(v.members_joined, static_cast<uint64_t>(children));
    EXPECT_LE(v.peak_charge, limit);
    EXPECT_EQ(v.peak_charge, limit) << "the workers never filled the job";
  }
  EXPECT_GT(overlaps.load(), 0u) << "the workers never held reservations at the same time";
  ::munmap(shared_counts, 4096);
}

TEST(JobConcurrency, AMemberKilledHoldingChargeIsReapedAndReturnsIt) {
  auto j = make_job(1000);
  ASSERT_TRUE(j);
  const pid_t pid = fork_member_holding(*j, 700);
  ASSERT_GT(pid, 0);
  job_view v = j->view();
  ASSERT_EQ(v.members.size(), 1u);
  const unsigned slot = v.members[0].slot;
  EXPECT_TRUE(j->still_alive(slot));
  EXPECT_EQ(j->charge(), 700u);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  EXPECT_FALSE(j->still_alive(slot));
  j->reap_dead(slot);
  EXPECT_EQ(j->charge(), 0u);
  v = j->view();
  EXPECT_TRUE(v.members.empty());
  EXPECT_EQ(v.members_reaped, 1u);
  // The room is there for the others at once.
  auto s = j->join(::getpid(), "next");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(j->try_reserve(*s, 1000, 1000), 1000u);
}

// A member that finds the job full reaps, itself, the members whose process is gone (killed and
// waited for), without waiting for the supervisor; a zombie (its parent has not waited yet) and
// the asking member itself stay.
TEST(JobConcurrency, AMemberFindingTheJobFullReapsTheKilledOnesItself) {
  auto j = make_job(1000);
  ASSERT_TRUE(j);
  auto self = j->join(::getpid(), "asker");
  ASSERT_TRUE(self.ok());
  ASSERT_EQ(j->try_reserve(*self, 100, 100), 100u);
  pid_t pids[2];
  for (pid_t& pid : pids) {
    pid = fork_member_holding(*j, 400);
    ASSERT_GT(pid, 0);
  }
  EXPECT_EQ(j->charge(), 900u);
  for (pid_t pid : pids) ::kill(pid, SIGKILL);
  // The first one is waited for (its pid is gone), the second stays a zombie for now.
  ASSERT_EQ(::waitpid(pids[0], nullptr, 0), pids[0]);
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(pids[1]), &info, WEXITED | WNOWAIT), 0);
  EXPECT_EQ(j->reap_ended_members(*self), 1u);
  EXPECT_EQ(j->charge(), 500u);
  EXPECT_EQ(j->view().members_reaped, 1u);
  ASSERT_EQ(::waitpid(pids[1], nullptr, 0), pids[1]);
  EXPECT_EQ(j->reap_ended_members(*self), 1u);
  EXPECT_EQ(j->charge(), 100u) << "the asker's own share stays";
  EXPECT_EQ(j->reap_ended_members(*self), 0u);
}

TEST(JobConcurrency, AHolderKilledInsideTheLockLeavesAConsistentJob) {
  auto j = make_job(1000);
  ASSERT_TRUE(j);
  auto mine = j->join(::getpid(), "parent");
  ASSERT_TRUE(mine.ok());
  ASSERT_EQ(j->try_reserve(*mine, 100, 100), 100u);
  unsigned child_slot = 0;
  int slot_pipe[2];
  ASSERT_EQ(::pipe(slot_pipe), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    auto s = j->join(::getpid(), "dies");
    if (!s || j->try_reserve(*s, 50, 50) != 50) ::_exit(1);
    const unsigned slot = *s;
    (void)!::write(slot_pipe[1], &slot, sizeof slot);
    job_die_mid_update_for_test(*j, slot, 10);
  }
  ASSERT_EQ(::read(slot_pipe[0], &child_slot, sizeof child_slot), static_cast<ssize_t>(sizeof child_slot));
  int st;
  ::waitpid(pid, &st, 0);
  // The next locker finds EOWNERDEAD, recomputes the charge from the usages (100 + 60) and goes on.
  EXPECT_EQ(j->try_reserve(*mine, 1, 1), 1u);
  job_view v = j->view();
  EXPECT_EQ(v.owner_dead_repairs, 1u);
  EXPECT_EQ(v.charge, 161u);
  j->reap_dead(child_slot);
  EXPECT_EQ(j->charge(), 101u);
  j->leave(*mine);
  EXPECT_EQ(j->charge(), 0u);
  ::close(slot_pipe[0]);
  ::close(slot_pipe[1]);
}

// Two members short of room at once want the same pages above the hog's share: the hog is
// asked for them once, plus what each of the two needs; while it evicts a request it took,
// another asker adds only what it needs.
TEST(Job, AskersAtOnceAskForTheShareAboveOnce) {
  auto j = make_job(1000);
  ASSERT_TRUE(j);
  auto hog = j->join(::getpid(), "hog");
  auto a = j->join(::getpid(), "a");
  auto b = j->join(::getpid(), "b");
  ASSERT_TRUE(hog.ok() && a.ok() && b.ok());
  ASSERT_EQ(j->try_reserve(*hog, 700, 700), 700u);
  ASSERT_EQ(j->try_reserve(*a, 100, 100), 100u);
  ASSERT_EQ(j->try_reserve(*b, 100, 100), 100u);
  ASSERT_EQ(j->request_reclaim(*a, 32)->slot, *hog);
  ASSERT_EQ(j->request_reclaim(*b, 40)->slot, *hog);
  EXPECT_EQ(j->take_reclaim_request(*hog), 700u - 333u + 32u + 40u);
  // Taken, being evicted: the usage has not dropped yet.
  ASSERT_EQ(j->request_reclaim(*a, 16)->slot, *hog);
  EXPECT_EQ(j->take_reclaim_request(*hog), 16u);
  j->reclaim_served(*hog);
  // Served and the usage unchanged (the hog found nothing to evict): asked in full again.
  ASSERT_EQ(j->request_reclaim(*b, 8)->slot, *hog);
  EXPECT_EQ(j->take_reclaim_request(*hog), 700u - 333u + 8u);
  EXPECT_EQ(j->view().reclaim_requests, 4u);
}

TEST(Job, AMemberUnderItsFairShareAsksTheLargestAboveIt) {
  auto j = make_job(1000);
  ASSERT_TRUE(j);
  auto hog = j->join(::getpid(), "hog");
  auto mid = j->join(::getpid(), "mid");
  auto small = j->join(::getpid(), "small");
  ASSERT_TRUE(hog.ok() && mid.ok() && small.ok());
  ASSERT_EQ(j->try_reserve(*hog, 700, 700), 700u);
  ASSERT_EQ(j->try_reserve(*mid, 290, 290), 290u);
  ASSERT_EQ(j->try_reserve(*small, 10, 10), 10u);
  const auto target = j->request_reclaim(*small, 32);
  ASSERT_TRUE(target.has_value());
  EXPECT_EQ(target->slot, *hog);
  EXPECT_EQ(target->pid, ::getpid());
  EXPECT_TRUE(j->has_reclaim_request(*hog));
  EXPECT_FALSE(j->has_reclaim_request(*mid));
  // The hog is asked for what it holds above a fair share (1000 / 3 = 333), and the 32 needed.
  EXPECT_EQ(j->take_reclaim_request(*hog), 700u - 333u + 32u);
  EXPECT_EQ(j->take_reclaim_request(*hog), 0u) << "a request is taken once";
  EXPECT_EQ(j->take_reclaim_request(*mid), 0u);
  EXPECT_FALSE(j->has_reclaim_request(*hog));
  // The hog itself is above its share: it evicts its own.
  EXPECT_FALSE(j->request_reclaim(*hog, 32).has_value());
  EXPECT_TRUE(j->mark_signalled(*hog));
  EXPECT_FALSE(j->mark_signalled(*hog)) << "one signal until the member takes it";
  j->clear_signalled(*hog);
  EXPECT_TRUE(j->mark_signalled(*hog));
  EXPECT_EQ(j->view().reclaim_requests, 1u);
  EXPECT_EQ(j->signal(), SIGRTMAX - 2);
}

// Room given back while a member waits for it goes to that member, up to what it waits for,
// before any other may reserve it; never beyond the limit, and not after the wait ended.
TEST(Job, RoomGivenBackGoesToTheMemberWaitingForIt) {
  auto j = make_job(1000);
  ASSERT_TRUE(j);
  auto hog = j->join(::getpid(), "hog");
  auto waiter = j->join(::getpid(), "waiter");
  auto other = j->join(::getpid(), "other");
  ASSERT_TRUE(hog.ok() && waiter.ok() && other.ok());
  ASSERT_EQ(j->try_reserve(*hog, 1000, 1000), 1000u);
  j->begin_wait(*waiter, 40);
  j->unreserve(*hog, 30);
  EXPECT_EQ(j->try_reserve(*other, 1, 1), 0u) << "another member took room given to the waiter";
  EXPECT_EQ(j->usage(*waiter), 30u);
  EXPECT_EQ(j->take_granted(*waiter), 30u);
  EXPECT_EQ(j->take_granted(*waiter), 0u) << "a grant is taken once";
  j->unreserve(*hog, 30);  // 10 more to the waiter, 20 free
  EXPECT_EQ(j->usage(*waiter), 40u);
  EXPECT_EQ(j->try_reserve(*other, 20, 50), 20u);
  EXPECT_EQ(j->end_wait(*waiter), 10u);
  j->unreserve(*hog, 5);  // the wait is over: free room
  EXPECT_EQ(j->usage(*waiter), 40u);
  EXPECT_EQ(j->try_reserve(*other, 5, 5), 5u);
  EXPECT_EQ(j->charge(), 1000u);

  // Overcharged (pages mapped above the limit): room given back first brings the job under it.
  j->force_reserve(*hog, 8);
  j->begin_wait(*waiter, 16);
  j->unreserve(*hog, 12);
  EXPECT_EQ(j->take_granted(*waiter), 4u);
  EXPECT_EQ(j->charge(), 1000u);
  // A member that leaves gives its usage to the waiter too.
  j->leave(*other);
  EXPECT_EQ(j->end_wait(*waiter), 12u);
  EXPECT_EQ(j->usage(*waiter), 56u);
  EXPECT_EQ(j->charge(), 1000u - 25u + 12u);
  // A waiter that leaves waits no more: what it held is free room.
  j->begin_wait(*waiter, 8);
  j->leave(*waiter);
  j->unreserve(*hog, 1);
  const job_view v = j->view();
  ASSERT_EQ(v.members.size(), 1u);
  EXPECT_EQ(v.charge, v.members[0].usage);
}

// The five-process fork tree's children, with nothing of their own to evict, asked the parent
// for room and waited, while the other members' faults reserved every page the parent gave
// back: after 200 ms the waiter mapped above the limit. Here the holder gives room back a few
// pages at a time while greedy members reserve all the time; once it has given what the waiter
// asked for, the waiter must hold it, every round.
TEST(JobConcurrency, RoomMadeForAWaitingMemberIsNotTakenByOthers) {
  constexpr uint64_t limit = 1024, need = 32, step = 4;
  constexpr int greedy = 3;  // with the waiter and the holder, more threads than cores
  const int rounds = 400 / testing::work_scale;
  auto j = make_job(limit);
  ASSERT_TRUE(j);
  auto holder = j->join(::getpid(), "holder");
  auto waiter = j->join(::getpid(), "waiter");
  ASSERT_TRUE(holder.ok() && waiter.ok());
  std::vector<unsigned> greedy_slots;
  for (int g = 0; g < greedy; ++g) {
    auto s = j->join(::getpid(), "greedy");
    ASSERT_TRUE(s.ok());
    greedy_slots.push_back(*s);
  }
  ASSERT_EQ(j->try_reserve(*holder, limit, limit), limit);
  std::atomic<int> asked{0}, served{0};
  std::atomic<bool> done{false};
  std::atomic<uint64_t> short_rounds{0}, over_limit{0}, taken_while_waiting{0};
  std::atomic<bool> waiting{false};
  testing::run_threads(2 + greedy, [&](int t) {
    if (t == 0) {  // the waiter: asks, waits for the holder to have given `need`, checks
      // Rounds go on past `rounds` until another member reserved during a wait (the race this
      // is about happened), for up to a minute: a loaded machine may run the greedy threads late.
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      for (int r = 1; r <= rounds || (taken_while_waiting.load() == 0 &&
                                      std::chrono::steady_clock::now() < deadline);
           ++r) {
        j->begin_wait(*waiter, need);
        waiting.store(true);
        asked.store(r);
        while (served.load() < r) std::this_thread::yield();
        waiting.store(false);
        uint64_t got = j->take_granted(*waiter);
        got += j->end_wait(*waiter);
        // What is free now, as the pager's wait also tries: the room is there unless taken.
        if (got < need) got += j->try_reserve(*waiter, need - got, need - got);
        if (got < need) short_rounds.fetch_add(1);
        j->unreserve(*waiter, got);
      }
      done.store(true);
    } else if (t == 1) {  // the holder: gives back in steps, as eviction passes do; takes room back
      int seen = 0;
      while (!done.load()) {
        if (asked.load() > seen) {
          ++seen;
          for (uint64_t given = 0; given < need; given += step) {
            while (j->usage(*holder) < step && j->try_reserve(*holder, step, step) == 0)
              std::this_thread::yield();
            j->unreserve(*holder, step);
            std::this_thread::yield();  // the others may run between two steps
          }
          served.store(seen);
        } else if (j->try_reserve(*holder, 1, 8) == 0) {
          std::this_thread::yield();
        }
      }
    } else {  // greedy: reserves whatever room there is, gives its pages back 64 at a time
      const unsigned s = greedy_slots[static_cast<size_t>(t - 2)];
      uint64_t held = 0;
      while (!done.load()) {
        const uint64_t got = j->try_reserve(s, 1, 1);
        held += got;
        if (got && waiting.load()) taken_while_waiting.fetch_add(1);
        if (j->charge() > limit) over_limit.fetch_add(1);
        if (held >= 64 || got == 0) {
          j->unreserve(s, held);
          held = 0;
        }
      }
      j->unreserve(s, held);
    }
  });
  EXPECT_EQ(short_rounds.load(), 0u) << "rounds whose room for the waiter went to others";
  EXPECT_EQ(over_limit.load(), 0u);
  EXPECT_GT(taken_while_waiting.load(), 0u) << "no other member reserved while the waiter waited";
  const job_view v = j->view();
  uint64_t sum = 0;
  for (const auto& m : v.members) sum += m.usage;
  EXPECT_EQ(v.charge, sum);
  EXPECT_LE(v.peak_charge, limit);
}

// Copies between members: a request goes to the member's box once, its answer to its asker
// alone; a second asker waits for the box; a cancelled request's answer reaches nobody.
TEST(Job, AFaultRequestIsTakenOnceAndAnsweredToItsAsker) {
  auto j = make_job(1000);
  ASSERT_TRUE(j);
  auto owner = j->join(::getpid(), "owner");
  ASSERT_TRUE(owner.ok());
  EXPECT_EQ(j->live_slot_of(::getpid()), *owner);
  EXPECT_FALSE(j->live_slot_of(::getpid() + 1000000).has_value());
  EXPECT_FALSE(j->has_fault(*owner));
  EXPECT_FALSE(j->take_fault(*owner).has_value());

  const uint64_t t1 = j->post_fault(*owner, 0x7000, 8192, true);
  ASSERT_NE(t1, 0u);
  EXPECT_EQ(j->post_fault(*owner, 0x9000, 4096, false), 0u) << "a second asker took a held box";
  EXPECT_TRUE(j->has_fault(*owner));
  EXPECT_FALSE(j->fault_answer(*owner, t1).has_value()) << "an answer before the member served";
  const auto f = j->take_fault(*owner);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->ticket, t1);
  EXPECT_EQ(f->addr, 0x7000u);
  EXPECT_EQ(f->len, 8192u);
  EXPECT_TRUE(f->write);
  EXPECT_FALSE(j->has_fault(*owner));
  EXPECT_FALSE(j->take_fault(*owner).has_value()) << "one request taken twice";
  j->fault_served(*owner, f->ticket, 2);
  EXPECT_EQ(j->fault_answer(*owner, t1), std::optional<int64_t>(2));

  // The box is free again; a request cancelled before its answer leaves the answer to nobody.
  const uint64_t t2 = j->post_fault(*owner, 0xa000, 4096, false);
  ASSERT_NE(t2, 0u);
  const auto f2 = j->take_fault(*owner);
  ASSERT_TRUE(f2.has_value());
  EXPECT_FALSE(f2->write);
  j->cancel_fault(*owner, t2);
  const uint64_t t3 = j->post_fault(*owner, 0xb000, 4096, false);
  ASSERT_NE(t3, 0u);
  j->fault_served(*owner, f2->ticket, 1);  // late, for the cancelled one
  EXPECT_FALSE(j->fault_answer(*owner, t3).has_value()) << "the next asker got another's answer";
  const auto f3 = j->take_fault(*owner);
  ASSERT_TRUE(f3.has_value());
  EXPECT_EQ(f3->addr, 0xb000u);
  j->fault_served(*owner, f3->ticket, -EFAULT);
  EXPECT_EQ(j->fault_answer(*owner, t3), std::optional<int64_t>(-EFAULT));

  // A request the member left without serving: the slot's next member does not serve it, and
  // its asker learns that the process is gone.
  const uint64_t t4 = j->post_fault(*owner, 0xc000, 4096, false);
  ASSERT_NE(t4, 0u);
  j->leave(*owner);
  auto next = j->join(::getpid(), "next");
  ASSERT_TRUE(next.ok());
  ASSERT_EQ(*next, *owner);
  EXPECT_FALSE(j->has_fault(*next));
  EXPECT_EQ(j->fault_answer(*owner, t4), std::optional<int64_t>(-ESRCH));
  EXPECT_NE(j->post_fault(*next, 0xd000, 4096, false), 0u) << "the new member's box is not free";
}

// Askers on several threads (more than cores) post to one member while a server takes and
// answers, and some askers give up before their answer: every answer an asker receives is the
// one for its own request (the server echoes the address it read), and the box changed hands
// under contention.
TEST(JobConcurrency, FaultRequestsOfManyAskersEachGetTheirOwnAnswer) {
  constexpr int askers = 4;
  const int rounds = 2000 / testing::work_scale;
  auto j = make_job(1000);
  ASSERT_TRUE(j);
  auto owner = j->join(::getpid(), "owner");
  ASSERT_TRUE(owner.ok());
  std::atomic<int> finished{0};
  std::atomic<uint64_t> wrong{0}, busy{0}, answered{0}, cancelled{0}, torn{0};
  testing::run_threads(askers + 1, [&](int t) {
    if (t == 0) {  // the member: serves until every asker is done
      while (finished.load() < askers) {
        if (const auto f = j->take_fault(*owner)) {
          // addr and len were written together: len = addr's low byte + 1.
          if (f->len != (f->addr & 0xff) + 1) torn.fetch_add(1);
          j->fault_served(*owner, f->ticket, static_cast<int64_t>(f->addr));
        } else {
          std::this_thread::yield();
        }
      }
      return;
    }
    for (int r = 0; r < rounds; ++r) {
      const uintptr_t addr = (uintptr_t(t) << 32) | (uintptr_t(r) << 8) | uintptr_t(r & 0xff);
      uint64_t ticket;
      while ((ticket = j->post_fault(*owner, addr, (addr & 0xff) + 1, false)) == 0) {
        busy.fetch_add(1);
        std::this_thread::yield();
      }
      if (r % 7 == 3) {  // gives up at once: its answer, if any, must reach nobody
        j->cancel_fault(*owner, ticket);
        cancelled.fetch_add(1);
        continue;
      }
      std::optional<int64_t> a;
      while (!(a = j->fault_answer(*owner, ticket))) std::this_thread::yield();
      answered.fetch_add(1);
      if (static_cast<uintptr_t>(*a) != addr) wrong.fetch_add(1);
    }
    finished.fetch_add(1);
  });
  EXPECT_EQ(wrong.load(), 0u) << "answers that went to another asker";
  EXPECT_EQ(torn.load(), 0u) << "requests read half from one asker, half from another";
  EXPECT_GT(busy.load(), 0u) << "no asker ever found the box held: no contention happened";
  EXPECT_GT(cancelled.load(), 0u);
  EXPECT_EQ(answered.load() + cancelled.load(), uint64_t(askers) * rounds);
}

// A fork's child is a copy of its parent's resident pages and pool from the moment it exists:
// the others' pool limits and the footprint count its slot before it runs (and publishes).
TEST(Job, AChildNotYetRunningCountsItsCopyOfTheParentsPool) {
  auto j = make_job(1000, 1 << 20);
  ASSERT_TRUE(j);
  auto parent = j->join(::getpid(), "parent");
  ASSERT_TRUE(parent.ok());
  uint64_t sp[JOB_STAT_COUNT] = {};
  sp[JOB_RESIDENT] = 100;
  sp[JOB_POOL_BYTES] = 300000;
  ASSERT_EQ(j->try_reserve(*parent, 100, 100), 100u);
  j->publish(*parent, sp, 1);
  EXPECT_EQ(j->pool_bytes(), 300000u);
  auto child = j->reserve_for_child(::getpid(), 100, 300000);
  ASSERT_TRUE(child.ok()) << child.error().to_string();
  EXPECT_EQ(j->pool_bytes(), 600000u) << "the child's copy of the pool was not counted";
  EXPECT_EQ(j->published(*child, JOB_POOL_BYTES), 300000u);
  j->publish(*parent, sp, 2);
  EXPECT_EQ(j->view().peak_footprint, 200u * 4096 + 600000);
  // Adopted, the child publishes its own figures over the copy's.
  ASSERT_TRUE(j->adopt(*child, ::getpid(), "child").ok());
  uint64_t sc[JOB_STAT_COUNT] = {};
  sc[JOB_RESIDENT] = 100;
  sc[JOB_POOL_BYTES] = 1000;
  j->publish(*child, sc, 3);
  EXPECT_EQ(j->pool_bytes(), 301000u);
}

// The parent names its child once fork() returned; the supervisor reads it from the view (a
// named child that is gone frees the share at once). Once adopted, the slot is the child's own
// and a late name changes nothing; an unadopted share goes back when reaped.
TEST(Job, AForkParentNamesItsChildUntilTheChildAdoptsTheSlot) {
  auto j = make_job(1000);
  ASSERT_TRUE(j);
  auto parent = j->join(::getpid(), "parent");
  ASSERT_TRUE(parent.ok());
  auto child = j->reserve_for_child(::getpid(), 100);
  ASSERT_TRUE(child.ok()) << child.error().to_string();
  auto slot_view = [&](unsigned slot) {
    for (const job_member_view& m : j->view().members)
      if (m.slot == slot) return m;
    return job_member_view{};
  };
  EXPECT_TRUE(slot_view(*child).for_child);
  EXPECT_EQ(slot_view(*child).child, 0) << "named before the parent named it";
  j->child_forked(*child, 4242);
  EXPECT_EQ(slot_view(*child).child, 4242);
  EXPECT_EQ(slot_view(*child).pid, ::getpid()) << "the slot is still the parent's to name";
  // Reaped unadopted (the supervisor saw 4242 gone): the share goes back at once.
  EXPECT_EQ(j->charge(), 100u);
  j->reap_unadopted(*child, uint64_t{60} * 1000 * 1000 * 1000, 4343);  // not its child
  EXPECT_EQ(j->charge(), 100u) << "a slot reaped for a child it is not reserved for";
  j->reap_unadopted(*child, uint64_t{60} * 1000 * 1000 * 1000, 4242);
  EXPECT_EQ(j->charge(), 0u);
  // Another fork, adopted first: a late name is ignored.
  auto second = j->reserve_for_child(::getpid(), 50);
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE(j->adopt(*second, ::getpid(), "child").ok());
  j->child_forked(*second, 4343);
  EXPECT_FALSE(slot_view(*second).for_child);
  EXPECT_EQ(slot_view(*second).child, 0);
  EXPECT_EQ(j->charge(), 50u);
}

// A parent that evicted for its child hands the reservation it freed to the child directly:
// the share fits even when a sibling took every free page meanwhile, and the charge does not
// move; without a donor the same request finds no room.
TEST(Job, AForkingParentLendsItsFreedReservationToTheChild) {
  auto j = make_job(1000);
  ASSERT_TRUE(j);
  auto parent = j->join(::getpid(), "parent");
  auto sibling = j->join(::getpid(), "sibling");
  ASSERT_TRUE(parent.ok() && sibling.ok());
  ASSERT_EQ(j->try_reserve(*parent, 600, 600), 600u);  // 600 reserved, 200 of them resident now
  ASSERT_EQ(j->try_reserve(*sibling, 400, 400), 400u);  // the job is full
  EXPECT_EQ(j->reserve_for_child(::getpid(), 200).error().code(), EAGAIN);
  EXPECT_EQ(j->reserve_for_child(::getpid(), 300, 0, {*parent, 250}).error().code(), EAGAIN)
      << "a share larger than the surplus and the free room fitted";
  EXPECT_EQ(j->charge(), 1000u);
  EXPECT_EQ(j->usage(*parent), 600u) << "a refused reservation moved the parent's usage";
  auto child = j->reserve_for_child(::getpid(), 200, 0, {*parent, 400});
  ASSERT_TRUE(child.ok()) << child.error().to_string();
  EXPECT_EQ(j->usage(*child), 200u);
  EXPECT_EQ(j->usage(*parent), 400u);
  EXPECT_EQ(j->charge(), 1000u);
  EXPECT_EQ(j->view().peak_charge, 1000u);
  // Part from the donor, part from free room.
  j->unreserve(*sibling, 50);
  auto second = j->reserve_for_child(::getpid(), 150, 0, {*parent, 100});
  ASSERT_TRUE(second.ok()) << second.error().to_string();
  EXPECT_EQ(j->usage(*parent), 300u);
  EXPECT_EQ(j->charge(), 1000u);
}

TEST(Job, StatisticsSumLiveMembersAndThoseThatLeft) {
  auto j = make_job(1000);
  ASSERT_TRUE(j);
  auto a = j->join(::getpid(), "a");
  auto b = j->join(::getpid(), "b");
  ASSERT_TRUE(a.ok() && b.ok());
  uint64_t sa[JOB_STAT_COUNT] = {}, sb[JOB_STAT_COUNT] = {};
  sa[JOB_RESIDENT] = 100;
  sa[JOB_POOL_BYTES] = 50000;
  sa[JOB_PGFAULT] = 7;
  sb[JOB_RESIDENT] = 20;
  sb[JOB_POOL_BYTES] = 1000;
  sb[JOB_PGFAULT] = 3;
  j->publish(*a, sa, 1);
  j->publish(*b, sb, 2);
  job_view v = j->view();
  EXPECT_EQ(v.total(JOB_RESIDENT), 120u);
  EXPECT_EQ(v.total(JOB_PGFAULT), 10u);
  EXPECT_EQ(v.peak_footprint, 120u * 4096 + 51000);
  j->leave(*a);
  v = j->view();
  EXPECT_EQ(v.total(JOB_RESIDENT), 20u) << "a member that left holds nothing";
  EXPECT_EQ(v.total(JOB_PGFAULT), 10u) << "its faults still count";
  ASSERT_EQ(v.members.size(), 1u);
  EXPECT_EQ(v.members[0].comm, "b");
}

}  // namespace
}  // namespace uswap
