// `uswap zram`: makes a zram device, fills it with a chosen mix of pages from several threads,
// reads every page back and checks it, optionally runs the kernel's post-processing (discard,
// idle marking, writeback to a backing file, recompression, compaction), and prints what zramctl
// and the device's stat files would show: NAME ALGORITHM DISKSIZE DATA COMPR TOTAL, then mm_stat,
// io_stat, bd_stat, debug_stat with their column names, and lockstat for the slot locks.
#include <atomic>
#include <chrono>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "cli.h"
#include "uswap/base/units.h"
#include "uswap/compress/page_fill.h"
#include "uswap/sync/lockstat.h"
#include "uswap/zram/zram.h"
#include "zram_report.h"

namespace uswap::tools {
namespace {

struct config {
  uint64_t size = 256ull << 20;
  uint64_t fill = 0;  // 0: the whole device
  std::string comp = "lzo";
  std::vector<std::string> recomp;
  std::string lock = "slot_bitlock";
  unsigned threads = 2;
  unsigned compress_pct = 50;
  unsigned same_pct = 10;
  unsigned huge_pct = 5;
  unsigned discard_pct = 0;
  uint64_t mem_limit = 0;
  std::string backing_dev;
  uint64_t backing_size = 0;
  bool idle = false;
  std::string writeback;
  std::string recompress;
  bool compact = false;
  bool lockstat = false;
  bool json = false;
};

uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Page `i` of the workload: same-filled, incompressible or compressible by a fixed draw.
void workload_page(const config& c, uint64_t i, uint8_t* page) {
  const uint64_t r = mix64(i) % 100;
  if (r < c.same_pct) {
    const uint64_t v = (i % 3 == 0) ? 0 : mix64(i + 1);
    for (size_t k = 0; k < page_size; k += 8) std::memcpy(page + k, &v, 8);
  } else if (r < c.same_pct + c.huge_pct) {
    fill_random(page, page_size, i);
  } else {
    fill_compressible(page, page_size, c.compress_pct, i);
  }
}

int fail(const std::string& what, const status& st) {
  std::cerr << "uswap zram: " << what << ": " << st.to_string() << "\n";
  return 1;
}

int run_zram(const config& c) {
  auto mode = parse_zram_lock_mode(c.lock);
  if (!mode.ok()) return fail("--lock", mode.error());
  if (c.same_pct + c.huge_pct > 100) {
    std::cerr << "uswap zram: --same-pct + --huge-pct exceed 100\n";
    return 2;
  }
  zram_options o;
  o.disksize = c.size;
  o.comp_algorithm = c.comp;
  o.recomp_algorithms = c.recomp;
  o.lock_mode = *mode;
  o.mem_limit = c.mem_limit;
  o.backing_dev = c.backing_dev;
  o.backing_dev_size = c.backing_size;
  if (c.lockstat) lockstat::enable(true);
  auto made = zram_device::create(o);
  if (!made.ok()) return fail("create", made.error());
  zram_device& dev = **made;

  const uint64_t pages =
      std::min(dev.nr_pages(), c.fill ? round_up_to_page(c.fill) >> page_shift : dev.nr_pages());
  std::atomic<uint64_t> refused{0}, bad{0};
  std::string first_error;
  std::atomic<bool> have_error{false};
  auto per_thread = [&](auto&& fn) {
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < c.threads; ++t)
      ts.emplace_back([&, t] {
        alignas(8) uint8_t page[page_size], got[page_size];
        for (uint64_t i = t; i < pages; i += c.threads) fn(i, page, got);
      });
    for (auto& th : ts) th.join();
  };
  const auto t0 = std::chrono::steady_clock::now();
  per_thread([&](uint64_t i, uint8_t* page, uint8_t*) {
    workload_page(c, i, page);
    const status st = dev.write_page(i, page);
    if (st.code() == ENOSPC) {
      ++refused;
    } else if (!st.ok() && !have_error.exchange(true)) {
      first_error = st.to_string();
    }
  });
  const auto t1 = std::chrono::steady_clock::now();
  per_thread([&](uint64_t i, uint8_t* page, uint8_t* got) {
    if (!dev.read_page(i, got).ok()) {
      ++bad;
      return;
    }
    if (dev.slot_info(i)->kind == zram_slot_kind::empty) return;  // refused at mem_limit
    workload_page(c, i, page);
    if (std::memcmp(page, got, page_size) != 0) ++bad;
  });
  const auto t2 = std::chrono::steady_clock::now();
  if (have_error) {
    std::cerr << "uswap zram: write: " << first_error << "\n";
    return 1;
  }

