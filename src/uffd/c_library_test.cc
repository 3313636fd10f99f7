// c_library.h: where an interrupted thread may hold one of the C library's locks. Contexts made
// by hand place the instruction pointer in the test's own code, in glibc's and the loader's
// text and at one of glibc's system call instructions with each kind of call; then real signals
// interrupt a thread blocked in read(2), one computing in glibc and one computing in its own
// code, and the handler classifies the context the kernel gave it.
#include "c_library.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <string>
#include <thread>

#include "uswap_testing/proc.h"
#include "uswap_testing/threads.h"

namespace uswap {
namespace {

// glibc's own definition (a sanitizer's runtime, loaded first, intercepts some of these names).
uintptr_t libc_symbol(const char* name) {
  static void* const libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  return libc ? reinterpret_cast<uintptr_t>(dlsym(libc, name)) : 0;
}

// A `syscall` instruction (0f 05) of glibc's: the one in its syscall(2) wrapper.
uintptr_t libc_syscall_instruction() {
  const auto* p = reinterpret_cast<const unsigned char*>(libc_symbol("syscall"));
  for (int i = 0; p && i < 96; ++i)
    if (p[i] == 0x0f && p[i + 1] == 0x05) return reinterpret_cast<uintptr_t>(p + i);
  return 0;
}

ucontext_t context_at(uintptr_t pc, long rax = 0, long rdi = 0, long rsi = 0) {
  ucontext_t uc;
  memset(&uc, 0, sizeof uc);
  uc.uc_mcontext.gregs[REG_RIP] = static_cast<greg_t>(pc);
  uc.uc_mcontext.gregs[REG_RAX] = rax;
  uc.uc_mcontext.gregs[REG_RDI] = rdi;
  uc.uc_mcontext.gregs[REG_RSI] = rsi;
  return uc;
}

__attribute__((noinline)) int own_code(int x) { return x * 3 + 1; }

TEST(CLibrary, FindsTheLibraryAndTheLoaderTextInsideTheirImages) {
  const c_library_map m = find_c_library();
  ASSERT_LT(m.libc_text.lo, m.libc_text.hi);
  ASSERT_LT(m.ldso_text.lo, m.ldso_text.hi);
  EXPECT_TRUE(m.libc_text.contains(libc_symbol("malloc_stats")));
  EXPECT_TRUE(m.libc_image.contains(m.libc_text.lo) && m.libc_image.contains(m.libc_text.hi - 1));
  EXPECT_TRUE(m.ldso_image.contains(m.ldso_text.lo) && m.ldso_image.contains(m.ldso_text.hi - 1));
  // glibc's stderr FILE (its lock beside it) is data in the library's image, not text.
  const uintptr_t stderr_file = libc_symbol("_IO_2_1_stderr_");
  EXPECT_TRUE(m.libc_image.contains(stderr_file));
  EXPECT_FALSE(m.libc_text.contains(stderr_file));
  EXPECT_FALSE(m.libc_image.contains(reinterpret_cast<uintptr_t>(&own_code)));
}

TEST(CLibrary, ProgramCodeHoldsNoneAndTheLibrarysOrTheLoadersCodeMay) {
  const c_library_map m = find_c_library();
  EXPECT_FALSE(may_hold_c_library_locks(m, context_at(reinterpret_cast<uintptr_t>(&own_code))));
  EXPECT_TRUE(may_hold_c_library_locks(m, context_at(libc_symbol("malloc_stats"))));
  EXPECT_TRUE(may_hold_c_library_locks(m, context_at(libc_symbol("fork"))));
  EXPECT_TRUE(may_hold_c_library_locks(m, context_at(m.ldso_text.lo + 64)));
}

TEST(CLibrary, AtASystemCallOnlyOneThatRestartsCleanlyAndWaitsForNoLockOfItsOwnIsSafe) {
  const c_library_map m = find_c_library();
  const uintptr_t at = libc_syscall_instruction();
  ASSERT_TRUE(m.libc_text.contains(at));
  long word = 0;
  const auto own_word = reinterpret_cast<long>(&word);
  const auto libc_word = static_cast<long>(libc_symbol("_IO_2_1_stderr_"));
  // A blocking call the member sleeps in, about to be made again: no lock of glibc's held.
  EXPECT_FALSE(may_hold_c_library_locks(m, context_at(at, SYS_read, 0)));
  EXPECT_FALSE(may_hold_c_library_locks(m, context_at(at, SYS_wait4, -1)));
  EXPECT_FALSE(may_hold_c_library_locks(m, context_at(at, SYS_futex, own_word, 0)));
  EXPECT_FALSE(may_hold_c_library_locks(m, context_at(at, SYS_restart_syscall)));
  // A wait for one of glibc's own lock words (one of its locks may be held meanwhile), and the
  // calls malloc makes holding an arena's lock, or malloc_stats' writes.
  EXPECT_TRUE(may_hold_c_library_locks(m, context_at(at, SYS_futex, libc_word, 0)));
  EXPECT_TRUE(may_hold_c_library_locks(m, context_at(at, SYS_mmap)));
  EXPECT_TRUE(may_hold_c_library_locks(m, context_at(at, SYS_brk)));
  EXPECT_TRUE(may_hold_c_library_locks(m, context_at(at, SYS_write, 2)));
  // Just past the instruction: a call the signal cut short (EINTR) slept, and is safe; any other
  // result leaves the call unknown.
  EXPECT_FALSE(may_hold_c_library_locks(m, context_at(at + 2, -EINTR)));
  EXPECT_TRUE(may_hold_c_library_locks(m, context_at(at + 2, 9)));
  EXPECT_TRUE(may_hold_c_library_locks(m, context_at(at + 2, -EAGAIN)));
}

// Real interruptions: what the handler decides for the context the kernel gave it.
c_library_map live_map;
std::atomic<int> said_held{0}, said_free{0};

void classify(int, siginfo_t*, void* uc) {
  if (may_hold_c_library_locks(live_map, *static_cast<const ucontext_t*>(uc)))
    said_held.fetch_add(1, std::memory_order_relaxed);
  else
    said_free.fetch_add(1, std::memory_order_relaxed);
}

class CLibraryLive : public ::testing::Test {
 protected:
  void SetUp() override {
#if defined(USWAP_TSAN)
    // ThreadSanitizer takes every signal in a handler of its own and runs the program's later,
    // where it sees fit (a thread in read(2) never): the context is not where the thread was.
    GTEST_SKIP() << "ThreadSanitizer delivers signals at points of its own choosing";
#endif
    live_map = find_c_library();
    struct sigaction act {};
    act.sa_sigaction = classify;
    act.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&act.sa_mask);
    ASSERT_EQ(sigaction(SIGUSR2, &act, &old_), 0);
    old_saved_ = true;
    said_held = 0;
    said_free = 0;
  }
  void TearDown() override {
    if (old_saved_) sigaction(SIGUSR2, &old_, nullptr);
  }

