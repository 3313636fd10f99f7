// zram post-processing on one thread: idle marking by access time, writeback to a backing file
// and transparent read-back, recompression kept only when smaller, compaction; each checked
// against what reads back and against the statistics.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zram_test_util.h"

namespace uswap {
namespace {

using zram_test::make_dev;
using zram_test::make_page;
using zram_test::page_kind;

void expect_page(zram_device& dev, uint64_t index, page_kind k, uint64_t seed) {
  alignas(8) uint8_t want[page_size], got[page_size];
  make_page(want, k, seed);
  const status st = dev.read_page(index, got);
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(std::memcmp(want, got, page_size), 0) << "page " << index;
}

TEST(ZramPp, IdleMarkingFollowsAccessTimeAndSkipsSameFilledSlots) {
  zram_options o;
  o.disksize = 16 * page_size;
  o.clock = zram_test::fake_clock;
  auto dev = make_dev(o);
  alignas(8) uint8_t page[page_size];
  zram_test::fake_now = 1000;
  for (uint64_t i = 0; i < 8; ++i) {
    make_page(page, i == 7 ? page_kind::same : page_kind::compressible, i);
    ASSERT_TRUE(dev->write_page(i, page).ok());
  }
  EXPECT_EQ(dev->slot_info(0)->ac_time, 1000u);
  zram_test::fake_now = 1100;
  for (uint64_t i = 0; i < 3; ++i) ASSERT_TRUE(dev->read_page(i, page).ok());  // touched at 1100
  EXPECT_EQ(dev->slot_info(0)->ac_time, 1100u);
  zram_test::fake_now = 1130;
  // Not accessed in the last 60 s: slots 3..6 (written at 1000); 0..2 were read 30 s ago.
  EXPECT_EQ(dev->mark_idle(60), 4u);
  for (uint64_t i = 0; i < 8; ++i) EXPECT_EQ(dev->slot_info(i)->idle, i >= 3 && i <= 6) << i;
  // An access clears the mark; "all" marks every stored, non-same slot.
  ASSERT_TRUE(dev->read_page(4, page).ok());
  EXPECT_FALSE(dev->slot_info(4)->idle);
  EXPECT_EQ(dev->mark_idle(), 7u);
  EXPECT_FALSE(dev->slot_info(7)->idle);   // same-filled
  EXPECT_FALSE(dev->slot_info(12)->idle);  // empty
  // A rewrite clears it too.
  make_page(page, page_kind::compressible, 50);
  ASSERT_TRUE(dev->write_page(5, page).ok());
  EXPECT_FALSE(dev->slot_info(5)->idle);
}

struct wb_fixture {
  zram_test::temp_file file;
  std::unique_ptr<zram_device> dev;
  wb_fixture(uint64_t pages, uint64_t backing_pages, zram_lock_mode mode) {
    zram_options o;
    o.disksize = pages * page_size;
    o.backing_dev = file.path();
    o.backing_dev_size = backing_pages * page_size;
    o.lock_mode = mode;
    dev = make_dev(o);
  }
};

TEST(ZramPp, WritebackOfIdleSlotsReadsBackTransparentlyInEveryMode) {
  for (zram_lock_mode mode : all_zram_lock_modes) {
    wb_fixture f(32, 64, mode);
    zram_device& dev = *f.dev;
    alignas(8) uint8_t page[page_size];
    for (uint64_t i = 0; i < 32; ++i) {
      make_page(page, zram_test::kind_of(i), i);
      ASSERT_TRUE(dev.write_page(i, page).ok());
    }
    const zram_mm_stat before = dev.mm_stat();
    // Nothing is idle yet.
    EXPECT_EQ(dev.writeback({}).value(), 0u);
    dev.mark_idle();
    ASSERT_TRUE(dev.read_page(0, page).ok());  // accessed again: no longer idle
    auto n = dev.writeback({});
    ASSERT_TRUE(n.ok()) << n.error().to_string();
    const zram_test::table_census c = zram_test::census(dev);
    EXPECT_EQ(*n, c.written_back);
    EXPECT_GT(*n, 16u);
    EXPECT_EQ(c.huge, 1u);  // only slot 0 (incompressible, re-read) stayed
    EXPECT_EQ(c.compressed, 0u);
    const zram_bd_stat bd = dev.bd_stat();
    EXPECT_EQ(bd.bd_count, *n);
    EXPECT_EQ(bd.bd_writes, *n);
    EXPECT_EQ(bd.bd_reads, 0u);
    const zram_mm_stat after = dev.mm_stat();
    EXPECT_EQ(after.orig_data_size, before.orig_data_size);  // still stored, elsewhere
    EXPECT_LT(after.compr_data_size, before.compr_data_size);
    EXPECT_EQ(after.huge_pages, 1u);
    zram_test::expect_stats_match_table(dev);
    for (uint64_t i = 0; i < 32; ++i) expect_page(dev, i, zram_test::kind_of(i), i);
    EXPECT_EQ(dev.bd_stat().bd_reads, *n);
    // Written-back slots are freed, rewritten and partially rewritten like any other.
    ASSERT_TRUE(dev.discard(3).ok());
    make_page(page, page_kind::compressible, 1000);
    ASSERT_TRUE(dev.write_page(4, page).ok());
    ASSERT_TRUE(dev.write(5 * page_size + 11, "partial", 7).ok());
    make_page(page, zram_test::kind_of(5), 5);
    std::memcpy(page + 11, "partial", 7);
    alignas(8) uint8_t got[page_size];
    ASSERT_TRUE(dev.read_page(5, got).ok());
    EXPECT_EQ(std::memcmp(page, got, page_size), 0);
    EXPECT_EQ(dev.bd_stat().bd_count, *n - 3);
    expect_page(dev, 4, page_kind::compressible, 1000);
    zram_test::expect_stats_match_table(dev);
    EXPECT_EQ(dev.bd_stat_text().size(), 27u);
  }
}

// A field of /proc/self/status in KiB ("RssAnon:", "VmPTE:").
uint64_t status_kib(const char* field) {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  uint64_t v = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, field, std::strlen(field)) == 0)
      v = std::strtoull(line + std::strlen(field), nullptr, 10);
  std::fclose(f);
  return v;
}

