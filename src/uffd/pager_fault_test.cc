// The pager under fault injection (uswap/base/fault_inject.h): for every N a workload reaches,
// the N-th pager table, arena reservation, arena mapping, zspage or zsmalloc table segment is
// refused. create, map, map_fixed, remap, protect and unmap succeed or return ENOMEM, and a failed
// one leaves the arena as it was (a refused map_fixed keeps the mapping it would have replaced;
// the records' nodes are reserved before anything changes, record_nodes.h); a refused
// zspage during eviction keeps its victim resident (swap_out_failures) instead of losing it.
// check_invariants holds, every page written reads back byte-identical, and with the point
// disarmed the work completes and the pager ends holding nothing.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "uffd_test_util.h"
#include "uswap/base/fault_inject.h"
#include "uswap_testing/fault_sweep.h"

namespace uswap {
namespace {

using namespace uffd_test;
using uswap::testing::fault_run;
using uswap::testing::fault_sweep;

constexpr uint64_t nr_maps = 6;
constexpr uint64_t map_pages = 32;  // six of them: three times the limit

struct mapping {
  uint8_t* addr = nullptr;
  uint64_t pages = 0;
  uint64_t zero_pages = 0;  // the first pages, replaced by a map_fixed: zeros
};

uint64_t page_id(uint64_t m, uint64_t i) { return m * 1000 + i; }

// Every page of every mapping as written (or zeros where a map_fixed replaced it).
uint64_t verify(const std::vector<mapping>& maps) {
  uint64_t verified = 0;
  std::vector<uint8_t> zeros(page_size, 0);
  for (uint64_t m = 0; m < maps.size(); ++m) {
    if (!maps[m].addr) continue;
    for (uint64_t i = 0; i < maps[m].pages; ++i) {
      const uint8_t* p = maps[m].addr + i * page_size;
      if (i < maps[m].zero_pages)
        EXPECT_EQ(std::memcmp(p, zeros.data(), page_size), 0) << "mapping " << m << " page " << i;
      else
        EXPECT_TRUE(page_matches(p, page_id(m, i), 0)) << "mapping " << m << " page " << i;
      ++verified;
    }
  }
  return verified;
}

void write_all(mapping& mp, uint64_t m) {
  for (uint64_t i = mp.zero_pages; i < mp.pages; ++i)
    fill_page(mp.addr + i * page_size, page_id(m, i), 0);
}

fault_run pager_workload(fault_mode mode) {
  fault_run r;
  const pager_options o = options(mode, 64 * page_size, 8 * MiB);
  auto created = pager::create(o);
  ++r.ops;
  if (!created.ok()) {
    EXPECT_EQ(created.error().code(), ENOMEM) << created.error().to_string();
    ++r.failed;
    fault_inject_disarm_all();
    created = pager::create(o);
    EXPECT_TRUE(created.ok()) << created.error().to_string();
    if (!created.ok()) return r;
  }
  pager& pg = **created;
  const auto ok_or_enomem = [&](const status& st) {
    ++r.ops;
    if (st.ok()) return true;
    EXPECT_EQ(st.code(), ENOMEM) << st.to_string();
    ++r.failed;
    return false;
  };
  std::vector<mapping> maps(nr_maps);
  for (uint64_t m = 0; m < nr_maps; ++m) {
    auto a = pg.map(map_pages * page_size);
    if (!ok_or_enomem(a.ok() ? status{} : a.error())) continue;
    maps[m] = {static_cast<uint8_t*>(*a), map_pages, 0};
    write_all(maps[m], m);
  }
  // Grow one mapping (in place or moved): its pages come along either way, or stay if refused.
  if (maps[0].addr) {
    auto g = pg.remap(maps[0].addr, map_pages * page_size, 2 * map_pages * page_size, true);
    if (ok_or_enomem(g.ok() ? status{} : g.error())) {
      maps[0].addr = static_cast<uint8_t*>(*g);
      maps[0].pages = 2 * map_pages;
      write_all(maps[0], 0);  // the new half; the old half is rewritten with the same contents
    }
  }
  // Replace the head of another with a fresh mapping: zeros there if it worked, the old pages
  // if it was refused.
  if (maps[1].addr) {
    auto f = pg.map_fixed(maps[1].addr, 8 * page_size, PROT_READ | PROT_WRITE);
    if (ok_or_enomem(f.ok() ? status{} : f.error())) maps[1].zero_pages = 8;
  }
  // Make the middle of another read-only (two splits), and cut the tail off a fourth: each
  // succeeds or changes nothing.
  if (maps[2].addr)
    ok_or_enomem(pg.protect(maps[2].addr + 4 * page_size, 8 * page_size, PROT_READ));
  if (maps[3].addr && ok_or_enomem(pg.unmap(maps[3].addr + 24 * page_size, 8 * page_size)))
    maps[3].pages = 24;
  r.pages_verified += verify(maps);  // refaults with the point still armed

  fault_inject_disarm_all();
  r.failed += pg.stats().swap_out_failures;  // refused zspages: their victims stayed
  {
    const status inv = pg.check_invariants();
    EXPECT_TRUE(inv.ok()) << inv.to_string();
  }
  r.pages_verified += verify(maps);
  // The work completes: every mapping refused is made and written.
  for (uint64_t m = 0; m < nr_maps; ++m) {
    if (maps[m].addr) continue;
    auto a = pg.map(map_pages * page_size);
    EXPECT_TRUE(a.ok()) << a.error().to_string();
    if (!a.ok()) continue;
    maps[m] = {static_cast<uint8_t*>(*a), map_pages, 0};
    write_all(maps[m], m);
  }
  r.pages_verified += verify(maps);
  {
    const status inv = pg.check_invariants();
    EXPECT_TRUE(inv.ok()) << inv.to_string();
  }
  for (const mapping& mp : maps) {
    if (mp.addr) {
      EXPECT_TRUE(pg.unmap(mp.addr, mp.pages * page_size).ok());
    }
  }
  expect_holds_nothing(pg);
  return r;
}

struct point_case {
  fault_point point;
  fault_mode mode;
};

class PagerFaultTest : public ::testing::TestWithParam<point_case> {};

TEST_P(PagerFaultTest, EachFailureIsReturnedOrKeepsThePageAndNothingIsLost) {
  const point_case c = GetParam();
  // How many zspages eviction allocates depends on which victims each pass finds (handler
  // threads, write-protect sweeps): not the same from run to run, so the last N may not be
  // reached. The pager's own points are hit by its operations alone, always in the same order.
  const bool exact = c.point != fault_point::zs_malloc_page && c.point != fault_point::zs_meta;
  const auto rep = fault_sweep(std::string("pager-") + std::string(to_string(c.mode)), c.point,
                               ENOMEM, [&] { return pager_workload(c.mode); }, 1000, exact);
  // Every refusal reaches someone: an operation's ENOMEM, or a victim kept resident.
  EXPECT_EQ(rep.failed, rep.injected);
  if (exact) {
    EXPECT_EQ(rep.injected, rep.tried);
  }
}

std::string case_name(const ::testing::TestParamInfo<point_case>& info) {
  return std::string(to_string(info.param.point)) +
         (info.param.mode == fault_mode::sigbus ? "_sigbus" : "_handler_thread");
}

std::vector<point_case> every_case() {
  std::vector<point_case> v;
  for (fault_mode mode : {fault_mode::sigbus, fault_mode::handler_thread})
    for (fault_point p : {fault_point::pager_meta, fault_point::pager_arena, fault_point::pager_map,
                          fault_point::zs_malloc_page, fault_point::zs_meta})
      v.push_back({p, mode});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Points, PagerFaultTest, ::testing::ValuesIn(every_case()), case_name);

}  // namespace
}  // namespace uswap
