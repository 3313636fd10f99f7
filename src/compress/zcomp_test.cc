#include "uswap/compress/zcomp.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <latch>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "uswap/compress/page_fill.h"

namespace uswap {
namespace {

constexpr size_t guard = 64;
constexpr uint8_t guard_byte = 0xA5;

// A page with guard bytes on both sides, to catch a decompressor that writes outside the page.
struct guarded_page {
  std::vector<uint8_t> mem = std::vector<uint8_t>(page_size + 2 * guard, guard_byte);
  uint8_t* data() { return mem.data() + guard; }
  bool guards_intact() const {
    for (size_t i = 0; i < guard; ++i)
      if (mem[i] != guard_byte || mem[guard + page_size + i] != guard_byte) return false;
    return true;
  }
};

enum class kind { zero, compressible25, compressible50, compressible75, random, text, repeated };

std::vector<uint8_t> make_page(kind k, uint64_t seed) {
  std::vector<uint8_t> p(page_size, 0);
  switch (k) {
    case kind::zero: break;
    case kind::compressible25: fill_compressible(p.data(), page_size, 25, seed); break;
    case kind::compressible50: fill_compressible(p.data(), page_size, 50, seed); break;
    case kind::compressible75: fill_compressible(p.data(), page_size, 75, seed); break;
    case kind::random: fill_random(p.data(), page_size, seed); break;
    case kind::text: {
      // English-like text made of words, so that it compresses like prose does.
      static const char* words[] = {"swap ", "page ", "the ", "memory ", "compressed ", "zram ",
                                    "of ", "and ", "cluster ", "lock ", "kernel ", "slot "};
      uint64_t s = seed;
      size_t off = 0;
      while (off < page_size) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        const char* w = words[(s >> 33) % std::size(words)];
        for (const char* c = w; *c && off < page_size; ++c) p[off++] = static_cast<uint8_t>(*c);
      }
      break;
    }
    case kind::repeated:
      for (size_t i = 0; i < page_size; ++i) p[i] = static_cast<uint8_t>(i * 7 + seed);
      break;
  }
  return p;
}

class CodecTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto z = zcomp::create(GetParam());
    ASSERT_TRUE(z.ok()) << z.error().to_string();
    comp = std::move(*z);
  }
  std::unique_ptr<zcomp> comp;
};

INSTANTIATE_TEST_SUITE_P(Codecs, CodecTest, ::testing::Values("lz4", "lz4hc", "zstd", "lzo"),
                         [](const auto& info) { return info.param; });

TEST_P(CodecTest, RoundTripsEveryKindOfPage) {
  auto s = comp->stream_get();
  ASSERT_TRUE(s.ok());
  for (kind k : {kind::zero, kind::compressible25, kind::compressible50, kind::compressible75,
                 kind::random, kind::text, kind::repeated}) {
    for (uint64_t seed = 1; seed <= 8; ++seed) {
      const auto page = make_page(k, seed);
      auto len = comp->compress(**s, page.data());
      ASSERT_TRUE(len.ok()) << len.error().to_string();
      ASSERT_GT(*len, 0u);
      ASSERT_LE(*len, zcomp_strm::buffer_size);
      ASSERT_LE(*len, comp->ops().compress_bound(page_size));
      // What went in determines roughly what comes out: this catches a codec that is not
      // really compressing (or one that "compresses" random data).
      if (k == kind::zero) {
        EXPECT_LT(*len, 128u);
      }
      if (k == kind::random) {
        EXPECT_GE(*len, page_size - 16);
      }
      if (k == kind::compressible50) {
        EXPECT_GT(*len, page_size * 45 / 100);
        EXPECT_LT(*len, page_size * 60 / 100);
      }
      const std::vector<uint8_t> stored((*s)->buffer, (*s)->buffer + *len);
      guarded_page out;
      std::memset(out.data(), 0x5A, page_size);
      status st = comp->decompress(**s, stored.data(), stored.size(), out.data());
      ASSERT_TRUE(st.ok()) << st.to_string();
      EXPECT_EQ(0, std::memcmp(out.data(), page.data(), page_size)) << "kind " << int(k);
      EXPECT_TRUE(out.guards_intact());
    }
  }
}

