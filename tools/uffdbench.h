// uffdbench's report: usemem-style write passes over memory paged by a uswap region, side by
// side with the kernel's own swap to zram under a memory cgroup of the same limit, per access
// pattern and round (see tools/uffdbench.cc for the workload and the set-up).
//
// Thread-safety: a plain value.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "uswap/base/enum_names.h"

namespace uswap::tools {

// The order the pages are written in: address order, one fixed random permutation, or both.
enum class uffdbench_pattern { seq, rand, both };
inline constexpr enum_name<uffdbench_pattern> uffdbench_pattern_names[] = {
    {uffdbench_pattern::seq, "seq"},
    {uffdbench_pattern::rand, "rand"},
    {uffdbench_pattern::both, "both"}};
static_assert(valid_table(uffdbench_pattern_names));

// One side's write pass.
struct uffdbench_side {
  double mbps = 0;           // bytes written / seconds of the pass, 10^6 bytes
  double cpu_s = 0;          // CPU time of the pass
  uint64_t swapped_out = 0;  // pages: the pager's swap_outs, or the kernel's pswpout delta
};

struct uffdbench_report {
  std::string machine;       // "2-core <model>"
  std::string date;          // UTC, YYYY-MM-DD
  uint64_t size = 0, limit = 0;
  std::string comp, fault_mode;
  unsigned reclaim_batch = 0;
  bool background_reclaim = false;  // the uswap side's pager_options::background_reclaim
  bool kernel = true;        // the kernel side was set up (not --no-kernel)
  std::string kernel_device, kernel_cgroup;

  struct round {
    uffdbench_side uswap;
    std::optional<uffdbench_side> kernel;  // none with --no-kernel
  };
  struct pattern {
    std::string name;                 // "seq" or "rand"
    std::vector<round> rounds;
    std::vector<double> uswap_mbps() const;
    std::vector<double> kernel_mbps() const;  // empty without the kernel side
    std::vector<double> ratios() const;       // uswap / kernel of the rounds the kernel wrote in
  };
  std::vector<pattern> patterns;

  void print(std::ostream& out) const;
  nlohmann::json to_json() const;
};

}  // namespace uswap::tools
