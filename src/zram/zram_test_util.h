// Helpers shared by the zram tests: devices, page contents of each kind (compressible,
// incompressible, same-filled) derived from a seed, a controllable clock, a temporary backing
// file, threads released together, and the invariant check that ties the statistics to what the
// table holds.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "uswap/base/hash.h"
#include "uswap/compress/page_fill.h"
#include "uswap/zram/zram.h"
#include "uswap/zsmalloc/zsmalloc.h"
#include "uswap_testing/param_names.h"
#include "uswap_testing/threads.h"

namespace uswap::zram_test {

using uswap::testing::work_scale;

// A device, or nullptr after recording why it could not be made.
inline std::unique_ptr<zram_device> make_dev(const zram_options& o) {
  auto d = zram_device::create(o);
  EXPECT_TRUE(d.ok()) << d.error().to_string();
  return d.ok() ? std::move(*d) : nullptr;
}

enum class page_kind { compressible, incompressible, same, zero };

// A page of the given kind, a pure function of (kind, seed).
inline void make_page(uint8_t* page, page_kind kind, uint64_t seed) {
  switch (kind) {
    case page_kind::compressible:
      fill_compressible(page, page_size, 50, seed);
      break;
    case page_kind::incompressible:
      fill_random(page, page_size, seed);
      break;
    case page_kind::same: {
      const uint64_t v = mix64(seed) | 1;  // never zero
      for (size_t i = 0; i < page_size; i += 8) std::memcpy(page + i, &v, 8);
      break;
    }
    case page_kind::zero:
      std::memset(page, 0, page_size);
      break;
  }
}

inline page_kind kind_of(uint64_t r) {
  switch (r % 8) {
    case 0: return page_kind::incompressible;
    case 1: return page_kind::same;
    case 2: return page_kind::zero;
    default: return page_kind::compressible;
  }
}

// A clock tests move by hand (zram_options::clock takes a plain function).
inline std::atomic<uint32_t> fake_now{1000};
inline uint32_t fake_clock() { return fake_now.load(std::memory_order_relaxed); }

// A backing file removed when the test ends.
class temp_file {
 public:
  temp_file() {
    char tmpl[] = "/tmp/uswap-zram-test-XXXXXX";
    const int fd = ::mkstemp(tmpl);
    EXPECT_GE(fd, 0);
    if (fd >= 0) ::close(fd);
    path_ = tmpl;
  }
  ~temp_file() { ::unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

using uswap::testing::run_threads;

// What the table holds, counted slot by slot.
struct table_census {
  uint64_t stored = 0, same = 0, compressed = 0, huge = 0, written_back = 0;
  uint64_t compr_bytes = 0;
};

inline table_census census(const zram_device& dev) {
  table_census c;
  for (uint64_t i = 0; i < dev.nr_pages(); ++i) {
    auto info = dev.slot_info(i);
    EXPECT_TRUE(info.ok());
    if (!info.ok()) continue;
    switch (info->kind) {
      case zram_slot_kind::empty: continue;
      case zram_slot_kind::same: ++c.same; break;
      case zram_slot_kind::compressed:
        ++c.compressed;
        c.compr_bytes += info->size;
        break;
      case zram_slot_kind::huge:
        ++c.huge;
        c.compr_bytes += page_size;
        break;
      case zram_slot_kind::written_back: ++c.written_back; break;
    }
    ++c.stored;
  }
  return c;
}

// With no operation in flight: every statistic agrees with the table and the pool.
inline void expect_stats_match_table(zram_device& dev) {
  const table_census c = census(dev);
  const zram_mm_stat m = dev.mm_stat();
  EXPECT_EQ(m.orig_data_size, c.stored * page_size);
  EXPECT_EQ(m.same_pages, c.same);
  EXPECT_EQ(m.huge_pages, c.huge);
  EXPECT_EQ(m.compr_data_size, c.compr_bytes);
  EXPECT_EQ(m.mem_used_total, dev.mem_pool().get_total_pages() * page_size);
  EXPECT_LE(m.mem_used_total, m.mem_used_max);
  EXPECT_EQ(dev.mem_pool().objects_in_use(), c.compressed + c.huge);
  EXPECT_EQ(dev.bd_stat().bd_count, c.written_back);
  if (c.compressed + c.huge == 0) {
    EXPECT_EQ(m.mem_used_total, 0u);
  }
}

// zram_device::read_pages over `index`, each page starting as 0xA5 bytes (a page the call left
// unwritten shows): the pages and results, in the order of `index`.
struct run_read {
  struct alignas(8) page_buf {
    uint8_t bytes[page_size];
  };
  std::vector<uint64_t> index;
  std::vector<page_buf> pages;
  std::vector<status> result;
};
inline run_read read_run(zram_device& dev, std::vector<uint64_t> index) {
  run_read r{std::move(index), {}, {}};
  r.pages.resize(r.index.size());
  r.result.resize(r.index.size());
  std::vector<void*> dst;
  for (run_read::page_buf& p : r.pages) {
    std::memset(p.bytes, 0xA5, page_size);
    dst.push_back(p.bytes);
  }
  dev.read_pages(r.index, dst, r.result);
  return r;
}

}  // namespace uswap::zram_test
