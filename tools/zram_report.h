// How the uswap tools show a zram device: a zramctl-like summary line and the kernel's stat files
// (mm_stat, io_stat, bd_stat, debug_stat) with their column names, plus lockstat for the slot
// locks; and the same as JSON.
//
// Thread-safety: reads statistics only; may run while the device is in use (figures are then a
// snapshot of counters, not an atomic cut).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <ostream>
#include <string>

#include "uswap/zram/zram.h"

namespace uswap::tools {

// zramctl's human sizes: "0B", "4K", "130.5M", "1G" (binary units, one decimal, none if whole).
std::string zramctl_size(uint64_t bytes);

// NAME ALGORITHM DISKSIZE DATA COMPR TOTAL STREAMS LOCK, then the stat files, then lockstat.
void print_zram_report(std::ostream& out, zram_device& dev);

nlohmann::json zram_report_json(zram_device& dev);

}  // namespace uswap::tools