TEST_P(CodecTest, RoundTripsRealTextWhenTheSystemHasSome) {
  // /usr/share/common-licenses comes with Debian's base-files: real English prose.
  std::ifstream f("/usr/share/common-licenses/GPL-3", std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (text.size() < 4 * page_size) GTEST_SKIP() << "no license texts on this system";
  auto s = comp->stream_get();
  ASSERT_TRUE(s.ok());
  for (size_t off = 0; off + page_size <= text.size(); off += page_size) {
    auto len = comp->compress(**s, text.data() + off);
    ASSERT_TRUE(len.ok());
    EXPECT_LT(*len, page_size * 3 / 4);  // prose compresses
    std::vector<uint8_t> stored((*s)->buffer, (*s)->buffer + *len);
    guarded_page out;
    ASSERT_TRUE(comp->decompress(**s, stored.data(), stored.size(), out.data()).ok());
    EXPECT_EQ(0, std::memcmp(out.data(), text.data() + off, page_size));
  }
}

TEST_P(CodecTest, TruncatedOrExtendedInputIsAnErrorAndWritesNothingOutside) {
  auto s = comp->stream_get();
  ASSERT_TRUE(s.ok());
  for (kind k : {kind::compressible50, kind::text, kind::random, kind::zero}) {
    const auto page = make_page(k, 7);
    auto len = comp->compress(**s, page.data());
    ASSERT_TRUE(len.ok());
    std::vector<uint8_t> stored((*s)->buffer, (*s)->buffer + *len);
    for (size_t cut : {size_t{1}, size_t{2}, *len / 2, *len - 1}) {
      if (cut == 0 || cut >= *len) continue;
      guarded_page out;
      status st = comp->decompress(**s, stored.data(), cut, out.data());
      EXPECT_EQ(st.code(), EIO) << "kind " << int(k) << " cut to " << cut << " of " << *len;
      EXPECT_TRUE(out.guards_intact());
    }
    std::vector<uint8_t> longer = stored;
    for (int i = 0; i < 16; ++i) longer.push_back(static_cast<uint8_t>(0x3C + 17 * i));
    guarded_page out;
    EXPECT_EQ(comp->decompress(**s, longer.data(), longer.size(), out.data()).code(), EIO)
        << "trailing bytes accepted, kind " << int(k);
    EXPECT_TRUE(out.guards_intact());
    EXPECT_EQ(comp->decompress(**s, stored.data(), 0, out.data()).code(), EIO);
  }
}

TEST_P(CodecTest, GarbageInputIsAnError) {
  auto s = comp->stream_get();
  ASSERT_TRUE(s.ok());
  for (uint64_t seed = 1; seed <= 64; ++seed) {
    std::vector<uint8_t> junk(16 + (seed * 97) % 3000);
    fill_random(junk.data(), junk.size(), seed * 1000003);
    guarded_page out;
    status st = comp->decompress(**s, junk.data(), junk.size(), out.data());
    EXPECT_EQ(st.code(), EIO) << "seed " << seed;
    EXPECT_FALSE(st.message().empty());
    EXPECT_TRUE(out.guards_intact());
  }
}

TEST_P(CodecTest, EverySingleBitFlipFailsCleanlyOrDecodesAFullPage) {
  auto s = comp->stream_get();
  ASSERT_TRUE(s.ok());
  const auto page = make_page(kind::compressible50, 11);
  auto len = comp->compress(**s, page.data());
  ASSERT_TRUE(len.ok());
  const std::vector<uint8_t> stored((*s)->buffer, (*s)->buffer + *len);
  size_t detected = 0, total = 0;
  for (size_t byte = 0; byte < stored.size(); ++byte) {
    for (uint8_t bit : {uint8_t{0x01}, uint8_t{0x80}}) {
      std::vector<uint8_t> bad = stored;
      bad[byte] ^= bit;
      guarded_page out;
      status st = comp->decompress(**s, bad.data(), bad.size(), out.data());
      ++total;
      if (!st.ok()) {
        EXPECT_EQ(st.code(), EIO);
        ++detected;
      }
      ASSERT_TRUE(out.guards_intact()) << "byte " << byte;
    }
  }
  // Flips in the stream's structure (tokens, lengths, offsets, headers) must be caught; flips in
  // literal bytes decode to a wrong but full page, which only a checksum could notice.
  EXPECT_GT(detected, 0u) << "of " << total;
}

TEST_P(CodecTest, AStreamOfAnotherLengthIsAWrongLengthError) {
  auto s = comp->stream_get();
  ASSERT_TRUE(s.ok());
  for (size_t n : {page_size / 2, page_size - 1, page_size + 1, 2 * page_size - 64}) {
    std::vector<uint8_t> src(n);
    fill_compressible(src.data(), n, 50, n);
    std::vector<uint8_t> dst(comp->ops().compress_bound(n));
    auto len = (*s)->ctx->compress(src.data(), n, dst.data(), dst.size());
    ASSERT_TRUE(len.ok()) << len.error().to_string();
    guarded_page out;
    status st = comp->decompress(**s, dst.data(), *len, out.data());
    EXPECT_EQ(st.code(), EIO) << "a " << n << "-byte stream was accepted as a page";
    EXPECT_TRUE(out.guards_intact());
  }
}

TEST_P(CodecTest, CompressIntoASmallBufferIsE2BIG) {
  auto s = comp->stream_get();
  ASSERT_TRUE(s.ok());
  const auto page = make_page(kind::random, 3);
  std::vector<uint8_t> dst(page_size / 4);
  auto len = (*s)->ctx->compress(page.data(), page_size, dst.data(), dst.size());
  ASSERT_FALSE(len.ok());
  EXPECT_EQ(len.error().code(), E2BIG);
}

TEST(Zcomp, ListsAndFindsAlgorithmsByName) {
  auto names = zcomp::available_algorithms();
  ASSERT_EQ(names.size(), 4u);
  for (std::string_view n : {"lz4", "lz4hc", "zstd", "lzo"}) {
    EXPECT_TRUE(zcomp::available_algorithm(n)) << n;
    auto z = zcomp::create(n);
    ASSERT_TRUE(z.ok()) << n;
    EXPECT_EQ((*z)->name(), n);
  }
  EXPECT_FALSE(zcomp::available_algorithm("deflate"));
  auto bad = zcomp::create("lzo-rle");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), EINVAL);
  EXPECT_NE(bad.error().message().find("lzo-rle"), std::string_view::npos);
  EXPECT_NE(bad.error().message().find("zstd"), std::string_view::npos);  // lists the known ones
}

