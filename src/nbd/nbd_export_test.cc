// nbd_export without nbdkit: parameter parsing, the errno each failure reaches a client with, and
// every request type checked against a byte model of the device - unaligned reads and writes,
// trim, zero with and without may_trim, extents, cache, mem_limit, a corrupt object, statistics
// files and idle writeback.
#include "uswap/nbd/nbd_export.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "uswap/compress/page_fill.h"
#include "uswap/zsmalloc/zsmalloc.h"
#include "uswap_testing/param_names.h"
#include "uswap_testing/temp_dir.h"

namespace uswap {
namespace {

namespace fs = std::filesystem;

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

nbd_config cfg(uint64_t size, zram_lock_mode lock = zram_lock_mode::slot_bitlock) {
  nbd_config c;
  c.size = size;
  c.lock = lock;
  return c;
}

std::unique_ptr<nbd_export> make(const nbd_config& c) {
  auto e = nbd_export::create(c);
  EXPECT_TRUE(e.ok()) << e.error().to_string();
  return e.ok() ? std::move(*e) : nullptr;
}

struct extent {
  uint64_t offset, length;
  uint32_t flags;
  bool operator==(const extent&) const = default;
};

std::ostream& operator<<(std::ostream& os, const extent& e) {
  return os << "{" << e.offset << ", " << e.length << ", " << e.flags << "}";
}

std::vector<extent> all_extents(nbd_export& e, uint32_t count, uint64_t offset,
                                bool req_one = false) {
  std::vector<extent> out;
  const status st = e.extents(count, offset, req_one, [&](uint64_t o, uint64_t l, uint32_t f) {
    out.push_back({o, l, f});
    return true;
  });
  EXPECT_TRUE(st.ok()) << st.to_string();
  return out;
}

// ---------------------------------------------------------------------------------------------
// Parameters

TEST(NbdConfig, DefaultsAreTheDocumentedOnes) {
  nbd_config c;
  EXPECT_EQ(c.size, 0u);
  EXPECT_EQ(c.comp, "lz4");
  EXPECT_EQ(c.lock, zram_lock_mode::slot_bitlock);
  EXPECT_EQ(c.mem_limit, 0u);
  EXPECT_TRUE(c.backing.empty());
  EXPECT_EQ(c.writeback_idle, 0u);
  EXPECT_EQ(c.stats_interval_ms, 1000u);
  EXPECT_TRUE(c.checksum);
  // size= is required.
  const status st = c.complete();
  EXPECT_EQ(st.code(), EINVAL);
  EXPECT_NE(st.message().find("size"), std::string_view::npos) << st.to_string();
}

TEST(NbdConfig, EveryParameterParsesWithSizeSuffixes) {
  nbd_config c;
  ASSERT_TRUE(c.set("size", "1G").ok());
  EXPECT_EQ(c.size, 1ull << 30);
  ASSERT_TRUE(c.set("size", "1536K").ok());
  EXPECT_EQ(c.size, 1536ull << 10);
  ASSERT_TRUE(c.set("mem_limit", "64M").ok());
  EXPECT_EQ(c.mem_limit, 64ull << 20);
  ASSERT_TRUE(c.set("mem_limit", "0").ok());
  EXPECT_EQ(c.mem_limit, 0u);
  for (const char* alg : {"lz4", "zstd", "lzo", "lz4hc"}) {
    ASSERT_TRUE(c.set("comp", alg).ok()) << alg;
    EXPECT_EQ(c.comp, alg);
  }
  for (zram_lock_mode m : all_zram_lock_modes) {
    ASSERT_TRUE(c.set("lock", to_string(m)).ok());
    EXPECT_EQ(c.lock, m);
  }
  ASSERT_TRUE(c.set("backing", "/tmp/x").ok());
  EXPECT_EQ(c.backing, "/tmp/x");
  ASSERT_TRUE(c.set("backing_size", "2G").ok());
  EXPECT_EQ(c.backing_size, 2ull << 30);
  ASSERT_TRUE(c.set("writeback_idle", "30").ok());
  EXPECT_EQ(c.writeback_idle, 30u);
  ASSERT_TRUE(c.set("statsdir", "/tmp/s").ok());
  EXPECT_EQ(c.statsdir, "/tmp/s");
  ASSERT_TRUE(c.set("stats_interval_ms", "250").ok());
  EXPECT_EQ(c.stats_interval_ms, 250u);
  ASSERT_TRUE(c.set("checksum", "off").ok());
  EXPECT_FALSE(c.checksum);
  ASSERT_TRUE(c.set("checksum", "on").ok());
  EXPECT_TRUE(c.checksum);
  EXPECT_TRUE(c.complete().ok());

  const zram_options o = c.to_zram_options();
  EXPECT_EQ(o.disksize, c.size);
  EXPECT_EQ(o.comp_algorithm, "lz4hc");
  EXPECT_EQ(o.lock_mode, zram_lock_mode::slot_bitlock);
  EXPECT_EQ(o.backing_dev, "/tmp/x");
  EXPECT_EQ(o.backing_dev_size, 2ull << 30);
  // Without backing_size the backing file is as big as the device.
  c.backing_size = 0;
  EXPECT_EQ(c.to_zram_options().backing_dev_size, c.size);
}

TEST(NbdConfig, BadValuesAreEINVALNamingTheParameterAndChangeNothing) {
  nbd_config c;
  ASSERT_TRUE(c.set("size", "64M").ok());
  const nbd_config before = c;
  struct bad {
    const char* key;
    const char* value;
  };
  for (const bad& b : {bad{"size", "0"}, bad{"size", "12Q"}, bad{"size", "-5"}, bad{"size", ""},
                       bad{"mem_limit", "lots"}, bad{"comp", "brotli"}, bad{"lock", "spin"},
                       bad{"backing", ""}, bad{"writeback_idle", "-1"},
                       bad{"writeback_idle", "1.5"}, bad{"stats_interval_ms", "0"},
                       bad{"checksum", "maybe"}, bad{"statsdir", ""}}) {
    const status st = c.set(b.key, b.value);
    EXPECT_EQ(st.code(), EINVAL) << b.key << "=" << b.value;
    EXPECT_NE(st.message().find(b.key), std::string_view::npos) << st.to_string();
    EXPECT_EQ(c.size, before.size);
    EXPECT_EQ(c.comp, before.comp);
    EXPECT_EQ(c.lock, before.lock);
    EXPECT_EQ(c.mem_limit, before.mem_limit);
    EXPECT_EQ(c.checksum, before.checksum);
    EXPECT_EQ(c.stats_interval_ms, before.stats_interval_ms);
  }
  const status st = c.set("colour", "blue");
  EXPECT_EQ(st.code(), EINVAL);
  EXPECT_NE(st.message().find("unknown parameter 'colour'"), std::string_view::npos);
  // Writeback settings without a backing file contradict each other.
  c.writeback_idle = 5;
  EXPECT_EQ(c.complete().code(), EINVAL);
  // A bad device (zram refuses the size) fails create with zram's EINVAL.
  nbd_config huge = cfg(uint64_t{1} << 50);
  auto e = nbd_export::create(huge);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().code(), EINVAL);
}

TEST(NbdErrno, UswapErrorsReachTheClientAsNbdErrors) {
  EXPECT_EQ(nbd_errno(status{}), 0);
  for (int e : {EPERM, EIO, ENOMEM, EINVAL, ENOSPC, EOVERFLOW, ENOTSUP, ESHUTDOWN})
    EXPECT_EQ(nbd_errno(error(e, "x")), e);
  EXPECT_EQ(nbd_errno(error(ERANGE, "x")), EINVAL);
  EXPECT_EQ(nbd_errno(error(EDQUOT, "x")), ENOSPC);
  EXPECT_EQ(nbd_errno(error(EFBIG, "x")), ENOSPC);
  // Codes NBD cannot carry become EIO rather than something misleading.
  EXPECT_EQ(nbd_errno(error(ENOENT, "x")), EIO);
  EXPECT_EQ(nbd_errno(error(EAGAIN, "x")), EIO);
}

// ---------------------------------------------------------------------------------------------
// Requests

class NbdExportModesTest : public ::testing::TestWithParam<zram_lock_mode> {};

TEST_P(NbdExportModesTest, UnalignedReadsWritesZeroesAndTrimsMatchAByteModel) {
  constexpr uint64_t size = 24 * page_size;
  auto e = make(cfg(size, GetParam()));
  std::vector<uint8_t> model(size, 0), buf(5 * page_size + 321), got(buf.size());
  uint64_t rng = 99;
  auto next = [&rng] {
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return rng >> 17;
  };
  for (int op = 0; op < 600; ++op) {
    const uint64_t offset = next() % size;
    const uint32_t len =
        static_cast<uint32_t>(1 + next() % std::min<uint64_t>(buf.size(), size - offset));
    switch (next() % 6) {
      case 0:
      case 1:
        if (next() & 1)
          fill_random(buf.data(), len, next());
        else
          fill_compressible(buf.data(), len, 50, next());
        ASSERT_TRUE(e->pwrite(buf.data(), len, offset).ok());
        std::memcpy(model.data() + offset, buf.data(), len);
        break;
      case 2: {
        ASSERT_TRUE(e->zero(len, offset, next() & 1).ok());
        std::memset(model.data() + offset, 0, len);
        break;
      }
      case 3: {
        // trim frees the whole pages inside the range; partial pages keep their bytes.
        ASSERT_TRUE(e->trim(len, offset).ok());
        const uint64_t first = round_up_to_page(offset), end = (offset + len) & page_mask;
        if (end > first) std::memset(model.data() + first, 0, end - first);
        break;
      }
      default:
        ASSERT_TRUE(e->pread(got.data(), len, offset).ok());
        ASSERT_EQ(std::memcmp(got.data(), model.data() + offset, len), 0)
            << "op " << op << " offset " << offset << " len " << len;
    }
  }
  std::vector<uint8_t> all(size);
  ASSERT_TRUE(e->pread(all.data(), size, 0).ok());
  EXPECT_EQ(all, model);
  const nbd_stat s = e->stats();
  EXPECT_EQ(s.errors, 0u);
  EXPECT_GT(s.pwrite, 0u);
  EXPECT_GT(s.zero, 0u);
  EXPECT_GT(s.trim, 0u);
  EXPECT_GT(s.pread_bytes, size);
}

TEST_P(NbdExportModesTest, ZeroMakesZeroPagesOrHolesAndExtentsTellThemApart) {
  constexpr uint64_t size = 16 * page_size;
  auto e = make(cfg(size, GetParam()));
  std::vector<uint8_t> data(size);
  fill_compressible(data.data(), size, 50, 7);
  ASSERT_TRUE(e->pwrite(data.data(), size, 0).ok());
  EXPECT_EQ(all_extents(*e, size, 0), (std::vector<extent>{{0, size, 0}}));

  // Pages 2-3 zeroed without may_trim: stored zero pages (zero, not hole). Pages 6-7 with
  // may_trim: freed (hole and zero). Page 10 trimmed: hole. Byte range 12.5-13.5 zeroed: the
  // partial pages are rewritten, still data.
  ASSERT_TRUE(e->zero(2 * page_size, 2 * page_size, false).ok());
  ASSERT_TRUE(e->zero(2 * page_size, 6 * page_size, true).ok());
  ASSERT_TRUE(e->trim(page_size, 10 * page_size).ok());
  ASSERT_TRUE(e->zero(page_size, 12 * page_size + page_size / 2, false).ok());
  const uint32_t H = nbd_extent_hole | nbd_extent_zero, Z = nbd_extent_zero;
  const std::vector<extent> want = {
      {0, 2 * page_size, 0},  {2 * page_size, 2 * page_size, Z},
      {4 * page_size, 2 * page_size, 0}, {6 * page_size, 2 * page_size, H},
      {8 * page_size, 2 * page_size, 0}, {10 * page_size, page_size, H},
      {11 * page_size, 5 * page_size, 0}};
  EXPECT_EQ(all_extents(*e, size, 0), want);
  // A request from inside a page starts at that page; req_one gives only the first extent.
  EXPECT_EQ(all_extents(*e, 100, 2 * page_size + 5),
            (std::vector<extent>{{2 * page_size, page_size, Z}}));
  EXPECT_EQ(all_extents(*e, size - 3 * page_size, 3 * page_size, true),
            (std::vector<extent>{{3 * page_size, page_size, Z}}));
  // Every zeroed byte reads as zero, the rest is the data.
  std::memset(data.data() + 2 * page_size, 0, 2 * page_size);
  std::memset(data.data() + 6 * page_size, 0, 2 * page_size);
  std::memset(data.data() + 10 * page_size, 0, page_size);
  std::memset(data.data() + 12 * page_size + page_size / 2, 0, page_size);
  std::vector<uint8_t> got(size);
  ASSERT_TRUE(e->pread(got.data(), size, 0).ok());
  EXPECT_EQ(got, data);
  // The zero pages hold no pool memory: same_pages counts them.
  EXPECT_EQ(e->device().mm_stat().same_pages, 2u);
}

INSTANTIATE_TEST_SUITE_P(Modes, NbdExportModesTest, ::testing::ValuesIn(all_zram_lock_modes),
                         testing::to_string_name());

TEST(NbdExport, RequestsPastTheEndFailWithEINVALAndChangeNothing) {
  constexpr uint64_t size = 8 * page_size;
  auto e = make(cfg(size));
  std::vector<uint8_t> data(size), got(size);
  fill_compressible(data.data(), size, 50, 3);
  ASSERT_TRUE(e->pwrite(data.data(), size, 0).ok());
  std::vector<uint8_t> buf(2 * page_size, 0xAB);
  EXPECT_EQ(e->pwrite(buf.data(), 2 * page_size, size - page_size).code(), EINVAL);
  EXPECT_EQ(e->pwrite(buf.data(), 1, size).code(), EINVAL);
  EXPECT_EQ(e->pread(buf.data(), 2, size - 1).code(), EINVAL);
  EXPECT_EQ(e->trim(page_size, size).code(), EINVAL);
  EXPECT_EQ(e->zero(2 * page_size, size - page_size, false).code(), EINVAL);
  EXPECT_EQ(e->zero(2 * page_size, size - page_size, true).code(), EINVAL);
  EXPECT_EQ(e->cache(1, size).code(), EINVAL);
  const status st = e->extents(page_size, size, false, [](uint64_t, uint64_t, uint32_t) {
    ADD_FAILURE() << "no extent past the end";
    return true;
  });
  EXPECT_EQ(st.code(), EINVAL);
  EXPECT_NE(st.message().find("outside the device"), std::string_view::npos) << st.to_string();
  EXPECT_EQ(e->stats().errors, 8u);
  ASSERT_TRUE(e->pread(got.data(), size, 0).ok());
  EXPECT_EQ(got, data);  // the last page was not half-written by the refused write
}

TEST(NbdExport, AtMemLimitWritesFailWithENOSPCAndEarlierDataStays) {
  nbd_config c = cfg(64 << 20);
  c.mem_limit = 1 << 20;
  auto e = make(c);
  std::vector<uint8_t> chunk(64 * 1024);
  uint64_t offset = 0;
  status st;
  for (; offset < c.size; offset += chunk.size()) {
    fill_random(chunk.data(), chunk.size(), offset);
    st = e->pwrite(chunk.data(), static_cast<uint32_t>(chunk.size()), offset);
    if (!st.ok()) break;
  }
  ASSERT_EQ(st.code(), ENOSPC) << st.to_string();
  EXPECT_EQ(nbd_errno(st), ENOSPC);
  EXPECT_NE(st.message().find("mem_limit"), std::string_view::npos) << st.to_string();
  ASSERT_GT(offset, 0u);
  EXPECT_LE(e->device().mm_stat().mem_used_total, c.mem_limit);
  // Every write that succeeded reads back.
  std::vector<uint8_t> got(chunk.size());
  for (uint64_t o = 0; o < offset; o += chunk.size()) {
    fill_random(chunk.data(), chunk.size(), o);
    ASSERT_TRUE(e->pread(got.data(), static_cast<uint32_t>(got.size()), o).ok());
    ASSERT_EQ(got, chunk) << "offset " << o;
  }
  // Zero pages still fit (they take no pool memory), and trimming frees room for data again.
  ASSERT_TRUE(e->zero(static_cast<uint32_t>(chunk.size()), offset + chunk.size(), false).ok());
  ASSERT_TRUE(e->trim(static_cast<uint32_t>(chunk.size()), 0).ok());
  fill_random(chunk.data(), chunk.size(), 4242);
  EXPECT_TRUE(e->pwrite(chunk.data(), static_cast<uint32_t>(chunk.size()), 0).ok());
}

TEST(NbdExport, ACorruptObjectReadsAsEIO) {
  auto e = make(cfg(4 * page_size));
  std::vector<uint8_t> data(page_size);
  fill_compressible(data.data(), page_size, 50, 11);
  ASSERT_TRUE(e->pwrite(data.data(), page_size, page_size).ok());
  auto info = e->device().slot_info(1);
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(info->kind, zram_slot_kind::compressed);
  {
    auto ref = e->device().mem_pool().obj_read_begin(info->handle);
    ASSERT_TRUE(ref.ok());
    std::vector<uint8_t> bytes(ref->data(), ref->data() + info->size);
    ref->release();
    bytes[bytes.size() / 2] ^= 0x40;
    ASSERT_TRUE(e->device().mem_pool().obj_write(info->handle, bytes.data(), bytes.size()).ok());
  }
  std::vector<uint8_t> got(page_size + 10);
  const status st = e->pread(got.data(), static_cast<uint32_t>(got.size()), page_size - 5);
  EXPECT_EQ(st.code(), EIO);
  EXPECT_EQ(nbd_errno(st), EIO);
  EXPECT_NE(st.message().find("checksum"), std::string_view::npos) << st.to_string();
  // A partial write into the corrupt page cannot merge into it: EIO, nothing changes.
  EXPECT_EQ(e->pwrite(data.data(), 100, page_size + 10).code(), EIO);
  EXPECT_EQ(e->cache(10, page_size).code(), EIO);
  // A whole-page write replaces it.
  ASSERT_TRUE(e->pwrite(data.data(), page_size, page_size).ok());
  ASSERT_TRUE(e->pread(got.data(), page_size, page_size).ok());
  EXPECT_EQ(std::memcmp(got.data(), data.data(), page_size), 0);
  EXPECT_EQ(e->stats().errors, 3u);
}

TEST(NbdExport, CacheMarksPagesAccessedSoIdleWritebackSkipsThem) {
  auto e = make(cfg(8 * page_size));
  std::vector<uint8_t> data(8 * page_size);
  fill_compressible(data.data(), data.size(), 50, 5);
  ASSERT_TRUE(e->pwrite(data.data(), static_cast<uint32_t>(data.size()), 0).ok());
  EXPECT_EQ(e->device().mark_idle(), 8u);
  ASSERT_TRUE(e->cache(page_size + 1, 2 * page_size - 1).ok());  // pages 1 and 2
  for (uint64_t i = 0; i < 8; ++i) {
    auto info = e->device().slot_info(i);
    ASSERT_TRUE(info.ok());
    EXPECT_EQ(info->idle, i != 1 && i != 2) << "page " << i;
  }
  EXPECT_EQ(e->stats().cache, 1u);
}

TEST(NbdExport, StatisticsFilesFollowTheDevice) {
  testing::temp_dir dir("uswap-nbd-test-");
  nbd_config c = cfg(16 * page_size);
  c.statsdir = dir.path() + "/stats";  // created by start_housekeeping
  c.stats_interval_ms = 20;
  auto e = make(c);
  ASSERT_TRUE(e->start_housekeeping().ok());
  for (const char* f : {"mm_stat", "io_stat", "bd_stat", "debug_stat", "nbd_stat", "disksize",
                        "comp_algorithm", "lock_mode"})
    EXPECT_TRUE(fs::exists(c.statsdir + "/" + f)) << f;
  EXPECT_EQ(slurp(c.statsdir + "/disksize"), std::to_string(16 * page_size) + "\n");
  EXPECT_EQ(slurp(c.statsdir + "/comp_algorithm"), "lz4\n");
  EXPECT_EQ(slurp(c.statsdir + "/lock_mode"), "slot_bitlock\n");

  std::vector<uint8_t> data(4 * page_size);
  fill_compressible(data.data(), data.size(), 50, 1);
  ASSERT_TRUE(e->pwrite(data.data(), static_cast<uint32_t>(data.size()), 0).ok());
  // The thread rewrites the files: wait (bounded) until mm_stat shows the 4 pages.
  const std::string want_prefix = "   16384 ";
  bool seen = false;
  for (int i = 0; i < 500 && !seen; ++i) {
    seen = slurp(c.statsdir + "/mm_stat").rfind(want_prefix, 0) == 0;
    if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(seen) << slurp(c.statsdir + "/mm_stat");
  e->stop_housekeeping();
  // The last rewrite at stop shows everything, and the files are the device's own text.
  EXPECT_EQ(slurp(c.statsdir + "/mm_stat"), e->device().mm_stat_text());
  EXPECT_EQ(slurp(c.statsdir + "/io_stat"), e->device().io_stat_text());
  const std::string nbd = slurp(c.statsdir + "/nbd_stat");
  EXPECT_NE(nbd.find("pwrite 1\n"), std::string::npos) << nbd;
  EXPECT_NE(nbd.find("pwrite_bytes 16384\n"), std::string::npos) << nbd;
  // No temporary file is left behind.
  for (const auto& entry : fs::directory_iterator(c.statsdir))
    EXPECT_NE(entry.path().filename().string()[0], '.') << entry.path();
}

TEST(NbdExport, IdleWritebackMovesPagesToTheBackingFileAndTheyReadBack) {
  testing::temp_dir dir("uswap-nbd-test-");
  nbd_config c = cfg(32 * page_size);
  c.backing = dir.path() + "/backing";
  c.writeback_idle = 1;
  auto e = make(c);
  struct stat sb{};
  ASSERT_EQ(::stat(c.backing.c_str(), &sb), 0);
  EXPECT_EQ(static_cast<uint64_t>(sb.st_size), c.size);  // as big as the device by default
  std::vector<uint8_t> data(32 * page_size), got(data.size());
  fill_compressible(data.data(), data.size(), 50, 9);
  ASSERT_TRUE(e->pwrite(data.data(), static_cast<uint32_t>(data.size()), 0).ok());
  ASSERT_TRUE(e->start_housekeeping().ok());
  // Pages idle for more than a second are written back on a later pass (bounded wait).
  for (int i = 0; i < 100 && e->device().bd_stat().bd_count == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  e->stop_housekeeping();
  EXPECT_EQ(e->device().bd_stat().bd_count, 32u);
  EXPECT_GE(e->stats().writeback_pages, 32u);
  EXPECT_EQ(e->stats().writeback_failures, 0u);
  ASSERT_TRUE(e->pread(got.data(), static_cast<uint32_t>(got.size()), 0).ok());
  EXPECT_EQ(got, data);
  EXPECT_EQ(e->device().bd_stat().bd_reads, 32u);
}

}  // namespace
}  // namespace uswap
