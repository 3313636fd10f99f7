// How the uswap tools show a zram device: a zramctl-like summary line and the kernel's stat files
// (mm_stat, io_stat, bd_stat, debug_stat) with their column names, plus lockstat for the slot
// locks; and the same as JSON. The figures are taken once (zram_report::of) and printed from
// the copy, so a report says what the device held at one moment however it is printed.
//
// Thread-safety: of() reads statistics only and may run while the device is in use (figures are
// then a snapshot of counters, not an atomic cut); a zram_report is a plain value.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "uswap/sync/lockstat.h"
#include "uswap/zram/zram.h"

namespace uswap::tools {

// zramctl's human sizes: "0B", "4K", "130.5M", "1G" (binary units, one decimal, none if whole).
std::string zramctl_size(uint64_t bytes);

struct zram_report {
  std::string name;
  std::string algorithm;                       // the primary codec
  std::vector<std::string> recomp_algorithms;  // recompression codecs, by priority
  std::string lock_mode;
  uint64_t disksize = 0;
  zram_mm_stat mm;
  zram_io_stat io;
  zram_bd_stat bd;
  zram_request_stat requests;
  // The stat files as the device formats them.
  std::string mm_stat_text, io_stat_text, bd_stat_text, debug_stat_text;
  lock_stats slot_locks;                       // the device's lock class

  static zram_report of(zram_device& dev);
  // NAME ALGORITHM DISKSIZE DATA COMPR TOTAL ZERO LOCK, then the stat files, then lockstat.
  void print(std::ostream& out) const;
  nlohmann::json to_json() const;
};

// `uswap zram`'s run: the page mix written, what reading it back found, the post-processing
// steps taken, and the device afterwards.
struct zram_fill_report {
  uint64_t pages = 0;             // pages written
  unsigned threads = 0;
  unsigned same_pct = 0, huge_pct = 0, compress_pct = 0;
  uint64_t refused = 0;           // writes refused at mem_limit (ENOSPC)
  uint64_t verify_failures = 0;   // pages that did not read back as written
  double write_seconds = 0, read_seconds = 0;
  std::vector<std::string> steps;  // "discarded 12 pages", "wrote back 3 slots", ...
  zram_report device;

  void print(std::ostream& out) const;
  nlohmann::json to_json() const;  // the device's report with "workload" added
};

}  // namespace uswap::tools
