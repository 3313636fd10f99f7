// Plumbing shared by the rmap workloads' subcommands (pft.cc, aim9.cc, rmap_bench.cc):
// --rmap-lock lists, per-thread CPU time, medians, summed lock statistics and seed 001's
// published figures (compiled in, for when the shared reference file is not there).
//
// Thread-safety: pure functions, except thread_times() which reads the calling thread's usage.
#pragma once

#include <sys/resource.h>

#include <ctime>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

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

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Adds `rows` into `sum` by class name.
inline void add_locks(std::vector<lock_stats>& sum, const std::vector<lock_stats>& rows) {
  for (const lock_stats& s : rows) {
    auto it = std::find_if(sum.begin(), sum.end(), [&](const lock_stats& x) { return x.name == s.name; });
    if (it == sum.end()) {
      sum.push_back(s);
    } else {
      it->acquisitions += s.acquisitions;
      it->contended += s.contended;
      it->wait_total_ns += s.wait_total_ns;
      it->wait_max_ns = std::max(it->wait_max_ns, s.wait_max_ns);
    }
  }
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
