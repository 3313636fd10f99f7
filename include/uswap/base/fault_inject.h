// fault_inject: make the N-th host allocation or backing-file I/O of a named point fail, after the
// kernel's fault-injection framework (lib/fault-inject.c: struct fault_attr, should_fail();
// failslab's should_failslab(), fail_page_alloc, and the per-task fail-nth file, whose "fail the
// N-th call" this is). Tests use it to prove that every failure an allocation or an I/O can
// have is an error returned to the caller, with the state left consistent and nothing stored lost.
//
// A site asks `if (const int err = should_fail(fault_point::P)) { ...fail with err... }`. A test
// arms a point: fault_inject_arm(P, nth, err, times) makes the nth hit from now fail with `err`,
// and the times - 1 hits after it too (fault_inject_forever: every hit from the nth on);
// fault_inject_count(P) only counts hits, to learn how many a workload makes. `uswap run` arms
// points from USWAP_FAIL_INJECT (fault_inject_setup: "point:N[+|-M][:ERRNO],...").
//
// Cost when nothing is armed: one relaxed load of a global word and a branch predicted not taken,
// at allocation sites (a new zspage, a table, a mapping) and around backing-file I/O, none of
// them per stored page: so the facility is compiled into every build rather than gated by a
// compile definition, and `uswap run` can use it on the binaries that are tested.
//
// Thread-safety: every function may be called from any thread; should_fail() is async-signal-
// safe (atomics only: the pager's SIGBUS handler reaches hooked sites). Hits are counted per
// point over all threads: with threads the N-th hit is whichever thread comes N-th. Arming while
// a workload runs is allowed but makes the N-th hit a race; tests arm between workloads.
// Invariants: a point's failures <= its hits since it was armed; an armed point fails exactly
// the hits numbered nth .. nth + times - 1; disarmed points are never counted.
#pragma once

#include <atomic>
#include <cstdint>
#include <iterator>
#include <string_view>

#include "uswap/base/enum_names.h"
#include "uswap/base/status.h"

namespace uswap {

// The named points; a point's comment says where its hook sits (the layer docs list them too).
enum class fault_point : uint8_t {
  zs_malloc_page,  // zsmalloc: the memory of a new zspage (alloc_zspage's alloc_page)
  zs_meta,         // zsmalloc: a new segment of a class's handle or zspage-descriptor table
  zram_table,      // zram: the slot table and the huge-page checksums (zram_meta_alloc)
  backing_bitmap,  // zram: the backing file's block bitmap (backing_dev_store's bitmap_zalloc)
  zram_pp,         // zram: growing the list of slots writeback or recompress selected (pp_ctl)
  backing_read,    // zram: a backing-file block read (pread), EIO by default
  backing_write,   // zram: a backing-file block write (pwrite), EIO or ENOSPC
  swap_map,        // swap: a swap area's swap_map at swapon
  cluster_info,    // swap: a swap area's cluster_info and cluster lists at swapon
  pager_meta,      // uffd: a pager's per-page tables (ptes, handles, LRU links) at create
  pager_arena,     // uffd: the pager's arena reservation at create
  pager_map,       // uffd: room for a new mapping in the arena (map, map_fixed, remap's move)
  futex_waitv,     // sync: futex_wait_any's futex_waitv, refused as by a kernel without it
};
inline constexpr unsigned nr_fault_points = 13;

inline constexpr enum_name<fault_point> fault_point_names[] = {
    {fault_point::zs_malloc_page, "zs_malloc_page"},
    {fault_point::zs_meta, "zs_meta"},
    {fault_point::zram_table, "zram_table"},
    {fault_point::backing_bitmap, "backing_bitmap"},
    {fault_point::zram_pp, "zram_pp"},
    {fault_point::backing_read, "backing_read"},
    {fault_point::backing_write, "backing_write"},
    {fault_point::swap_map, "swap_map"},
    {fault_point::cluster_info, "cluster_info"},
    {fault_point::pager_meta, "pager_meta"},
    {fault_point::pager_arena, "pager_arena"},
    {fault_point::pager_map, "pager_map"},
    {fault_point::futex_waitv, "futex_waitv"}};
static_assert(valid_table(fault_point_names));
static_assert(std::size(fault_point_names) == nr_fault_points);

std::string_view to_string(fault_point p) noexcept;

inline constexpr uint64_t fault_inject_forever = ~uint64_t{0};

// Arms `p`: hits are counted from 0 again; hit number nth (1-based) and the times - 1 after it
// return `err` from should_fail(). nth 0 or times 0 only counts (as fault_inject_count).
void fault_inject_arm(fault_point p, uint64_t nth, int err, uint64_t times = 1) noexcept;
// Counts hits of `p` from 0 without failing any.
void fault_inject_count(fault_point p) noexcept;
// Stops counting and failing `p` (its counts stay readable until it is armed again).
void fault_inject_disarm(fault_point p) noexcept;
void fault_inject_disarm_all() noexcept;
// Hits of `p` since it was armed or counted, and how many of them failed.
uint64_t fault_inject_hits(fault_point p) noexcept;
uint64_t fault_inject_failures(fault_point p) noexcept;

// Arms points from a specification, as USWAP_FAIL_INJECT gives it: comma-separated
// "point:N" (the N-th hit fails), "point:N+" (every hit from the N-th on), "point:N-M" (hits N
// to M), each optionally followed by ":ENOMEM", ":EIO" or ":ENOSPC" (default ENOMEM, EIO for
// backing_read and backing_write). EINVAL naming the bad part otherwise, with no point armed.
status fault_inject_setup(std::string_view spec);

namespace fault_inject_detail {
// Bit p set while point p is armed or counted: the one word the fast path loads.
extern std::atomic<uint32_t> active_mask;
int should_fail_slow(fault_point p) noexcept;
}  // namespace fault_inject_detail

// Kernel: should_fail(). 0 to go on, or the errno the site must fail with.
inline int should_fail(fault_point p) noexcept {
  if (fault_inject_detail::active_mask.load(std::memory_order_relaxed) == 0) [[likely]]
    return 0;
  return fault_inject_detail::should_fail_slow(p);
}

}  // namespace uswap
