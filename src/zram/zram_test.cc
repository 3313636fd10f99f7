// zram on one thread: every page kind written and read back in every lock mode, partial-page
// I/O at odd offsets against a byte model, bad requests refused with nothing changed, mem_limit,
// corrupted objects, the statistics files, and slot_free_notify.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <regex>
#include <sstream>

#include "uswap/sync/lockstat.h"
#include "zram_test_util.h"

namespace uswap {
namespace {

using zram_test::make_dev;
using zram_test::make_page;
using zram_test::page_kind;

zram_options opts(zram_lock_mode mode, uint64_t size = 4 << 20) {
  zram_options o;
  o.disksize = size;
  o.lock_mode = mode;
  return o;
}

class ZramModesTest : public ::testing::TestWithParam<zram_lock_mode> {};

TEST(Zram, OptionsAreValidatedWithTheOptionNamed) {
  zram_options o;
  auto d = zram_device::create(o);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().code(), EINVAL);
  EXPECT_NE(d.error().message().find("disksize"), std::string_view::npos);

  o.disksize = 1 << 20;
  o.comp_algorithm = "lzma";
  d = zram_device::create(o);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().code(), EINVAL);
  EXPECT_NE(d.error().message().find("comp_algorithm"), std::string_view::npos);

  o.comp_algorithm = "lz4";
  o.recomp_algorithms = {"zstd", "lz4hc", "lzo", "zstd"};
  d = zram_device::create(o);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().code(), EINVAL);

  o.recomp_algorithms = {"brotli"};
  d = zram_device::create(o);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message().find("recomp_algorithm"), std::string_view::npos);

  o.recomp_algorithms = {};
  o.max_pages_per_zspage = 17;
  EXPECT_EQ(zram_device::create(o).error().code(), EINVAL);

  o.max_pages_per_zspage = 8;
  o.disksize = uint64_t{1} << 45;
  EXPECT_EQ(zram_device::create(o).error().code(), EINVAL);

  zram_test::temp_file f;  // exists, zero bytes long
  o.disksize = 1 << 20;
  o.backing_dev = f.path();
  d = zram_device::create(o);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().code(), EINVAL);
  EXPECT_NE(d.error().message().find("zero-sized"), std::string_view::npos);

  EXPECT_EQ(parse_zram_lock_mode("slot_cas").value(), zram_lock_mode::slot_cas);
  EXPECT_EQ(parse_zram_lock_mode("spin").error().code(), EINVAL);
}

TEST(Zram, DisksizeIsRoundedUpToPages) {
  auto dev = make_dev(opts(zram_lock_mode::slot_bitlock, 10 * page_size + 1));
  EXPECT_EQ(dev->nr_pages(), 11u);
  EXPECT_EQ(dev->disksize(), 11 * page_size);
  EXPECT_EQ(dev->mm_stat_text(),
            "       0        0        0        0        0        0        0        0        0\n");
}

