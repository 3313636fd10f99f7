// swap_backend: swapon over each device, store / load / release, page I/O through the swap
// protocol, full devices and mem_limit, and the invariant checker itself.
#include "uswap/backend/swap_backend.h"

#include <gtest/gtest.h>

#include <vector>

#include "backend_test_util.h"

namespace uswap {
namespace {

using testing::fill_tagged_page;
using testing::make_backend;
using testing::page_has_tag;

class SwapBackend : public ::testing::TestWithParam<swap_dev_kind> {};

TEST(SwapBackendCreate, RejectsNoSlots) {
  swap_backend_options o;
  auto b = swap_backend::create(o);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().code(), EINVAL);
}

TEST_P(SwapBackend, StoredPagesReadBackAndReleaseFreesSlotAndObjectAtOnce) {
  auto b = make_backend(1024, GetParam());
  ASSERT_TRUE(b);
  alignas(64) unsigned char page[page_size];
  std::vector<swap_entry> entries;
  for (uint64_t tag = 1; tag <= 300; ++tag) {
    fill_tagged_page(tag, page);
    swap_entry e;
    uint32_t bytes = 0;
    ASSERT_EQ(b->store(page, &e, &bytes), 0) << tag;
    EXPECT_NE(swp_offset(e), 0u) << "the header slot was handed out";
    EXPECT_GT(bytes, 0u);
    EXPECT_LE(bytes, page_size);
    entries.push_back(e);
  }
  swap_backend_stats s = b->stats();
  EXPECT_EQ(s.used_slots, 300u);
  EXPECT_EQ(s.device.stored_pages, 300u);
  ASSERT_TRUE(b->check_invariants().ok()) << b->check_invariants().to_string();
  for (uint64_t tag = 1; tag <= 300; ++tag) {
    ASSERT_EQ(b->load(entries[tag - 1], page), 0);
    EXPECT_TRUE(page_has_tag(tag, page)) << tag;
  }
  // A load keeps the reference: the page reads again.
  ASSERT_EQ(b->load(entries[0], page), 0);
  EXPECT_TRUE(page_has_tag(1, page));
  for (size_t i = 0; i < entries.size(); i += 2) b->release(entries[i]);
  s = b->stats();
  EXPECT_EQ(s.used_slots, 150u);
  EXPECT_EQ(s.device.stored_pages, 150u) << "a released slot kept its page on the device";
  ASSERT_TRUE(b->check_invariants().ok()) << b->check_invariants().to_string();
  for (size_t i = 1; i < entries.size(); i += 2) b->release(entries[i]);
  s = b->stats();
  EXPECT_EQ(s.used_slots, 0u);
  EXPECT_EQ(s.device.stored_pages, 0u);
  EXPECT_TRUE(b->check_invariants().ok());
}

TEST_P(SwapBackend, AFullAreaRefusesWithEnospcAndKeepsWhatItHolds) {
  auto b = make_backend(SWAPFILE_CLUSTER * 2, GetParam());
  ASSERT_TRUE(b);
  alignas(64) unsigned char page[page_size];
  std::vector<swap_entry> entries;
  uint64_t tag = 1;
  int rc = 0;
  for (;; ++tag) {
    fill_tagged_page(tag, page);
    swap_entry e;
    uint32_t bytes;
    rc = b->store(page, &e, &bytes);
    if (rc != 0) break;
    entries.push_back(e);
    ASSERT_LE(entries.size(), SWAPFILE_CLUSTER * 2u);
  }
  EXPECT_EQ(rc, ENOSPC);
  EXPECT_EQ(entries.size(), b->stats().total_slots);
  for (size_t i = 0; i < entries.size(); ++i) {
    ASSERT_EQ(b->load(entries[i], page), 0);
    EXPECT_TRUE(page_has_tag(i + 1, page)) << i;
  }
  EXPECT_TRUE(b->check_invariants().ok());
  for (swap_entry e : entries) b->release(e);
}

TEST_P(SwapBackend, SameFilledPagesTakeNothingOnZram) {
  auto b = make_backend(64, GetParam());
  ASSERT_TRUE(b);
  alignas(64) uint64_t page[page_size / 8];
  for (auto& w : page) w = 0x5a5a5a5a5a5a5a5aull;
  swap_entry e;
  uint32_t bytes = 1;
  ASSERT_EQ(b->store(page, &e, &bytes), 0);
  EXPECT_EQ(bytes, GetParam() == swap_dev_kind::zram ? 0u : page_size);
  alignas(64) uint64_t back[page_size / 8] = {};
  ASSERT_EQ(b->load(e, back), 0);
  EXPECT_EQ(std::memcmp(page, back, page_size), 0);
  b->release(e);
}

TEST_P(SwapBackend, TheSwapCacheProtocolFreesTheDeviceCopyWithTheLastReference) {
  auto b = make_backend(64, GetParam());
  ASSERT_TRUE(b);
  alignas(64) unsigned char page[page_size];
  fill_tagged_page(7, page);
  // Swap-out as mm does it: a slot with SWAP_HAS_CACHE, two PTEs, the write, the cache dropped.
  const swap_entry e = b->swap().get_swap_page();
  ASSERT_FALSE(e.empty());
  ASSERT_TRUE(b->swap().swap_duplicate(e).ok());
  ASSERT_TRUE(b->swap().swap_duplicate(e).ok());
  ASSERT_TRUE(b->swap_writepage(e, page).ok());
  ASSERT_TRUE(b->swap().put_swap_page(e).ok());
  EXPECT_EQ(b->stats().device.stored_pages, 1u);
  alignas(64) unsigned char back[page_size];
  ASSERT_TRUE(b->swap_read_folio(e, back).ok());
  EXPECT_TRUE(page_has_tag(7, back));
  ASSERT_TRUE(b->swap().swap_free(e).ok());
  EXPECT_EQ(b->stats().device.stored_pages, 1u) << "one PTE still refers to the slot";
  ASSERT_TRUE(b->swap().swap_free(e).ok());
  EXPECT_EQ(b->stats().device.stored_pages, 0u);
  EXPECT_EQ(b->stats().used_slots, 0u);
  EXPECT_TRUE(b->check_invariants().ok());
}

TEST(SwapBackendSlotCache, AParkedSlotKeepsItsPageUntilTheCacheDrains) {
  // The 4.11 kernel's freeing-side slot cache: the last reference parks the slot, and zram's
  // object goes only when the cache returns it to the area.
  auto b = make_backend(1024, swap_dev_kind::zram, swap_lock_mode::cluster);
  ASSERT_TRUE(b);
  ASSERT_TRUE(b->swap().slot_cache_free_enabled());
  alignas(64) unsigned char page[page_size];
  fill_tagged_page(9, page);
  swap_entry e;
  uint32_t bytes;
  ASSERT_EQ(b->store(page, &e, &bytes), 0);
  b->release(e);
  EXPECT_EQ(b->stats().device.stored_pages, 1u);
  EXPECT_TRUE(b->check_invariants().ok()) << "a parked slot counts as used";
  b->swap().drain_swap_slots_cache();
  EXPECT_EQ(b->stats().device.stored_pages, 0u);
  EXPECT_EQ(b->stats().used_slots, 0u);
  EXPECT_TRUE(b->check_invariants().ok());
}

TEST_P(SwapBackend, TheCheckerFindsAPageLeftInAFreeSlot) {
  auto b = make_backend(64, GetParam());
  ASSERT_TRUE(b);
  alignas(64) unsigned char page[page_size];
  fill_tagged_page(3, page);
  // Written behind the allocator's back: slot 5 is free but holds a page.
  ASSERT_TRUE(b->device().write_page(5, page).ok());
  status st = b->check_invariants();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("free slot 5"), std::string_view::npos) << st.to_string();
  b->device().discard(5, 1);
  EXPECT_TRUE(b->check_invariants().ok());
}

