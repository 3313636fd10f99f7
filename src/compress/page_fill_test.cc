#include "uswap/compress/page_fill.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "uswap/base/page.h"

namespace uswap {
namespace {

TEST(PageFill, FiftyPercentIsRunsOfRandomThenZeroLikeFio) {
  std::vector<uint8_t> p(page_size, 0xFF);
  fill_compressible(p.data(), page_size, 50, 42);
  for (size_t chunk = 0; chunk < page_size; chunk += 512) {
    size_t zeros_in_random_half = 0;
    for (size_t i = 0; i < 256; ++i) zeros_in_random_half += p[chunk + i] == 0;
    EXPECT_LT(zeros_in_random_half, 16u) << "chunk at " << chunk;
    for (size_t i = 256; i < 512; ++i) ASSERT_EQ(p[chunk + i], 0) << chunk + i;
  }
}

TEST(PageFill, IsDeterministicPerSeedAndDiffersAcrossSeedsAndChunks) {
  std::vector<uint8_t> a(page_size), b(page_size), c(page_size);
  fill_compressible(a.data(), page_size, 50, 7);
  fill_compressible(b.data(), page_size, 50, 7);
  fill_compressible(c.data(), page_size, 50, 8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  // Chunks of one page are not copies of each other (a codec would find them otherwise).
  EXPECT_NE(0, std::memcmp(a.data(), a.data() + 512, 256));
}

TEST(PageFill, Extremes) {
  std::vector<uint8_t> p(page_size, 0xFF);
  fill_compressible(p.data(), page_size, 100, 1);
  for (uint8_t v : p) ASSERT_EQ(v, 0);
  fill_compressible(p.data(), page_size, 0, 1);
  size_t zeros = 0;
  for (uint8_t v : p) zeros += v == 0;
  EXPECT_LT(zeros, 64u);
  // 75% compressible: 128 random bytes then 384 zeros per chunk.
  fill_compressible(p.data(), page_size, 75, 3);
  for (size_t i = 128; i < 512; ++i) ASSERT_EQ(p[i], 0);
}

TEST(PageFill, RandomFillHandlesOddLengths) {
  std::vector<uint8_t> p(13, 0);
  fill_random(p.data(), 13, 99);
  size_t zeros = 0;
  for (uint8_t v : p) zeros += v == 0;
  EXPECT_LT(zeros, 4u);
}

}  // namespace
}  // namespace uswap
