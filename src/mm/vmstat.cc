// Sharded VM event counters; see include/uswap/mm/vmstat.h.
#include "uswap/mm/vmstat.h"

namespace uswap {

const char* vm_event_name(vm_event_item item) noexcept {
  switch (item) {
    case PGFAULT: return "pgfault";
    case PGMAJFAULT: return "pgmajfault";
    case PGALLOC: return "pgalloc";
    case PGFREE: return "pgfree";
    case PSWPIN: return "pswpin";
    case PSWPOUT: return "pswpout";
    case PGSCAN_KSWAPD: return "pgscan_kswapd";
    case PGSCAN_DIRECT: return "pgscan_direct";
    case PGSTEAL_KSWAPD: return "pgsteal_kswapd";
    case PGSTEAL_DIRECT: return "pgsteal_direct";
    case PGACTIVATE: return "pgactivate";
    case PGDEACTIVATE: return "pgdeactivate";
    case PGREFILL: return "pgrefill";
    case ALLOCSTALL: return "allocstall";
    case KSWAPD_WAKEUP: return "kswapd_wakeup";
    case SWAP_RA_HIT: return "swap_ra_hit";
    case OOM_KILL: return "oom_kill";
    case NR_WRITTEN: return "nr_written";
    case NR_VM_EVENT_ITEMS: break;
  }
  return "?";
}

std::vector<std::pair<std::string, uint64_t>> vm_event_counts::items() const {
  std::vector<std::pair<std::string, uint64_t>> out;
  out.reserve(NR_VM_EVENT_ITEMS);
  for (unsigned i = 0; i < NR_VM_EVENT_ITEMS; ++i)
    out.emplace_back(vm_event_name(static_cast<vm_event_item>(i)), v[i]);
  return out;
}

vm_event_counts vm_events::snapshot() const {
  vm_event_counts c;
  for (const auto& s : shards_)
    for (unsigned i = 0; i < NR_VM_EVENT_ITEMS; ++i) c.v[i] += s.v[i].load(std::memory_order_relaxed);
  return c;
}

unsigned vm_events::shard() noexcept {
  static std::atomic<unsigned> next{0};
  thread_local const unsigned mine = next.fetch_add(1, std::memory_order_relaxed) % nr_shards;
  return mine;
}

}  // namespace uswap
