// Many threads (more than the machine's cores) compressing and decompressing through one zcomp
// per algorithm: every page read back must equal what was written, each thread must get its own
// stream, and streams must be released at thread exit or at zcomp destruction.
#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <barrier>
#include <cstring>
#include <thread>
#include <vector>

#include "uswap/compress/page_fill.h"
#include "uswap/compress/zcomp.h"
#include "uswap_testing/threads.h"

namespace uswap {
namespace {

constexpr int pages_per_thread = 400 / testing::work_scale;
constexpr int nr_threads = 16;

void make_page(uint8_t* p, uint64_t seed) {
  // Mix of kinds so that every thread exercises short, long and incompressible outputs.
  switch (seed % 4) {
    case 0: fill_compressible(p, page_size, 50, seed); break;
    case 1: fill_compressible(p, page_size, 80, seed); break;
    case 2: fill_random(p, page_size, seed); break;
    default: std::memset(p, static_cast<int>(seed & 0xFF), page_size); break;
  }
}

class ConcurrentCodecTest : public ::testing::TestWithParam<std::string> {};
INSTANTIATE_TEST_SUITE_P(Codecs, ConcurrentCodecTest,
                         ::testing::Values("lz4", "lz4hc", "zstd", "lzo"),
                         [](const auto& info) { return info.param; });

TEST_P(ConcurrentCodecTest, SixteenThreadsRoundTripTheirOwnAndEachOthersPages) {
  auto z = zcomp::create(GetParam());
  ASSERT_TRUE(z.ok());
  zcomp& comp = **z;

  // Phase 1: every thread compresses its pages into a shared table.
  // Phase 2: every thread decompresses another thread's pages (cross-thread data, own stream).
  std::vector<std::vector<std::vector<uint8_t>>> stored(nr_threads);
  std::atomic<int> failures{0};
  std::atomic<size_t> streams_seen{0};
  std::barrier sync(nr_threads + 1);

  std::vector<std::thread> threads;
  for (int t = 0; t < nr_threads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<uint8_t> page(page_size), out(page_size);
      auto& mine = stored[t];
      for (int i = 0; i < pages_per_thread; ++i) {
        const uint64_t seed = uint64_t(t) * 1000003 + i;
        make_page(page.data(), seed);
        auto s = comp.stream_get();
        if (!s.ok()) { ++failures; return; }
        auto len = comp.compress(**s, page.data());
        if (!len.ok()) { ++failures; return; }
        mine.emplace_back((*s)->buffer, (*s)->buffer + *len);
        // Read it straight back through the same stream.
        if (!comp.decompress(**s, mine.back().data(), *len, out.data()).ok() ||
            std::memcmp(out.data(), page.data(), page_size) != 0)
          ++failures;
      }
      sync.arrive_and_wait();  // all tables written; main checks the stream count
      sync.arrive_and_wait();
      const int other = (t + 1) % nr_threads;
      for (int i = 0; i < pages_per_thread; ++i) {
        make_page(page.data(), uint64_t(other) * 1000003 + i);
        auto s = comp.stream_get();
        if (!s.ok()) { ++failures; return; }
        const auto& obj = stored[other][i];
        if (!comp.decompress(**s, obj.data(), obj.size(), out.data()).ok() ||
            std::memcmp(out.data(), page.data(), page_size) != 0)
          ++failures;
      }
      streams_seen.fetch_add(1);
    });
  }
  sync.arrive_and_wait();
  EXPECT_EQ(comp.nr_streams(), size_t{nr_threads});  // one stream per thread, no sharing
  sync.arrive_and_wait();
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(streams_seen.load(), size_t{nr_threads});
  // Exiting threads left their streams as spares; the next threads take those instead of
  // making new ones.
  EXPECT_EQ(comp.nr_streams(), size_t{nr_threads});
  std::vector<std::thread> again;
  for (int t = 0; t < nr_threads; ++t)
    again.emplace_back([&] {
      std::vector<uint8_t> page(page_size);
      make_page(page.data(), 7);
      auto s = comp.stream_get();
      if (!s.ok() || !comp.compress(**s, page.data()).ok()) ++failures;
    });
  for (auto& th : again) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(comp.nr_streams(), size_t{nr_threads});
}