TEST_P(ZramModesTest, EveryPageKindReadsBackAndUnwrittenSlotsReadAsZeros) {
  auto dev = make_dev(opts(GetParam()));
  const uint64_t n = dev->nr_pages();
  alignas(8) uint8_t page[page_size], got[page_size];
  std::map<uint64_t, std::pair<page_kind, uint64_t>> written;
  for (uint64_t i = 0; i < n; i += 3) {
    const page_kind k = zram_test::kind_of(i * 7 + 3);
    make_page(page, k, i);
    ASSERT_TRUE(dev->write_page(i, page).ok());
    written[i] = {k, i};
  }
  for (uint64_t i = 0; i < n; ++i) {
    ASSERT_TRUE(dev->read_page(i, got).ok());
    if (auto it = written.find(i); it != written.end()) {
      make_page(page, it->second.first, it->second.second);
    } else {
      std::memset(page, 0, page_size);
    }
    ASSERT_EQ(std::memcmp(page, got, page_size), 0) << "page " << i;
  }
  // Each kind is stored as it should be.
  for (auto [i, ks] : written) {
    auto info = dev->slot_info(i);
    ASSERT_TRUE(info.ok());
    switch (ks.first) {
      case page_kind::same:
      case page_kind::zero:
        EXPECT_EQ(info->kind, zram_slot_kind::same) << i;
        break;
      case page_kind::incompressible:
        EXPECT_EQ(info->kind, zram_slot_kind::huge) << i;
        EXPECT_EQ(info->size, page_size);
        break;
      case page_kind::compressible:
        EXPECT_EQ(info->kind, zram_slot_kind::compressed) << i;
        EXPECT_GT(info->size, 0u);
        EXPECT_LT(info->size, dev->huge_class_size());
        break;
    }
  }
  zram_test::expect_stats_match_table(*dev);
  const zram_mm_stat m = dev->mm_stat();
  EXPECT_EQ(m.orig_data_size, written.size() * page_size);
  EXPECT_GT(m.same_pages, 0u);
  EXPECT_GT(m.huge_pages, 0u);
  EXPECT_EQ(m.huge_pages_since, m.huge_pages);
  EXPECT_LT(m.compr_data_size, m.orig_data_size);
}

TEST_P(ZramModesTest, OverwritesChangeTheKindAndDiscardFreesEverything) {
  auto dev = make_dev(opts(GetParam(), 64 * page_size));
  alignas(8) uint8_t page[page_size], got[page_size];
  const page_kind cycle[] = {page_kind::same, page_kind::compressible, page_kind::incompressible,
                             page_kind::zero, page_kind::compressible, page_kind::same};
  for (int round = 0; round < 6; ++round) {
    for (uint64_t i = 0; i < 64; ++i) {
      make_page(page, cycle[(round + i) % 6], round * 1000 + i);
      ASSERT_TRUE(dev->write_page(i, page).ok());
    }
    for (uint64_t i = 0; i < 64; ++i) {
      make_page(page, cycle[(round + i) % 6], round * 1000 + i);
      ASSERT_TRUE(dev->read_page(i, got).ok());
      ASSERT_EQ(std::memcmp(page, got, page_size), 0);
    }
    zram_test::expect_stats_match_table(*dev);
  }
  ASSERT_TRUE(dev->discard(0, 64).ok());
  for (uint64_t i = 0; i < 64; ++i) {
    ASSERT_TRUE(dev->read_page(i, got).ok());
    EXPECT_EQ(got[0] | got[page_size - 1], 0);
    EXPECT_EQ(dev->slot_info(i)->kind, zram_slot_kind::empty);
  }
  zram_test::expect_stats_match_table(*dev);
  EXPECT_EQ(dev->mm_stat().orig_data_size, 0u);
  EXPECT_EQ(dev->mm_stat().mem_used_total, 0u);
  EXPECT_EQ(dev->io_stat().notify_free, 64u);
  EXPECT_EQ(dev->request_stat().discards, 64u);
  EXPECT_EQ(dev->mm_stat().huge_pages_since, 64u);  // counts every huge page ever stored
}

