// swapbench: seed 000's slot allocator measured in its lock forms side by side, as a function
// that `uswap swapbench` and `uswap bench seeds` both call.
//
// N threads do to swap slots what swap-out and swap-in do, with the page work left out or
// simulated (see tools/swapbench.cc). The forms run in alternating rounds (A B C A B C ...), a
// fresh swap_system per round; each round ends by releasing every slot and checking the areas'
// invariants, so a broken allocator cannot produce a figure. Optionally one more round per form
// runs with lockstat on and gives the lock statistics that explain the ratios.
//
// Thread-safety: run_swapbench may be called from one thread at a time (it switches the
// process-wide lock statistics on and off). A swapbench_report is a plain value.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "alternate_rounds.h"
#include "uswap/base/status.h"
#include "uswap/swap/swap.h"
#include "uswap/sync/lockstat.h"

namespace uswap::tools {

// A measured form: a lock mode, and for percpu whether inuse_pages is a per-thread-slot counter
// ("percpu", uswap's default) or the kernel's single shared atomic ("percpu-atomic"); with the
// suffix "-notag" (e.g. "percpu-notag"), the kernel's choice of a new cluster without uswap's
// freer tag (swap_options::freer_tag).
struct swapbench_mode {
  std::string label;
  swap_lock_mode mode = swap_lock_mode::global;
  bool percpu_inuse_counter = true;
  bool freer_tag = true;
};

// "global", "cluster", "percpu" or "percpu-atomic", each optionally with "-notag"; EINVAL
// naming the valid ones otherwise.
result<swapbench_mode> parse_swapbench_mode(std::string_view text);
// A comma-separated list of them, in the order given; EINVAL for an empty list or item.
result<std::vector<swapbench_mode>> parse_swapbench_modes(std::string_view text);

struct swapbench_config {
  std::vector<unsigned> threads{2, 16};     // thread counts to measure; default 2 and 16
  std::vector<swapbench_mode> modes;        // forms; validate fills global, cluster, percpu if empty
  slot_cache_policy slot_cache = slot_cache_policy::by_mode;
  unsigned rounds = 7;                      // rounds per form; default 7
  double duration_s = 0.5;                  // seconds per round; default 0.5
  uint64_t size = uint64_t{1} << 30;        // swap space; default 1 GiB
  uint64_t work = 0;                        // bytes of page work per page step; default 0
  unsigned batch = 32;                      // pages per swap-out batch; default 32
  unsigned resident = 2048;                 // pages each thread keeps swapped out; default 2048
  unsigned mappings = 1;                    // ptes per swapped page; default 1
  unsigned areas = 1;                       // swap areas of equal priority; default 1
  bool lockstat_round = true;               // one more round per form with lockstat on
};

// EINVAL with a message naming the option for a bad configuration (the CLI's wording).
status validate_swapbench(swapbench_config& cfg);

struct swapbench_mode_result {
  swapbench_mode spec;
  std::vector<double> ops_per_sec;    // per round
  std::vector<double> pages_per_sec;  // swap-outs per second, per round
  std::vector<double> cores;          // CPU time of the workers / wall time, per round
  std::vector<double> ops_per_cpu_sec;  // slot operations per CPU-second of the workers, per round
  std::vector<lock_stats> locks;      // from the lockstat round (si->lock, cluster_lock, cache)
  uint64_t lockstat_ops = 0;          // slot operations in the lockstat round
  double med() const;
  double lo() const { return min_of(ops_per_sec); }
  double hi() const { return max_of(ops_per_sec); }
};

struct swapbench_result {
  // per[k][i]: thread count cfg.threads[k], form cfg.modes[i].
  std::vector<std::vector<swapbench_mode_result>> per;
};

// A line of progress text after each round.
using swapbench_progress_fn = std::function<void(const std::string&)>;

// Runs the rounds. cfg must have passed validate_swapbench. EIO (naming the form and thread)
// when a round failed or left the areas inconsistent.
result<swapbench_result> run_swapbench(const swapbench_config& cfg,
                                       const swapbench_progress_fn& progress = {});

// `uswap swapbench`'s report: the measurement, the machine, and seed 000's published figure.
struct swapbench_report {
  swapbench_config config;
  unsigned cpus = 0;
  std::string cpu_model;
  swapbench_result result;

  // The baseline of the ratios: the global form if measured, else the first.
  size_t base_index() const;
  nlohmann::json to_json() const;
  void print(std::ostream& out) const;
};

}  // namespace uswap::tools
