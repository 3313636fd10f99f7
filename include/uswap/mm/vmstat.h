// VM event counters, with /proc/vmstat's names (include/linux/vm_event_item.h).
//
// Counting must not become a contended cache line of its own (every fault and every reclaimed
// page counts), so counters are sharded: each thread adds to one of 16 cache-line-aligned shards
// and snapshot() sums them, as the kernel's per-CPU vm_event_states are summed by all_vm_events.
//
// Thread-safety: count() is wait-free from any thread; snapshot() may run concurrently and then
// returns a sum that is at least every count completed before it started.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace uswap {

enum vm_event_item : unsigned {
  PGFAULT,          // faults handled (first touch and swap-in)
  PGMAJFAULT,       // faults that read the page from the swap device
  PGALLOC,          // frames allocated
  PGFREE,           // frames freed
  PSWPIN,           // pages read from swap
  PSWPOUT,          // pages written to swap
  PGSCAN_KSWAPD,    // pages scanned on the inactive list by kswapd
  PGSCAN_DIRECT,    // ... by direct reclaim
  PGSTEAL_KSWAPD,   // pages reclaimed by kswapd
  PGSTEAL_DIRECT,   // ... by direct reclaim
  PGACTIVATE,       // pages moved to the active list
  PGDEACTIVATE,     // pages moved to the inactive list
  PGREFILL,         // pages scanned on the active list
  ALLOCSTALL,       // allocations that entered direct reclaim
  KSWAPD_WAKEUP,    // times kswapd was woken
  SWAP_RA_HIT,      // swap-in faults that found the page in the swap cache
  OOM_KILL,         // allocations that failed with ENOMEM (the kernel would OOM-kill)
  NR_WRITTEN,       // dirty file pages written back to their file by reclaim or invalidate
  NR_VM_EVENT_ITEMS
};

// /proc/vmstat's spelling of each item.
const char* vm_event_name(vm_event_item item) noexcept;

struct vm_event_counts {
  std::array<uint64_t, NR_VM_EVENT_ITEMS> v{};
  uint64_t operator[](vm_event_item i) const { return v[i]; }
  // (name, value) pairs in enum order.
  std::vector<std::pair<std::string, uint64_t>> items() const;
};

class vm_events {
 public:
  void count(vm_event_item item, uint64_t n = 1) noexcept {
    shards_[shard()].v[item].fetch_add(n, std::memory_order_relaxed);
  }
  vm_event_counts snapshot() const;

 private:
  static constexpr unsigned nr_shards = 16;
  struct alignas(64) shard_t {
    std::array<std::atomic<uint64_t>, NR_VM_EVENT_ITEMS> v{};
  };
  static unsigned shard() noexcept;
  std::array<shard_t, nr_shards> shards_{};
};

}  // namespace uswap