// A swap area the size of an arena (`uswap run` sizes it to twice the RAM) stores a few pages at
// its start; its table is 256 MiB of zero-filled-on-demand memory. Marking idle, writing back,
// listing the backing blocks and tearing down walk it only up to the highest slot written:
// nothing past it is written (a slot lock taken on every free slot made the whole table
// resident) or read (the read maps zero pages, and their page tables).
TEST(ZramPp, ASparseDeviceIsWalkedOnlyUpToItsHighestWrittenSlot) {
  constexpr uint64_t pages = uint64_t{16} << 20;  // 64 GiB
  for (zram_lock_mode mode : all_zram_lock_modes) {
    SCOPED_TRACE(to_string(mode));
    const uint64_t anon0 = status_kib("RssAnon:"), pte0 = status_kib("VmPTE:");
    {
      wb_fixture f(pages, 256, mode);
      zram_device& dev = *f.dev;
      EXPECT_EQ(dev.slots_end(), 0u);
      alignas(8) uint8_t page[page_size];
      for (uint64_t i = 1; i <= 64; ++i) {
        make_page(page, zram_test::kind_of(i), i);
        ASSERT_TRUE(dev.write_page(i * 3, page).ok());
      }
      EXPECT_EQ(dev.slots_end(), 64u * 3 + 1);
      ASSERT_TRUE(dev.discard(64 * 3).ok());  // freeing never lowers it
      ASSERT_TRUE(dev.read_page(6, page).ok());
      EXPECT_EQ(dev.slots_end(), 64u * 3 + 1);
      EXPECT_GT(dev.mark_idle(), 32u);
      auto n = dev.writeback({});
      ASSERT_TRUE(n.ok()) << n.error().to_string();
      EXPECT_GT(*n, 32u);
      EXPECT_EQ(dev.backing_blocks().size(), *n);
      for (uint64_t i = 1; i < 64; ++i) expect_page(dev, i * 3, zram_test::kind_of(i), i);
      // The device's tables, resident, are a few pages (and the test's own memory); the whole
      // table would be 256 MiB resident, or 512 KiB of page tables for its zero pages.
      EXPECT_LT(status_kib("RssAnon:"), anon0 + 8 * 1024);
      EXPECT_LT(status_kib("VmPTE:"), pte0 + 256);
    }
    EXPECT_LT(status_kib("VmPTE:"), pte0 + 256);  // teardown too
  }
}

