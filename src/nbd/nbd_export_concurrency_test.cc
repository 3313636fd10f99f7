// nbd_export under nbdkit's PARALLEL thread model, without nbdkit (so ThreadSanitizer can see
// it): many threads - more than the machine's 2 cores - issue unaligned writes, zeroes, trims,
// reads and extents queries on interleaved byte stripes that share pages with their neighbours,
// so concurrent sub-page read-modify-writes of one page come from different "connections". Each
// thread checks its own stripes as it goes; at the end the whole device must equal the union of
// the threads' models, and the statistics must match the table.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "uswap/compress/page_fill.h"
#include "uswap/nbd/nbd_export.h"
#include "uswap/zsmalloc/zsmalloc.h"
#include "uswap_testing/threads.h"

namespace uswap {
namespace {

constexpr int rounds = 3000 / testing::work_scale;

class NbdExportConcurrencyTest
    : public ::testing::TestWithParam<std::tuple<zram_lock_mode, int>> {};

TEST_P(NbdExportConcurrencyTest, InterleavedUnalignedStripesStayExact) {
  const auto [mode, nr_threads] = GetParam();
  // Stripe s covers bytes [s * stripe, (s + 1) * stripe) and belongs to thread s % nr_threads.
  // 5000 bytes: a stripe shares its first and last page with the neighbouring threads' stripes
  // and sometimes holds one whole page of its own (which trim may free).
  constexpr uint64_t stripe = 5000;
  const uint64_t stripes = 16 * static_cast<uint64_t>(nr_threads);
  const uint64_t size = round_up_to_page(stripes * stripe);
  nbd_config c;
  c.size = size;
  c.lock = mode;
  auto made = nbd_export::create(c);
  ASSERT_TRUE(made.ok()) << made.error().to_string();
  nbd_export& e = **made;

  std::vector<uint8_t> model(size, 0);  // each thread writes only its own stripes' bytes
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < nr_threads; ++t) {
    threads.emplace_back([&, t] {
      uint64_t rng = 1000 + t;
      auto next = [&rng] {
        rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
        return rng >> 17;
      };
      std::vector<uint8_t> buf(stripe), got(stripe);
      for (int r = 0; r < rounds && failures.load(std::memory_order_relaxed) == 0; ++r) {
        const uint64_t s = t + nr_threads * (next() % (stripes / nr_threads));
        const uint64_t lo = s * stripe;
        // A sub-range of the stripe (sometimes all of it).
        const uint64_t a = next() % stripe, b = next() % stripe;
        uint64_t off = lo + std::min(a, b), len = std::max<uint64_t>(1, std::max(a, b) - std::min(a, b));
        if (next() % 4 == 0) {
          off = lo;
          len = stripe;
        }
        status st;
        switch (next() % 5) {
          case 0:
          case 1:
            fill_compressible(buf.data(), len, 50, next());
            st = e.pwrite(buf.data(), static_cast<uint32_t>(len), off);
            if (st.ok()) std::memcpy(model.data() + off, buf.data(), len);
            break;
          case 2:
            st = e.zero(static_cast<uint32_t>(len), off, next() & 1);
            if (st.ok()) std::memset(model.data() + off, 0, len);
            break;
          case 3: {
            st = e.trim(static_cast<uint32_t>(len), off);
            const uint64_t first = round_up_to_page(off), end = (off + len) & page_mask;
            if (st.ok() && end > first) std::memset(model.data() + first, 0, end - first);
            break;
          }
          default:
            st = e.pread(got.data(), static_cast<uint32_t>(len), off);
            if (st.ok() && std::memcmp(got.data(), model.data() + off, len) != 0) {
              ADD_FAILURE() << "thread " << t << " round " << r << ": stripe " << s
                            << " bytes [" << off << ", +" << len << ") differ";
              failures.fetch_add(1);
            }
        }
        if (!st.ok()) {
          ADD_FAILURE() << st.to_string();
          failures.fetch_add(1);
        }
        if (r % 16 == 0) {
          // Extents and statistics are read while others write: they must not fail.
          const status x = e.extents(static_cast<uint32_t>(std::min<uint64_t>(size, 1 << 20)), 0,
                                     false, [](uint64_t, uint64_t, uint32_t) { return true; });
          if (!x.ok()) failures.fetch_add(1);
          (void)e.device().mm_stat();
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_EQ(failures.load(), 0);

  std::vector<uint8_t> all(size);
  ASSERT_TRUE(e.pread(all.data(), static_cast<uint32_t>(size), 0).ok());
  for (uint64_t i = 0; i < size; ++i) {
    ASSERT_EQ(all[i], model[i]) << "byte " << i << " (stripe " << i / stripe << ")";
  }
  // Extents agree with the contents: a hole or zero extent reads as zeros.
  const status x = e.extents(static_cast<uint32_t>(size), 0, false,
                             [&](uint64_t off, uint64_t len, uint32_t flags) {
                               if (flags & nbd_extent_zero) {
                                 for (uint64_t k = off; k < off + len; ++k) {
                                   EXPECT_EQ(all[k], 0) << "byte " << k;
                                 }
                               }
                               return true;
                             });
  EXPECT_TRUE(x.ok());
  EXPECT_EQ(e.stats().errors, 0u);
  const zram_mm_stat m = e.device().mm_stat();
  EXPECT_LE(m.mem_used_total, m.mem_used_max);
  // The statistics agree with what the table holds once nothing is in flight.
  uint64_t stored = 0, objects = 0, same = 0;
  for (uint64_t i = 0; i < e.device().nr_pages(); ++i) {
    auto info = e.device().slot_info(i);
    ASSERT_TRUE(info.ok());
    if (info->kind == zram_slot_kind::empty) continue;
    ++stored;
    if (info->kind == zram_slot_kind::same) ++same;
    if (info->kind == zram_slot_kind::compressed || info->kind == zram_slot_kind::huge) ++objects;
  }
  EXPECT_EQ(m.orig_data_size, stored * page_size);
  EXPECT_EQ(m.same_pages, same);
  EXPECT_EQ(e.device().mem_pool().objects_in_use(), objects);
}

INSTANTIATE_TEST_SUITE_P(
    ModesAndThreads, NbdExportConcurrencyTest,
    ::testing::Combine(::testing::ValuesIn(all_zram_lock_modes), ::testing::Values(8, 16)),
    [](const auto& info) {
      return std::string(to_string(std::get<0>(info.param))) + "_" +
             std::to_string(std::get<1>(info.param)) + "_threads";
    });

}  // namespace
}  // namespace uswap