TEST_P(ZramModesTest, ByteIoAtOddOffsetsMatchesAByteModel) {
  constexpr uint64_t pages = 16;
  auto dev = make_dev(opts(GetParam(), pages * page_size));
  std::vector<uint8_t> model(pages * page_size, 0);
  // Start from a mix of kinds so that partial writes merge into every kind of slot.
  alignas(8) uint8_t page[page_size];
  for (uint64_t i = 0; i < pages; i += 2) {
    make_page(page, zram_test::kind_of(i + 1), i);
    ASSERT_TRUE(dev->write_page(i, page).ok());
    std::memcpy(model.data() + i * page_size, page, page_size);
  }
  uint64_t rng = 12345;
  std::vector<uint8_t> buf(3 * page_size + 100), got(buf.size());
  for (int op = 0; op < 400; ++op) {
    rng = mix64(rng);
    const uint64_t offset = rng % (pages * page_size - 1);
    const uint64_t max_len = std::min<uint64_t>(buf.size(), pages * page_size - offset);
    const uint64_t len = 1 + (rng >> 32) % max_len;
    switch ((rng >> 20) % 4) {
      case 0:
      case 1: {  // write: random or compressible bytes
        if ((rng >> 24) & 1)
          fill_random(buf.data(), len, rng);
        else
          fill_compressible(buf.data(), len, 50, rng);
        ASSERT_TRUE(dev->write(offset, buf.data(), len).ok());
        std::memcpy(model.data() + offset, buf.data(), len);
        break;
      }
      case 2:
        ASSERT_TRUE(dev->write_zeroes(offset, len).ok());
        std::memset(model.data() + offset, 0, len);
        break;
      case 3: {
        ASSERT_TRUE(dev->read(offset, got.data(), len).ok());
        ASSERT_EQ(std::memcmp(got.data(), model.data() + offset, len), 0)
            << "op " << op << " offset " << offset << " len " << len;
        break;
      }
    }
  }
  std::vector<uint8_t> all(pages * page_size);
  ASSERT_TRUE(dev->read(0, all.data(), all.size()).ok());
  EXPECT_EQ(all, model);
  zram_test::expect_stats_match_table(*dev);
  EXPECT_EQ(dev->request_stat().rmw_retries, 0u);  // one thread: nothing to retry for
}

TEST_P(ZramModesTest, ExtentAtReportsRunsOfHolesZeroPagesAndData) {
  constexpr uint64_t pages = 12;
  auto dev = make_dev(opts(GetParam(), pages * page_size));
  alignas(8) uint8_t page[page_size];
  // Layout: 0-1 hole, 2-3 data (compressible), 4 zero page, 5 data (same-filled non-zero),
  // 6 data (incompressible), 7-8 zero pages, 9 discarded (hole), 10-11 hole.
  make_page(page, page_kind::compressible, 1);
  ASSERT_TRUE(dev->write_page(2, page).ok());
  ASSERT_TRUE(dev->write_page(3, page).ok());
  make_page(page, page_kind::zero, 0);
  for (uint64_t i : {4, 7, 8}) ASSERT_TRUE(dev->write_page(i, page).ok());
  make_page(page, page_kind::same, 5);
  ASSERT_TRUE(dev->write_page(5, page).ok());
  make_page(page, page_kind::incompressible, 6);
  ASSERT_TRUE(dev->write_page(6, page).ok());
  ASSERT_TRUE(dev->write_page(9, page).ok());
  ASSERT_TRUE(dev->discard(9).ok());

  using T = zram_extent_type;
  struct run {
    T type;
    uint64_t n;
  };
  const std::vector<run> want = {{T::hole, 2}, {T::data, 2}, {T::zero, 1}, {T::data, 2},
                                 {T::zero, 2}, {T::hole, 3}};
  uint64_t index = 0;
  for (const run& r : want) {
    auto e = dev->extent_at(index, pages);
    ASSERT_TRUE(e.ok()) << e.error().to_string();
    EXPECT_EQ(e->type, r.type) << "page " << index;
    EXPECT_EQ(e->nr_pages, r.n) << "page " << index;
    index += r.n;
  }
  EXPECT_EQ(index, pages);
  // max_pages caps the run; a run never goes past the end of the device.
  auto e = dev->extent_at(10, 1);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->nr_pages, 1u);
  e = dev->extent_at(0, 1000);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->nr_pages, 2u);
  e = dev->extent_at(11, 1000);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->nr_pages, 1u);
  EXPECT_EQ(dev->extent_at(pages, 1).error().code(), EINVAL);
  EXPECT_EQ(dev->extent_at(0, 0).error().code(), EINVAL);
}