TEST(ZramPp, WritebackTypesSelectHugeAndIncompressibleSlotsAndRanges) {
  wb_fixture f(32, 64, zram_lock_mode::slot_bitlock);
  zram_device& dev = *f.dev;
  alignas(8) uint8_t page[page_size];
  for (uint64_t i = 0; i < 32; ++i) {
    make_page(page, i % 2 ? page_kind::incompressible : page_kind::compressible, i);
    ASSERT_TRUE(dev.write_page(i, page).ok());
  }
  zram_writeback_params p;
  p.type = zram_writeback_type::huge;
  p.first_page = 0;
  p.nr_pages = 10;
  EXPECT_EQ(dev.writeback(p).value(), 5u);  // the odd slots of 0..9
  for (uint64_t i = 0; i < 10; ++i)
    EXPECT_EQ(dev.slot_info(i)->kind == zram_slot_kind::written_back, i % 2 == 1) << i;
  p.type = zram_writeback_type::huge_idle;
  p.nr_pages = 0;
  EXPECT_EQ(dev.writeback(p).value(), 0u);  // huge, but nothing idle
  dev.mark_idle();
  EXPECT_EQ(dev.writeback(p).value(), 11u);  // the odd slots of 10..31
  p.type = zram_writeback_type::incompressible;
  EXPECT_EQ(dev.writeback(p).value(), 0u);  // no slot marked incompressible by recompression
  p.first_page = 32;
  EXPECT_EQ(dev.writeback(p).error().code(), EINVAL);
  for (uint64_t i = 0; i < 32; ++i)
    expect_page(dev, i, i % 2 ? page_kind::incompressible : page_kind::compressible, i);
  zram_test::expect_stats_match_table(dev);
}

TEST(ZramPp, WritebackStopsWithENOSPCWhenTheBackingFileIsFull) {
  wb_fixture f(32, 8, zram_lock_mode::slot_bitlock);
  zram_device& dev = *f.dev;
  alignas(8) uint8_t page[page_size];
  for (uint64_t i = 0; i < 32; ++i) {
    make_page(page, page_kind::compressible, i);
    ASSERT_TRUE(dev.write_page(i, page).ok());
  }
  dev.mark_idle();
  auto n = dev.writeback({});
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.error().code(), ENOSPC);
  EXPECT_EQ(dev.bd_stat().bd_count, 8u);
  // Slots not moved stay idle for a later writeback.
  for (uint64_t i = 0; i < 32; ++i) {
    auto info = dev.slot_info(i);
    if (info->kind != zram_slot_kind::written_back) {
      EXPECT_TRUE(info->idle) << i;
    }
  }
  for (uint64_t i = 0; i < 32; ++i) expect_page(dev, i, page_kind::compressible, i);
  zram_test::expect_stats_match_table(dev);
  // Freeing written-back slots makes room again.
  ASSERT_TRUE(dev.discard(0, 32).ok());
  EXPECT_EQ(dev.bd_stat().bd_count, 0u);
}