TEST(Zcomp, LevelsAreCheckedPerBackend) {
  auto zd = zcomp::create("zstd");
  ASSERT_TRUE(zd.ok());
  EXPECT_EQ((*zd)->level(), 3);
  for (int level : {1, 3, 9, 19, -5}) {
    auto z = zcomp::create("zstd", {.level = level});
    ASSERT_TRUE(z.ok()) << level;
    EXPECT_EQ((*z)->level(), level);
  }
  EXPECT_EQ(zcomp::create("zstd", {.level = 99}).error().code(), EINVAL);
  EXPECT_EQ(zcomp::create("lz4", {.level = 0}).error().code(), EINVAL);
  EXPECT_TRUE(zcomp::create("lz4", {.level = 8}).ok());
  EXPECT_EQ(zcomp::create("lz4hc", {.level = 13}).error().code(), EINVAL);
  auto lzo = zcomp::create("lzo", {.level = 1});
  ASSERT_FALSE(lzo.ok());
  EXPECT_EQ(lzo.error().code(), EINVAL);
  EXPECT_NE(lzo.error().message().find("no level"), std::string_view::npos);
}

TEST(Zcomp, HigherZstdLevelsCompressTextAtLeastAsWell) {
  const auto page = make_page(kind::text, 5);
  size_t prev = SIZE_MAX;
  for (int level : {-5, 1, 19}) {
    auto z = zcomp::create("zstd", {.level = level});
    ASSERT_TRUE(z.ok());
    auto s = (*z)->stream_get();
    ASSERT_TRUE(s.ok());
    auto len = (*z)->compress(**s, page.data());
    ASSERT_TRUE(len.ok());
    EXPECT_LE(*len, prev) << "level " << level;
    prev = *len;
    guarded_page out;
    ASSERT_TRUE((*z)->decompress(**s, (*s)->buffer, *len, out.data()).ok());
    EXPECT_EQ(0, std::memcmp(out.data(), page.data(), page_size));
  }
}

TEST(Zcomp, AThreadReusesItsStreamAndNestingGetsASecondOne) {
  auto z = zcomp::create("lz4");
  ASSERT_TRUE(z.ok());
  EXPECT_EQ((*z)->nr_streams(), 0u);
  zcomp_strm* first = nullptr;
  {
    auto s = (*z)->stream_get();
    ASSERT_TRUE(s.ok());
    first = &**s;
    EXPECT_EQ((*z)->nr_streams(), 1u);
    auto nested = (*z)->stream_get();
    ASSERT_TRUE(nested.ok());
    EXPECT_NE(&**nested, first);
    EXPECT_NE((*nested)->buffer, (*s)->buffer);
    EXPECT_EQ((*z)->nr_streams(), 2u);
  }
  for (int i = 0; i < 100; ++i) {
    auto s = (*z)->stream_get();
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(&**s, first);  // the same stream again: no allocation per page
  }
  EXPECT_EQ((*z)->nr_streams(), 2u);
  // A second zcomp has streams of its own.
  auto z2 = zcomp::create("lz4");
  ASSERT_TRUE(z2.ok());
  auto s2 = (*z2)->stream_get();
  ASSERT_TRUE(s2.ok());
  EXPECT_NE(&**s2, first);
  EXPECT_EQ((*z2)->nr_streams(), 1u);
}