INSTANTIATE_TEST_SUITE_P(Modes, ZramModesTest, ::testing::ValuesIn(all_zram_lock_modes),
                         testing::to_string_name());

TEST(Zram, PartialWritesKeepTheUntouchedBytesOfEveryKindOfSlot) {
  auto dev = make_dev(opts(zram_lock_mode::slot_bitlock, 8 * page_size));
  alignas(8) uint8_t page[page_size], got[page_size];
  const page_kind kinds[] = {page_kind::compressible, page_kind::incompressible, page_kind::same,
                             page_kind::zero};
  for (uint64_t i = 0; i < 4; ++i) {
    make_page(page, kinds[i], 77 + i);
    ASSERT_TRUE(dev->write_page(i, page).ok());
    const char patch[] = "odd offset";
    ASSERT_TRUE(dev->write(i * page_size + 4093, patch, 3).ok());   // the page's last 3 bytes
    ASSERT_TRUE(dev->write(i * page_size + 7, patch, sizeof patch).ok());
    std::memcpy(page + 4093, patch, 3);
    std::memcpy(page + 7, patch, sizeof patch);
    ASSERT_TRUE(dev->read_page(i, got).ok());
    EXPECT_EQ(std::memcmp(page, got, page_size), 0) << "kind " << int(kinds[i]);
  }
  // A write straddling two pages, one byte into each.
  const uint8_t two[2] = {0xAA, 0x55};
  ASSERT_TRUE(dev->write(5 * page_size - 1, two, 2).ok());
  uint8_t back[2];
  ASSERT_TRUE(dev->read(5 * page_size - 1, back, 2).ok());
  EXPECT_EQ(back[0], 0xAA);
  EXPECT_EQ(back[1], 0x55);
  // Zeroing part of a page that held data, and a whole page.
  ASSERT_TRUE(dev->write_zeroes(0 * page_size + 100, 200).ok());
  ASSERT_TRUE(dev->read(100, got, 200).ok());
  for (int i = 0; i < 200; ++i) ASSERT_EQ(got[i], 0);
  ASSERT_TRUE(dev->write_zeroes(page_size, page_size).ok());
  EXPECT_EQ(dev->slot_info(1)->kind, zram_slot_kind::empty);
  zram_test::expect_stats_match_table(*dev);
}

TEST(Zram, DiscardRangeFreesOnlyWholePages) {
  auto dev = make_dev(opts(zram_lock_mode::slot_bitlock, 8 * page_size));
  alignas(8) uint8_t page[page_size];
  for (uint64_t i = 0; i < 8; ++i) {
    make_page(page, page_kind::compressible, i);
    ASSERT_TRUE(dev->write_page(i, page).ok());
  }
  // [page 1 + 1 byte, page 5 + 1 byte): pages 2, 3, 4 go; 1 and 5 are partial and stay.
  ASSERT_TRUE(dev->discard_range(page_size + 1, 4 * page_size).ok());
  for (uint64_t i = 0; i < 8; ++i) {
    const bool gone = i >= 2 && i <= 4;
    EXPECT_EQ(dev->slot_info(i)->kind == zram_slot_kind::empty, gone) << i;
  }
  zram_test::expect_stats_match_table(*dev);
}

