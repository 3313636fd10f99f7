// `uswap zram`: makes a zram device, fills it with a chosen mix of pages from several threads,
// reads every page back and checks it, optionally runs the kernel's post-processing (discard,
// idle marking, writeback to a backing file, recompression, compaction), and prints what zramctl
// and the device's stat files would show: NAME ALGORITHM DISKSIZE DATA COMPR TOTAL, then mm_stat,
// io_stat, bd_stat, debug_stat with their column names, and lockstat for the slot locks.
#include <atomic>
#include <chrono>
#include <cstring>
#include <iostream>
#include <optional>
#include <thread>
#include <vector>

#include "cli.h"
#include "report.h"
#include "uswap/base/hash.h"
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
  zram_lock_mode lock = zram_lock_mode::slot_bitlock;
  unsigned threads = 2;
  unsigned compress_pct = 50;
  unsigned same_pct = 10;
  unsigned huge_pct = 5;
  unsigned discard_pct = 0;
  uint64_t mem_limit = 0;
  std::string backing_dev;
  uint64_t backing_size = 0;
  bool idle = false;
  std::optional<zram_writeback_type> writeback;
  std::optional<zram_recompress_type> recompress;
  bool compact = false;
  bool lockstat = false;
  bool json = false;
};

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

// What failed, for "uswap zram: <what>: <error>".
status failed(const std::string& what, const status& st) {
  return error(st.code(), what + ": " + st.to_string());
}

result<std::unique_ptr<zram_device>> make_device(const config& c) {
  zram_options o;
  o.disksize = c.size;
  o.comp_algorithm = c.comp;
  o.recomp_algorithms = c.recomp;
  o.lock_mode = c.lock;
  o.mem_limit = c.mem_limit;
  o.backing_dev = c.backing_dev;
  o.backing_dev_size = c.backing_size;
  auto made = zram_device::create(o);
  if (!made.ok()) return failed("create", made.error());
  return made;
}

// Runs fn(index, page buffer, second buffer) over the device's pages from c.threads threads.
template <class Fn>
void per_thread(const config& c, uint64_t pages, Fn&& fn) {
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < c.threads; ++t)
    ts.emplace_back([&, t] {
      alignas(8) uint8_t page[page_size], got[page_size];
      for (uint64_t i = t; i < pages; i += c.threads) fn(i, page, got);
    });
  for (auto& th : ts) th.join();
}

// Reads every page back and compares it with what was written; the pages that differ or fail.
uint64_t check_pages(const config& c, zram_device& dev, uint64_t pages) {
  std::atomic<uint64_t> bad{0};
  per_thread(c, pages, [&](uint64_t i, uint8_t* page, uint8_t* got) {
    if (!dev.read_page(i, got).ok()) {
      ++bad;
      return;
    }
    if (dev.slot_info(i)->kind == zram_slot_kind::empty) return;  // refused at mem_limit
    workload_page(c, i, page);
    if (std::memcmp(page, got, page_size) != 0) ++bad;
  });
  return bad.load();
}

// Writes the page mix from c.threads threads, then reads every page back and compares it.
status fill_and_check(const config& c, zram_device& dev, zram_fill_report& r) {
  std::atomic<uint64_t> refused{0};
  std::string first_error;
  std::atomic<bool> have_error{false};
  const auto t0 = std::chrono::steady_clock::now();
  per_thread(c, r.pages, [&](uint64_t i, uint8_t* page, uint8_t*) {
    workload_page(c, i, page);
    const status st = dev.write_page(i, page);
    if (st.code() == ENOSPC) {
      ++refused;
    } else if (!st.ok() && !have_error.exchange(true)) {
      first_error = st.to_string();
    }
  });
  const auto t1 = std::chrono::steady_clock::now();
  const uint64_t bad = check_pages(c, dev, r.pages);
  const auto t2 = std::chrono::steady_clock::now();
  if (have_error) return error(EIO, "write: " + first_error);
  r.refused = refused.load();
  r.verify_failures = bad;
  r.write_seconds = std::chrono::duration<double>(t1 - t0).count();
  r.read_seconds = std::chrono::duration<double>(t2 - t1).count();
  return {};
}

