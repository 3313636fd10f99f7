#include "zram_report.h"

#include <cmath>
#include <cstdio>
#include <iomanip>

#include "report.h"

namespace uswap::tools {

std::string zramctl_size(uint64_t bytes) {
  static const char* units[] = {"B", "K", "M", "G", "T", "P"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  const double rounded = std::round(v * 10) / 10;
  if (u == 0 || rounded == std::floor(rounded)) return strprintf("%.0f%s", rounded, units[u]);
  return strprintf("%.1f%s", rounded, units[u]);
}

namespace {

void stat_line(std::ostream& out, const char* file, const std::string& text, const char* columns) {
  out << "  " << std::left << std::setw(11) << file << std::right << text;
  out << "  " << std::setw(11) << "" << "(" << columns << ")\n";
}

}  // namespace

zram_report zram_report::of(zram_device& dev) {
  const zram_options& o = dev.options();
  zram_report r;
  r.name = o.name;
  r.algorithm = o.comp_algorithm;
  r.recomp_algorithms = o.recomp_algorithms;
  r.lock_mode = std::string(to_string(dev.lock_mode()));
  r.disksize = dev.disksize();
  r.mm = dev.mm_stat();
  r.io = dev.io_stat();
  r.bd = dev.bd_stat();
  r.requests = dev.request_stat();
  r.mm_stat_text = dev.mm_stat_text();
  r.io_stat_text = dev.io_stat_text();
  r.bd_stat_text = dev.bd_stat_text();
  r.debug_stat_text = dev.debug_stat_text();
  r.slot_locks = dev.lock_stats().snapshot();
  return r;
}

void zram_report::print(std::ostream& out) const {
  out << std::left << std::setw(8) << "NAME" << std::setw(10) << "ALGORITHM" << std::right
      << std::setw(9) << "DISKSIZE" << std::setw(8) << "DATA" << std::setw(8) << "COMPR"
      << std::setw(8) << "TOTAL" << std::setw(8) << "ZERO" << "  " << std::left << "LOCK\n";
  std::string alg = algorithm;
  for (const auto& r : recomp_algorithms) alg += "," + r;
  out << std::left << std::setw(8) << name << std::setw(10) << alg << std::right << std::setw(9)
      << zramctl_size(disksize) << std::setw(8) << zramctl_size(mm.orig_data_size) << std::setw(8)
      << zramctl_size(mm.compr_data_size) << std::setw(8) << zramctl_size(mm.mem_used_total)
      << std::setw(8) << mm.same_pages << "  " << std::left << lock_mode << std::right << "\n";
  if (mm.orig_data_size)
    out << "  compression ratio " << std::fixed << std::setprecision(2)
        << static_cast<double>(mm.orig_data_size) /
               static_cast<double>(std::max<uint64_t>(mm.mem_used_total, 1))
        << " (DATA / TOTAL)" << std::defaultfloat << "\n";
  out << "\n";
  stat_line(out, "mm_stat", mm_stat_text,
            "orig_data_size compr_data_size mem_used_total mem_limit mem_used_max same_pages "
            "pages_compacted huge_pages huge_pages_since");
  stat_line(out, "io_stat", io_stat_text, "failed_reads failed_writes invalid_io notify_free");
  stat_line(out, "bd_stat", bd_stat_text, "bd_count bd_reads bd_writes, in 4 KiB pages");
  std::string debug = debug_stat_text;
  for (auto& c : debug)
    if (c == '\n') c = ' ';
  out << "  " << std::left << std::setw(11) << "debug_stat" << debug << "(version, miss_free)\n"
      << std::right;
  out << "  requests   reads " << requests.reads << ", writes " << requests.writes
      << ", discards " << requests.discards << ", partial-write retries " << requests.rmw_retries
      << "\n";
  if (slot_locks.acquisitions)
    out << "\n" << lockstat::format_table({slot_locks});
  else
    out << "\n  lockstat: not collected (run with --lockstat)\n";
}

nlohmann::json zram_report::to_json() const {
  nlohmann::json j;
  j["name"] = name;
  j["algorithm"] = algorithm;
  j["recomp_algorithms"] = recomp_algorithms;
  j["lock_mode"] = lock_mode;
  j["disksize"] = disksize;
  j["mm_stat"] = {{"orig_data_size", mm.orig_data_size},   {"compr_data_size", mm.compr_data_size},
                  {"mem_used_total", mm.mem_used_total},   {"mem_limit", mm.mem_limit},
                  {"mem_used_max", mm.mem_used_max},       {"same_pages", mm.same_pages},
                  {"pages_compacted", mm.pages_compacted}, {"huge_pages", mm.huge_pages},
                  {"huge_pages_since", mm.huge_pages_since}};
  j["io_stat"] = {{"failed_reads", io.failed_reads},
                  {"failed_writes", io.failed_writes},
                  {"invalid_io", io.invalid_io},
                  {"notify_free", io.notify_free}};
  j["bd_stat"] = {{"bd_count", bd.bd_count}, {"bd_reads", bd.bd_reads}, {"bd_writes", bd.bd_writes}};
  j["requests"] = {{"reads", requests.reads},         {"writes", requests.writes},
                   {"discards", requests.discards},   {"miss_free", requests.miss_free},
                   {"rmw_retries", requests.rmw_retries}};
  j["text"] = {{"mm_stat", mm_stat_text},
               {"io_stat", io_stat_text},
               {"bd_stat", bd_stat_text},
               {"debug_stat", debug_stat_text}};
  j["lockstat"] = nlohmann::json::array({slot_locks});
  return j;
}

void zram_fill_report::print(std::ostream& out) const {
  out << "uswap zram: wrote " << pages << " pages (" << same_pct << "% same-filled, " << huge_pct
      << "% incompressible, the rest " << compress_pct << "% compressible) from " << threads
      << " threads in " << write_seconds << " s; read back and checked in " << read_seconds
      << " s: "
      << (verify_failures ? std::to_string(verify_failures) + " MISMATCHES"
                          : std::string("all match"));
  if (refused) out << "; " << refused << " writes refused at mem_limit (ENOSPC)";
  out << "\n";
  for (const auto& s : steps) out << "  then " << s << "\n";
  out << "\n";
  device.print(out);
}

nlohmann::json zram_fill_report::to_json() const {
  nlohmann::json j = device.to_json();
  j["workload"] = {{"pages", pages},
                   {"threads", threads},
                   {"refused_enospc", refused},
                   {"verify_failures", verify_failures},
                   {"write_seconds", write_seconds},
                   {"read_seconds", read_seconds},
                   {"steps", steps}};
  return j;
}

}  // namespace uswap::tools