  std::vector<std::string> steps;
  if (c.discard_pct) {
    uint64_t n = 0;
    for (uint64_t i = 0; i < pages; ++i)
      if (mix64(i * 7 + 3) % 100 < c.discard_pct) {
        (void)dev.discard(i);
        ++n;
      }
    steps.push_back("discarded " + std::to_string(n) + " pages");
  }
  if (c.idle || !c.writeback.empty())
    steps.push_back("marked " + std::to_string(dev.mark_idle()) + " slots idle");
  if (!c.recompress.empty()) {
    zram_recompress_params p;
    if (c.recompress == "idle") p.type = zram_recompress_type::idle;
    else if (c.recompress == "huge") p.type = zram_recompress_type::huge;
    else if (c.recompress == "huge_idle") p.type = zram_recompress_type::huge_idle;
    else if (c.recompress != "all") {
      std::cerr << "uswap zram: --recompress: all, idle, huge or huge_idle\n";
      return 2;
    }
    auto n = dev.recompress(p);
    if (!n.ok()) return fail("recompress", n.error());
    steps.push_back("recompressed " + std::to_string(*n) + " slots");
  }
  if (!c.writeback.empty()) {
    zram_writeback_params p;
    if (c.writeback == "idle") p.type = zram_writeback_type::idle;
    else if (c.writeback == "huge") p.type = zram_writeback_type::huge;
    else if (c.writeback == "huge_idle") p.type = zram_writeback_type::huge_idle;
    else if (c.writeback == "incompressible") p.type = zram_writeback_type::incompressible;
    else {
      std::cerr << "uswap zram: --writeback: idle, huge, huge_idle or incompressible\n";
      return 2;
    }
    auto n = dev.writeback(p);
    if (!n.ok() && n.error().code() != ENOSPC) return fail("writeback", n.error());
    steps.push_back(n.ok() ? "wrote back " + std::to_string(*n) + " slots"
                           : "writeback stopped: " + n.error().to_string());
  }
  if (c.compact) steps.push_back("compaction freed " + std::to_string(dev.compact()) + " pages");

  const double wsec = std::chrono::duration<double>(t1 - t0).count();
  const double rsec = std::chrono::duration<double>(t2 - t1).count();
  if (c.json) {
    nlohmann::json j = zram_report_json(dev);
    j["workload"] = {{"pages", pages},          {"threads", c.threads},
                     {"refused_enospc", refused.load()}, {"verify_failures", bad.load()},
                     {"write_seconds", wsec},   {"read_seconds", rsec},
                     {"steps", steps}};
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << "uswap zram: wrote " << pages << " pages (" << c.same_pct << "% same-filled, "
              << c.huge_pct << "% incompressible, the rest " << c.compress_pct
              << "% compressible) from " << c.threads << " threads in " << wsec
              << " s; read back and checked in " << rsec << " s: "
              << (bad ? std::to_string(bad.load()) + " MISMATCHES" : std::string("all match"));
    if (refused) std::cout << "; " << refused.load() << " writes refused at mem_limit (ENOSPC)";
    std::cout << "\n";
    for (const auto& s : steps) std::cout << "  then " << s << "\n";
    std::cout << "\n";
    print_zram_report(std::cout, dev);
  }
  return bad ? 1 : 0;
}

void add_zram_command(CLI::App& app, command_table& table) {
  static config c;
  auto* sub = app.add_subcommand(
      "zram",
      "Fill a zram device with a page mix, check it, post-process it, and print zramctl's "
      "summary and the stat files (mm_stat, io_stat, bd_stat)");
  add_size_option(*sub, "--size", c.size, "Device size (disksize)");
  add_size_option(*sub, "--fill", c.fill, "Bytes to write (default: the whole device)");
  sub->add_option("--comp", c.comp, "Compression algorithm: lz4, lz4hc, zstd, lzo")
      ->capture_default_str();
  sub->add_option("--recomp", c.recomp, "Recompression algorithm (repeat for priority 2, 3)");
  sub->add_option("--lock", c.lock, "Lock mode: global_rwlock, slot_cas, slot_bitlock")
      ->capture_default_str();
  sub->add_option("-t,--threads", c.threads, "Writer and reader threads")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub->add_option("--compressibility", c.compress_pct,
                  "Percent of a compressible page that compresses away")
      ->capture_default_str()
      ->check(CLI::Range(0, 100));
  sub->add_option("--same-pct", c.same_pct, "Percent of pages that are same-filled")
      ->capture_default_str()
      ->check(CLI::Range(0, 100));
  sub->add_option("--huge-pct", c.huge_pct, "Percent of pages that are incompressible")
      ->capture_default_str()
      ->check(CLI::Range(0, 100));
  sub->add_option("--discard-pct", c.discard_pct, "Then discard this percent of the pages")
      ->capture_default_str()
      ->check(CLI::Range(0, 100));
  add_size_option(*sub, "--mem-limit", c.mem_limit, "mem_limit (0: none)");
  sub->add_option("--backing-dev", c.backing_dev, "Backing file for writeback");
  add_size_option(*sub, "--backing-size", c.backing_size, "Backing file size (0: its size)");
  sub->add_flag("--idle", c.idle, "Then mark every slot idle");
  sub->add_option("--writeback", c.writeback, "Then write back: idle, huge, huge_idle, incompressible");
  sub->add_option("--recompress", c.recompress, "Then recompress: all, idle, huge, huge_idle");
  sub->add_flag("--compact", c.compact, "Then compact the pool");
  sub->add_flag("--lockstat", c.lockstat, "Collect and print slot lock statistics");
  sub->add_flag("--json", c.json, "Print the report as JSON");
  table.add(sub, [] { return run_zram(c); });
}

const command_registrar reg{51, add_zram_command};

}  // namespace
}  // namespace uswap::tools
