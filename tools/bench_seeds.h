// bench seeds: each seed's experiment run with the seed's baseline and patched lock forms (and
// uswap's further forms) in alternating rounds, reported beside the seed's published figures.
// `uswap bench seeds` prints the tables, writes JSON and gnuplot charts; `uswap demo` runs a
// short version.
//
//   seed 000 (swap cluster lock): usemem -n N (vm-scalability swap-w-seq: N processes write
//            anonymous memory twice the machine's RAM, sequentially, so half goes out to swap on
//            an uncompressed RAM device, the seed's RAM-simulated PMEM), and swapbench (the slot
//            allocator alone). Forms: global (si->lock, baseline), cluster (patched), percpu.
//   seed 001 (rmap rwsem): pft (page faults on a file mapping) and AIM9 fork_test / exec_test.
//            Forms: spin (baseline), rwsem (patched).
//   seed 002 (zram per-slot lock): iozone -t N -r 16K (the seed's tests). Forms: global_rwlock
//            (baseline), slot_cas (patched, as posted), slot_bitlock (as merged).
//
// Every measured figure is a median over rounds in which the forms alternate (A B C A B C ...);
// a change is the ratio of medians, its spread the min-max of the per-round ratios (the forms of
// one round ran seconds apart under the same load). Nothing here is a constant: a seed whose
// workload this build lacks is reported as not available, with no figures.
//
// Thread-safety: run_seed_benchmarks may be called from one thread at a time (the workloads
// switch process-wide lock statistics on and off). A seeds_run is a plain value.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "uswap/base/status.h"

namespace uswap::tools {

struct seeds_options {
  bool quick = false;                  // short rounds and small sizes (under 2 minutes)
  std::vector<std::string> only;       // seeds to run ("000", "001", "002"); empty: all
  std::vector<unsigned> threads;       // thread counts; empty: each seed's own
  unsigned rounds = 0;                 // rounds per form; 0: 3 with quick, else 5
  std::string reference;               // seed_results.csv; empty: default_seed_results_path()
  // Scale of the memory workloads (for tests and the demo); 0: the quick / full defaults.
  uint64_t usemem_ram = 0;             // seed 000 usemem: the machine's RAM (writes 2x it)
  uint64_t iozone_size = 0;            // seed 002: bytes per iozone child
  double swapbench_duration = 0;       // seed 000 swapbench: seconds per round
};

// One form's figures over the rounds.
struct form_series {
  std::string form;             // "global", "cluster", "slot_cas"...
  std::vector<double> rounds;   // one value per round, in the row's unit
  double median() const;
  double min() const;
  double max() const;
};

// The seed's published figures for a row (from seed_results.csv).
struct seed_figures {
  double baseline = 0;
  double patched = 0;
  double change_pct = 0;        // as published
  std::string unit;
  std::string source_rows;      // which csv rows ("sample 1..3" when a median of samples)
};

struct bench_row {
  std::string experiment;       // "usemem -n (swap-w-seq)", "iozone", ...
  std::string row;              // "swap-out throughput", "Read", ...
  unsigned threads = 0;         // tasks / threads / children of the run (0: not applicable)
  std::string unit;             // of the measured figures
  std::optional<seed_figures> seed;  // absent: the seed published nothing for this row
  std::vector<form_series> forms;    // [0] baseline, [1] patched, then uswap's further forms
  // Change of form k against the baseline: ratio of medians, min-max of the per-round ratios.
  double change_pct(size_t k) const;
  double change_min_pct(size_t k) const;
  double change_max_pct(size_t k) const;
};

// A chart: threads vs one row's median, per form.
struct seed_chart {
  std::string file;             // "seed000_usemem.png"
  std::string title;
  std::string ylabel;
  std::string xlabel;           // what the thread count counts: "threads", "usemem tasks (-n N)"
  std::string experiment, row;  // which rows (one per thread count)
};

struct seed_report {
  std::string id;               // "000"
  std::string title;            // the seed thread's subject
  std::string baseline_form, patched_form;
  bool available = true;
  std::string unavailable_reason;
  std::vector<std::string> notes;    // the configuration, one line each
  std::vector<bench_row> rows;
  std::vector<seed_chart> charts;
  double seconds = 0;                // wall time of this seed's measurement
};

struct seeds_run {
  std::string machine;          // "2 CPUs, AMD EPYC ..."
  std::string load_before, load_after;  // /proc/loadavg
  std::string reference_source;
  unsigned rounds = 0;
  bool quick = false;
  std::vector<seed_report> seeds;

  // `uswap bench seeds`'s text: a header line, then one table per seed.
  void print(std::ostream& out) const;
  nlohmann::json to_json() const;
};

// Progress: the current phase and step (shown on one line on a terminal).
using seeds_progress_fn = std::function<void(const std::string& text)>;

// EINVAL for an unknown seed or a thread count outside 1..64; a workload's error otherwise.
result<seeds_run> run_seed_benchmarks(const seeds_options& opts,
                                      const seeds_progress_fn& progress = {});

// One seed's table, as `uswap bench seeds` and `uswap demo` print it.
void print_seed_report(std::ostream& out, const seeds_run& run, const seed_report& rep);
// PNG charts via gnuplot into dir (created if missing); returns the files written.
result<std::vector<std::string>> write_seed_charts(const seeds_run& run, const std::string& dir);

}  // namespace uswap::tools
