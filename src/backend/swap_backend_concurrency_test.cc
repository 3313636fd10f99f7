// swap_backend under more threads than cores, every swap lock mode on both devices and every zram
// lock mode: pages stored by one thread are loaded, verified and released by another (so frees
// land in clusters other threads allocate from), every page read back is checked, and at the end
// every slot and every device object is gone again.
#include <gtest/gtest.h>

#include <mutex>
#include <random>
#include <tuple>
#include <vector>

#include "backend_test_util.h"
#include "uswap/base/atomic_max.h"
#include "uswap_testing/threads.h"

namespace uswap {
namespace {

using testing::fill_tagged_page;
using testing::make_backend;
using testing::page_has_tag;

struct held {
  swap_entry e;
  uint64_t tag;
};

using param = std::tuple<swap_lock_mode, swap_dev_kind, zram_lock_mode>;

class SwapBackendStress : public ::testing::TestWithParam<param> {};

TEST_P(SwapBackendStress, PagesSurviveCrossThreadReleaseAndNothingLeaks) {
  const auto [lock, dev, zlock] = GetParam();
  auto b = make_backend(4096, dev, lock, zlock);
  ASSERT_TRUE(b);
  constexpr int threads = 16;
  const int iterations = 1500 / testing::work_scale;
  std::mutex mailbox_lock;
  std::vector<held> mailbox(64, held{swap_entry{}, 0});
  // Back-end calls in flight, and the most seen at once: the stress ran concurrently.
  std::atomic<int> in_flight{0}, max_in_flight{0};
  auto call = [&](auto&& f) {
    fetch_max(max_in_flight, in_flight.fetch_add(1) + 1);
    auto r = f();
    in_flight.fetch_sub(1);
    return r;
  };
  std::atomic<uint64_t> cross_releases{0}, verified{0}, failures{0};

  // A thread's share runs a few milliseconds: on a loaded machine the threads may all run one
  // after another, so the stress repeats (every page checked each time) until calls overlapped.
  for (int attempt = 0; attempt < 20 && max_in_flight.load() < 2; ++attempt) {
    testing::run_threads(threads, [&](int t) {
      std::mt19937_64 rng(static_cast<uint64_t>(t) * 7919 + 1);
      alignas(64) unsigned char page[page_size];
      std::vector<held> mine;
      auto check_and_release = [&](const held& h) {
        if (call([&] { return b->load(h.e, page); }) != 0 || !page_has_tag(h.tag, page))
          failures.fetch_add(1);
        verified.fetch_add(1, std::memory_order_relaxed);
        call([&] {
          b->release(h.e);
          return 0;
        });
      };
      for (int i = 0; i < iterations; ++i) {
        const uint64_t tag = (static_cast<uint64_t>(t + 1) << 32) | static_cast<uint64_t>(i);
        fill_tagged_page(tag, page);
        swap_entry e;
        uint32_t bytes;
        const int rc = call([&] { return b->store(page, &e, &bytes); });
        if (rc != 0) {
          failures.fetch_add(1);
          continue;
        }
        mine.push_back({e, tag});
        if (mine.size() < 24) continue;
        const size_t pick = rng() % mine.size();
        held h = mine[pick];
        mine[pick] = mine.back();
        mine.pop_back();
        if (rng() & 1) {
          check_and_release(h);
        } else {
          held other;
          {
            std::lock_guard g(mailbox_lock);
            std::swap(mailbox[rng() % mailbox.size()], h);
            other = h;
          }
          if (other.tag != 0) {
            check_and_release(other);
            if ((other.tag >> 32) != static_cast<uint64_t>(t + 1)) cross_releases.fetch_add(1);
          }
        }
      }
      for (const held& h : mine) check_and_release(h);
    });
  }
  alignas(64) unsigned char page[page_size];
  for (const held& h : mailbox) {
    if (h.tag == 0) continue;
    ASSERT_EQ(b->load(h.e, page), 0);
    EXPECT_TRUE(page_has_tag(h.tag, page));
    b->release(h.e);
  }
  EXPECT_EQ(failures.load(), 0u);
  EXPECT_GT(verified.load(), static_cast<uint64_t>(threads * iterations) / 2);
  // The stress really ran concurrently, and frees crossed threads.
  EXPECT_GE(max_in_flight.load(), 2);
  EXPECT_GT(cross_releases.load(), 0u);
  b->swap().drain_swap_slots_cache();
  const swap_backend_stats s = b->stats();
  EXPECT_EQ(s.used_slots, 0u);
  EXPECT_EQ(s.device.stored_pages, 0u);
  EXPECT_TRUE(b->check_invariants().ok()) << b->check_invariants().to_string();
}

std::string param_name(const ::testing::TestParamInfo<param>& info) {
  const auto [lock, dev, zlock] = info.param;
  std::string n = std::string(to_string(lock)) + "_" + to_string(dev);
  if (dev == swap_dev_kind::zram) n += "_" + std::string(to_string(zlock));
  return n;
}

INSTANTIATE_TEST_SUITE_P(
    Zram, SwapBackendStress,
    ::testing::Combine(::testing::Values(swap_lock_mode::global, swap_lock_mode::cluster,
                                         swap_lock_mode::percpu),
                       ::testing::Values(swap_dev_kind::zram),
                       ::testing::Values(zram_lock_mode::global_rwlock, zram_lock_mode::slot_cas,
                                         zram_lock_mode::slot_bitlock)),
    param_name);
INSTANTIATE_TEST_SUITE_P(
    Ram, SwapBackendStress,
    ::testing::Combine(::testing::Values(swap_lock_mode::global, swap_lock_mode::cluster,
                                         swap_lock_mode::percpu),
                       ::testing::Values(swap_dev_kind::ram),
                       ::testing::Values(zram_lock_mode::slot_bitlock)),
    param_name);

}  // namespace
}  // namespace uswap
