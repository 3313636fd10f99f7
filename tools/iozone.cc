// `uswap iozone`: iozone's throughput mode (-t) run in-process against a zram_device, the
// benchmark of seed 002 ("iozone -t 4 -R -r 16K -s 200M -I +Z" on a 1 GB zram with LZO).
//
// Each of the -t threads owns a "file": its own -s bytes of the device, accessed in -r byte
// records, as iozone's children each own a file. The tests, run in iozone's order (-i 0 1 2 3 5 8
// 9 10) and reported in the seed's: initial write and rewrite (sequential), read and re-read,
// random read and random write (uniform record offsets, one file's worth of records), reverse
// read, stride read (every 17th record, wrapping: iozone's default -j 17), mixed workload
// (iozone's random mix: children alternately assigned random reads and random writes), pwrite and
// pread (sequential, at explicit offsets: in-process they are the same calls as write and read,
// run again on the written device). A test's figure is iozone's "children see throughput": the
// sum over threads of that thread's bytes / its own elapsed time, in KB/s (KB = 1024 bytes).
//
// Data: every record written is one of 64 distinct per-thread buffers filled like fio's
// buffer_compress_percentage (50% by default, the seed's +Z / refill_buffers setting), generated
// before timing starts.
//
// --lock all compares the three lock modes in alternating rounds: each round makes a fresh device
// per mode and runs every test once per mode back to back (A B C), the order rotating from round
// to round (A B C, B C A, C A B) so that no mode always runs first or last. It reports per test
// the median KB/s of each mode, its ratio to global_rwlock with the min-max spread of the
// per-round ratios, and the seed's ratio (patched / base) beside it.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <time.h>
#include <unistd.h>
#include <vector>

#include "alternate_rounds.h"
#include "cli.h"
#include "iozone.h"
#include "seed_reference.h"
#include "uswap/base/units.h"
#include "uswap/compress/page_fill.h"
#include "uswap/sync/lockstat.h"
#include "uswap/zram/zram.h"
#include "zram_report.h"

