// Plumbing shared by the rmap workloads' subcommands (pft.cc, aim9.cc, rmap_bench.cc): the
// --rmap-lock list, what their reports hold and print of alternating rounds over the rmap lock
// modes (each run in run order, the rwsem/spin ratio, the lock statistics summed per mode; the
// rounds themselves run in alternate_rounds.h) and seed 001's published figures (compiled in,
// for when the shared reference file is not there).
//
// Thread-safety: pure functions of their arguments, except run_timed, which runs the caller's
// threads; the printers write to the stream given.
//
// Invariants: the ratios and tables are of the rounds as run_alternating_rounds returned them;
// a mode that was not run gives no ratio (std::nullopt) rather than a made-up one.
#pragma once

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <iostream>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "alternate_rounds.h"
#include "cli.h"
#include "report.h"
#include "seed_reference.h"
#include "uswap/mm/rmap_lock.h"
#include "uswap/sync/lockstat.h"

namespace uswap::tools::rmap_util {

// One mode's rounds of a workload whose samples are `Sample`.
template <class Sample>
using rounds_of = std::vector<mode_rounds<rmap_lock_mode, Sample>>;

// What every rmap tool's command line gives: the workload's configuration, the modes to
// compare, how many rounds (0 counts as 1) and whether to print JSON.
template <class Config>
struct options {
  Config cfg;
  std::vector<rmap_lock_mode> modes = all_values(rmap_lock_mode_names);
  unsigned rounds = 5;
  bool json = false;
};

// --rmap-lock ("spin", "rwsem", a comma list or "all", the default), --rounds and --json.
template <class Config>
void add_round_options(CLI::App& app, options<Config>& o) {
  add_enum_list_option(app, "--rmap-lock", o.modes, rmap_lock_mode_names, "rmap lock mode",
                       "rmap lock mode");
  add_rounds_option(app, o.rounds, "Rounds, alternating the lock modes in each");
  add_json_flag(app, o.json);
}

// `cfg` run once per round and rmap lock mode (cfg.rmap_lock set to the mode), alternating the
// modes: run_alternating_rounds with the copy of the configuration every rmap tool makes.
template <class Config, class Run, class Progress = no_round_progress>
auto run_rounds(const std::vector<rmap_lock_mode>& modes, unsigned rounds, const Config& cfg,
                Run&& run, Progress&& progress = {}) {
  return run_alternating_rounds(
      modes, rounds,
      [&](unsigned, rmap_lock_mode md) {
        Config c = cfg;
        c.rmap_lock = md;
        return run(c);
      },
      progress);
}

// Runs `report`'s rounds of `run` (run_rounds), prints the report and returns the exit status:
// 1 when a run failed (said on stderr as "<tool>: <error>") or the report is not clean.
template <class Report, class Config, class Run>
int run_and_print(const char* tool, Report& report, const options<Config>& o, Run&& run) {
  report.rounds = std::max(o.rounds, 1u);
  auto all = run_rounds(o.modes, report.rounds, report.config, run);
  if (!all) {
    std::cerr << tool << ": " << all.error().to_string() << "\n";
    return 1;
  }
  report.modes = std::move(*all);
  print_report(std::cout, report, o.json);
  return report.clean() ? 0 : 1;
}

// fn(round, mode, sample) for every run, in the order the runs took place (round by round, the
// modes in the order given: run_rounds' order).
template <class Sample, class Fn>
void for_each_run(const rounds_of<Sample>& all, Fn&& fn) {
  size_t rounds = 0;
  for (const auto& m : all) rounds = std::max(rounds, m.samples.size());
  for (size_t r = 0; r < rounds; ++r)
    for (const auto& m : all)
      if (r < m.samples.size()) fn(static_cast<unsigned>(r), m.mode, m.samples[r]);
}

// median(rwsem) / median(spin) of one figure of the rounds, or nothing unless both modes ran.
template <class Sample, class Proj>
std::optional<double> rwsem_over_spin(const rounds_of<Sample>& all, Proj proj) {
  const auto* spin = find_mode(all, rmap_lock_mode::spin);
  const auto* rwsem = find_mode(all, rmap_lock_mode::rwsem);
  if (!spin || !rwsem) return std::nullopt;
  return median(rwsem->values(proj)) / median(spin->values(proj));
}

// {mode: rows}: each mode's lock statistics summed over its rounds ("locks_summed_over_rounds").
template <class Sample>
nlohmann::json locks_by_mode(const rounds_of<Sample>& all) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& m : all) out[to_string(m.mode)] = m.locks;
  return out;
}

// One lock contention table per mode, summed over its rounds, each headed
// "<lead><mode> (summed over rounds):".
template <class Sample>
void print_lock_tables(std::ostream& out, const rounds_of<Sample>& all, const char* lead) {
  for (const auto& m : all)
    out << lead << to_string(m.mode) << " (summed over rounds):\n"
        << lockstat::format_table(m.locks);
}

// The timed part of a loop workload (aim9, rmap-bench): releases the threads waiting on `start`
// (the caller being its last participant), lets them run `seconds`, sets `stop` and joins them.
// Returns the wall time from the release to the last join.
inline double run_timed(std::barrier<>& start, std::atomic<bool>& stop,
                        std::vector<std::thread>& threads, double seconds) {
  start.arrive_and_wait();
  const auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop.store(true);
  for (auto& th : threads) th.join();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The lock classes with acquisitions right now (after a run that began with reset_all()).
inline std::vector<lock_stats> active_locks() {
  std::vector<lock_stats> out;
  for (lock_stats& s : lockstat::snapshot_all())
    if (s.acquisitions) out.push_back(std::move(s));
  return out;
}

// Seed 001's rows of one experiment (prefix match on the experiment name): the shared reference
// file, else the thread's figures as posted (compiled into seed_reference.cc with every seed's).
inline std::vector<seed_row> seed001_rows(const std::string& experiment_prefix) {
  std::vector<seed_row> out;
  for (const seed_row& r : load_seed_rows(default_seed_results_path(), "001").rows)
    if (r.experiment.rfind(experiment_prefix, 0) == 0) out.push_back(r);
  return out;
}

}  // namespace uswap::tools::rmap_util
