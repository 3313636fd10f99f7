// usemem: vm-scalability's usemem, run on a uswap machine instead of the host kernel: N tasks
// each map SIZE bytes of anonymous memory and write every 8-byte word of it (word i gets i, as
// usemem's `p[idx] = idx`, with the task number in the top bits so tasks differ), through a
// machine whose RAM is smaller than the total, so reclaim pushes pages out through swap to zram
// or to an uncompressed RAM device. Each task reports `N bytes / T usecs = X KB/s` for its write
// pass; the case's throughput is their sum (swap-w-seq's figure). --verify reads every page back
// afterwards (every one that went out comes in again) and compares every word.
//
// Tasks are threads of one mm_struct (-t, usemem --thread) or each the only thread of its own
// mm_struct (-n, usemem --nproc). `uswap bench seeds` (issue 9) calls run_usemem directly.
//
// Thread-safety: run_usemem may be called from one thread at a time (it enables and resets the
// process-wide lock statistics). A usemem_report is a plain value.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "alternate_rounds.h"
#include "seed_reference.h"
#include "uswap/base/status.h"
#include "uswap/mm/machine.h"
#include "uswap/mm/vmstat.h"
#include "uswap/swap/swap.h"
#include "uswap/sync/lockstat.h"
#include "uswap/zram/zram.h"

namespace uswap::tools {

struct usemem_config {
  unsigned tasks = 1;             // number of tasks (default 1)
  bool separate_mms = false;      // -n: one mm per task; default: threads of one mm (-t)
  uint64_t size = 64ull << 20;    // bytes per task, rounded up to pages; default 64 MiB
  bool random = false;            // write the pages in a random order (each page once)
  bool verify = false;            // read every page back after all tasks wrote and compare
  uint64_t ram = 256ull << 20;    // the machine's RAM; default 256 MiB
  uint64_t swap = 0;              // swap space; 0 (default): tasks * size + ram, enough for all
  swap_dev_kind swap_dev = swap_dev_kind::zram;
  swap_lock_mode swap_lock = swap_lock_mode::cluster;
  slot_cache_policy slot_cache = slot_cache_policy::by_mode;
  zram_lock_mode zram_lock = zram_lock_mode::slot_bitlock;
  std::string comp = "lzo";       // zram's codec; default lzo (zram's default family)
  bool kswapd = true;
};

struct usemem_task_result {
  uint64_t bytes = 0;         // bytes written
  uint64_t usecs = 0;         // duration of the write pass
  double kbps = 0;            // bytes / usecs in KB/s, as usemem prints it
  uint64_t verify_usecs = 0;  // duration of the verify pass (0 without --verify)
  uint64_t pages_verified = 0;
  uint64_t mismatches = 0;    // pages whose contents differed from what was written
  std::string error;          // the first failed access (e.g. ENOMEM), empty if none
};

struct usemem_result {
  std::vector<usemem_task_result> tasks;
  double total_kbps = 0;      // sum over tasks (vm-scalability's throughput of the case)
  uint64_t wall_usecs = 0;    // whole write phase, first start to last finish
  uint64_t mismatches = 0;
  uint64_t errors = 0;        // tasks that failed an access
  vm_event_counts events;     // at the end of the verify pass, before teardown
  swap_usage swap;            // idem
  std::optional<zram_mm_stat> mm_stat;  // zram only
  std::string mm_stat_text;
  std::vector<lock_stats> locks;        // every lock class with acquisitions, during the run
  bool teardown_clean = false;          // after exit: no slot, no cached page, no zram object
};

// Progress callback: called about every 200 ms from a monitor thread with the bytes written and
// verified so far.
using usemem_progress_fn = std::function<void(uint64_t written, uint64_t verified,
                                              const vm_event_counts& ev)>;

// One run on a fresh machine. EINVAL for a bad configuration; the machine's creation errors.
// Task failures (ENOMEM when RAM and swap run out) are reported in the result, not as an error.
result<usemem_result> run_usemem(const usemem_config& cfg, const usemem_progress_fn& progress = {});

// One run's figures as JSON: tasks, vmstat, swap, mm_stat, locks.
nlohmann::json to_json(const usemem_result& r);

// A pair of lock modes `uswap usemem` compares.
struct usemem_combo {
  swap_lock_mode swap_lock = swap_lock_mode::cluster;
  zram_lock_mode zram_lock = zram_lock_mode::slot_bitlock;
  // "swap cluster / zram slot_bitlock" (the zram part only when swapping to zram).
  std::string name(swap_dev_kind dev) const;
  bool operator==(const usemem_combo&) const = default;
};

// `uswap usemem`'s report. One run (one combination, one round): usemem's own lines and the
// machine's counters. Alternating rounds: each round's line, every combination's median with
// its ratio to the first, seed 000's figures, and the lock tables summed over the rounds.
struct usemem_report {
  usemem_config config;            // the runs' configuration but for the lock modes
  unsigned rounds = 1;
  bool round_lines = true;         // print each round's line (not with -q)
  std::vector<mode_rounds<usemem_combo, usemem_result>> combos;
  std::optional<seed_row> seed;    // seed 000's swap-out throughput (alternating rounds only)
  std::string seed_source;

  bool single() const { return combos.size() == 1 && rounds == 1; }
  bool clean() const;              // every page verified, no task error, clean teardown
  void print(std::ostream& out) const;
  nlohmann::json to_json() const;
};

}  // namespace uswap::tools
