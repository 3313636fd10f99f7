// The kernel-access module under concurrency: twice as many threads as the machine has cores
// make trapped reads and writes into one simulated arena at once, their buffers sharing pages
// (so pins of the same page nest and unnest across threads), with every byte verified. Runs
// under ThreadSanitizer too (make tsan): the SIGSYS handler, the pin callbacks and the chunked
// transfers are all on the instrumented path.
#include <fcntl.h>
#include <sys/uio.h>
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "kernel_access.h"
#include "kernel_access_test_util.h"
#include "uswap_testing/threads.h"

namespace uswap {
namespace {

using namespace ka_test;

TEST(KernelAccessConcurrency, ManyThreadsReadAndWriteThroughTheArena) {
  in_child([] {
    const unsigned cores = std::max(2u, std::thread::hardware_concurrency());
    const int threads = static_cast<int>(2 * cores);
    const size_t file_size = 4 << 20;
    std::vector<uint8_t> data(file_size);
    std::mt19937_64 rng(42);
    for (auto& b : data) b = static_cast<uint8_t>(rng());
    char path[] = "/tmp/uswap_ka_stress_XXXXXX";
    const int fd = ::mkstemp(path);
    ASSERT_GE(fd, 0);
    ::unlink(path);
    ASSERT_EQ(::pwrite(fd, data.data(), data.size(), 0), static_cast<ssize_t>(data.size()));
    install(64 << 10);  // small chunks: the 96 KiB reads below are split
    const int rounds = 3000 / testing::work_scale;
    std::atomic<int> bad{0};
    testing::run_threads(threads, [&](int t) {
      std::mt19937_64 r(static_cast<uint64_t>(t) + 1);
      // Each thread's buffer starts at its own offset inside shared pages.
      char* buf = at<char>(0x1000000 + static_cast<uint64_t>(t) * 1000);
      char* big = at<char>(0x2000000 + static_cast<uint64_t>(t) * (128 << 10));
      // An iovec array of its own in the arena, its two bases in the shared pages.
      auto* iov = at<struct iovec>(0x3000000 + static_cast<uint64_t>(t) * 64);
      char* va = at<char>(0x3100000 + static_cast<uint64_t>(t) * 512);
      char* vb = at<char>(0x3200000 + static_cast<uint64_t>(t) * 512);
      const struct iovec v[2] = {{va, 300}, {vb, 200}};
      poke(iov, v, sizeof v);
      std::vector<uint8_t> got(96 << 10);
      for (int i = 0; i < rounds; ++i) {
        const size_t len = 1 + r() % 900;
        const off_t off = static_cast<off_t>(r() % (file_size - len));
        if (::pread(fd, buf, len, off) != static_cast<ssize_t>(len)) {
          bad.fetch_add(1);
          continue;
        }
        peek(got.data(), buf, len);
        if (std::memcmp(got.data(), data.data() + off, len) != 0) bad.fetch_add(1);
        if (i % 4 == 0) {
          const off_t voff = static_cast<off_t>(r() % (file_size - 500));
          // syscall(2): TSan's readv interceptor would read the PROT_NONE iovec array back.
          if (::syscall(SYS_preadv, fd, iov, 2, voff, 0) != 500) {
            bad.fetch_add(1);
            continue;
          }
          peek(got.data(), va, 300);
          peek(got.data() + 300, vb, 200);
          if (std::memcmp(got.data(), data.data() + voff, 500) != 0) bad.fetch_add(1);
        }
        if (i % 16 == 0) {
          const off_t boff = static_cast<off_t>(r() % (file_size - got.size()));
          if (::pread(fd, big, got.size(), boff) != static_cast<ssize_t>(got.size())) {
            bad.fetch_add(1);
            continue;
          }
          peek(got.data(), big, got.size());
          if (std::memcmp(got.data(), data.data() + boff, got.size()) != 0) bad.fetch_add(1);
          // And back out of the arena into the file, at the same offset: unchanged contents.
          if (::pwrite(fd, big, got.size(), boff) != static_cast<ssize_t>(got.size()))
            bad.fetch_add(1);
        }
      }
    });
    EXPECT_EQ(bad.load(), 0);
    EXPECT_EQ(sim().live.load(), 0);  // every pin released
    const kernel_access_stats s = kernel_access_get_stats();
    EXPECT_GE(s.trapped, static_cast<uint64_t>(threads) * static_cast<uint64_t>(rounds));
    EXPECT_GT(s.chunked, 0u);
    EXPECT_EQ(s.unsupported, 0u);
  });
}

}  // namespace
}  // namespace uswap
