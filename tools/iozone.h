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
// Thread-safety: run_iozone may be called from one thread at a time. An iozone_report is a
// plain value.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "seed_reference.h"
#include "uswap/base/enum_names.h"
#include "uswap/base/status.h"
#include "uswap/sync/lockstat.h"
#include "uswap/zram/zram.h"
#include "zram_report.h"

namespace uswap::tools {

// The tests, in the seed's table order (the order of the report's rows).
enum class iozone_test : unsigned {
  initial_write, rewrite, read, reread, reverse_read, stride_read, random_read, mixed,
  random_write, pwrite, pread,
};
inline constexpr unsigned iozone_nr_tests = 11;

// Each test's name as iozone -R prints it (the seed's rows are named so).
inline constexpr enum_name<iozone_test> iozone_test_names[] = {
    {iozone_test::initial_write, "Initial write"}, {iozone_test::rewrite, "Rewrite"},
    {iozone_test::read, "Read"},                   {iozone_test::reread, "Re-read"},
    {iozone_test::reverse_read, "Reverse Read"},   {iozone_test::stride_read, "Stride read"},
    {iozone_test::random_read, "Random read"},     {iozone_test::mixed, "Mixed workload"},
    {iozone_test::random_write, "Random write"},   {iozone_test::pwrite, "Pwrite"},
    {iozone_test::pread, "Pread"}};
// Each test's key for --tests.
inline constexpr enum_name<iozone_test> iozone_test_keys[] = {
    {iozone_test::initial_write, "write"},  {iozone_test::rewrite, "rewrite"},
    {iozone_test::read, "read"},            {iozone_test::reread, "reread"},
    {iozone_test::reverse_read, "reverse"}, {iozone_test::stride_read, "stride"},
    {iozone_test::random_read, "randread"}, {iozone_test::mixed, "mixed"},
    {iozone_test::random_write, "randwrite"}, {iozone_test::pwrite, "pwrite"},
    {iozone_test::pread, "pread"}};
static_assert(valid_table(iozone_test_names) && std::size(iozone_test_names) == iozone_nr_tests);
static_assert(valid_table(iozone_test_keys) && std::size(iozone_test_keys) == iozone_nr_tests);

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

// [mode][test] -> one value per round.
using iozone_series = std::map<zram_lock_mode, std::vector<std::vector<double>>>;

struct iozone_result {
  iozone_series children_kbs, parent_kbs, cpu_seconds;
  uint64_t size_per_thread = 0;            // size rounded down to whole records
  std::unique_ptr<zram_device> last;       // with keep_last_device: for --stat / --lockstat
};

// Progress: text describing the step; `step_done` true once per finished round (printed as its
// own line when stderr is not a terminal).
using iozone_progress_fn = std::function<void(const std::string& text, bool step_done)>;

// EINVAL for a bad configuration; the device's or a child's error (naming test and mode).
result<iozone_result> run_iozone(const iozone_config& cfg, const iozone_progress_fn& progress = {});

// `uswap iozone`'s report: the measurement, the machine it ran on and the seed's figures. With
// more than one mode, every mode is compared with global_rwlock (the seed's baseline), which
// must then be among the modes.
struct iozone_report {
  iozone_config config;
  uint64_t size_per_thread = 0;
  std::string machine;                     // "<model>, N CPUs"
  std::string load_average;                // at the end
  seed_table seed;                         // seed 002's rows
  iozone_series children_kbs, parent_kbs, cpu_seconds;
  std::optional<zram_report> device;       // --stat: the last round's last device
  struct lock_table {
    std::string device_lock_mode;          // of the last round's last device
    std::vector<lock_stats> rows;          // every class still registered after the last round
  };
  std::optional<lock_table> locks;         // --lockstat

  bool compare() const { return config.modes.size() > 1; }
  // The seed-style table; with --stat the device, with --lockstat the lock table.
  void print(std::ostream& out) const;
  nlohmann::json to_json() const;
};

}  // namespace uswap::tools