namespace uswap::tools {
namespace {

enum test_id : unsigned {
  t_initial_write,
  t_rewrite,
  t_read,
  t_reread,
  t_reverse_read,
  t_stride_read,
  t_random_read,
  t_mixed,
  t_random_write,
  t_pwrite,
  t_pread,
  nr_tests
};
static_assert(nr_tests == iozone_nr_tests);

using test_desc = iozone_test_desc;
const auto& tests = iozone_tests;

// iozone's execution order.
constexpr test_id run_order[nr_tests] = {t_initial_write, t_rewrite,     t_read,
                                         t_reread,        t_random_read, t_random_write,
                                         t_reverse_read,  t_stride_read, t_mixed,
                                         t_pwrite,        t_pread};

constexpr unsigned nr_buffers = 64;
constexpr unsigned stride_records = 17;

// The command line's options: the measurement's configuration, and what to select and print.
struct config : iozone_config {
  std::string lock = "all";
  std::string tests = "all";
  std::string reference = default_seed_results_path();
  bool json = false;
  std::string json_file;
  bool stat = false;
  bool lockstat = false;
};

uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

double thread_cpu_seconds() {
  struct timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// One child: its file (a region of the device), its buffers, what each record last received.
struct child {
  unsigned index = 0;
  uint64_t base = 0;
  uint64_t nrec = 0;
  std::vector<uint8_t> pool;        // nr_buffers records
  std::vector<uint8_t> scratch;     // one record, for reads
  std::vector<uint16_t> expected;   // buffer id last written to each record (for --verify)
  uint64_t rng = 0;
  std::string error;                // first failure
  double kbs = 0;                   // this test's throughput
  uint64_t bytes = 0;               // this test's bytes
  double cpu = 0;                   // this test's CPU seconds (the thread's CPU clock)
  const uint8_t* buffer(unsigned id, uint64_t record) const { return pool.data() + id * record; }
};

class runner {
 public:
  runner(const iozone_config& c, zram_device& dev, std::vector<child>& children)
      : c_(c), dev_(dev), children_(children) {}

  // Runs one test on every child at once; sets children-see KB/s (the sum of each child's rate)
  // and parent-see KB/s (all bytes / wall time from the common start to the last child's end, what
  // fio's group report gives); returns an error message or "".
  std::string run(test_id t, double* kbs, double* parent_kbs, double* cpu_seconds) {
    std::atomic<unsigned> ready{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (auto& ch : children_) {
      threads.emplace_back([&, t] {
        ready.fetch_add(1);
        while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
        const auto start = std::chrono::steady_clock::now();
        const double cpu0 = thread_cpu_seconds();
        const uint64_t bytes = run_child(t, ch);
        ch.cpu = thread_cpu_seconds() - cpu0;
        ch.bytes = bytes;
        const double secs =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        ch.kbs = secs > 0 ? static_cast<double>(bytes) / 1024.0 / secs : 0;
      });
    }
    while (ready.load() < children_.size()) std::this_thread::yield();
    const auto start = std::chrono::steady_clock::now();
    go.store(true, std::memory_order_release);
    for (auto& th : threads) th.join();
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    *kbs = 0;
    *cpu_seconds = 0;
    uint64_t total = 0;
    for (auto& ch : children_) {
      if (!ch.error.empty()) return ch.error;
      *kbs += ch.kbs;
      *cpu_seconds += ch.cpu;
      total += ch.bytes;
    }
    *parent_kbs = wall > 0 ? static_cast<double>(total) / 1024.0 / wall : 0;
    return {};
  }

 private:
  bool write_rec(child& ch, uint64_t j, unsigned id) {
    const status st = dev_.write(ch.base + j * c_.record, ch.buffer(id, c_.record), c_.record);
    if (!st.ok()) {
      ch.error = st.to_string();
      return false;
    }
    ch.expected[j] = static_cast<uint16_t>(id);
    return true;
  }
  bool read_rec(child& ch, uint64_t j) {
    const status st = dev_.read(ch.base + j * c_.record, ch.scratch.data(), c_.record);
    if (!st.ok()) {
      ch.error = st.to_string();
      return false;
    }
    if (c_.verify &&
        std::memcmp(ch.scratch.data(), ch.buffer(ch.expected[j], c_.record), c_.record) != 0) {
      ch.error = "verify: child " + std::to_string(ch.index) + " record " + std::to_string(j) +
                 " does not hold what was written";
      return false;
    }
    return true;
  }

  uint64_t run_child(test_id t, child& ch) {
    const uint64_t n = ch.nrec;
    uint64_t done = 0;
    auto wr = [&](uint64_t j, unsigned id) { return write_rec(ch, j, id % nr_buffers) && ++done; };
    auto rd = [&](uint64_t j) { return read_rec(ch, j) && ++done; };
    switch (t) {
      case t_initial_write:
        for (uint64_t j = 0; j < n; ++j)
          if (!wr(j, static_cast<unsigned>(j))) break;
        break;
      case t_rewrite:
        for (uint64_t j = 0; j < n; ++j)
          if (!wr(j, static_cast<unsigned>(j + 1))) break;
        break;
      case t_pwrite:
        for (uint64_t j = 0; j < n; ++j)
          if (!wr(j, static_cast<unsigned>(j + 2))) break;
        break;
      case t_read:
      case t_reread:
      case t_pread:
        for (uint64_t j = 0; j < n; ++j)
          if (!rd(j)) break;
        break;
      case t_reverse_read:
        for (uint64_t j = n; j-- > 0;)
          if (!rd(j)) break;
        break;
      case t_stride_read:
        for (uint64_t i = 0; i < n; ++i)
          if (!rd((i * stride_records) % n)) break;
        break;
      case t_random_read:
        for (uint64_t i = 0; i < n; ++i)
          if (!rd((ch.rng = mix64(ch.rng)) % n)) break;
        break;
      case t_random_write:
        for (uint64_t i = 0; i < n; ++i) {
          ch.rng = mix64(ch.rng);
          if (!wr(ch.rng % n, static_cast<unsigned>(ch.rng >> 40))) break;
        }
        break;
      case t_mixed:
        // iozone's random mix: children alternate between readers and writers.
        for (uint64_t i = 0; i < n; ++i) {
          ch.rng = mix64(ch.rng);
          const bool ok = ch.index % 2 == 0 ? rd(ch.rng % n)
                                            : wr(ch.rng % n, static_cast<unsigned>(ch.rng >> 40));
          if (!ok) break;
        }
        break;
      case nr_tests:
        break;
    }
    return done * c_.record;
  }

  const iozone_config& c_;
  zram_device& dev_;
  std::vector<child>& children_;
};

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown CPU";
}

// /proc/loadavg's three figures: how busy the (shared) machine was.
std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

class progress_line {
 public:
  progress_line() : tty_(isatty(STDERR_FILENO)) {}
  void show(const std::string& s) {
    if (tty_) {
      std::cerr << "\r" << std::left << std::setw(78) << s.substr(0, 78) << std::right
                << std::flush;
    }
    last_ = s;
  }
  // Without a terminal, one line per finished step instead of a line rewritten in place.
  void step_done(const std::string& s) {
    if (!tty_) std::cerr << s << "\n";
  }
  void done() {
    if (tty_) std::cerr << "\r" << std::string(78, ' ') << "\r" << std::flush;
  }

 private:
  bool tty_;
  std::string last_;
};

// The measurement (see iozone.h).
result<iozone_result> measure(const iozone_config& c, const iozone_progress_fn& progress) {
  auto say = [&](const std::string& text, bool step) {
    if (progress) progress(text, step);
  };
  if (c.threads == 0 || c.record == 0 || c.record % page_size || c.size < c.record)
    return error(EINVAL, "-r must be a positive multiple of 4K and -s at least one record (got -r " +
                             std::to_string(c.record) + ", -s " + std::to_string(c.size) + ")");
  if (c.rounds == 0 || c.compress_pct > 100)
    return error(EINVAL, "--rounds must be at least 1 and --compressibility 0..100");
  if (c.modes.empty()) return error(EINVAL, "give at least one lock mode");
  const auto& modes = c.modes;
  const auto& selected = c.selected;
  const uint64_t size = c.size / c.record * c.record;
  const uint64_t nrec = size / c.record;

  // --- Per-child buffers, made once (outside every timed region).
  std::vector<child> children(c.threads);
  for (unsigned t = 0; t < c.threads; ++t) {
    child& ch = children[t];
    ch.index = t;
    ch.base = t * size;
    ch.nrec = nrec;
    ch.pool.resize(nr_buffers * c.record);
    for (unsigned b = 0; b < nr_buffers; ++b)
      fill_compressible(ch.pool.data() + b * c.record, c.record, c.compress_pct,
                        mix64(t * 1000 + b));
    ch.scratch.resize(c.record);
    ch.expected.assign(nrec, 0);
  }

  iozone_result out;
  out.size_per_thread = size;
  auto& results = out.children_kbs;
  auto& parent = out.parent_kbs;
  auto& cpu = out.cpu_seconds;
  for (auto m : modes) {
    results[m].assign(nr_tests, {});
    parent[m].assign(nr_tests, {});
    cpu[m].assign(nr_tests, {});
  }
  std::unique_ptr<zram_device>& last = out.last;

  for (unsigned round = 0; round < c.rounds; ++round) {
    // A fresh device per mode for this round; every test then runs once per mode, back to back
    // (A B C for the initial write, A B C for the rewrite, ...), so that the forms compared by a
    // ratio run seconds apart, under the same load.
    last.reset();
    std::map<zram_lock_mode, std::unique_ptr<zram_device>> devs;
    std::map<zram_lock_mode, std::vector<child>> kids;
    for (size_t k = 0; k < modes.size(); ++k) {
      const zram_lock_mode mode = modes[k];
      zram_options o;
      o.disksize = c.threads * size;
      o.comp_algorithm = c.comp;
      o.lock_mode = mode;
      o.checksum = c.checksum;
      o.name = "zram" + std::to_string(k);
      auto dev = zram_device::create(o);
      if (!dev.ok()) return dev.error();
      devs[mode] = std::move(*dev);
      kids[mode] = children;
      for (auto& ch : kids[mode]) ch.rng = mix64(ch.index + 7 * round + 1);
    }
    // The order rotates from round to round (A B C, B C A, C A B, ...), so that no mode always
    // runs first or last after another mode's test (caches, the other tenants of the machine).
    // Not run_alternating_rounds: a round here is every test, each run once per mode on the
    // round's own devices, so the modes alternate within each test.
    std::vector<zram_lock_mode> order;
    for (size_t k = 0; k < modes.size(); ++k)
      order.push_back(modes[mode_at(round_order::rotate, round, k, modes.size())]);
    for (test_id t : run_order) {
      // Reads need data: the initial write always runs, reported only when selected.
      if (!selected[t] && t != t_initial_write) continue;
      for (zram_lock_mode mode : order) {
        std::ostringstream msg;
        msg << "iozone: round " << round + 1 << "/" << c.rounds << ": " << tests[t].name << " ("
            << to_string(mode) << ")";
        say(msg.str(), false);
        runner r(c, *devs[mode], kids[mode]);
        double kbs = 0, parent_kbs = 0, cpu_seconds = 0;
        const std::string err = r.run(t, &kbs, &parent_kbs, &cpu_seconds);
        if (!err.empty())
          return error(EIO, std::string(tests[t].name) + " (" + std::string(to_string(mode)) +
                                "): " + err);
        if (selected[t]) {
          results[mode][t].push_back(kbs);
          parent[mode][t].push_back(parent_kbs);
          cpu[mode][t].push_back(cpu_seconds);
        }
      }
    }
    std::ostringstream msg;
    msg << "iozone: round " << round + 1 << "/" << c.rounds << " done";
    say(msg.str(), true);
    if (c.keep_last_device) last = std::move(devs[modes.back()]);
  }
  return out;
}

int run_iozone_cli(config& c) {
  // --- Validate what only the command line names.
  c.modes.clear();
  if (c.lock == "all") {
    c.modes.assign(all_zram_lock_modes.begin(), all_zram_lock_modes.end());
  } else {
    auto m = parse_zram_lock_mode(c.lock);
    if (!m.ok()) {
      std::cerr << "uswap iozone: --lock: " << m.error().message() << " or all\n";
      return 2;
    }
    c.modes.push_back(*m);
  }
  c.selected.fill(c.tests == "all");
  if (c.tests != "all") {
    std::stringstream ss(c.tests);
    std::string key;
    while (std::getline(ss, key, ',')) {
      bool found = false;
      for (unsigned t = 0; t < nr_tests; ++t)
        if (key == tests[t].key) c.selected[t] = found = true;
      if (!found) {
        std::cerr << "uswap iozone: --tests: unknown test '" << key << "'; known:";
        for (const auto& d : tests) std::cerr << " " << d.key;
        std::cerr << "\n";
        return 2;
      }
    }
  }
  c.keep_last_device = c.stat || c.lockstat;
  if (c.lockstat) lockstat::enable(true);
  const seed_table seed = load_seed_rows(c.reference, "002");
  progress_line progress;
  auto measured = measure(c, [&](const std::string& text, bool step) {
    if (step)
      progress.step_done(text);
    else
      progress.show(text);
  });
  progress.done();
  if (!measured.ok()) {
    const bool bad_input = measured.error().code() == EINVAL;
    std::cerr << "uswap iozone: "
              << (bad_input ? std::string(measured.error().message()) : measured.error().to_string())
              << "\n";
    return bad_input ? 2 : 1;
  }
  const auto& modes = c.modes;
  const auto& selected = c.selected;
  const uint64_t size = measured->size_per_thread;
  auto& results = measured->children_kbs;
  auto& parent = measured->parent_kbs;
  auto& cpu = measured->cpu_seconds;
  const std::unique_ptr<zram_device>& last = measured->last;

  // --- Report.
  const bool compare = modes.size() > 1;
  const zram_lock_mode base = zram_lock_mode::global_rwlock;
  using series = std::map<zram_lock_mode, std::vector<std::vector<double>>>;
  auto per_round_ratios = [&](const series& v, zram_lock_mode m, unsigned t) {
    std::vector<double> r;
    const auto& a = v.at(m)[t];
    const auto& b = v.at(base)[t];
    for (size_t k = 0; k < a.size() && k < b.size(); ++k)
      if (b[k] > 0) r.push_back(a[k] / b[k]);
    return r;
  };
  // "1.234 [0.91-1.40]": ratio of medians, min-max of the per-round ratios.
  auto ratio_cell = [&](const series& v, zram_lock_mode m, unsigned t) {
    const auto rr = per_round_ratios(v, m, t);
    std::ostringstream cell;
    cell << std::fixed << std::setprecision(3)
         << median(v.at(m)[t]) / std::max(median(v.at(base)[t]), 1e-9) << " ["
         << std::setprecision(2) << (rr.empty() ? 0 : *std::min_element(rr.begin(), rr.end()))
         << "-" << (rr.empty() ? 0 : *std::max_element(rr.begin(), rr.end())) << "]";
    return cell.str();
  };
  std::ostringstream cfg;
  cfg << c.threads << " threads, " << format_size(c.record) << " records, "
      << format_size(size) << " per thread, " << c.comp << ", " << c.compress_pct
      << "% compressible" << (c.checksum ? "" : ", no checksums") << ", " << c.rounds
      << (c.rounds == 1 ? " round" : " rounds");
  if (compare) cfg << " (each test run once per mode back to back, A B C / B C A / C A B ..., fresh devices "
           "per round)";
  const std::string machine =
      cpu_model() + ", " + std::to_string(std::thread::hardware_concurrency()) + " CPUs";

  if (c.json || !c.json_file.empty()) {
    nlohmann::json j;
    j["config"] = {{"threads", c.threads},     {"record", c.record},
                   {"size_per_thread", size},  {"comp", c.comp},
                   {"compressibility", c.compress_pct}, {"rounds", c.rounds},
                   {"checksum", c.checksum},   {"verify", c.verify}};
    j["machine"] = machine;
    j["seed_reference"] = seed.source;
    j["unit"] = "KB/s (children see throughput, KB = 1024 bytes)";
    for (unsigned t = 0; t < nr_tests; ++t) {
      if (!selected[t]) continue;
      nlohmann::json row;
      row["test"] = tests[t].name;
      for (auto m : modes) {
        const std::string mn(to_string(m));
        row["modes"][mn] = {{"median_kbs", median(results[m][t])},
                            {"rounds", results[m][t]},
                            {"parent_median_kbs", median(parent[m][t])},
                            {"parent_rounds", parent[m][t]},
                            {"cpu_seconds_median", median(cpu[m][t])},
                            {"cpu_seconds_rounds", cpu[m][t]}};
        if (compare) {
          const auto rr = per_round_ratios(results, m, t);
          const auto pr = per_round_ratios(parent, m, t);
          row["parent_ratio_to_global_rwlock"][mn] = {
              {"ratio", median(parent[m][t]) / std::max(median(parent[base][t]), 1e-9)},
              {"min", pr.empty() ? 0 : *std::min_element(pr.begin(), pr.end())},
              {"max", pr.empty() ? 0 : *std::max_element(pr.begin(), pr.end())}};
          row["ratio_to_global_rwlock"][mn] = {
              {"ratio", median(results[m][t]) / std::max(median(results[base][t]), 1e-9)},
              {"min", rr.empty() ? 0 : *std::min_element(rr.begin(), rr.end())},
              {"max", rr.empty() ? 0 : *std::max_element(rr.begin(), rr.end())}};
        }
      }
      if (const seed_row* s = find_seed_row(seed, tests[t].name)) row["seed_ratio"] = s->ratio();
      j["tests"].push_back(row);
    }
    if (c.stat && last) j["zram"] = zram_report_json(*last);
    j["load_average"] = load_average();
    if (!c.json_file.empty()) {
      std::ofstream f(c.json_file);
      f << j.dump(2) << "\n";
      if (!f) {
        std::cerr << "uswap iozone: cannot write " << c.json_file << "\n";
        return 1;
      }
    }
    if (c.json) {
      std::cout << j.dump(2) << "\n";
      return 0;
    }
  }

  std::cout << "uswap iozone: " << cfg.str() << "\n"
            << "machine: " << machine << ", load average at the end " << load_average() << "\n"
            << "KB/s = children see throughput (iozone -t), median of rounds\n";
  if (compare)
    std::cout << "seed: Weijie Yang, seed 002 (4 threads, 4-core Core2 Q8400, kernel 3.15-rc3); "
              << "figures from " << seed.source << "\n";
  std::cout << "\n";
  std::cout << std::left << std::setw(16) << "Test" << std::right;
  for (auto m : modes) std::cout << std::setw(15) << to_string(m);
  if (compare)
    std::cout << std::setw(22) << "slot_cas/global" << std::setw(22) << "slot_bitlock/global"
              << std::setw(16) << "seed CAS/base";
  std::cout << "\n";
  for (unsigned t = 0; t < nr_tests; ++t) {
    if (!selected[t]) continue;
    std::cout << std::left << std::setw(16) << tests[t].name << std::right << std::fixed
              << std::setprecision(2);
    for (auto m : modes) std::cout << std::setw(15) << median(results[m][t]);
    if (compare) {
      for (auto m : {zram_lock_mode::slot_cas, zram_lock_mode::slot_bitlock})
        std::cout << std::setw(22) << ratio_cell(results, m, t);
      if (const seed_row* s = find_seed_row(seed, tests[t].name)) {
        std::ostringstream cell;
        cell << std::fixed << std::setprecision(3) << s->ratio();
        std::cout << std::setw(16) << cell.str();
      }
    }
    std::cout << std::defaultfloat << "\n";
  }
  if (compare) {
    std::cout << "\nratio = median KB/s of the mode / median KB/s of global_rwlock "
                 "[min-max of the per-round ratios]\n";
    // With more threads than CPUs, children-see throughput credits a thread for finishing early
    // while others wait (a lock that starves writers lets readers finish at full speed); all
    // bytes over wall time does not.
    std::cout << "\nparent sees (all bytes / wall time), ratio to global_rwlock:\n"
              << std::left << std::setw(16) << "Test" << std::right << std::setw(22)
              << "slot_cas/global" << std::setw(22) << "slot_bitlock/global" << "\n";
    for (unsigned t = 0; t < nr_tests; ++t) {
      if (!selected[t]) continue;
      std::cout << std::left << std::setw(16) << tests[t].name << std::right;
      for (auto m : {zram_lock_mode::slot_cas, zram_lock_mode::slot_bitlock})
        std::cout << std::setw(22) << ratio_cell(parent, m, t);
      std::cout << "\n";
    }
  }
  if (c.stat && last) {
    std::cout << "\nzram device after the last round (" << to_string(last->lock_mode())
              << "):\n";
    print_zram_report(std::cout, *last);
  }
  if (c.lockstat && last) {
    // Every lock class still registered: the last device's slot locks or tb_lock, and its
    // zsmalloc pool's class and zspage locks, over the last round.
    std::cout << "\nlock statistics of the last round's " << to_string(last->lock_mode())
              << " device (all classes):\n"
              << lockstat::format_table(lockstat::snapshot_all());
  }
  return 0;
}

void add_iozone_command(CLI::App& app, command_table& table) {
  static config c;
  auto* sub = app.add_subcommand(
      "iozone",
      "iozone's throughput tests in-process on a zram device; --lock all compares the lock "
      "modes in alternating rounds beside seed 002's figures");
  sub->add_option("-t,--threads", c.threads, "Threads (iozone children), each with its own file")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  add_size_option(*sub, "-r,--record", c.record, "Record size, a multiple of 4K");
  add_size_option(*sub, "-s,--size", c.size, "File size per thread");
  sub->add_option("--compressibility", c.compress_pct,
                  "Percent of each buffer that compresses away (fio buffer_compress_percentage)")
      ->capture_default_str()
      ->check(CLI::Range(0, 100));
  sub->add_option("--comp", c.comp, "Compression algorithm: lz4, lz4hc, zstd, lzo")
      ->capture_default_str();
  sub->add_option("--lock", c.lock, "Lock mode: global_rwlock, slot_cas, slot_bitlock or all")
      ->capture_default_str();
  sub->add_option("--rounds", c.rounds, "Rounds (each mode once per round, on a fresh device)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub->add_option("--tests", c.tests,
                  "Comma-separated tests: write,rewrite,read,reread,reverse,stride,randread,"
                  "mixed,randwrite,pwrite,pread (the initial write always runs)")
      ->capture_default_str();
  sub->add_option("--reference", c.reference,
                  "Seed figures (seed_results.csv); compiled-in copy if unreadable")
      ->capture_default_str();
  sub->add_flag("--verify", c.verify, "Check every record read against what was written");
  sub->add_flag("--stat", c.stat, "Print the last device's zramctl summary and stat files");
  sub->add_flag("--lockstat", c.lockstat, "Collect lock statistics (shown with --stat)");
  sub->add_flag("!--no-checksum", c.checksum, "Store objects without checksums (as the kernel)");
  sub->add_flag("--json", c.json, "Print the results as JSON");
  sub->add_option("--json-file", c.json_file, "Also write the results as JSON to this file");
  table.add(sub, [] { return run_iozone_cli(c); });
}

const command_registrar reg{50, add_iozone_command};

}  // namespace

const std::array<iozone_test_desc, iozone_nr_tests> iozone_tests = {{
    {"Initial write", "write"},   {"Rewrite", "rewrite"},       {"Read", "read"},
    {"Re-read", "reread"},        {"Reverse Read", "reverse"},  {"Stride read", "stride"},
    {"Random read", "randread"},  {"Mixed workload", "mixed"},  {"Random write", "randwrite"},
    {"Pwrite", "pwrite"},         {"Pread", "pread"},
}};

result<iozone_result> run_iozone(const iozone_config& cfg, const iozone_progress_fn& progress) {
  return measure(cfg, progress);
}

}  // namespace uswap::tools