INSTANTIATE_TEST_SUITE_P(Devices, SwapBackend,
                         ::testing::Values(swap_dev_kind::zram, swap_dev_kind::ram),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST(SwapBackendZram, AWriteRefusedAtMemLimitIsCountedAndChangesNothing) {
  swap_backend_options o;
  o.slots = 4096;
  o.swap.lock_mode = swap_lock_mode::percpu;
  o.swap.slot_cache = slot_cache_policy::off;
  o.zram.mem_limit = 256 * 1024;
  auto r = swap_backend::create(o);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  auto& b = **r;
  alignas(64) unsigned char page[page_size];
  std::vector<swap_entry> entries;
  int rc = 0;
  for (uint64_t tag = 1; tag < 4096; ++tag) {
    // Incompressible: every word distinct.
    auto* w = reinterpret_cast<uint64_t*>(page);
    for (size_t i = 0; i < page_size / 8; ++i) w[i] = mix64(tag * 4096 + i);
    swap_entry e;
    uint32_t bytes;
    rc = b.store(page, &e, &bytes);
    if (rc != 0) break;
    entries.push_back(e);
  }
  EXPECT_EQ(rc, ENOSPC);
  const swap_backend_stats s = b.stats();
  EXPECT_EQ(s.write_errors, 1u);
  EXPECT_EQ(s.used_slots, entries.size()) << "the refused store kept its slot";
  EXPECT_EQ(s.device.stored_pages, entries.size());
  EXPECT_TRUE(b.check_invariants().ok());
  // Lifting the limit lets stores through again.
  ASSERT_TRUE(b.device().set_mem_limit(0).ok());
  swap_entry e;
  uint32_t bytes;
  ASSERT_EQ(b.store(page, &e, &bytes), 0);
  b.release(e);
  for (swap_entry x : entries) b.release(x);
  EXPECT_EQ(b.stats().device.stored_pages, 0u);
}

TEST(SwapBackendRam, HasNoMemLimit) {
  auto b = make_backend(64, swap_dev_kind::ram);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->device().set_mem_limit(1 << 20).code(), ENOTSUP);
  EXPECT_EQ(b->device().mm_stat_text(), "");
  EXPECT_FALSE(b->stats().device.mm_stat.has_value());
}

TEST(SwapDevKind, NamesParseBack) {
  for (swap_dev_kind k : all_values(swap_dev_kind_names)) {
    auto p = parse_swap_dev_kind(to_string(k));
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(*p, k);
  }
  auto bad = parse_swap_dev_kind("nvme");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), EINVAL);
  EXPECT_NE(bad.error().message().find("zram, ram"), std::string_view::npos);
}

}  // namespace
}  // namespace uswap
