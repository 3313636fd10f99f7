// Helpers shared by the uffd tests: page contents derived from (page, version) so that any page
// can be checked without keeping a copy, pagers and their options, the check that a pager holds
// nothing, and the fault modes' parameter names.
#pragma once

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "uswap/base/page.h"
#include "uswap/compress/page_fill.h"
#include "uswap/uffd/pager.h"
#include "uswap/uffd/region.h"

namespace uswap::uffd_test {

inline constexpr uint64_t MiB = uint64_t{1} << 20;

inline uint64_t seed_of(uint64_t page, uint64_t version) {
  return (page + 1) * 0x9e3779b97f4a7c15ull ^ (version + 1) * 0xc2b2ae3d27d4eb4full;
}

// Fills the 4 KiB page at p with 50%-compressible contents (fio's pattern) named by
// (page, version); version 0 with the page number in the first word.
inline void fill_page(void* p, uint64_t page, uint64_t version) {
  uint8_t buf[page_size];
  fill_compressible(buf, page_size, 50, seed_of(page, version));
  std::memcpy(buf, &page, sizeof page);
  std::memcpy(buf + 8, &version, sizeof version);
  std::memcpy(p, buf, page_size);
}

// n pages, fill_page(first + i, version) each, in one buffer: a file's contents.
inline std::vector<uint8_t> pages_of(uint64_t n, uint64_t first, uint64_t version) {
  std::vector<uint8_t> v(n * page_size);
  for (uint64_t i = 0; i < n; ++i) fill_page(v.data() + i * page_size, first + i, version);
  return v;
}

// A temporary file holding `contents`, unlinked at once so that nothing is left behind however
// the test ends; its descriptor, or -1 with errno set. The caller closes it.
inline int unlinked_file_with(const std::vector<uint8_t>& contents) {
  char path[] = "/tmp/uswap_uffd_fileXXXXXX";
  const int fd = ::mkstemp(path);
  if (fd < 0) return -1;
  ::unlink(path);
  if (::pwrite(fd, contents.data(), contents.size(), 0) != static_cast<ssize_t>(contents.size())) {
    const int e = errno;
    ::close(fd);
    errno = e ? e : EIO;
    return -1;
  }
  return fd;
}

inline bool page_matches(const void* p, uint64_t page, uint64_t version) {
  uint8_t buf[page_size];
  fill_compressible(buf, page_size, 50, seed_of(page, version));
  std::memcpy(buf, &page, sizeof page);
  std::memcpy(buf + 8, &version, sizeof version);
  return std::memcmp(p, buf, page_size) == 0;
}

inline std::string describe(const pager_stats& s) {
  return "faults " + std::to_string(s.faults) + " wp_faults " + std::to_string(s.wp_faults) +
         " zero_fills " + std::to_string(s.zero_fills) + " swap_ins " + std::to_string(s.swap_ins) +
         " swap_outs " + std::to_string(s.swap_outs) + " clean " +
         std::to_string(s.clean_evictions) + " zero " + std::to_string(s.zero_evictions) +
         " peak " + std::to_string(s.peak_resident_pages) + "/" + std::to_string(s.limit_pages) +
         " overcharges " + std::to_string(s.overcharges) + " wp_sweeps " +
         std::to_string(s.wp_sweeps) + " evict_wp_pages " + std::to_string(s.evict_wp_pages) +
         " resident " + std::to_string(s.resident_pages) + " pgsteal_kswapd " +
         std::to_string(s.pgsteal_kswapd) + " pgsteal_direct " + std::to_string(s.pgsteal_direct) +
         " kswapd_wakeups " + std::to_string(s.kswapd_wakeups);
}

// Pages of [p, p + len) that are resident, by mincore(2).
inline uint64_t resident_pages(const void* p, uint64_t len) {
  const uint64_t n = (len + page_size - 1) / page_size;
  std::string vec(n, '\0');
  if (::mincore(const_cast<void*>(p), len, reinterpret_cast<unsigned char*>(vec.data())) != 0)
    return UINT64_MAX;
  uint64_t r = 0;
  for (char c : vec) r += c & 1;
  return r;
}

inline pager_options options(fault_mode mode, uint64_t limit, uint64_t max_size) {
  pager_options o;
  o.mode = mode;
  o.limit = limit;
  o.max_size = max_size;
  return o;
}

// A pager, or nullptr after recording why it could not be made.
inline std::shared_ptr<pager> make_pager(const pager_options& o) {
  auto p = pager::create(o);
  EXPECT_TRUE(p.ok()) << p.error().to_string();
  return p.ok() ? std::move(p).value() : nullptr;
}

// With every mapping gone: no resident page, no swap slot, nothing in zram, invariants intact.
inline void expect_holds_nothing(pager& pg) {
  const pager_stats s = pg.stats();
  EXPECT_EQ(s.mapped_bytes, 0u) << describe(s);
  EXPECT_EQ(s.resident_pages, 0u) << describe(s);
  EXPECT_EQ(s.swap_pages_used, 0u) << describe(s);
  EXPECT_EQ(s.zram_orig_data_size, 0u) << describe(s);
  EXPECT_EQ(s.zram_compr_data_size, 0u) << describe(s);
  EXPECT_EQ(s.zram_mem_used_total, 0u) << describe(s);
  EXPECT_TRUE(pg.check_invariants().ok()) << pg.check_invariants().to_string();
}

struct mode_name {
  std::string operator()(const ::testing::TestParamInfo<fault_mode>& info) const {
    return info.param == fault_mode::sigbus ? "sigbus" : "handler_thread";
  }
};

}  // namespace uswap::uffd_test