TEST(Zram, BadRequestsAreEINVALCountedAsInvalidIoAndChangeNothing) {
  auto dev = make_dev(opts(zram_lock_mode::slot_bitlock, 4 * page_size));
  alignas(8) uint8_t page[page_size];
  make_page(page, page_kind::compressible, 1);
  ASSERT_TRUE(dev->write_page(3, page).ok());
  const std::string before = dev->mm_stat_text();
  EXPECT_EQ(dev->write_page(4, page).code(), EINVAL);
  EXPECT_EQ(dev->read_page(4, page).code(), EINVAL);
  EXPECT_EQ(dev->discard(3, 2).code(), EINVAL);
  EXPECT_EQ(dev->discard(0, 0).code(), EINVAL);
  EXPECT_EQ(dev->write(4 * page_size - 1, page, 2).code(), EINVAL);
  EXPECT_EQ(dev->write(0, page, 0).code(), EINVAL);
  EXPECT_EQ(dev->read(4 * page_size, page, 1).code(), EINVAL);
  EXPECT_EQ(dev->read(~uint64_t{0}, page, 2).code(), EINVAL);
  EXPECT_EQ(dev->write_zeroes(1, ~uint64_t{0}).code(), EINVAL);
  EXPECT_EQ(dev->discard_range(0, 5 * page_size).code(), EINVAL);
  EXPECT_EQ(dev->slot_info(9).error().code(), EINVAL);
  EXPECT_FALSE(dev->slot_free_notify(4));
  const status st = dev->read(4 * page_size, page, 1);
  EXPECT_NE(st.message().find("outside the device"), std::string_view::npos);
  EXPECT_EQ(dev->io_stat().invalid_io, 13u);
  EXPECT_EQ(dev->mm_stat_text(), before);
  alignas(8) uint8_t got[page_size], want[page_size];
  make_page(want, page_kind::compressible, 1);
  ASSERT_TRUE(dev->read_page(3, got).ok());
  EXPECT_EQ(std::memcmp(got, want, page_size), 0);
}

TEST(Zram, MemLimitRefusesWithENOSPCAndLeavesEarlierDataIntact) {
  zram_options o = opts(zram_lock_mode::slot_bitlock, 16 << 20);
  o.mem_limit = 1 << 20;  // 256 pages of pool for 4096 slots
  auto dev = make_dev(o);
  alignas(8) uint8_t page[page_size], got[page_size];
  uint64_t stored = 0;
  status st;
  for (uint64_t i = 0; i < dev->nr_pages(); ++i) {
    make_page(page, i % 4 ? page_kind::compressible : page_kind::incompressible, i);
    st = dev->write_page(i, page);
    if (!st.ok()) break;
    ++stored;
    ASSERT_LE(dev->mm_stat().mem_used_total, o.mem_limit);
  }
  ASSERT_EQ(st.code(), ENOSPC) << st.to_string();
  EXPECT_NE(st.message().find("mem_limit"), std::string_view::npos);
  EXPECT_GT(stored, 256u);  // compression let it hold more than 256 pages
  EXPECT_EQ(dev->io_stat().failed_writes, 1u);
  EXPECT_EQ(dev->mm_stat().mem_limit, o.mem_limit);
  EXPECT_EQ(dev->mm_stat().mem_used_max, dev->mm_stat().mem_used_total);
  // The refused slot is still empty; an overwrite refused at the limit keeps the old page.
  EXPECT_EQ(dev->slot_info(stored)->kind, zram_slot_kind::empty);
  make_page(page, page_kind::incompressible, 999);
  uint64_t refused_overwrite = 0;
  for (uint64_t i = 1; i < stored; i += 4) {  // compressible slots, overwritten by huge pages
    if (dev->write_page(i, page).code() == ENOSPC) {
      refused_overwrite = i;
      break;
    }
  }
  ASSERT_NE(refused_overwrite, 0u);
  // Same-filled pages need no memory and are still accepted at the limit.
  make_page(page, page_kind::same, 5);
  EXPECT_TRUE(dev->write_page(stored, page).ok());
  for (uint64_t i = 0; i < stored; ++i) {
    ASSERT_TRUE(dev->read_page(i, got).ok());
    if (i < refused_overwrite && i % 4 == 1) continue;  // these were overwritten before it filled
    make_page(page, i % 4 ? page_kind::compressible : page_kind::incompressible, i);
    ASSERT_EQ(std::memcmp(page, got, page_size), 0) << "page " << i;
  }
  zram_test::expect_stats_match_table(*dev);
  // Lifting the limit at run time lets writes through again.
  dev->set_mem_limit(0);
  make_page(page, page_kind::incompressible, 1234);
  EXPECT_TRUE(dev->write_page(stored + 1, page).ok());
  EXPECT_EQ(dev->mm_stat().mem_limit, 0u);
  dev->reset_mem_used_max();
  EXPECT_EQ(dev->mm_stat().mem_used_max, dev->mm_stat().mem_used_total);
}