// Allocations (operator new) made by a thread that set counting_allocations: its thread_local
// destructors run after its function returns and still see the flag (trivially destructible).
thread_local bool counting_allocations = false;
std::atomic<unsigned> counted_allocations{0};

}  // namespace
}  // namespace uswap

// A replacement pair over malloc/free: GCC cannot see that they match. Not under
// AddressSanitizer, whose own operator new the libraries' objects come from (freeing them here
// is its alloc-dealloc-mismatch): there the test is skipped.
#if !defined(__SANITIZE_ADDRESS__)
#define USWAP_COUNT_ALLOCATIONS 1
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t n) {
  if (uswap::counting_allocations) uswap::counted_allocations.fetch_add(1);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop
#endif

namespace uswap {
namespace {

// A thread's exit gives its stream to the spare list without allocating: under `uswap run` the
// exiting thread's destructors are the program's code, whose allocations land in the paged
// arena, and a spare list there deadlocked a job (zcomp.cc, registry). Before the room was
// reserved, the list grew by reallocation at the 1st, 2nd, 3rd, 5th, 9th... exit.
TEST(Zcomp, AThreadsExitGivesItsStreamBackWithoutAllocating) {
#if !defined(USWAP_COUNT_ALLOCATIONS)
  GTEST_SKIP() << "allocations are not counted under AddressSanitizer";
#endif
  auto z = zcomp::create("lz4");
  ASSERT_TRUE(z.ok());
  counted_allocations.store(0);
  // Forty threads each take a stream while all the others hold theirs (so each makes one),
  // then all exit: forty spares.
  constexpr unsigned threads = 40;
  std::latch all_hold(threads);
  std::atomic<unsigned> failed{0};
  std::vector<std::thread> ts;
  for (unsigned i = 0; i < threads; ++i)
    ts.emplace_back([&] {
      {
        auto s = (*z)->stream_get();
        if (!s.ok()) failed.fetch_add(1);
        all_hold.arrive_and_wait();
      }
      counting_allocations = true;  // from here: the cache's destructor gives the stream back
    });
  for (auto& t : ts) t.join();
  ASSERT_EQ(failed.load(), 0u);
  EXPECT_EQ((*z)->nr_streams(), threads);
  EXPECT_EQ(counted_allocations.load(), 0u)
      << "a thread's exit allocated while giving its stream back";
  // The spares serve the next threads: no new stream.
  std::thread([&] { EXPECT_TRUE((*z)->stream_get().ok()); }).join();
  EXPECT_EQ((*z)->nr_streams(), threads);
}

TEST(Zcomp, AMovedStreamIsPutOnce) {
  auto z = zcomp::create("lzo");
  ASSERT_TRUE(z.ok());
  zcomp_strm* p = nullptr;
  {
    auto s = (*z)->stream_get();
    ASSERT_TRUE(s.ok());
    zcomp_stream moved = std::move(*s);
    p = &*moved;
    zcomp_stream again;
    again = std::move(moved);
    EXPECT_FALSE(moved);
    EXPECT_EQ(&*again, p);
  }
  auto s = (*z)->stream_get();
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(&**s, p);
  EXPECT_EQ((*z)->nr_streams(), 1u);
}

TEST(Zcomp, ImpossibleLengthsAreRejectedBeforeTheCodec) {
  auto z = zcomp::create("zstd");
  ASSERT_TRUE(z.ok());
  auto s = (*z)->stream_get();
  ASSERT_TRUE(s.ok());
  std::vector<uint8_t> big(3 * page_size, 0);
  guarded_page out;
  EXPECT_EQ((*z)->decompress(**s, big.data(), big.size(), out.data()).code(), EIO);
  EXPECT_EQ((*z)->decompress(**s, big.data(), 0, out.data()).code(), EIO);
  EXPECT_TRUE(out.guards_intact());
}

}  // namespace
}  // namespace uswap
