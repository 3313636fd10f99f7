// Helpers shared by the uffd tests: page contents derived from (page, version) so that any page
// can be checked without keeping a copy, and small wrappers around region creation.
#pragma once

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "uswap/base/page.h"
#include "uswap/compress/page_fill.h"
#include "uswap/uffd/pager.h"
#include "uswap/uffd/region.h"

namespace uswap::uffd_test {

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
         std::to_string(s.wp_sweeps) + " evict_wp_pages " + std::to_string(s.evict_wp_pages);
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

struct mode_name {
  std::string operator()(const ::testing::TestParamInfo<fault_mode>& info) const {
    return info.param == fault_mode::sigbus ? "sigbus" : "handler_thread";
  }
};

}  // namespace uswap::uffd_test
