// zram under 16 threads on the machine's 2 cores, in every lock mode:
//   - disjoint slots: each thread owns a range and checks every read against its exact model,
//     with full writes of every kind, odd-offset partial writes, zeroing and discards, while a
//     compactor, an idle marker and a statistics reader run;
//   - overlapping slots: every thread writes, partially writes, reads, discards and frees the same
//     few slots; pages are made of self-describing 512-byte blocks, so a reader can tell a page
//     some writer wrote (block by block) from a torn or foreign one;
//   - one page shared by 16 partial writers, each owning 256 bytes of it: a lost update (a
//     read-modify-write that overwrote another thread's bytes) is seen by its owner;
//   - post-processing (mark_idle, writeback, recompress, compact) running against writers and
//     readers that verify exact contents.
// After every run, the statistics must match the table and the pool exactly.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <thread>
#include <vector>

#include "zram_test_util.h"

namespace uswap {
namespace {

using zram_test::make_dev;
using zram_test::make_page;
using zram_test::page_kind;
using zram_test::work_scale;

constexpr int nr_threads = 16;

class ZramConcurrencyTest : public ::testing::TestWithParam<zram_lock_mode> {};

// slot_cas spins on preempted holders by design; with 16 threads on 2 cores it needs fewer
// operations to stay within the time budget.
int ops_for(zram_lock_mode mode, int ops) {
  return (mode == zram_lock_mode::slot_cas ? ops / 2 : ops) / work_scale;
}

// Runs `body` on the workers while helper threads compact, mark idle and read statistics.
void with_background(zram_device& dev, std::atomic<int>& failures,
                     const std::function<void()>& body) {
  std::atomic<bool> stop{false};
  std::thread compactor([&] {
    while (!stop.load()) {
      dev.compact();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  std::thread observer([&] {
    while (!stop.load()) {
      // Statistics and idle marking take locks and read counters while the workers run.
      if (dev.mm_stat_text().size() < 9 * 9) ++failures;
      (void)dev.io_stat_text();
      dev.mark_idle();
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  body();
  stop = true;
  compactor.join();
  observer.join();
}

// A worker's own slots [base, base + n) and the bytes they must hold: each operation goes to the
// device and to the model, and each read is checked against the model.
class modelled_slots {
 public:
  modelled_slots(zram_device& dev, uint64_t base, uint64_t n, std::atomic<int>& failures)
      : dev_(dev), base_(base), model_(n * page_size, 0), failures_(failures) {}

  void write_page(uint64_t slot, const uint8_t* page) {
    if (!dev_.write_page(base_ + slot, page).ok()) ++failures_;
    std::memcpy(at(slot), page, page_size);
  }
  // `len` bytes at `off` in `slot`, on into the following slots if they are longer.
  void write(uint64_t slot, size_t off, const uint8_t* data, size_t len) {
    if (!dev_.write((base_ + slot) * page_size + off, data, len).ok()) ++failures_;
    std::memcpy(at(slot) + off, data, len);
  }
  void write_zeroes(uint64_t slot, size_t off, size_t len) {
    if (!dev_.write_zeroes((base_ + slot) * page_size + off, len).ok()) ++failures_;
    std::memset(at(slot) + off, 0, len);
  }
  void discard(uint64_t slot) {
    if (!dev_.discard(base_ + slot).ok()) ++failures_;
    std::memset(at(slot), 0, page_size);
  }
  void check(uint64_t slot) {
    alignas(8) uint8_t got[page_size];
    if (!dev_.read_page(base_ + slot, got).ok() || std::memcmp(got, at(slot), page_size) != 0)
      ++failures_;
  }
  // Every slot, one read_page each.
  void check_each() {
    for (uint64_t s = 0; s < model_.size() / page_size; ++s) check(s);
  }
  // All the slots in one multi-page read.
  void check_in_one_read() {
    std::vector<uint8_t> all(model_.size());
    if (!dev_.read(base_ * page_size, all.data(), all.size()).ok() || all != model_) ++failures_;
  }

 private:
  uint8_t* at(uint64_t slot) { return model_.data() + slot * page_size; }

  zram_device& dev_;
  uint64_t base_;
  std::vector<uint8_t> model_;
  std::atomic<int>& failures_;
};

TEST_P(ZramConcurrencyTest, DisjointSlotsReadBackExactlyUnderEveryOperation) {
  constexpr uint64_t per_thread = 32;
  zram_options o;
  o.disksize = nr_threads * per_thread * page_size;
  o.lock_mode = GetParam();
  auto dev = make_dev(o);
  ASSERT_TRUE(dev);
  std::atomic<int> failures{0};
  const int ops = ops_for(GetParam(), 8000);
  with_background(*dev, failures, [&] {
    zram_test::run_threads(nr_threads, [&](int t) {
      modelled_slots mine(*dev, t * per_thread, per_thread, failures);
      alignas(8) uint8_t page[page_size];
      uint64_t rng = mix64(t + 100);
      for (int op = 0; op < ops; ++op) {
        rng = mix64(rng);
        const uint64_t slot = rng % per_thread;
        switch ((rng >> 16) % 8) {
          case 0:
          case 1:
          case 2:
            make_page(page, zram_test::kind_of(rng >> 24), rng);
            mine.write_page(slot, page);
            break;
          case 3: {  // odd offset and length, possibly crossing into the next slot
            const size_t off = (rng >> 24) % page_size;
            const size_t max = (per_thread - slot) * page_size - off;
            const size_t len = 1 + (rng >> 40) % std::min<size_t>(max, page_size + 777);
            std::vector<uint8_t> buf(len);
            fill_compressible(buf.data(), len, 50, rng);
            mine.write(slot, off, buf.data(), len);
            break;
          }
          case 4:
            mine.discard(slot);
            break;
          case 5: {
            const size_t off = (rng >> 24) % page_size;
            mine.write_zeroes(slot, off, 1 + (rng >> 40) % (page_size - off));
            break;
          }
          default:
            mine.check(slot);
            break;
        }
      }
      mine.check_in_one_read();
    });
  });
  EXPECT_EQ(failures.load(), 0);
  zram_test::expect_stats_match_table(*dev);
  EXPECT_EQ(dev->io_stat().failed_reads + dev->io_stat().failed_writes, 0u);
}

// --- Overlapping slots: self-describing blocks. ------------------------------------------------

constexpr size_t block = 512;
constexpr size_t blocks_per_page = page_size / block;

// A block is all zeros (never written, discarded, zeroed) or {index, seed, body(seed)}.
void make_block(uint8_t* b, uint64_t index, uint64_t seed) {
  std::memcpy(b, &index, 8);
  std::memcpy(b + 8, &seed, 8);
  fill_compressible(b + 16, block - 16, (seed & 3) == 0 ? 0 : 50, seed, 0);
}

bool block_valid(const uint8_t* b, uint64_t index) {
  static const uint8_t zero[block] = {};
  if (std::memcmp(b, zero, block) == 0) return true;
  uint64_t idx, seed;
  std::memcpy(&idx, b, 8);
  std::memcpy(&seed, b + 8, 8);
  if (idx != index) return false;
  alignas(8) uint8_t want[block];
  make_block(want, index, seed);
  return std::memcmp(b, want, block) == 0;
}

bool page_valid(const uint8_t* p, uint64_t index) {
  for (size_t k = 0; k < blocks_per_page; ++k)
    if (!block_valid(p + k * block, index)) return false;
  return true;
}

TEST_P(ZramConcurrencyTest, OverlappingSlotsNeverReadTornOrForeignPages) {
  constexpr uint64_t shared = 24;
  zram_options o;
  o.disksize = shared * page_size;
  o.lock_mode = GetParam();
  auto dev = make_dev(o);
  ASSERT_TRUE(dev);
  std::atomic<int> failures{0};
  const int ops = ops_for(GetParam(), 12000);
  with_background(*dev, failures, [&] {
    zram_test::run_threads(nr_threads, [&](int t) {
      alignas(8) uint8_t page[page_size], got[page_size];
      uint64_t rng = mix64(t + 7);
      for (int op = 0; op < ops; ++op) {
        rng = mix64(rng);
        const uint64_t slot = rng % shared;
        switch ((rng >> 16) % 10) {
          case 0:
          case 1:
          case 2: {
            for (size_t k = 0; k < blocks_per_page; ++k)
              make_block(page + k * block, slot, mix64(rng + k));
            if (!dev->write_page(slot, page).ok()) ++failures;
            break;
          }
          case 3:
          case 4: {  // whole blocks, at a block boundary
            const size_t first = (rng >> 24) % blocks_per_page;
            const size_t n = 1 + (rng >> 32) % (blocks_per_page - first);
            for (size_t k = 0; k < n; ++k) make_block(page + k * block, slot, mix64(rng + 99 + k));
            if (!dev->write(slot * page_size + first * block, page, n * block).ok()) ++failures;
            break;
          }
          case 5:
            if (!dev->discard(slot).ok()) ++failures;
            break;
          case 6:
            dev->slot_free_notify(slot);
            break;
          case 7:
            std::memset(page, 0, page_size);
            if (!dev->write_page(slot, page).ok()) ++failures;  // stored as ZRAM_SAME
            break;
          default:
            if (!dev->read_page(slot, got).ok() || !page_valid(got, slot)) ++failures;
            break;
        }
      }
    });
  });
  EXPECT_EQ(failures.load(), 0);
  alignas(8) uint8_t got[page_size];
  for (uint64_t i = 0; i < shared; ++i) {
    ASSERT_TRUE(dev->read_page(i, got).ok());
    EXPECT_TRUE(page_valid(got, i)) << i;
  }
  zram_test::expect_stats_match_table(*dev);
}

TEST_P(ZramConcurrencyTest, PartialWritersSharingAPageNeverLoseAnUpdate) {
  // 16 owners of 256 bytes each fill page 0; page 1 is shared by 8 owners of 512 bytes and
  // readers; partial writes start at odd offsets inside each owner's span.
  constexpr size_t span0 = page_size / nr_threads;
  zram_options o;
  o.disksize = 2 * page_size;
  o.lock_mode = GetParam();
  auto dev = make_dev(o);
  ASSERT_TRUE(dev);
  std::atomic<int> failures{0};
  const int ops = ops_for(GetParam(), 2500);
  zram_test::run_threads(nr_threads, [&](int t) {
    uint64_t version = 0;
    std::array<uint8_t, span0> mine{};  // what this thread last wrote into its span of page 0
    for (int op = 0; op < ops; ++op) {
      ++version;
      const size_t off = 1 + (version * 37) % 64;
      std::array<uint8_t, span0> buf;
      fill_random(buf.data(), span0, mix64(t * 100000 + version));
      if (version % 3 == 0) std::memset(buf.data(), int(t), span0);  // same-ish pages too
      std::memcpy(mine.data() + off, buf.data() + off, span0 - off);
      if (!dev->write(t * span0 + off, buf.data() + off, span0 - off).ok()) ++failures;
      std::array<uint8_t, span0> back;
      if (!dev->read(t * span0, back.data(), span0).ok() || back != mine) ++failures;
      if (t < 8) {  // page 1: 512-byte spans, whole blocks
        alignas(8) uint8_t b[block];
        make_block(b, 1, mix64(version + t));
        if (!dev->write(page_size + t * block, b, block).ok()) ++failures;
        alignas(8) uint8_t again[block];
        if (!dev->read(page_size + t * block, again, block).ok() ||
            std::memcmp(again, b, block) != 0)
          ++failures;
      } else {
        alignas(8) uint8_t p[page_size];
        if (!dev->read_page(1, p).ok() || !page_valid(p, 1)) ++failures;
      }
    }
  });
  EXPECT_EQ(failures.load(), 0);
  zram_test::expect_stats_match_table(*dev);
  // Contended partial writes had to be redone at least sometimes: the check above is real.
  RecordProperty("rmw_retries", std::to_string(dev->request_stat().rmw_retries));
}

TEST_P(ZramConcurrencyTest, PostProcessingRunsAgainstVerifiedIo) {
  zram_test::temp_file backing;
  constexpr uint64_t per_thread = 24;
  constexpr int workers = 12;
  zram_options o;
  o.disksize = workers * per_thread * page_size;
  o.lock_mode = GetParam();
  o.comp_algorithm = "lz4";
  o.recomp_algorithms = {"zstd"};
  o.backing_dev = backing.path();
  o.backing_dev_size = 64 * page_size;  // smaller than the device: writeback fills it up
  o.clock = zram_test::fake_clock;
  auto dev = make_dev(o);
  ASSERT_TRUE(dev);
  std::atomic<int> failures{0};
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> written_back{0}, recompressed{0};
  std::thread pp([&] {
    int round = 0;
    while (!stop.load()) {
      zram_test::fake_now.fetch_add(1);
      dev->mark_idle(round % 2 ? std::optional<uint32_t>(0) : std::nullopt);
      zram_writeback_params wb;
      wb.type = round % 3 == 0 ? zram_writeback_type::huge : zram_writeback_type::idle;
      auto w = dev->writeback(wb);
      if (w.ok()) written_back += *w;
      else if (w.error().code() != ENOSPC) ++failures;
      auto r = dev->recompress({});
      if (r.ok()) recompressed += *r;
      else ++failures;
      dev->compact();
      ++round;
    }
  });
  const int ops = ops_for(GetParam(), 6000);
  zram_test::run_threads(workers, [&](int t) {
    modelled_slots mine(*dev, t * per_thread, per_thread, failures);
    alignas(8) uint8_t page[page_size];
    uint64_t rng = mix64(t + 555);
    for (int op = 0; op < ops; ++op) {
      rng = mix64(rng);
      const uint64_t slot = rng % per_thread;
      switch ((rng >> 16) % 8) {
        case 0:
          make_page(page, zram_test::kind_of(rng >> 24), rng);
          mine.write_page(slot, page);
          break;
        case 1: {
          const size_t off = (rng >> 24) % page_size;
          const size_t len = 1 + (rng >> 40) % (page_size - off);
          std::vector<uint8_t> buf(len);
          fill_random(buf.data(), len, rng);
          mine.write(slot, off, buf.data(), len);
          break;
        }
        case 2:
          mine.discard(slot);
          break;
        default:
          mine.check(slot);
          break;
      }
    }
    mine.check_each();
  });
  stop = true;
  pp.join();
  EXPECT_EQ(failures.load(), 0);
  zram_test::expect_stats_match_table(*dev);
  EXPECT_EQ(dev->io_stat().failed_reads + dev->io_stat().failed_writes, 0u);
  RecordProperty("written_back", std::to_string(written_back.load()));
  RecordProperty("recompressed", std::to_string(recompressed.load()));
}

INSTANTIATE_TEST_SUITE_P(Modes, ZramConcurrencyTest, ::testing::ValuesIn(all_zram_lock_modes),
                         testing::to_string_name());

}  // namespace
}  // namespace uswap
