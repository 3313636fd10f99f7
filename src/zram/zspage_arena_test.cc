// zspage_arena: blocks of every zspage size are distinct, writable and reused after free; memory
// released to the host is usable again; a zsmalloc pool runs on it.
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <vector>

#include "zram_test_util.h"
#include "zspage_arena.h"

namespace uswap {
namespace {

using zram_detail::zspage_arena;

TEST(ZspageArena, BlocksAreDistinctWritableAndReused) {
  zspage_arena arena;
  std::vector<std::pair<uint8_t*, unsigned>> blocks;
  for (int i = 0; i < 600; ++i) {
    const unsigned n = 1 + i % ZS_MAX_PAGES_PER_ZSPAGE;
    auto* p = static_cast<uint8_t*>(arena.alloc_pages(n));
    ASSERT_NE(p, nullptr);
    std::memset(p, i & 0xff, n * page_size);
    blocks.emplace_back(p, n);
  }
  // No two blocks overlap, and each kept what was written into it.
  std::set<uintptr_t> starts;
  for (size_t i = 0; i < blocks.size(); ++i) {
    auto [p, n] = blocks[i];
    for (unsigned k = 0; k < n; ++k) ASSERT_TRUE(starts.insert(uintptr_t(p) + k * page_size).second);
    for (size_t b = 0; b < n * page_size; b += 512) ASSERT_EQ(p[b], i & 0xff);
  }
  EXPECT_GE(arena.chunks(), 600u * 8.5 * page_size / zspage_arena::chunk_bytes);
  EXPECT_EQ(arena.alloc_pages(0), nullptr);
  EXPECT_EQ(arena.alloc_pages(ZS_MAX_PAGES_PER_ZSPAGE + 1), nullptr);
  // Freed blocks come back first, for the same size.
  const uint64_t chunks = arena.chunks();
  arena.free_pages(blocks[5].first, blocks[5].second);
  const uint64_t resident = arena.resident_free_pages();
  EXPECT_GE(resident, blocks[5].second);
  EXPECT_EQ(arena.alloc_pages(blocks[5].second), blocks[5].first);
  EXPECT_EQ(arena.resident_free_pages(), resident - blocks[5].second);
  // Released blocks are given back to the host and still usable (they read as zeros).
  for (int i = 0; i < 10; ++i) arena.free_pages(blocks[i].first, blocks[i].second);
  EXPECT_GE(arena.release_free(), 55u);
  EXPECT_EQ(arena.resident_free_pages(), 0u);
  auto* again = static_cast<uint8_t*>(arena.alloc_pages(blocks[3].second));
  EXPECT_EQ(again, blocks[3].first);
  EXPECT_EQ(again[0], 0);
  again[0] = 1;
  EXPECT_EQ(arena.chunks(), chunks);
}

TEST(ZspageArena, FreedPagesBeyondTheCacheBoundGoBackToTheHostAtOnce) {
  zspage_arena arena(64);
  std::vector<std::pair<uint8_t*, unsigned>> blocks;
  for (int i = 0; i < 300; ++i) {
    auto* p = static_cast<uint8_t*>(arena.alloc_pages(4));
    ASSERT_NE(p, nullptr);
    std::memset(p, 0x5a, 4 * page_size);
    blocks.emplace_back(p, 4);
  }
  for (auto [p, n] : blocks) arena.free_pages(p, n);
  EXPECT_LE(arena.resident_free_pages(), 64u);
  EXPECT_GE(arena.resident_free_pages(), 60u);
  // Every block comes back, the cached ones with their old bytes, the released ones as zeros.
  std::set<uint8_t*> seen;
  unsigned zeroed = 0;
  for (int i = 0; i < 300; ++i) {
    auto* p = static_cast<uint8_t*>(arena.alloc_pages(4));
    ASSERT_NE(p, nullptr);
    ASSERT_TRUE(seen.insert(p).second);
    zeroed += p[0] == 0;
  }
  EXPECT_GE(zeroed, 280u);
}

TEST(ZspageArena, APoolOnTheArenaKeepsObjectsAndGivesPagesBackAfterCompaction) {
  zram_options o;
  o.disksize = 4096 * page_size;
  auto dev = zram_device::create(o);
  ASSERT_TRUE(dev.ok());
  alignas(8) uint8_t page[page_size], got[page_size];
  for (uint64_t i = 0; i < 4096; ++i) {
    zram_test::make_page(page, zram_test::page_kind::compressible, i);
    ASSERT_TRUE((*dev)->write_page(i, page).ok());
  }
  for (uint64_t i = 0; i < 4096; ++i)
    if (i % 3) {
      ASSERT_TRUE((*dev)->discard(i).ok());
    }
  EXPECT_GT((*dev)->compact(), 0u);
  for (uint64_t i = 0; i < 4096; i += 3) {
    zram_test::make_page(page, zram_test::page_kind::compressible, i);
    ASSERT_TRUE((*dev)->read_page(i, got).ok());
    ASSERT_EQ(std::memcmp(page, got, page_size), 0);
  }
  zram_test::expect_stats_match_table(**dev);
}

}  // namespace
}  // namespace uswap