// A descriptor the process holds, named /proc/self/fd/N, is written back into as it is: its file
// may be one the process could not open again (mode 000 here, as a root-owned 0600 file is to
// a process that dropped root). One open for reading only is refused, named.
TEST(ZramPp, ABackingDescriptorNamedInProcSelfFdIsUsedAsItIs) {
  zram_test::temp_file file;
  const int fd = ::open(file.path().c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, 16 * page_size), 0);
  ASSERT_EQ(::chmod(file.path().c_str(), 0), 0);
  zram_options o;
  o.disksize = 8 * page_size;
  o.backing_dev = "/proc/self/fd/" + std::to_string(fd);
  {
    auto dev = make_dev(o);
    alignas(8) uint8_t page[page_size];
    for (uint64_t i = 0; i < 8; ++i) {
      make_page(page, page_kind::compressible, i + 50);
      ASSERT_TRUE(dev->write_page(i, page).ok());
    }
    dev->mark_idle();
    ASSERT_EQ(dev->writeback({}).value(), 8u);
    EXPECT_EQ(dev->bd_stat().bd_count, 8u);
    for (uint64_t i = 0; i < 8; ++i) expect_page(*dev, i, page_kind::compressible, i + 50);
  }
  EXPECT_GE(::fcntl(fd, F_GETFD), 0) << "the device closed its copy, not the process's descriptor";
  ::close(fd);

  const int ro = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(ro, 0);
  o.backing_dev = "/proc/self/fd/" + std::to_string(ro);
  auto refused = zram_device::create(o);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code(), EBADF);
  EXPECT_NE(refused.error().message().find("reading and writing"), std::string_view::npos);
  ::close(ro);
}

TEST(ZramPp, WritebackWithoutABackingFileIsEINVAL) {
  zram_options o;
  o.disksize = 4 * page_size;
  auto dev = make_dev(o);
  auto n = dev->writeback({});
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.error().code(), EINVAL);
  EXPECT_NE(n.error().message().find("backing"), std::string_view::npos);
}

