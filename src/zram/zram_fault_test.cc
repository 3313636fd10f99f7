// zram under fault injection (uswap/base/fault_inject.h): for every N a workload reaches, the N-th
// zspage, zsmalloc table segment, slot table, backing bitmap, backing-file write or backing-file
// read fails. Each operation succeeds or returns the injected error; a failed write leaves the
// slot's previous page; a failed writeback leaves the page in memory; a failed read of a written-
// back page leaves it in the file. The statistics agree with the table (expect_stats_match_table,
// zram's invariant check), and every page acknowledged reads back byte-identical once the point is
// disarmed.
#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <vector>

#include "uswap/base/fault_inject.h"
#include "uswap/base/hash.h"
#include "uswap/zram/zram.h"
#include "uswap_testing/fault_sweep.h"
#include "uswap_testing/threads.h"
#include "zram_test_util.h"

namespace uswap {
namespace {

using uswap::testing::fault_run;
using uswap::testing::fault_sweep;
using zram_test::kind_of;
using zram_test::make_page;
using zram_test::temp_file;

constexpr uint64_t nr_slots = 128;

zram_options device_options(const temp_file& f) {
  zram_options o;
  o.disksize = nr_slots * page_size;
  o.name = "zram-fault";
  o.backing_dev = f.path();
  o.backing_dev_size = nr_slots * page_size;
  o.huge_page_chunks = false;
  o.clock = zram_test::fake_clock;
  return o;
}

// The page a slot holds: the seed of its last acknowledged write, or none (zeros).
using contents = std::vector<std::optional<uint64_t>>;

uint64_t verify_all(zram_device& dev, const contents& want, uint64_t n) {
  alignas(8) uint8_t got[page_size], exp[page_size];
  uint64_t verified = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const status st = dev.read_page(i, got);
    EXPECT_TRUE(st.ok()) << "slot " << i << ": " << st.to_string();
    if (want[i])
      make_page(exp, kind_of(*want[i]), *want[i]);
    else
      std::memset(exp, 0, page_size);
    EXPECT_EQ(std::memcmp(got, exp, page_size), 0) << "slot " << i;
    ++verified;
  }
  return verified;
}

// `expected` is the error the armed point gives; any op may fail with it, none with another.
void expect_ok_or(const status& st, int expected, fault_run& r) {
  ++r.ops;
  if (st.ok()) return;
  EXPECT_EQ(st.code(), expected) << st.to_string();
  ++r.failed;
}

// Create (with a backing file), write every slot and overwrite half of them, write back the idle
// ones, read everything; then disarm, check, read back, and do it all again successfully.
fault_run device_workload(int err) {
  fault_run r;
  temp_file f;
  const zram_options o = device_options(f);
  auto d = zram_device::create(o);
  ++r.ops;
  if (!d.ok()) {
    EXPECT_EQ(d.error().code(), err) << d.error().to_string();
    ++r.failed;
    fault_inject_disarm_all();
    d = zram_device::create(o);
    EXPECT_TRUE(d.ok()) << d.error().to_string();
    if (!d.ok()) return r;
  }
  zram_device& dev = **d;
  contents want(nr_slots);
  alignas(8) uint8_t page[page_size];
  for (uint64_t k = 0; k < nr_slots + nr_slots / 2; ++k) {
    const uint64_t i = k < nr_slots ? k : (k * 7) % nr_slots;
    const uint64_t seed = mix64(k + 1);
    make_page(page, kind_of(seed), seed);
    const status st = dev.write_page(i, page);
    expect_ok_or(st, err, r);
    if (st.ok()) want[i] = seed;  // a failed write keeps the slot's previous page
  }
  dev.mark_idle();
  auto wb = dev.writeback();
  expect_ok_or(wb.ok() ? status{} : wb.error(), err, r);
  alignas(8) uint8_t got[page_size];
  for (uint64_t i = 0; i < nr_slots; ++i) {
    const status st = dev.read_page(i, got);
    expect_ok_or(st, err, r);
  }
  fault_inject_disarm_all();
  zram_test::expect_stats_match_table(dev);
  r.pages_verified += verify_all(dev, want, nr_slots);
  // The work completes: rewrite every slot, write back what is idle, and read it all again.
  for (uint64_t i = 0; i < nr_slots; ++i) {
    const uint64_t seed = mix64(1000 + i);
    make_page(page, kind_of(seed), seed);
    EXPECT_TRUE(dev.write_page(i, page).ok());
    want[i] = seed;
  }
  dev.mark_idle();
  EXPECT_TRUE(dev.writeback().ok());
  zram_test::expect_stats_match_table(dev);
  r.pages_verified += verify_all(dev, want, nr_slots);
  return r;
}

struct point_case {
  fault_point point;
  int err;
};

class ZramFaultTest : public ::testing::TestWithParam<point_case> {};

TEST_P(ZramFaultTest, EachFailureIsReturnedAndNoAcknowledgedPageIsLost) {
  const point_case c = GetParam();
  const auto rep = fault_sweep("zram", c.point, c.err, [&] { return device_workload(c.err); });
  // Every injected failure reaches a caller: as the failed operation's own error. (A refused
  // write-back block write or read is one failed writeback or read; a refused zspage one write.)
  EXPECT_EQ(rep.failed, rep.tried);
}

std::string case_name(const ::testing::TestParamInfo<point_case>& info) {
  return std::string(to_string(info.param.point)) + (info.param.err == ENOSPC ? "_ENOSPC"
                                                     : info.param.err == EIO  ? "_EIO"
                                                                              : "_ENOMEM");
}

INSTANTIATE_TEST_SUITE_P(Points, ZramFaultTest,
                         ::testing::Values(point_case{fault_point::zs_malloc_page, ENOMEM},
                                           point_case{fault_point::zs_meta, ENOMEM},
                                           point_case{fault_point::zram_table, ENOMEM},
                                           point_case{fault_point::backing_bitmap, ENOMEM},
                                           point_case{fault_point::zram_pp, ENOMEM},
                                           point_case{fault_point::backing_write, EIO},
                                           point_case{fault_point::backing_write, ENOSPC},
                                           point_case{fault_point::backing_read, EIO}),
                         case_name);

}  // namespace
}  // namespace uswap
