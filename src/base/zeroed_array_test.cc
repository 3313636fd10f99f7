#include "uswap/base/zeroed_array.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>

#include <fstream>
#include <string>

namespace uswap {
namespace {

// RssAnon of this process, from /proc/self/status.
uint64_t resident_anon_bytes() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("RssAnon:", 0) == 0) return std::stoull(line.substr(8)) << 10;
  return 0;
}

TEST(ZeroedArray, StartsZeroAndHoldsWrites) {
  zeroed_array<std::atomic<uint64_t>> a(100000);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a.size(), 100000u);
  EXPECT_EQ(a.bytes(), (100000 * 8 + 4095) / 4096 * 4096);
  for (size_t i = 0; i < a.size(); i += 997) EXPECT_EQ(a[i].load(), 0u);
  a[12345].store(7);
  a[99999].store(9);
  EXPECT_EQ(a[12345].load(), 7u);
  EXPECT_EQ(a[99999].load(), 9u);
}

TEST(ZeroedArray, UntouchedElementsCostNoMemory) {
  // 1 GiB of table: only the pages written are resident.
  const uint64_t before = resident_anon_bytes();
  zeroed_array<uint64_t> a(uint64_t{1} << 27);
  ASSERT_TRUE(a.ok());
  for (size_t i = 0; i < a.size(); i += a.size() / 16) a[i] = i + 1;
  const uint64_t after = resident_anon_bytes();
  EXPECT_LT(after, before + (uint64_t{4} << 20)) << "16 touched pages of a 1 GiB table";
  for (size_t i = 0; i < a.size(); i += a.size() / 16) EXPECT_EQ(a[i], i + 1);
}

TEST(ZeroedArray, ReleaseRangeZeroesWholePagesOnly) {
  zeroed_array<uint32_t> a(4096);  // four pages
  for (size_t i = 0; i < a.size(); ++i) a[i] = 1;
  // [100, 3100) covers pages 1 and 2 (elements 1024..3071) and parts of pages 0 and 3.
  a.release_range(100, 3000);
  EXPECT_EQ(a[99], 1u);
  EXPECT_EQ(a[1023], 1u);
  EXPECT_EQ(a[1024], 0u);
  EXPECT_EQ(a[3071], 0u);
  EXPECT_EQ(a[3072], 1u);
  EXPECT_EQ(a[3099], 1u);
}

TEST(ZeroedArray, MoveTransfersOwnership) {
  zeroed_array<uint8_t> a(10);
  a[3] = 5;
  zeroed_array<uint8_t> b(std::move(a));
  EXPECT_FALSE(a.ok());
  EXPECT_EQ(a.size(), 0u);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b[3], 5);
  zeroed_array<uint8_t> c;
  EXPECT_FALSE(c.ok());
  c = std::move(b);
  EXPECT_EQ(c[3], 5);
}

}  // namespace
}  // namespace uswap
