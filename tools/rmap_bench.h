// rmap_bench: reclaim against faults, the workload where seed 001's shared rmap walks should pay.
//
// A parent maps anonymous memory and a file (shared), touches all of it and forks `forks`
// children that keep every page shared, so each page is mapped `forks + 1` times: every
// page_referenced and try_to_unmap walks that many VMAs under one lock, the anon_vma root lock
// of the whole fork tree or the file's i_mmap lock. The machine's RAM holds only part of the
// working set, so `threads` threads that read through the children's mappings (each its own
// child) fault pages back continuously while kswapd and the faulting threads' direct reclaim
// walk the same pages' reverse maps to push them out again. In spin mode every walk excludes
// every other; in rwsem mode they proceed together.
//
// Reports accesses (page touches, most of them faults) per second and the rmap lock statistics.
// `uswap rmap-bench` runs it in alternating rounds per lock mode; `uswap bench seeds` (issue 9)
// may call run_rmap_bench directly.
//
// Thread-safety: run_rmap_bench may be called from one thread at a time. An rmap_bench_report is
// a plain value.
#pragma once

#include <cstdint>
#include <ostream>
#include <vector>

#include <nlohmann/json.hpp>

#include "alternate_rounds.h"
#include "uswap/base/status.h"
#include "uswap/mm/rmap_lock.h"
#include "uswap/backend/swap_device.h"
#include "uswap/mm/vmstat.h"
#include "uswap/sync/lockstat.h"

namespace uswap::tools {

struct rmap_bench_config {
  unsigned threads = 4;          // faulting threads (default 4: more than the 2 cores)
  unsigned forks = 16;           // children sharing every page (default 16)
  uint64_t anon_pages = 4096;    // the parent's anonymous memory (default 16 MiB)
  uint64_t file_pages = 4096;    // the shared file (default 16 MiB)
  uint64_t ram_pages = 4096;     // the machine's RAM: half the working set (default 16 MiB)
  double seconds = 2.0;          // measured time
  swap_dev_kind swap_dev = swap_dev_kind::ram;  // uncompressed: the locks, not the codec
  rmap_lock_mode rmap_lock = rmap_lock_mode::rwsem;
};

struct rmap_bench_result {
  uint64_t accesses = 0;         // pages touched by the faulting threads
  uint64_t faults = 0;           // pgfault during the measured time
  double seconds = 0;
  double accesses_per_s = 0;
  double faults_per_s = 0;
  uint64_t walks_reclaimed = 0;  // pgsteal (kswapd + direct) during the measured time
  uint64_t mismatches = 0;       // pages read back with the wrong contents (must be 0)
  uint64_t errors = 0;
  vm_event_counts events;
  std::vector<lock_stats> locks;
};

// EINVAL for 0 threads, pages or RAM below 64 pages.
result<rmap_bench_result> run_rmap_bench(const rmap_bench_config& cfg);

// `uswap rmap-bench`'s report: every mode's rounds.
struct rmap_bench_report {
  rmap_bench_config config;
  unsigned rounds = 0;
  std::vector<mode_rounds<rmap_lock_mode, rmap_bench_result>> modes;

  bool clean() const;              // no errors or mismatches in any run
  void print(std::ostream& out) const;
  nlohmann::json to_json() const;
};

}  // namespace uswap::tools