TEST(ZcompConcurrency, DestroyingAZcompWhileItsThreadsLiveFreesTheirStreams) {
  auto z = zcomp::create("zstd");
  ASSERT_TRUE(z.ok());
  auto z2 = zcomp::create("lz4");
  ASSERT_TRUE(z2.ok());
  std::barrier sync(9);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::vector<uint8_t> page(page_size), out(page_size);
      for (zcomp* c : {z->get(), z2->get()}) {
        fill_compressible(page.data(), page_size, 50, t);
        auto s = c->stream_get();
        auto len = s.ok() ? c->compress(**s, page.data()) : result<size_t>(s.error());
        if (!len.ok() || !c->decompress(**s, (*s)->buffer, *len, out.data()).ok()) ++failures;
      }
      sync.arrive_and_wait();  // main destroys z here
      sync.arrive_and_wait();
      // The surviving zcomp still works, and a new zcomp (possibly at the old address) gives
      // this thread a fresh stream rather than a freed one.
      fill_compressible(page.data(), page_size, 50, 100 + t);
      auto s = (*z2)->stream_get();
      if (!s.ok()) { ++failures; return; }
      auto len = (*z2)->compress(**s, page.data());
      if (!len.ok() || !(*z2)->decompress(**s, (*s)->buffer, *len, out.data()).ok() ||
          std::memcmp(out.data(), page.data(), page_size) != 0)
        ++failures;
    });
  }
  sync.arrive_and_wait();
  EXPECT_EQ((*z)->nr_streams(), 8u);
  z->reset();
  auto z3 = zcomp::create("zstd");
  ASSERT_TRUE(z3.ok());
  sync.arrive_and_wait();
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ((*z2)->nr_streams(), 8u);  // the exited threads' spares
  EXPECT_EQ((*z3)->nr_streams(), 0u);
}

// A thread that compresses after its own thread_local destructors ran (a pthread key destructor:
// mimalloc's thread teardown touching memory a pager paged out, whose fault is resolved on that
// thread) gets a working stream, shared with others through the spare list.
pthread_key_t late_key;
zcomp* late_comp = nullptr;
std::atomic<int> late_ok{0}, late_failures{0};

void late_use(void*) {
  std::vector<uint8_t> page(page_size), out(page_size);
  fill_compressible(page.data(), page_size, 50, 42);
  auto s = late_comp->stream_get();
  if (!s.ok()) {
    ++late_failures;
    return;
  }
  auto len = late_comp->compress(**s, page.data());
  if (!len.ok() || !late_comp->decompress(**s, (*s)->buffer, *len, out.data()).ok() ||
      std::memcmp(out.data(), page.data(), page_size) != 0)
    ++late_failures;
  else
    ++late_ok;
}

TEST(ZcompConcurrency, AThreadPastItsThreadLocalDestructorsStillGetsAStream) {
  auto z = zcomp::create("lz4");
  ASSERT_TRUE(z.ok());
  late_comp = z->get();
  ASSERT_EQ(pthread_key_create(&late_key, late_use), 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([] {
      // A stream first (the thread_local cache exists and will be destroyed at exit), then the
      // key whose destructor runs after the thread_local destructors.
      std::vector<uint8_t> page(page_size);
      fill_compressible(page.data(), page_size, 50, 1);
      { auto s = late_comp->stream_get(); if (!s.ok() || !late_comp->compress(**s, page.data()).ok()) ++late_failures; }
      pthread_setspecific(late_key, reinterpret_cast<void*>(1));
    });
  for (auto& th : threads) th.join();
  pthread_key_delete(late_key);
  EXPECT_EQ(late_failures.load(), 0);
  EXPECT_EQ(late_ok.load(), 8);
  EXPECT_LE(z.value()->nr_streams(), 16u);
}

}  // namespace
}  // namespace uswap
