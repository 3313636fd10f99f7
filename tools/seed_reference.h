// The figures the seed threads published, for printing beside uswap's own measurements.
//
// They are read from seed_results.csv (the shared reference file, columns seed, experiment, row,
// baseline, patched, change_pct, unit, conditions). A fresh clone elsewhere has no such file, so
// the rows the subcommands print are also compiled in, with their source named; load_seed_rows()
// says which one it used.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

namespace uswap::tools {

struct seed_row {
  std::string seed;        // "002"
  std::string experiment;  // "iozone -t 4 -R -r 16K -s 200M -I +Z"
  std::string row;         // "Mixed workload"
  double baseline = 0;
  double patched = 0;
  double change_pct = 0;   // as published (rounded by the author); 0 if the file has none
  std::string unit;        // "KB/s", "GB/s", ...
  double ratio() const { return baseline > 0 ? patched / baseline : 0; }
};

struct seed_table {
  std::vector<seed_row> rows;
  std::string source;  // the file read, or a description of the compiled-in copy
};

// Where the reference file is looked for by default: $USWAP_SEED_RESULTS, else
// shared/reference/seed_results.csv one or two directories above the source tree (the
// workspace's layout for the main checkout and for worktrees).
std::string default_seed_results_path();

// The rows of `seed` from `path`; if the file cannot be read (or has none), the compiled-in rows.
seed_table load_seed_rows(const std::string& path, const std::string& seed);

// The row named `row` (case-insensitive), or nullptr.
const seed_row* find_seed_row(const seed_table& t, const std::string& row);

}  // namespace uswap::tools
