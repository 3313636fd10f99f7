// iozone: iozone's throughput mode (-t) run in-process against zram_devices, seed 002's
// benchmark, as a function that `uswap iozone` and `uswap bench seeds` both call.
//
// Each of the `threads` children owns its own `size` bytes of the device, accessed in `record`
// byte records (see tools/iozone.cc for the tests). Every round makes a fresh device per lock
// mode and runs each test once per mode back to back, the order rotating from round to round
// (A B C, B C A, C A B), so that the forms compared by a ratio run seconds apart under the same
// load. A test's figure is iozone's "children see throughput" (the sum over children of bytes /
// own elapsed time, KB/s with KB = 1024 bytes); "parent sees" (all bytes / wall time) is kept
// beside it.
//
// Thread-safety: run_iozone may be called from one thread at a time.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "uswap/base/status.h"
#include "uswap/zram/zram.h"

namespace uswap::tools {

inline constexpr unsigned iozone_nr_tests = 11;

// The tests in the seed's table order: name as iozone -R prints it, key for --tests.
struct iozone_test_desc {
  const char* name;
  const char* key;
};
extern const std::array<iozone_test_desc, iozone_nr_tests> iozone_tests;

struct iozone_config {
  unsigned threads = 4;                    // children; default 4 (the seed's -t 4)
  uint64_t record = 16 * 1024;             // record size, a multiple of 4K; default 16K
  uint64_t size = 200ull << 20;            // bytes per child; default 200M (the seed's -s)
  unsigned compress_pct = 50;              // fio buffer_compress_percentage; default 50
  std::string comp = "lzo";                // zram codec; default lzo (the seed's)
  std::vector<zram_lock_mode> modes{all_zram_lock_modes.begin(), all_zram_lock_modes.end()};
  unsigned rounds = 5;                     // default 5 (the seed averaged 5 runs)
  // Which tests are timed and reported; the initial write always runs (reads need data).
  std::array<bool, iozone_nr_tests> selected{true, true, true, true, true, true,
                                             true, true, true, true, true};
  bool verify = false;                     // compare every record read with what was written
  bool checksum = true;                    // zram object checksums
  bool keep_last_device = false;           // keep the last round's last device in the result
};

struct iozone_result {
  // [mode][test] -> one value per round.
  std::map<zram_lock_mode, std::vector<std::vector<double>>> children_kbs, parent_kbs, cpu_seconds;
  uint64_t size_per_thread = 0;            // size rounded down to whole records
  std::unique_ptr<zram_device> last;       // with keep_last_device: for --stat / --lockstat
};

// Progress: text describing the step; `step_done` true once per finished round (printed as its
// own line when stderr is not a terminal).
using iozone_progress_fn = std::function<void(const std::string& text, bool step_done)>;

// EINVAL for a bad configuration; the device's or a child's error (naming test and mode).
result<iozone_result> run_iozone(const iozone_config& cfg, const iozone_progress_fn& progress = {});

}  // namespace uswap::tools
