// Plumbing shared by the rmap workloads' subcommands (pft.cc, aim9.cc, rmap_bench.cc):
// --rmap-lock lists, per-thread CPU time, what they print of alternating rounds over the rmap
// lock modes (the rwsem/spin ratio, the lock statistics summed per mode; the rounds themselves
// run in alternate_rounds.h) and seed 001's published figures (compiled in, for when the shared
// reference file is not there).
//
// Thread-safety: pure functions, except thread_times() which reads the calling thread's usage
// and print_lock_tables() which writes to stdout (call both from one thread at a time).
//
// Invariants: the ratios and tables are of the rounds as run_alternating_rounds returned them;
// a mode that was not run gives no ratio (std::nullopt) rather than a made-up one.
#pragma once

#include <sys/resource.h>

#include <ctime>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "alternate_rounds.h"
#include "seed_reference.h"
#include "uswap/base/status.h"
#include "uswap/mm/rmap_lock.h"
#include "uswap/sync/lockstat.h"

namespace uswap::tools::rmap_util {

// "spin", "rwsem", "all" (spin, rwsem) or a comma list.
inline result<std::vector<rmap_lock_mode>> parse_modes(const std::string& text) {
  if (text == "all") return std::vector<rmap_lock_mode>{rmap_lock_mode::spin, rmap_lock_mode::rwsem};
  std::vector<rmap_lock_mode> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    auto r = parse_rmap_lock_mode(item);
    if (!r) return r.error();
    out.push_back(*r);
  }
  if (out.empty()) return error(EINVAL, "empty --rmap-lock list");
  return out;
}

struct cpu_times {
  double user = 0, sys = 0;  // RUSAGE_THREAD: the kernel's tick-sampled split, for display
  double total = 0;          // CLOCK_THREAD_CPUTIME_ID: exact to the nanosecond, for rates
};
// The calling thread's CPU time so far. Rates divide by `total`: a run of a millisecond or two
// (bench seeds --quick) gave user + sys deltas of 0 from getrusage on this machine, and a
// flt/cpu/s of 0 with them.
inline cpu_times thread_times() {
  rusage ru{};
  getrusage(RUSAGE_THREAD, &ru);
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return {ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6, ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6,
          ts.tv_sec + ts.tv_nsec / 1e9};
}

// `cfg` run once per round and rmap lock mode (cfg.rmap_lock set to the mode), alternating the
// modes: run_alternating_rounds with the copy of the configuration every rmap tool makes.
template <class Config, class Run, class Progress>
auto run_rounds(const std::vector<rmap_lock_mode>& modes, unsigned rounds, const Config& cfg,
                Run&& run, Progress&& progress) {
  return run_alternating_rounds(
      modes, rounds,
      [&](unsigned, rmap_lock_mode md) {
        Config c = cfg;
        c.rmap_lock = md;
        return run(c);
      },
      progress);
}

// median(rwsem) / median(spin) of one figure of the rounds, or nothing unless both modes ran.
template <class Sample, class Proj>
std::optional<double> rwsem_over_spin(const std::vector<mode_rounds<rmap_lock_mode, Sample>>& all,
                                      Proj proj) {
  const auto* spin = find_mode(all, rmap_lock_mode::spin);
  const auto* rwsem = find_mode(all, rmap_lock_mode::rwsem);
  if (!spin || !rwsem) return std::nullopt;
  return median(rwsem->values(proj)) / median(spin->values(proj));
}

// out["locks_summed_over_rounds"][mode]: each mode's lock statistics summed over its rounds.
template <class Sample>
void add_locks_json(nlohmann::json& out, const std::vector<mode_rounds<rmap_lock_mode, Sample>>& all) {
  for (const auto& m : all)
    out["locks_summed_over_rounds"][to_string(m.mode)] = nlohmann::json::parse(lockstat::to_json(m.locks));
}

// One lock contention table per mode, summed over its rounds (aim9's and rmap-bench's text).
template <class Sample>
void print_lock_tables(const std::vector<mode_rounds<rmap_lock_mode, Sample>>& all) {
  for (const auto& m : all)
    std::printf("\nlock contention, rmap %s (summed over rounds):\n%s", to_string(m.mode),
                lockstat::format_table(m.locks).c_str());
}

// The lock classes with acquisitions right now (after a run that began with reset_all()).
inline std::vector<lock_stats> active_locks() {
  std::vector<lock_stats> out;
  for (lock_stats& s : lockstat::snapshot_all())
    if (s.acquisitions) out.push_back(std::move(s));
  return out;
}

// Seed 001's rows: the shared reference file, else the thread's figures as posted (compiled into
// seed_reference.cc with every seed's).
inline seed_table seed001() { return load_seed_rows(default_seed_results_path(), "001"); }

// The seed's rows of one experiment (prefix match on the experiment name).
inline std::vector<seed_row> seed001_rows(const std::string& experiment_prefix) {
  std::vector<seed_row> out;
  for (const seed_row& r : seed001().rows)
    if (r.experiment.rfind(experiment_prefix, 0) == 0) out.push_back(r);
  return out;
}

}  // namespace uswap::tools::rmap_util