// Overwrites bytes of a stored object through the pool, as a memory error would.
void corrupt_object(zram_device& dev, uint64_t index, size_t at) {
  auto info = dev.slot_info(index);
  ASSERT_TRUE(info.ok());
  auto ref = dev.mem_pool().obj_read_begin(info->handle);
  ASSERT_TRUE(ref.ok());
  std::vector<uint8_t> bytes(ref->data(), ref->data() + info->size);
  ref->release();
  bytes[at % bytes.size()] ^= 0x20;
  ASSERT_TRUE(dev.mem_pool().obj_write(info->handle, bytes.data(), bytes.size()).ok());
}

TEST(Zram, ACorruptedObjectReadsAsEIOAndAZeroedBufferNotGarbage) {
  for (const char* alg : {"lzo", "lz4", "zstd"}) {
    zram_options o = opts(zram_lock_mode::slot_bitlock, 8 * page_size);
    o.comp_algorithm = alg;
    auto dev = make_dev(o);
    alignas(8) uint8_t page[page_size], got[page_size];
    make_page(page, page_kind::compressible, 3);
    ASSERT_TRUE(dev->write_page(0, page).ok());
    make_page(page, page_kind::incompressible, 4);
    ASSERT_TRUE(dev->write_page(1, page).ok());
    make_page(page, page_kind::compressible, 5);
    ASSERT_TRUE(dev->write_page(2, page).ok());
    corrupt_object(*dev, 0, 100);  // a byte in the middle of the compressed stream
    corrupt_object(*dev, 1, 4000);  // a byte of a raw huge page
    for (uint64_t i : {0, 1}) {
      std::memset(got, 0xEE, page_size);
      const status st = dev->read_page(i, got);
      EXPECT_EQ(st.code(), EIO) << alg << " page " << i;
      EXPECT_NE(st.message().find("checksum"), std::string_view::npos) << st.to_string();
      for (size_t b = 0; b < page_size; ++b) ASSERT_EQ(got[b], 0) << alg;
    }
    EXPECT_EQ(dev->io_stat().failed_reads, 2u);
    // The untouched neighbour still reads; a partial write into the corrupt page fails and
    // leaves it as it was; a full overwrite replaces it.
    ASSERT_TRUE(dev->read_page(2, got).ok());
    EXPECT_EQ(std::memcmp(got, page, page_size), 0);
    EXPECT_EQ(dev->write(10, "x", 1).code(), EIO);
    EXPECT_EQ(dev->read_page(0, got).code(), EIO);
    ASSERT_TRUE(dev->write_page(0, page).ok());
    ASSERT_TRUE(dev->read_page(0, got).ok());
    EXPECT_EQ(std::memcmp(got, page, page_size), 0);
  }
}

TEST(Zram, WithoutChecksumsPagesStillRoundTrip) {
  zram_options o = opts(zram_lock_mode::global_rwlock, 64 * page_size);
  o.checksum = false;
  auto dev = make_dev(o);
  alignas(8) uint8_t page[page_size], got[page_size];
  for (uint64_t i = 0; i < 64; ++i) {
    make_page(page, zram_test::kind_of(i), i);
    ASSERT_TRUE(dev->write_page(i, page).ok());
  }
  for (uint64_t i = 0; i < 64; ++i) {
    make_page(page, zram_test::kind_of(i), i);
    ASSERT_TRUE(dev->read_page(i, got).ok());
    ASSERT_EQ(std::memcmp(page, got, page_size), 0);
  }
  zram_test::expect_stats_match_table(*dev);
}

