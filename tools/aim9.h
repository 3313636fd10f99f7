// aim9: AIM9's fork_test ("Task Creations/second") and exec_test ("Program Loads/second"), the
// two AIM9 tests of seed 001, run on a uswap machine.
//
// A "shell" address space is set up first, like the process AIM9 forks from: program text (a
// private read-only file mapping, partly faulted in), data (a private writable file mapping,
// partly copied on write), a heap and a stack of anonymous memory, all touched.
//   fork_test  fork the shell; the child writes one word of its stack (a copy-on-write fault) and
//              exits. Each fork links the child's VMAs into the shell's anon_vma trees and the
//              files' i_mmap trees (write lock), and exit unlinks them.
//   exec_test  fork the shell; the child execs a small program (text and data mapped from a
//              file, bss and stack anonymous), reads its text, writes its data and stack, exits.
// `threads` threads run the loop concurrently on the same shell (AIM9 itself runs one).
//
// `uswap aim9 fork|exec` runs it in alternating rounds per lock mode; `uswap bench seeds`
// (issue 9) calls run_aim9 directly.
//
// Thread-safety: run_aim9 may be called from one thread at a time (it resets the process-wide
// lock statistics). An aim9_report is a plain value.
#pragma once

#include <cstdint>
#include <ostream>
#include <vector>

#include <nlohmann/json.hpp>

#include "alternate_rounds.h"
#include "seed_reference.h"
#include "uswap/base/enum_names.h"
#include "uswap/base/status.h"
#include "uswap/mm/rmap_lock.h"
#include "uswap/mm/vmstat.h"
#include "uswap/sync/lockstat.h"

namespace uswap::tools {

enum class aim9_test { fork, exec };
inline constexpr enum_name<aim9_test> aim9_test_names[] = {{aim9_test::fork, "fork"},
                                                           {aim9_test::exec, "exec"}};
static_assert(valid_table(aim9_test_names));

struct aim9_config {
  aim9_test test = aim9_test::fork;
  double seconds = 1.0;      // how long the loop runs (default 1 s)
  unsigned threads = 1;      // concurrent loops on the same shell (default 1, as AIM9)
  uint64_t heap_pages = 256; // the shell's touched heap (default 1 MiB)
  rmap_lock_mode rmap_lock = rmap_lock_mode::rwsem;
};

struct aim9_result {
  uint64_t operations = 0;   // task creations (fork) or program loads (exec)
  double seconds = 0;        // wall time of the loop
  double per_second = 0;     // operations / seconds (AIM9's figure)
  double cpu_s = 0;          // the loop threads' CPU time (user + system)
  uint64_t errors = 0;       // failed forks, execs or accesses (must be 0)
  bool teardown_clean = false;  // after everything exited: every frame free
  vm_event_counts events;
  std::vector<lock_stats> locks;
};

// EINVAL for a non-positive duration or 0 threads.
result<aim9_result> run_aim9(const aim9_config& cfg);

const char* to_string(aim9_test t) noexcept;

// `uswap aim9 fork|exec`'s report: every mode's rounds, with seed 001's AIM9 samples beside the
// rwsem/spin change.
struct aim9_report {
  aim9_config config;
  unsigned rounds = 0;
  std::vector<mode_rounds<rmap_lock_mode, aim9_result>> modes;
  std::vector<seed_row> seed;      // seed 001's samples of this test

  bool clean() const;              // no errors, every run torn down cleanly
  // AIM9's unit: "Task Creations/second" or "Program Loads/second".
  const char* unit() const;
  void print(std::ostream& out) const;
  nlohmann::json to_json() const;
};

}  // namespace uswap::tools
