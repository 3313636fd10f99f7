#include "seed_reference.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>

namespace uswap::tools {

namespace {

// Splits one CSV line; fields may be double-quoted (with "" for a quote inside).
std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cur += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cur += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.push_back(cur);
      cur.clear();
    } else if (c != '\r') {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// Seed 002's table as posted (Weijie Yang, "[PATCH] zram: remove global tb_lock by using
// lock-free CAS", linux-mm, 2014-05-05): iozone -t 4 -R -r 16K -s 200M -I +Z on a 1 GB zram with
// 4 LZO streams, Core2 Q8400, kernel 3.15-rc3; base = global rwlock tb_lock, patched = per-slot
// CAS. The same figures as shared/reference/seed_results.csv.
const seed_row seed002[] = {
    {"002", "iozone -t 4 -R -r 16K -s 200M -I +Z", "Initial write", 1348017.60, 1424141.62, 5.6, "KB/s"},
    {"002", "iozone -t 4 -R -r 16K -s 200M -I +Z", "Rewrite", 1520189.16, 1652504.81, 8.7, "KB/s"},
    {"002", "iozone -t 4 -R -r 16K -s 200M -I +Z", "Read", 8294445.45, 11404668.35, 37.5, "KB/s"},
    {"002", "iozone -t 4 -R -r 16K -s 200M -I +Z", "Re-read", 8134448.83, 11555483.75, 42.1, "KB/s"},
    {"002", "iozone -t 4 -R -r 16K -s 200M -I +Z", "Reverse Read", 6748717.97, 8394478.17, 24.4, "KB/s"},
    {"002", "iozone -t 4 -R -r 16K -s 200M -I +Z", "Stride read", 7220276.66, 9372229.95, 29.8, "KB/s"},
    {"002", "iozone -t 4 -R -r 16K -s 200M -I +Z", "Random read", 7133010.06, 9187221.90, 28.8, "KB/s"},
    {"002", "iozone -t 4 -R -r 16K -s 200M -I +Z", "Mixed workload", 4056980.71, 5843370.85, 44.0, "KB/s"},
    {"002", "iozone -t 4 -R -r 16K -s 200M -I +Z", "Random write", 1470106.17, 1608947.04, 9.4, "KB/s"},
    {"002", "iozone -t 4 -R -r 16K -s 200M -I +Z", "Pwrite", 1259493.72, 1311055.32, 4.1, "KB/s"},
    {"002", "iozone -t 4 -R -r 16K -s 200M -I +Z", "Pread", 4247583.17, 4652056.11, 9.5, "KB/s"},
};

// Seed 000's figure (Huang Ying, "mm/swap: Add cluster lock", 2016): vm-scalability swap-w-seq,
// 16 processes, Xeon E5 v3, swap on RAM-simulated PMEM; base si->lock, patched the cluster lock.
const seed_row seed000[] = {
    {"000", "vm-scalability swap-w-seq", "swap-out throughput", 1.61, 2.11, 30.7, "GB/s"},
};

// Seed 001's figures (Christoph Lameter, "RFC Conversion of reverse map locks to semaphores",
// 2008): AIM9 (three samples each) and the page fault test on file-backed pages, i_mmap_lock
// converted to a rwsem, anon_vma not converted.
constexpr const char* pft_exp = "page fault test (file-backed; 250k faults per thread)";
const seed_row seed001[] = {
    {"001", "AIM9 exec_test", "sample 1", 1048.95, 1025.50, -2.24, "program loads/s"},
    {"001", "AIM9 exec_test", "sample 2", 1057.00, 1019.00, -3.60, "program loads/s"},
    {"001", "AIM9 exec_test", "sample 3", 1047.50, 1038.96, -0.82, "program loads/s"},
    {"001", "AIM9 fork_test", "sample 1", 4775.22, 4945.16, 3.56, "task creations/s"},
    {"001", "AIM9 fork_test", "sample 2", 4930.14, 4760.00, -3.45, "task creations/s"},
    {"001", "AIM9 fork_test", "sample 3", 4760.48, 4925.07, 3.46, "task creations/s"},
    {"001", pft_exp, "1 thread fault/wsec", 246536.848, 243323.477, -1.30, "faults/wall-second"},
    {"001", pft_exp, "2 threads fault/wsec", 357800.362, 354671.772, -0.87, "faults/wall-second"},
    {"001", pft_exp, "4 threads fault/wsec", 218846.742, 225528.586, 3.05, "faults/wall-second"},
    {"001", pft_exp, "8 threads fault/wsec", 104461.093, 101027.423, -3.29, "faults/wall-second"},
    {"001", pft_exp, "1 thread flt/cpu/s", 261555.860, 238813.108, -8.70, "faults/cpu-second"},
    {"001", pft_exp, "2 threads flt/cpu/s", 219709.015, 219706.818, 0.00, "faults/cpu-second"},
    {"001", pft_exp, "4 threads flt/cpu/s", 67810.629, 64619.728, -4.71, "faults/cpu-second"},
    {"001", pft_exp, "8 threads flt/cpu/s", 17548.427, 16644.421, -5.15, "faults/cpu-second"},
};

}  // namespace

std::string default_seed_results_path() {
  if (const char* env = std::getenv("USWAP_SEED_RESULTS")) return env;
  // The workspace keeps shared/ beside the main checkout; worktrees sit one level deeper.
  const std::string src = USWAP_SOURCE_DIR;
  for (const char* up : {"/..", "/../.."}) {
    const std::string p = src + up + "/shared/reference/seed_results.csv";
    if (std::ifstream(p).good()) return p;
  }
  return src + "/../shared/reference/seed_results.csv";
}

seed_table load_seed_rows(const std::string& path, const std::string& seed) {
  seed_table t;
  std::ifstream in(path);
  std::string line;
  bool header = true;
  while (in && std::getline(in, line)) {
    if (header) {
      header = false;
      continue;
    }
    const auto f = split_csv(line);
    if (f.size() < 5 || f[0] != seed) continue;
    seed_row r;
    r.seed = f[0];
    r.experiment = f[1];
    r.row = f[2];
    char* end = nullptr;
    r.baseline = std::strtod(f[3].c_str(), &end);
    r.patched = std::strtod(f[4].c_str(), &end);
    if (f.size() > 5) r.change_pct = std::strtod(f[5].c_str(), &end);
    if (f.size() > 6) r.unit = f[6];
    t.rows.push_back(r);
  }
  if (!t.rows.empty()) {
    t.source = path;
    return t;
  }
  if (seed == "000") t.rows.assign(std::begin(seed000), std::end(seed000));
  if (seed == "001") t.rows.assign(std::begin(seed001), std::end(seed001));
  if (seed == "002") t.rows.assign(std::begin(seed002), std::end(seed002));
  t.source = "compiled-in copy of seed " + seed + "'s posted table (" + path + " not readable)";
  return t;
}

const seed_row* find_seed_row(const seed_table& t, const std::string& row) {
  const std::string want = lower(row);
  for (const auto& r : t.rows)
    if (lower(r.row) == want) return &r;
  return nullptr;
}

}  // namespace uswap::tools
