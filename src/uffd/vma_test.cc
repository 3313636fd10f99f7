// The arena as an address space (vma.cc): mappings of every protection, MAP_FIXED replacement,
// mprotect commits of PROT_NONE reservations, mremap moves with swapped-out pages, foreign
// ranges, and the invariants after each. Every test pages (limit well below what it writes), so
// the operations meet resident, swapped and never-touched pages alike.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "uffd_test_util.h"

namespace uswap {
namespace {

using namespace uffd_test;

class VmaTest : public ::testing::TestWithParam<fault_mode> {
 protected:
  void SetUp() override {
    pg = make_pager(options(GetParam(), 1 * MiB, 64 * MiB));
    ASSERT_TRUE(pg);
  }
  void TearDown() override {
    if (pg) {
      EXPECT_TRUE(pg->check_invariants().ok()) << pg->check_invariants().to_string();
    }
  }
  uint8_t* map(uint64_t len, int prot = PROT_READ | PROT_WRITE) {
    auto m = pg->map(len, page_size, prot);
    EXPECT_TRUE(m.ok()) << m.error().to_string();
    return m.ok() ? static_cast<uint8_t*>(*m) : nullptr;
  }
  std::shared_ptr<pager> pg;
};

// A write to a PROT_NONE or PROT_READ page is a SIGSEGV, as without the pager.
sigjmp_buf segv_jump;
void on_segv(int) { siglongjmp(segv_jump, 1); }
bool write_faults(volatile uint8_t* p) {
  struct sigaction sa {}, old{};
  sa.sa_handler = on_segv;
  sigaction(SIGSEGV, &sa, &old);
  bool faulted = false;
  if (sigsetjmp(segv_jump, 1) == 0)
    *p = 1;
  else
    faulted = true;
  sigaction(SIGSEGV, &old, nullptr);
  return faulted;
}

TEST_P(VmaTest, ReservationCommittedByProtectPagesLikeAnyMapping) {
  // The JVM's and V8's way: reserve PROT_NONE, commit pieces with mprotect.
  uint8_t* r = map(16 * MiB, PROT_NONE);
  ASSERT_NE(r, nullptr);
  EXPECT_TRUE(write_faults(r));
  ASSERT_TRUE(pg->protect(r, 8 * MiB, PROT_READ | PROT_WRITE).ok());
  for (uint64_t i = 0; i < 2048; ++i) fill_page(r + i * page_size, i, 0);  // 8 MiB over a 1 MiB limit
  for (uint64_t i = 0; i < 2048; ++i) ASSERT_TRUE(page_matches(r + i * page_size, i, 0)) << i;
  EXPECT_TRUE(write_faults(r + 8 * MiB));  // still reserved only
  const pager_stats s = pg->stats();
  EXPECT_GT(s.swap_outs, 1500u) << describe(s);
  EXPECT_LE(s.peak_resident_pages, s.limit_pages) << describe(s);
  EXPECT_EQ(pg->protect(r + 60 * MiB, page_size, PROT_READ).code(), ENOMEM)
      << "protect of unmapped arena space";
}

TEST_P(VmaTest, ReadOnlyPagesKeepTheirContentsThroughEviction) {
  uint8_t* a = map(4 * MiB);
  for (uint64_t i = 0; i < 1024; ++i) fill_page(a + i * page_size, i, 0);
  ASSERT_TRUE(pg->protect(a, 4 * MiB, PROT_READ).ok());
  EXPECT_TRUE(write_faults(a));
  // Reading all of it twice evicts and refaults read-only pages.
  for (int pass = 0; pass < 2; ++pass)
    for (uint64_t i = 0; i < 1024; ++i) ASSERT_TRUE(page_matches(a + i * page_size, i, 0)) << i;
  EXPECT_GT(pg->stats().swap_ins, 1000u);
}

TEST_P(VmaTest, PagesWithoutReadPermissionAreUnevictableUntilReadableAgain) {
  uint8_t* a = map(512 * 1024);  // 128 pages
  for (uint64_t i = 0; i < 128; ++i) fill_page(a + i * page_size, i, 0);
  const uint64_t resident_before = pg->stats().resident_pages;
  ASSERT_GT(resident_before, 0u);
  ASSERT_TRUE(pg->protect(a, 512 * 1024, PROT_NONE).ok());
  EXPECT_EQ(pg->stats().unevictable_pages, resident_before);
  // Pressure elsewhere cannot evict them (eviction could not even read them).
  uint8_t* b = map(4 * MiB);
  for (uint64_t i = 0; i < 1024; ++i) fill_page(b + i * page_size, i + 1000, 0);
  EXPECT_EQ(pg->stats().unevictable_pages, resident_before);
  ASSERT_TRUE(pg->check_invariants().ok()) << pg->check_invariants().to_string();
  ASSERT_TRUE(pg->protect(a, 512 * 1024, PROT_READ | PROT_WRITE).ok());
  EXPECT_EQ(pg->stats().unevictable_pages, 0u);
  for (uint64_t i = 0; i < 1024; ++i) fill_page(b + i * page_size, i + 2000, 0);  // now it may go
  for (uint64_t i = 0; i < 128; ++i) ASSERT_TRUE(page_matches(a + i * page_size, i, 0)) << i;
}

TEST_P(VmaTest, MapFixedReplacesPagesAndSlotsWithZeros) {
  uint8_t* a = map(8 * MiB);
  for (uint64_t i = 0; i < 2048; ++i) fill_page(a + i * page_size, i, 0);
  const uint64_t slots = pg->stats().swap_pages_used;
  ASSERT_GT(slots, 1000u);
  // Replace the middle 4 MiB (resident and swapped pages alike) with a fresh read-only mapping.
  auto f = pg->map_fixed(a + 2 * MiB, 4 * MiB, PROT_READ);
  ASSERT_TRUE(f.ok()) << f.error().to_string();
  EXPECT_EQ(*f, a + 2 * MiB);
  EXPECT_LT(pg->stats().swap_pages_used, slots - 900);
  for (uint64_t i = 512; i < 1536; ++i) ASSERT_EQ(a[i * page_size + 5], 0) << i;
  EXPECT_TRUE(write_faults(a + 3 * MiB));
  for (uint64_t i = 0; i < 512; ++i) ASSERT_TRUE(page_matches(a + i * page_size, i, 0)) << i;
  for (uint64_t i = 1536; i < 2048; ++i) ASSERT_TRUE(page_matches(a + i * page_size, i, 0)) << i;
  EXPECT_EQ(pg->map_fixed(a, page_size, PROT_READ, true).error().code(), EEXIST);
  // Into free space, noreplace is fine.
  uint8_t* end = a + 8 * MiB;
  auto g = pg->map_fixed(end + 16 * MiB, MiB, PROT_READ | PROT_WRITE, true);
  ASSERT_TRUE(g.ok()) << g.error().to_string();
  EXPECT_EQ(pg->map_fixed(a + 1, page_size, PROT_READ).error().code(), EINVAL);
}

TEST_P(VmaTest, HintIsHonouredWhenFree) {
  uint8_t* a = map(MiB);
  uint8_t* want = a + 10 * MiB;
  auto m = pg->map(MiB, page_size, PROT_READ | PROT_WRITE, want);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(*m, want);
  auto n = pg->map(MiB, page_size, PROT_READ | PROT_WRITE, want);  // taken now: elsewhere
  ASSERT_TRUE(n.ok());
  EXPECT_NE(*n, want);
}

TEST_P(VmaTest, UnmapOfPartsAndHolesIsLikeMunmap) {
  uint8_t* a = map(4 * MiB);
  for (uint64_t i = 0; i < 1024; ++i) fill_page(a + i * page_size, i, 0);
  ASSERT_TRUE(pg->unmap(a + MiB, MiB).ok());
  ASSERT_TRUE(pg->unmap(a + MiB, 2 * MiB).ok()) << "unmapping a range with a hole";
  EXPECT_TRUE(write_faults(a + MiB + 5));
  for (uint64_t i = 0; i < 256; ++i) ASSERT_TRUE(page_matches(a + i * page_size, i, 0)) << i;
  for (uint64_t i = 768; i < 1024; ++i) ASSERT_TRUE(page_matches(a + i * page_size, i, 0)) << i;
  ASSERT_TRUE(pg->unmap(a, 4 * MiB).ok());
  const pager_stats s = pg->stats();
  EXPECT_EQ(s.mapped_bytes, 0u);
  EXPECT_EQ(s.swap_pages_used, 0u);
  EXPECT_EQ(s.resident_pages, 0u);
}

TEST_P(VmaTest, RemapMovesSwappedAndResidentPages) {
  uint8_t* a = map(4 * MiB);
  for (uint64_t i = 0; i < 1024; ++i) fill_page(a + i * page_size, i, 0);
  uint8_t* blocker = map(page_size);  // right after a: it cannot grow in place
  ASSERT_EQ(blocker, a + 4 * MiB);
  EXPECT_EQ(pg->remap(a, 4 * MiB, 8 * MiB, false).error().code(), ENOMEM);
  const uint64_t slots = pg->stats().swap_pages_used;
  auto m = pg->remap(a, 4 * MiB, 8 * MiB, true);
  ASSERT_TRUE(m.ok()) << m.error().to_string();
  auto* b = static_cast<uint8_t*>(*m);
  EXPECT_NE(b, a);
  EXPECT_TRUE(write_faults(a)) << "the old range is gone";
  // Swapped pages moved with their slots: nothing was decompressed for the move.
  EXPECT_EQ(pg->stats().swap_pages_used, slots);
  for (uint64_t i = 0; i < 1024; ++i) ASSERT_TRUE(page_matches(b + i * page_size, i, 0)) << i;
  for (uint64_t i = 1024; i < 2048; ++i) ASSERT_EQ(b[i * page_size + 9], 0);
  // To a fixed place, shrinking at the same time.
  uint8_t* target = b + 24 * MiB;
  auto t = pg->remap(b, 8 * MiB, 2 * MiB, true, target);
  ASSERT_TRUE(t.ok()) << t.error().to_string();
  EXPECT_EQ(*t, target);
  for (uint64_t i = 0; i < 512; ++i) ASSERT_TRUE(page_matches(target + i * page_size, i, 0)) << i;
  EXPECT_EQ(pg->remap(target + MiB, 2 * MiB, 3 * MiB, true).error().code(), EFAULT)
      << "a range that runs past its mapping";
  ASSERT_TRUE(pg->unmap(target, 2 * MiB).ok());
  ASSERT_TRUE(pg->unmap(blocker, page_size).ok());
  EXPECT_EQ(pg->stats().swap_pages_used, 0u);
}

TEST_P(VmaTest, ForeignRangeHoldsAFileUntilUnmapped) {
  // The JVM maps its class-data archive over a reservation it got from mmap: a file mapping
  // inside the arena, which the pager must leave alone and take back on munmap.
  uint8_t* r = map(4 * MiB, PROT_NONE);
  char path[] = "/tmp/uswap_vma_foreignXXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::unlink(path);
  std::vector<uint8_t> contents(MiB, 0x5a);
  ASSERT_EQ(::write(fd, contents.data(), contents.size()), static_cast<ssize_t>(contents.size()));
  ASSERT_TRUE(pg->adopt_foreign(r + MiB, MiB).ok());
  void* f = ::mmap(r + MiB, MiB, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0);
  ASSERT_EQ(f, r + MiB);
  ::close(fd);
  EXPECT_TRUE(pg->is_foreign(r + MiB + 100));
  EXPECT_FALSE(pg->is_foreign(r));
  EXPECT_EQ(pg->stats().foreign_bytes, MiB);
  EXPECT_EQ(r[MiB + 77], 0x5a);
  ASSERT_TRUE(pg->check_invariants().ok()) << pg->check_invariants().to_string();
  // Pressure elsewhere works around it.
  uint8_t* b = map(4 * MiB);
  for (uint64_t i = 0; i < 1024; ++i) fill_page(b + i * page_size, i, 0);
  for (uint64_t i = 0; i < 1024; ++i) ASSERT_TRUE(page_matches(b + i * page_size, i, 0)) << i;
  // munmap over the whole reservation: the file mapping goes, the range is the pager's again.
  ASSERT_TRUE(pg->unmap(r, 4 * MiB).ok());
  EXPECT_EQ(pg->stats().foreign_bytes, 0u);
  auto again = pg->map_fixed(r + MiB, MiB, PROT_READ | PROT_WRITE);
  ASSERT_TRUE(again.ok()) << again.error().to_string();
  // Registered again: it pages.
  for (uint64_t i = 0; i < 256; ++i) fill_page(r + MiB + i * page_size, i + 5000, 0);
  for (uint64_t i = 0; i < 1024; ++i) fill_page(b + i * page_size, i, 1);
  for (uint64_t i = 0; i < 256; ++i)
    ASSERT_TRUE(page_matches(r + MiB + i * page_size, i + 5000, 0)) << i;
}

TEST_P(VmaTest, DiscardOfARangeWithHolesDoesTheMappedPartsAndSaysENOMEM) {
  uint8_t* a = map(2 * MiB);
  for (uint64_t i = 0; i < 512; ++i) fill_page(a + i * page_size, i, 0);
  ASSERT_TRUE(pg->unmap(a + MiB, page_size).ok());
  EXPECT_EQ(pg->discard(a, 2 * MiB).code(), ENOMEM);
  for (uint64_t i = 0; i < 512; ++i)
    if (i != 256) {
      ASSERT_EQ(a[i * page_size + 100], 0) << i;
    }
  EXPECT_EQ(pg->stats().swap_pages_used, 0u);
}

INSTANTIATE_TEST_SUITE_P(Modes, VmaTest,
                         ::testing::Values(fault_mode::sigbus, fault_mode::handler_thread),
                         mode_name());

TEST(ArenaBase, FixedBaseIsUsedOrRefused) {
  pager_options o;
  o.limit = 1 * MiB;
  o.max_size = 16 * MiB;
  o.arena_base = uintptr_t{0x3f0000000000};
  auto p = pager::create(o);
  ASSERT_TRUE(p.ok()) << p.error().to_string();
  EXPECT_EQ((*p)->arena_start(), o.arena_base);
  auto q = pager::create(o);  // the range is taken by the first
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.error().code(), EEXIST);
  o.arena_base += 1;
  EXPECT_EQ(pager::create(o).error().code(), EINVAL);
}

}  // namespace
}  // namespace uswap