  // Signals `t` `n` times, a signal at a time, each once the last was handled.
  static void signal_thread(std::thread& t, int n) {
    for (int i = 0; i < n; ++i) {
      const int before = said_held.load() + said_free.load();
      pthread_kill(t.native_handle(), SIGUSR2);
      while (said_held.load() + said_free.load() == before) std::this_thread::yield();
    }
  }

  struct sigaction old_ {};
  bool old_saved_ = false;
};

TEST_F(CLibraryLive, AThreadBlockedInReadIsSafeAndReadRestarts) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  char got = 0;
  ssize_t n = -1;
  std::atomic<pid_t> tid{0};
  std::thread reader([&] {
    tid = gettid();
    n = read(fds[0], &got, 1);
  });
  while (tid.load() == 0) std::this_thread::yield();
  // In read(2) for certain: /proc says so.
  ASSERT_TRUE(testing::eventually([&] { return testing::in_syscall(tid.load(), SYS_read); }))
      << "the reader never sat in read(2)";
  signal_thread(reader, 5);
  EXPECT_EQ(said_held.load(), 0);
  EXPECT_EQ(said_free.load(), 5);
  ASSERT_EQ(write(fds[1], "x", 1), 1);
  reader.join();
  EXPECT_EQ(n, 1) << "read(2) did not restart after the signal";
  EXPECT_EQ(got, 'x');
  close(fds[0]);
  close(fds[1]);
}

TEST_F(CLibraryLive, AThreadComputingInTheLibraryMayHoldAndInItsOwnCodeHoldsNone) {
  // glibc's strverscmp over two long strings that differ at the end: a loop in the library's
  // text that no sanitizer intercepts.
  std::string a(1 << 16, '7'), b = a;
  b.back() = '8';
  using strverscmp_fn = int (*)(const char*, const char*);
  const auto libc_strverscmp = reinterpret_cast<strverscmp_fn>(libc_symbol("strverscmp"));
  ASSERT_NE(libc_strverscmp, nullptr);
  std::atomic<bool> stop{false}, looping{false};
  std::atomic<long> sink{0};
  std::thread in_libc([&] {
    looping = true;
    while (!stop.load(std::memory_order_relaxed))
      sink.fetch_add(libc_strverscmp(a.c_str(), b.c_str()), std::memory_order_relaxed);
  });
  while (!looping) std::this_thread::yield();
  signal_thread(in_libc, 50);
  stop = true;
  in_libc.join();
  // Mostly inside strverscmp; the loop's own instructions between two calls are few.
  EXPECT_GT(said_held.load(), 25) << said_free.load() << " of 50 found it outside the library";

  said_held = 0;
  said_free = 0;
  stop = false;
  looping = false;
  // Signalled only once in its loop: starting, a thread runs glibc's start_thread.
  std::thread own([&] {
    uint64_t x = 1;
    looping = true;
    while (!stop.load(std::memory_order_relaxed)) x = x * 6364136223846793005ull + 1;
    sink.fetch_add(static_cast<long>(x & 1), std::memory_order_relaxed);
  });
  while (!looping) std::this_thread::yield();
  signal_thread(own, 50);
  stop = true;
  own.join();
  EXPECT_EQ(said_held.load(), 0);
  EXPECT_EQ(said_free.load(), 50);
}

}  // namespace
}  // namespace uswap