// The post-processing the options ask for, in the kernel's usual order; one step line each.
status post_process(const config& c, zram_device& dev, zram_fill_report& r) {
  if (c.discard_pct) {
    uint64_t n = 0;
    for (uint64_t i = 0; i < r.pages; ++i)
      if (mix64(i * 7 + 3) % 100 < c.discard_pct) {
        (void)dev.discard(i);
        ++n;
      }
    r.steps.push_back("discarded " + std::to_string(n) + " pages");
  }
  if (c.idle || c.writeback)
    r.steps.push_back("marked " + std::to_string(dev.mark_idle()) + " slots idle");
  if (c.recompress) {
    zram_recompress_params p;
    p.type = *c.recompress;
    auto n = dev.recompress(p);
    if (!n.ok()) return failed("recompress", n.error());
    r.steps.push_back("recompressed " + std::to_string(*n) + " slots");
  }
  if (c.writeback) {
    zram_writeback_params p;
    p.type = *c.writeback;
    auto n = dev.writeback(p);
    if (!n.ok() && n.error().code() != ENOSPC) return failed("writeback", n.error());
    r.steps.push_back(n.ok() ? "wrote back " + std::to_string(*n) + " slots"
                             : "writeback stopped: " + n.error().to_string());
  }
  if (c.compact) r.steps.push_back("compaction freed " + std::to_string(dev.compact()) + " pages");
  return {};
}

result<zram_fill_report> measure(const config& c) {
  if (c.lockstat) lockstat::enable(true);
  auto dev = make_device(c);
  if (!dev.ok()) return dev.error();
  zram_fill_report r;
  r.pages = std::min((*dev)->nr_pages(),
                     c.fill ? round_up_to_page(c.fill) >> page_shift : (*dev)->nr_pages());
  r.threads = c.threads;
  r.same_pct = c.same_pct;
  r.huge_pct = c.huge_pct;
  r.compress_pct = c.compress_pct;
  if (status st = fill_and_check(c, **dev, r); !st.ok()) return st;
  if (status st = post_process(c, **dev, r); !st.ok()) return st;
  // Post-processing moves pages (to the backing device, to another codec): each is read back
  // once more where it now lives.
  if (!r.steps.empty()) {
    const uint64_t bad = check_pages(c, **dev, r.pages);
    r.verify_failures += bad;
    r.steps.push_back(bad ? std::to_string(bad) + " pages differ after post-processing"
                          : "every page read back the same after post-processing");
  }
  r.device = zram_report::of(**dev);
  return r;
}

int run_zram(const config& c) {
  if (c.same_pct + c.huge_pct > 100) {
    std::cerr << "uswap zram: --same-pct + --huge-pct exceed 100\n";
    return 2;
  }
  auto r = measure(c);
  if (!r.ok()) {
    std::cerr << "uswap zram: " << r.error().message() << "\n";
    return 1;
  }
  print_report(std::cout, *r, c.json);
  return r->verify_failures ? 1 : 0;
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
  add_enum_option(*sub, "--lock", c.lock, zram_lock_mode_names, "zram lock mode",
                  "Lock mode: " + valid_names(zram_lock_mode_names));
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
  sub->add_option("--backing-dev", c.backing_dev,
                  "Backing file for writeback, or an NBD export's URI (nbd://HOST/NAME, "
                  "nbd+unix:///?socket=PATH)");
  add_size_option(*sub, "--backing-size", c.backing_size, "Backing file size (0: its size)");
  sub->add_flag("--idle", c.idle, "Then mark every slot idle");
  add_enum_option(*sub, "--writeback", c.writeback, zram_writeback_type_names, "writeback type",
                  "Then write back: " + valid_names(zram_writeback_type_names));
  add_enum_option(*sub, "--recompress", c.recompress, zram_recompress_type_names,
                  "recompress type", "Then recompress: " + valid_names(zram_recompress_type_names));
  sub->add_flag("--compact", c.compact, "Then compact the pool");
  sub->add_flag("--lockstat", c.lockstat, "Collect and print slot lock statistics");
  add_json_flag(*sub, c.json, "Print the report as JSON");
  table.add(sub, [] { return run_zram(c); });
}

const command_registrar reg{51, add_zram_command};

}  // namespace
}  // namespace uswap::tools
