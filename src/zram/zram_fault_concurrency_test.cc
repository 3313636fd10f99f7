// zram under fault injection with threads (more than the machine's cores): a run of refused
// zspages while threads write and rewrite their slots, then a run of failed backing-file writes
// and reads while a writeback runs beside threads that read and rewrite. Each call succeeds or
// returns the injected error, a failed write keeps the slot's previous page, the statistics
// agree with the table, and every page acknowledged reads back once the points are disarmed.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include "uswap/base/fault_inject.h"
#include "uswap/base/hash.h"
#include "zram_test_util.h"

namespace uswap {
namespace {

using zram_test::kind_of;
using zram_test::make_page;
using zram_test::work_scale;

TEST(ZramFaultConcurrency, RefusalsUnderContentionLoseNoAcknowledgedPage) {
  constexpr int threads = 8;
  constexpr uint64_t slots_per_thread = 32;
  const int rounds = 12 / work_scale + 2;
  zram_test::temp_file f;
  zram_options o;
  o.disksize = threads * slots_per_thread * page_size;
  o.name = "zram-fault-mt";
  o.backing_dev = f.path();
  o.backing_dev_size = o.disksize;
  o.huge_page_chunks = false;
  auto dev = zram_test::make_dev(o);
  ASSERT_TRUE(dev);
  // Each thread owns its slots: want[i] is the seed of slot i's last acknowledged write.
  std::vector<std::optional<uint64_t>> want(threads * slots_per_thread);
  std::atomic<uint64_t> ops{0}, failed{0};
  const auto write_round = [&](int t, uint64_t round, int expected_err) {
    alignas(8) uint8_t page[page_size];
    for (uint64_t k = 0; k < slots_per_thread; ++k) {
      const uint64_t i = t * slots_per_thread + k;
      const uint64_t seed = mix64((round << 32) | i);
      make_page(page, kind_of(seed), seed);
      ops.fetch_add(1);
      const status st = dev->write_page(i, page);
      if (st.ok()) {
        want[i] = seed;
      } else {
        EXPECT_EQ(st.code(), expected_err) << st.to_string();
        failed.fetch_add(1);
      }
    }
  };

  // Phase 1: zspages 5..54 refused while every thread writes its slots, round after round.
  fault_inject_arm(fault_point::zs_malloc_page, 5, ENOMEM, 50);
  uswap::testing::run_threads(threads, [&](int t) {
    for (int r = 0; r < rounds; ++r) write_round(t, r, ENOMEM);
  });
  fault_inject_disarm_all();
  const uint64_t refused = fault_inject_failures(fault_point::zs_malloc_page);
  EXPECT_GE(refused, 1u);
  EXPECT_EQ(failed.load(), refused);  // each refused zspage is one write's ENOMEM
  zram_test::expect_stats_match_table(*dev);

  // Phase 2: backing-file writes 3..12 and reads 2..6 fail while a writeback runs and the
  // threads read their slots (a read of a written-back page is a backing-file read).
  dev->mark_idle();
  fault_inject_arm(fault_point::backing_write, 3, EIO, 10);
  fault_inject_arm(fault_point::backing_read, 2, EIO, 5);
  std::atomic<uint64_t> read_failures{0};
  int wb_error = 0;
  std::thread wb([&] {
    auto r = dev->writeback();
    ops.fetch_add(1);
    wb_error = r.ok() ? 0 : r.error().code();
  });
  uswap::testing::run_threads(threads, [&](int t) {
    alignas(8) uint8_t got[page_size], exp[page_size];
    for (int r = 0; r < 2; ++r) {
      for (uint64_t k = 0; k < slots_per_thread; ++k) {
        const uint64_t i = t * slots_per_thread + k;
        ops.fetch_add(1);
        const status st = dev->read_page(i, got);
        if (!st.ok()) {
          EXPECT_EQ(st.code(), EIO) << st.to_string();
          read_failures.fetch_add(1);
          continue;
        }
        if (want[i]) {
          make_page(exp, kind_of(*want[i]), *want[i]);
        } else {
          std::memset(exp, 0, page_size);
        }
        EXPECT_EQ(std::memcmp(got, exp, page_size), 0) << "slot " << i;
      }
    }
  });
  wb.join();
  fault_inject_disarm_all();
  // A failed block write is reported by the writeback (the remaining slots are still tried).
  EXPECT_EQ(wb_error, fault_inject_failures(fault_point::backing_write) ? EIO : 0);
  EXPECT_EQ(read_failures.load(), fault_inject_failures(fault_point::backing_read));
  zram_test::expect_stats_match_table(*dev);

  // Disarmed: every page acknowledged reads back, and new writes all succeed.
  uint64_t verified = 0;
  alignas(8) uint8_t got[page_size], exp[page_size];
  for (uint64_t i = 0; i < want.size(); ++i) {
    ASSERT_TRUE(dev->read_page(i, got).ok()) << "slot " << i;
    if (want[i]) {
      make_page(exp, kind_of(*want[i]), *want[i]);
    } else {
      std::memset(exp, 0, page_size);
    }
    EXPECT_EQ(std::memcmp(got, exp, page_size), 0) << "slot " << i;
    ++verified;
  }
  const uint64_t before = failed.load();
  uswap::testing::run_threads(threads, [&](int t) { write_round(t, rounds + 1, 0); });
  EXPECT_EQ(failed.load(), before);
  zram_test::expect_stats_match_table(*dev);
  std::printf(
      "fault-injection zram-concurrency: %d threads, operations %llu (failed %llu writes, "
      "%llu reads), pages verified %llu\n",
      threads, static_cast<unsigned long long>(ops.load()),
      static_cast<unsigned long long>(failed.load()),
      static_cast<unsigned long long>(read_failures.load()),
      static_cast<unsigned long long>(verified));
}

}  // namespace
}  // namespace uswap