TEST(ZramPp, ACorruptedBackingBlockReadsAsEIO) {
  wb_fixture f(4, 8, zram_lock_mode::slot_bitlock);
  zram_device& dev = *f.dev;
  alignas(8) uint8_t page[page_size];
  make_page(page, page_kind::compressible, 1);
  ASSERT_TRUE(dev.write_page(0, page).ok());
  dev.mark_idle();
  ASSERT_EQ(dev.writeback({}).value(), 1u);
  const uint64_t blk = dev.slot_info(0)->handle;
  const int fd = ::open(f.file.path().c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  uint8_t b = 0;
  ASSERT_EQ(::pread(fd, &b, 1, static_cast<off_t>(blk * page_size + 77)), 1);
  b ^= 1;
  ASSERT_EQ(::pwrite(fd, &b, 1, static_cast<off_t>(blk * page_size + 77)), 1);
  ::close(fd);
  EXPECT_EQ(dev.read_page(0, page).code(), EIO);
}

// Pages of random 4-bit symbols: no repeated strings for lz4 to find (stored huge), but an
// entropy coder (zstd's) halves them.
void nibble_page(uint8_t* page, uint64_t seed) {
  fill_random(page, page_size, seed);
  for (size_t i = 0; i < page_size; ++i) page[i] &= 0x0f;
}

// read_pages over a run of every kind of slot (written back, compressed, huge, same-filled,
// never written), one of the written-back blocks corrupted: each page reads as read_page reads
// it, the corrupted one alone EIO and zeros, in every lock mode; indices out of order are read
// one by one, with the same results.
TEST(ZramPp, ARunReadTogetherReadsAsEachPageAlone) {
  for (zram_lock_mode mode : all_zram_lock_modes) {
    SCOPED_TRACE(to_string(mode));
    wb_fixture f(64, 64, mode);
    zram_device& dev = *f.dev;
    alignas(8) uint8_t page[page_size];
    for (uint64_t i = 0; i < 24; ++i) {
      make_page(page, zram_test::kind_of(i), i);
      ASSERT_TRUE(dev.write_page(i, page).ok());
    }
    dev.mark_idle();
    ASSERT_GT(dev.writeback({.type = zram_writeback_type::idle, .first_page = 0, .nr_pages = 12,
                             .max_pages = 0}).value(), 6u);
    uint64_t bad = 0, written_back = 0;  // bad: an even one, which the run below reads
    while (bad < 12 && dev.slot_info(bad)->kind != zram_slot_kind::written_back) bad += 2;
    ASSERT_LT(bad, 12u);
    for (uint64_t i = 0; i < 12; i += 2)
      written_back += dev.slot_info(i)->kind == zram_slot_kind::written_back;
    ASSERT_GE(written_back, 3u);  // the corrupted one and others beside it
    const uint64_t blk = dev.slot_info(bad)->handle;
    const int fd = ::open(f.file.path().c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    uint8_t b = 0;
    ASSERT_EQ(::pread(fd, &b, 1, static_cast<off_t>(blk * page_size + 99)), 1);
    b ^= 0x10;
    ASSERT_EQ(::pwrite(fd, &b, 1, static_cast<off_t>(blk * page_size + 99)), 1);
    ::close(fd);
    for (bool sorted : {true, false}) {
      std::vector<uint64_t> index;  // 0, 2, ... 30: 24 and past never written
      for (uint64_t j = 0; j < 16; ++j) index.push_back(sorted ? 2 * j : 30 - 2 * j);
      const zram_test::run_read r = zram_test::read_run(dev, index);
      for (uint64_t j = 0; j < 16; ++j) {
        const uint64_t i = index[j];
        alignas(8) uint8_t alone[page_size];
        const status st = dev.read_page(i, alone);
        EXPECT_EQ(r.result[j].code(), st.code()) << "page " << i;
        EXPECT_EQ(std::memcmp(alone, r.pages[j].bytes, page_size), 0) << "page " << i;
        if (i == bad) EXPECT_EQ(r.result[j].code(), EIO);
        else EXPECT_TRUE(r.result[j].ok()) << "page " << i << ": " << r.result[j].to_string();
      }
    }
    zram_test::expect_stats_match_table(dev);
  }
}

TEST(ZramPp, RecompressionKeepsASmallerObjectAndMarksHopelessSlots) {
  zram_options o;
  o.disksize = 48 * page_size;
  o.comp_algorithm = "lz4";
  o.recomp_algorithms = {"zstd"};
  auto dev = make_dev(o);
  alignas(8) uint8_t page[page_size];
  for (uint64_t i = 0; i < 16; ++i) {
    nibble_page(page, i);
    ASSERT_TRUE(dev->write_page(i, page).ok());
    make_page(page, page_kind::incompressible, 100 + i);
    ASSERT_TRUE(dev->write_page(16 + i, page).ok());
    make_page(page, page_kind::same, i);
    ASSERT_TRUE(dev->write_page(32 + i, page).ok());
  }
  for (uint64_t i = 0; i < 16; ++i) ASSERT_EQ(dev->slot_info(i)->kind, zram_slot_kind::huge);
  const zram_mm_stat before = dev->mm_stat();
  zram_recompress_params p;
  p.type = zram_recompress_type::huge;
  auto n = dev->recompress(p);
  ASSERT_TRUE(n.ok()) << n.error().to_string();
  EXPECT_EQ(*n, 16u);
  for (uint64_t i = 0; i < 16; ++i) {
    auto info = dev->slot_info(i);
    EXPECT_EQ(info->kind, zram_slot_kind::compressed);
    EXPECT_EQ(info->comp_priority, 1u);
    EXPECT_LT(info->size, page_size * 3 / 4);
    nibble_page(page, i);
    alignas(8) uint8_t got[page_size];
    ASSERT_TRUE(dev->read_page(i, got).ok());
    EXPECT_EQ(std::memcmp(page, got, page_size), 0);
  }
  // Random pages: zstd cannot shrink them either, so they are marked and never tried again.
  for (uint64_t i = 16; i < 32; ++i) {
    EXPECT_EQ(dev->slot_info(i)->kind, zram_slot_kind::huge);
    EXPECT_TRUE(dev->slot_info(i)->incompressible) << i;
    expect_page(*dev, i, page_kind::incompressible, 100 + i - 16);
  }
  EXPECT_EQ(dev->recompress(p).value(), 0u);
  const zram_mm_stat after = dev->mm_stat();
  EXPECT_LT(after.compr_data_size, before.compr_data_size);
  EXPECT_EQ(after.huge_pages, 16u);
  EXPECT_EQ(after.huge_pages_since, 32u);
  zram_test::expect_stats_match_table(*dev);
  // Nothing is left to try: recompressed slots are at the highest priority, the rest marked.
  EXPECT_EQ(dev->recompress({}).value(), 0u);
}

TEST(ZramPp, RecompressionOfCompressedPagesAndItsParameters) {
  zram_options o;
  o.disksize = 64 * page_size;
  o.comp_algorithm = "lz4";
  o.recomp_algorithms = {"zstd", "lz4hc"};
  auto dev = make_dev(o);
  alignas(8) uint8_t page[page_size];
  for (uint64_t i = 0; i < 64; ++i) {
    // Text-like pages: lz4 leaves room that zstd takes.
    for (size_t b = 0; b < page_size; ++b)
      page[b] = static_cast<uint8_t>('a' + mix64(i * 8192 + b / 3) % 16);
    ASSERT_TRUE(dev->write_page(i, page).ok());
  }
  EXPECT_EQ(dev->recompress({.priority = 3}).error().code(), EINVAL);
  EXPECT_EQ(dev->recompress({.threshold = 4000}).error().code(), EINVAL);
  const uint64_t compr_before = dev->mm_stat().compr_data_size;
  zram_recompress_params p;
  p.max_pages = 10;
  p.priority = 1;
  EXPECT_EQ(dev->recompress(p).value(), 10u);
  uint64_t at1 = 0;
  for (uint64_t i = 0; i < 64; ++i) at1 += dev->slot_info(i)->comp_priority == 1;
  EXPECT_EQ(at1, 10u);
  // Idle only: nothing is idle.
  p = {};
  p.type = zram_recompress_type::idle;
  EXPECT_EQ(dev->recompress(p).value(), 0u);
  dev->mark_idle();
  EXPECT_EQ(dev->recompress(p).value(), 54u);
  EXPECT_LT(dev->mm_stat().compr_data_size, compr_before);
  for (uint64_t i = 0; i < 64; ++i) {
    EXPECT_FALSE(dev->slot_info(i)->idle);  // recompression counts as an access
    for (size_t b = 0; b < page_size; ++b)
      page[b] = static_cast<uint8_t>('a' + mix64(i * 8192 + b / 3) % 16);
    alignas(8) uint8_t got[page_size];
    ASSERT_TRUE(dev->read_page(i, got).ok());
    ASSERT_EQ(std::memcmp(page, got, page_size), 0) << i;
  }
  zram_test::expect_stats_match_table(*dev);
  zram_options none;
  none.disksize = page_size;
  EXPECT_EQ(make_dev(none)->recompress({}).error().code(), EINVAL);
}

TEST(ZramPp, CompactionFreesPagesAfterScatteredDiscardsAndKeepsData) {
  zram_options o;
  o.disksize = 2048 * page_size;
  auto dev = make_dev(o);
  alignas(8) uint8_t page[page_size];
  for (uint64_t i = 0; i < 2048; ++i) {
    make_page(page, page_kind::compressible, i);
    ASSERT_TRUE(dev->write_page(i, page).ok());
  }
  for (uint64_t i = 0; i < 2048; ++i)
    if (i % 4) {
      ASSERT_TRUE(dev->discard(i).ok());
    }
  const uint64_t used = dev->mm_stat().mem_used_total;
  const uint64_t freed = dev->compact();
  EXPECT_GT(freed, 0u);
  EXPECT_EQ(dev->mm_stat().pages_compacted, freed);
  EXPECT_EQ(dev->mm_stat().mem_used_total, used - freed * page_size);
  for (uint64_t i = 0; i < 2048; i += 4) expect_page(*dev, i, page_kind::compressible, i);
  zram_test::expect_stats_match_table(*dev);
}

}  // namespace
}  // namespace uswap