std::vector<uint64_t> numbers(const std::string& line) {
  std::istringstream in(line);
  std::vector<uint64_t> v;
  uint64_t x;
  while (in >> x) v.push_back(x);
  return v;
}

TEST(Zram, StatFilesHaveTheKernelsColumnsAndWidths) {
  zram_options o = opts(zram_lock_mode::slot_bitlock, 64 * page_size);
  o.mem_limit = 10 << 20;
  auto dev = make_dev(o);
  alignas(8) uint8_t page[page_size];
  for (uint64_t i = 0; i < 10; ++i) {
    make_page(page, zram_test::kind_of(i), i);
    ASSERT_TRUE(dev->write_page(i, page).ok());
  }
  ASSERT_TRUE(dev->discard(0).ok());
  (void)dev->read_page(99, page);
  const std::string mm = dev->mm_stat_text();
  EXPECT_TRUE(std::regex_match(mm, std::regex("( {0,7}[0-9]{1,20} ){8} {0,7}[0-9]{1,20}\n"))) << mm;
  const zram_mm_stat m = dev->mm_stat();
  EXPECT_EQ(numbers(mm), (std::vector<uint64_t>{m.orig_data_size, m.compr_data_size,
                                                m.mem_used_total, m.mem_limit, m.mem_used_max,
                                                m.same_pages, m.pages_compacted, m.huge_pages,
                                                m.huge_pages_since}));
  EXPECT_EQ(m.orig_data_size, 9 * page_size);
  EXPECT_EQ(m.mem_limit, 10u << 20);
  char expect_io[64];
  std::snprintf(expect_io, sizeof expect_io, "%8d %8d %8d %8d\n", 0, 0, 1, 1);
  EXPECT_EQ(dev->io_stat_text(), expect_io);
  EXPECT_EQ(dev->bd_stat_text(), "       0        0        0\n");
  EXPECT_EQ(dev->debug_stat_text(), "version: 1\n0        0\n");
}

TEST(Zram, SlotFreeNotifyFreesTheSlot) {
  for (zram_lock_mode mode : all_zram_lock_modes) {
    auto dev = make_dev(opts(mode, 4 * page_size));
    alignas(8) uint8_t page[page_size];
    make_page(page, page_kind::compressible, 1);
    ASSERT_TRUE(dev->write_page(2, page).ok());
    EXPECT_TRUE(dev->slot_free_notify(2));
    EXPECT_EQ(dev->slot_info(2)->kind, zram_slot_kind::empty);
    EXPECT_EQ(dev->io_stat().notify_free, 1u);
    EXPECT_EQ(dev->request_stat().miss_free, 0u);
    zram_test::expect_stats_match_table(*dev);
  }
}

TEST(Zram, LockStatisticsCountAcquisitionsInEveryMode) {
  lockstat::enable(true);
  for (zram_lock_mode mode : all_zram_lock_modes) {
    auto dev = make_dev(opts(mode, 8 * page_size));
    dev->lock_stats().reset();
    alignas(8) uint8_t page[page_size];
    make_page(page, page_kind::compressible, 1);
    for (int i = 0; i < 10; ++i) ASSERT_TRUE(dev->write_page(i % 8, page).ok());
    for (int i = 0; i < 10; ++i) ASSERT_TRUE(dev->read_page(i % 8, page).ok());
    const lock_stats s = dev->lock_stats().snapshot();
    EXPECT_EQ(s.acquisitions, 20u) << to_string(mode);
    EXPECT_EQ(s.contended, 0u);
    EXPECT_NE(s.name.find(mode == zram_lock_mode::global_rwlock ? "tb_lock" : "table[index].lock"),
              std::string::npos);
  }
  lockstat::enable(false);
}

}  // namespace
}  // namespace uswap
