#include "zram_report.h"

#include <cmath>
#include <cstdio>
#include <iomanip>
#include <sstream>

#include "uswap/sync/lockstat.h"

namespace uswap::tools {

std::string zramctl_size(uint64_t bytes) {
  static const char* units[] = {"B", "K", "M", "G", "T", "P"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  const double rounded = std::round(v * 10) / 10;
  if (u == 0 || rounded == std::floor(rounded))
    std::snprintf(buf, sizeof buf, "%.0f%s", rounded, units[u]);
  else
    std::snprintf(buf, sizeof buf, "%.1f%s", rounded, units[u]);
  return buf;
}

namespace {

void stat_line(std::ostream& out, const char* file, const std::string& text, const char* columns) {
  out << "  " << std::left << std::setw(11) << file << std::right << text;
  out << "  " << std::setw(11) << "" << "(" << columns << ")\n";
}

}  // namespace

void print_zram_report(std::ostream& out, zram_device& dev) {
  const zram_mm_stat m = dev.mm_stat();
  const zram_options& o = dev.options();
  out << std::left << std::setw(8) << "NAME" << std::setw(10) << "ALGORITHM" << std::right
      << std::setw(9) << "DISKSIZE" << std::setw(8) << "DATA" << std::setw(8) << "COMPR"
      << std::setw(8) << "TOTAL" << std::setw(8) << "ZERO" << "  " << std::left << "LOCK\n";
  std::string alg = o.comp_algorithm;
  for (const auto& r : o.recomp_algorithms) alg += "," + r;
  out << std::left << std::setw(8) << o.name << std::setw(10) << alg << std::right
      << std::setw(9) << zramctl_size(dev.disksize()) << std::setw(8)
      << zramctl_size(m.orig_data_size) << std::setw(8) << zramctl_size(m.compr_data_size)
      << std::setw(8) << zramctl_size(m.mem_used_total) << std::setw(8) << m.same_pages << "  "
      << std::left << to_string(dev.lock_mode()) << std::right << "\n";
  if (m.orig_data_size)
    out << "  compression ratio " << std::fixed << std::setprecision(2)
        << static_cast<double>(m.orig_data_size) / static_cast<double>(std::max<uint64_t>(
                                                       m.mem_used_total, 1))
        << " (DATA / TOTAL)" << std::defaultfloat << "\n";
  out << "\n";
  stat_line(out, "mm_stat", dev.mm_stat_text(),
            "orig_data_size compr_data_size mem_used_total mem_limit mem_used_max same_pages "
            "pages_compacted huge_pages huge_pages_since");
  stat_line(out, "io_stat", dev.io_stat_text(),
            "failed_reads failed_writes invalid_io notify_free");
  stat_line(out, "bd_stat", dev.bd_stat_text(), "bd_count bd_reads bd_writes, in 4 KiB pages");
  std::string debug = dev.debug_stat_text();
  for (auto& c : debug)
    if (c == '\n') c = ' ';
  out << "  " << std::left << std::setw(11) << "debug_stat" << debug << "(version, miss_free)\n"
      << std::right;
  const zram_request_stat r = dev.request_stat();
  out << "  requests   reads " << r.reads << ", writes " << r.writes << ", discards " << r.discards
      << ", partial-write retries " << r.rmw_retries << "\n";
  const lock_stats s = dev.lock_stats().snapshot();
  if (s.acquisitions) {
    out << "\n" << lockstat::format_table({s});
  } else {
    out << "\n  lockstat: not collected (run with --lockstat)\n";
  }
}

nlohmann::json zram_report_json(zram_device& dev) {
  const zram_mm_stat m = dev.mm_stat();
  const zram_io_stat io = dev.io_stat();
  const zram_bd_stat bd = dev.bd_stat();
  const zram_request_stat r = dev.request_stat();
  const zram_options& o = dev.options();
  nlohmann::json j;
  j["name"] = o.name;
  j["algorithm"] = o.comp_algorithm;
  j["recomp_algorithms"] = o.recomp_algorithms;
  j["lock_mode"] = std::string(to_string(dev.lock_mode()));
  j["disksize"] = dev.disksize();
  j["mm_stat"] = {{"orig_data_size", m.orig_data_size},     {"compr_data_size", m.compr_data_size},
                  {"mem_used_total", m.mem_used_total},     {"mem_limit", m.mem_limit},
                  {"mem_used_max", m.mem_used_max},         {"same_pages", m.same_pages},
                  {"pages_compacted", m.pages_compacted},   {"huge_pages", m.huge_pages},
                  {"huge_pages_since", m.huge_pages_since}};
  j["io_stat"] = {{"failed_reads", io.failed_reads},
                  {"failed_writes", io.failed_writes},
                  {"invalid_io", io.invalid_io},
                  {"notify_free", io.notify_free}};
  j["bd_stat"] = {{"bd_count", bd.bd_count}, {"bd_reads", bd.bd_reads}, {"bd_writes", bd.bd_writes}};
  j["requests"] = {{"reads", r.reads},         {"writes", r.writes},
                   {"discards", r.discards},   {"miss_free", r.miss_free},
                   {"rmw_retries", r.rmw_retries}};
  j["text"] = {{"mm_stat", dev.mm_stat_text()},
               {"io_stat", dev.io_stat_text()},
               {"bd_stat", dev.bd_stat_text()},
               {"debug_stat", dev.debug_stat_text()}};
  j["lockstat"] = nlohmann::json::parse(lockstat::to_json({dev.lock_stats().snapshot()}));
  return j;
}

}  // namespace uswap::tools
