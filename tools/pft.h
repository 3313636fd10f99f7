// pft: the page-fault test of seed 001 (Christoph Lameter's pft, "Gb Rep Thr CLine User System
// Wall flt/cpu/s fault/wsec"), run on a uswap machine: `threads` threads of one mm fault in
// `pages_per_thread` pages each of one shared file mapping (or of anonymous memory), `reps`
// times (mmap, fault every page with a write, munmap). Reports faults per wall-second (first
// start to last finish) and per CPU-second (the threads' user + system time, getrusage
// RUSAGE_THREAD), as the seed's table does. RAM is sized so that nothing is reclaimed: the test
// measures the fault path and the reverse-map work it does (page cache insertion, rmap, i_mmap
// updates on mmap / munmap), under the rmap lock mode given.
//
// `uswap pft` runs it in alternating rounds per lock mode; `uswap bench seeds` (issue 9) calls
// run_pft directly.
//
// Thread-safety: run_pft may be called from one thread at a time (it resets the process-wide
// lock statistics). A pft_report is a plain value.
#pragma once

#include <cstdint>
#include <ostream>
#include <vector>

#include <nlohmann/json.hpp>

#include "alternate_rounds.h"
#include "seed_reference.h"
#include "uswap/base/status.h"
#include "uswap/mm/rmap_lock.h"
#include "uswap/mm/vmstat.h"
#include "uswap/sync/lockstat.h"

namespace uswap::tools {

struct pft_config {
  unsigned threads = 1;               // faulting threads (default 1)
  uint64_t pages_per_thread = 16384;  // pages each thread faults per rep (default 64 MiB)
  unsigned reps = 3;                  // mmap / fault / munmap repetitions (the seed's Rep: 3)
  bool anon = false;                  // fault anonymous memory instead of a shared file mapping
  rmap_lock_mode rmap_lock = rmap_lock_mode::rwsem;
};

struct pft_result {
  uint64_t faults = 0;           // page faults taken (pgfault)
  double wall_s = 0;             // summed over reps: first thread start to last thread finish
  double user_s = 0;             // the threads' user time, summed
  double sys_s = 0;              // the threads' system time, summed
  double cpu_s = 0;              // the threads' CPU time (CLOCK_THREAD_CPUTIME_ID), summed
  double faults_per_wall_s = 0;  // fault/wsec
  double faults_per_cpu_s = 0;   // flt/cpu/s: faults / cpu_s
  uint64_t errors = 0;           // failed accesses (must be 0)
  vm_event_counts events;
  std::vector<lock_stats> locks;  // lock classes with acquisitions during the run
};

// One run on a fresh machine. EINVAL for 0 threads, pages or reps.
result<pft_result> run_pft(const pft_config& cfg);

// `uswap pft`'s report: per thread count, every mode's rounds, with seed 001's page fault test
// rows beside the rwsem/spin change.
struct pft_report {
  pft_config config;               // pages per thread, reps, mapping (threads: see results)
  unsigned rounds = 0;
  struct thread_count {
    unsigned threads = 0;
    std::vector<mode_rounds<rmap_lock_mode, pft_result>> modes;
  };
  std::vector<thread_count> results;
  std::vector<seed_row> seed;      // seed 001's "page fault test" rows

  bool clean() const;              // no failed access in any run
  void print(std::ostream& out) const;
  nlohmann::json to_json() const;
};

}  // namespace uswap::tools
