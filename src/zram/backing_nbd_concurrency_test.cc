// zram writeback to a real NBD server (nbdkit memory) under 8 threads on the machine's 2 cores,
// in every lock mode: each worker owns a range of slots and writes, rewrites, reads and discards
// them, checking every read against its exact model, while a post-processing thread marks idle
// and writes back in batches (each batch in flight with no slot lock held, so workers touch its
// slots meanwhile) and another reads the statistics. Reads are of one page, or of a run of up to
// six read together (read_pages: the written-back ones in one batch of requests). The race this
// is about: a slot written, read or discarded while its page is on the wire must keep its newest
// contents (writeback installs ZRAM_WB only if the slot was not touched), and a block freed
// meanwhile must go back. Afterwards every page reads back, the statistics match the table, and
// no block is leaked.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "backing_nbd_test.h"
#include "zram_test_util.h"

namespace uswap {
namespace {

using zram_test::make_page;
using zram_test::page_kind;
using zram_test::work_scale;

constexpr int nr_workers = 8;
constexpr uint64_t pages_per_worker = 64;

class NbdBackingConcurrencyTest : public ::testing::TestWithParam<zram_lock_mode> {};

TEST_P(NbdBackingConcurrencyTest, WritersReadersAndDiscardsRaceBatchedWriteback) {
  zram_test::nbdkit_memory server("64M");
  ASSERT_TRUE(server.ready());
  zram_options o;
  o.disksize = nr_workers * pages_per_worker * page_size;
  o.backing_dev = server.uri();
  o.lock_mode = GetParam();
  auto dev = zram_test::make_dev(o);
  ASSERT_TRUE(dev);

  // model[i]: the seed of slot i's page (kind_of(seed)), or -1 when discarded.
  std::vector<std::atomic<int64_t>> model(nr_workers * pages_per_worker);
  for (auto& m : model) m.store(-1);
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::atomic<uint64_t> written_back{0}, passes{0}, raced{0}, raced_runs{0};

  std::thread pp([&] {
    while (!stop.load()) {
      dev->mark_idle();
      auto n = dev->writeback({});
      if (n.ok()) written_back += *n;
      else if (n.error().code() != ENOSPC) ++failures;
      ++passes;
    }
  });
  std::thread observer([&] {
    while (!stop.load()) {
      (void)dev->bd_stat_text();
      (void)dev->backing_stat_text();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });

  const int ops = 3000 / work_scale;
  // A page reads as the model says: zeros when discarded (-1).
  auto matches = [](int64_t m, const uint8_t* got) {
    alignas(8) uint8_t want[page_size];
    if (m == -1) std::memset(want, 0, page_size);
    else if (m <= -2) make_page(want, page_kind::incompressible, -2 - m);
    else make_page(want, zram_test::kind_of(m), m);
    return std::memcmp(want, got, page_size) == 0;
  };
  zram_test::run_threads(nr_workers, [&](int t) {
    alignas(8) uint8_t page[page_size], got[page_size];
    const uint64_t first = static_cast<uint64_t>(t) * pages_per_worker;
    uint64_t rng = 0x9e3779b97f4a7c15ull * (t + 1);
    // At least `ops` operations, and on until writeback has moved 256 pages under them and
    // some worker has read a page back from the server (a bounded wait: a minute at most).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
    for (int k = 0;
         k < ops || ((written_back.load() < 256 || raced.load() == 0 || raced_runs.load() == 0) &&
                     std::chrono::steady_clock::now() < deadline);
         ++k) {
      rng = mix64(rng);
      const uint64_t i = first + rng % pages_per_worker;
      const uint64_t what = (rng >> 32) % 8;
      if (what < 3) {  // write; incompressible pages half of the time (writeback takes them)
        const int64_t seed = static_cast<int64_t>(rng >> 20);
        make_page(page, (what == 0) ? page_kind::incompressible : zram_test::kind_of(seed), seed);
        if (!dev->write_page(i, page).ok()) ++failures;
        model[i].store(what == 0 ? -2 - seed : seed);
      } else if (what < 5) {  // read and check
        const int64_t m = model[i].load();
        if (dev->slot_info(i)->kind == zram_slot_kind::written_back) ++raced;
        if (!dev->read_page(i, got).ok() || !matches(m, got)) ++failures;
      } else if (what < 7) {  // read a run of this worker's slots together, and check each
        const uint64_t n = std::min<uint64_t>(1 + (rng >> 40) % 6, first + pages_per_worker - i);
        std::vector<uint64_t> index;
        for (uint64_t j = 0; j < n; ++j) {
          index.push_back(i + j);
          if (dev->slot_info(i + j)->kind == zram_slot_kind::written_back) ++raced_runs;
        }
        const zram_test::run_read r = zram_test::read_run(*dev, index);
        for (uint64_t j = 0; j < n; ++j)
          if (!r.result[j].ok() || !matches(model[i + j].load(), r.pages[j].bytes)) ++failures;
      } else {
        if (!dev->discard(i).ok()) ++failures;
        model[i].store(-1);
      }
    }
  });
  stop = true;
  pp.join();
  observer.join();

  EXPECT_EQ(failures.load(), 0);
  EXPECT_GT(written_back.load(), 0u) << passes.load() << " writeback passes wrote nothing back";
  EXPECT_GT(raced.load(), 0u) << "no worker ever read a written-back page";
  EXPECT_GT(raced_runs.load(), 0u) << "no run read together held a written-back page";
  EXPECT_GE(written_back.load(), 256u);
  // Everything reads back as modelled, once more after a last writeback.
  dev->mark_idle();
  ASSERT_TRUE(dev->writeback({}).ok());
  alignas(8) uint8_t page[page_size], got[page_size];
  for (uint64_t i = 0; i < model.size(); ++i) {
    const int64_t m = model[i].load();
    ASSERT_TRUE(dev->read_page(i, got).ok());
    if (m == -1) std::memset(page, 0, page_size);
    else if (m <= -2) make_page(page, page_kind::incompressible, -2 - m);
    else make_page(page, zram_test::kind_of(m), m);
    ASSERT_EQ(std::memcmp(page, got, page_size), 0) << "slot " << i;
  }
  zram_test::expect_stats_match_table(*dev);
  const zram_backing_stat bs = dev->backing_stat();
  EXPECT_EQ(bs.write_failures + bs.read_failures + bs.server_resets, 0u) << bs.last_error;
}

INSTANTIATE_TEST_SUITE_P(AllModes, NbdBackingConcurrencyTest,
                         ::testing::ValuesIn(all_zram_lock_modes),
                         testing::to_string_name());

}  // namespace
}  // namespace uswap
