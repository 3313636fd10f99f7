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
#include <cstring>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>
#include <vector>

#include "alternate_rounds.h"
#include "cli.h"
#include "iozone.h"
#include "machine_facts.h"
#include "progress.h"
#include "report.h"
#include "seed_reference.h"
#include "uswap/base/hash.h"
#include "uswap/base/units.h"
#include "uswap/compress/page_fill.h"
#include "uswap/sync/lockstat.h"
#include "uswap/zram/zram.h"
#include "zram_report.h"

namespace uswap::tools {
namespace {

// iozone's execution order.
constexpr iozone_test run_order[iozone_nr_tests] = {
    iozone_test::initial_write, iozone_test::rewrite,      iozone_test::read,
    iozone_test::reread,        iozone_test::random_read,  iozone_test::random_write,
    iozone_test::reverse_read,  iozone_test::stride_read,  iozone_test::mixed,
    iozone_test::pwrite,        iozone_test::pread};

constexpr unsigned nr_buffers = 64;
constexpr unsigned stride_records = 17;

constexpr unsigned test_index(iozone_test t) { return static_cast<unsigned>(t); }
const char* name(iozone_test t) { return name_of(iozone_test_names, t).data(); }

// The command line's options: the measurement's configuration, and what to select and print.
struct config : iozone_config {
  std::vector<iozone_test> tests = all_values(iozone_test_keys);
  std::string reference = default_seed_results_path();
  bool json = false;
  std::string json_file;
  bool stat = false;
  bool lockstat = false;
};

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
  std::string run(iozone_test t, double* kbs, double* parent_kbs, double* cpu_seconds) {
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

  uint64_t run_child(iozone_test t, child& ch) {
    using enum iozone_test;
    const uint64_t n = ch.nrec;
    uint64_t done = 0;
    auto wr = [&](uint64_t j, unsigned id) { return write_rec(ch, j, id % nr_buffers) && ++done; };
    auto rd = [&](uint64_t j) { return read_rec(ch, j) && ++done; };
    switch (t) {
      case initial_write:
        for (uint64_t j = 0; j < n; ++j)
          if (!wr(j, static_cast<unsigned>(j))) break;
        break;
      case rewrite:
        for (uint64_t j = 0; j < n; ++j)
          if (!wr(j, static_cast<unsigned>(j + 1))) break;
        break;
      case pwrite:
        for (uint64_t j = 0; j < n; ++j)
          if (!wr(j, static_cast<unsigned>(j + 2))) break;
        break;
      case read:
      case reread:
      case pread:
        for (uint64_t j = 0; j < n; ++j)
          if (!rd(j)) break;
        break;
      case reverse_read:
        for (uint64_t j = n; j-- > 0;)
          if (!rd(j)) break;
        break;
      case stride_read:
        for (uint64_t i = 0; i < n; ++i)
          if (!rd((i * stride_records) % n)) break;
        break;
      case random_read:
        for (uint64_t i = 0; i < n; ++i)
          if (!rd((ch.rng = mix64(ch.rng)) % n)) break;
        break;
      case random_write:
        for (uint64_t i = 0; i < n; ++i) {
          ch.rng = mix64(ch.rng);
          if (!wr(ch.rng % n, static_cast<unsigned>(ch.rng >> 40))) break;
        }
        break;
      case mixed:
        // iozone's random mix: children alternate between readers and writers.
        for (uint64_t i = 0; i < n; ++i) {
          ch.rng = mix64(ch.rng);
          const bool ok = ch.index % 2 == 0 ? rd(ch.rng % n)
                                            : wr(ch.rng % n, static_cast<unsigned>(ch.rng >> 40));
          if (!ok) break;
        }
        break;
    }
    return done * c_.record;
  }

  const iozone_config& c_;
  zram_device& dev_;
  std::vector<child>& children_;
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
    results[m].assign(iozone_nr_tests, {});
    parent[m].assign(iozone_nr_tests, {});
    cpu[m].assign(iozone_nr_tests, {});
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
    for (iozone_test t : run_order) {
      // Reads need data: the initial write always runs, reported only when selected.
      if (!selected[test_index(t)] && t != iozone_test::initial_write) continue;
      for (zram_lock_mode mode : order) {
        say("iozone: round " + std::to_string(round + 1) + "/" + std::to_string(c.rounds) + ": " +
                name(t) + " (" + std::string(to_string(mode)) + ")",
            false);
        runner r(c, *devs[mode], kids[mode]);
        double kbs = 0, parent_kbs = 0, cpu_seconds = 0;
        const std::string err = r.run(t, &kbs, &parent_kbs, &cpu_seconds);
        if (!err.empty())
          return error(EIO, std::string(name(t)) + " (" + std::string(to_string(mode)) +
                                "): " + err);
        if (selected[test_index(t)]) {
          results[mode][test_index(t)].push_back(kbs);
          parent[mode][test_index(t)].push_back(parent_kbs);
          cpu[mode][test_index(t)].push_back(cpu_seconds);
        }
      }
    }
    say("iozone: round " + std::to_string(round + 1) + "/" + std::to_string(c.rounds) + " done",
        true);
    if (c.keep_last_device) last = std::move(devs[modes.back()]);
  }
  return out;
}

// --- The report -------------------------------------------------------------------------------

constexpr zram_lock_mode base_mode = zram_lock_mode::global_rwlock;

// Per round, the mode's figure over the baseline's.
std::vector<double> per_round_ratios(const iozone_series& v, zram_lock_mode m, unsigned t) {
  std::vector<double> r;
  const auto& a = v.at(m)[t];
  const auto& b = v.at(base_mode)[t];
  for (size_t k = 0; k < a.size() && k < b.size(); ++k)
    if (b[k] > 0) r.push_back(a[k] / b[k]);
  return r;
}

double ratio_of_medians(const iozone_series& v, zram_lock_mode m, unsigned t) {
  return median(v.at(m)[t]) / std::max(median(v.at(base_mode)[t]), 1e-9);
}

// "1.234 [0.91-1.40]": ratio of medians, min-max of the per-round ratios.
std::string ratio_cell(const iozone_series& v, zram_lock_mode m, unsigned t) {
  const auto rr = per_round_ratios(v, m, t);
  return strprintf("%.3f [%.2f-%.2f]", ratio_of_medians(v, m, t), min_of(rr), max_of(rr));
}

nlohmann::json ratio_json(const iozone_series& v, zram_lock_mode m, unsigned t) {
  const auto rr = per_round_ratios(v, m, t);
  return {{"ratio", ratio_of_medians(v, m, t)}, {"min", min_of(rr)}, {"max", max_of(rr)}};
}

// The modes compared with the baseline, each a column of ratios.
std::vector<zram_lock_mode> compared_modes(const iozone_config& c) {
  std::vector<zram_lock_mode> out;
  for (zram_lock_mode m : c.modes)
    if (m != base_mode) out.push_back(m);
  return out;
}

std::string ratio_heading(zram_lock_mode m) { return std::string(to_string(m)) + "/global"; }

// The ratios of "parent sees" throughput. With more threads than CPUs, children-see throughput
// credits a thread for finishing early while others wait (a lock that starves writers lets
// readers finish at full speed); all bytes over wall time does not.
void print_parent_ratios(std::ostream& out, const iozone_report& r) {
  const auto others = compared_modes(r.config);
  out << "\nratio = median KB/s of the mode / median KB/s of global_rwlock "
         "[min-max of the per-round ratios]\n";
  out << "\nparent sees (all bytes / wall time), ratio to global_rwlock:\n"
      << std::left << std::setw(16) << "Test" << std::right;
  for (auto m : others) out << std::setw(22) << ratio_heading(m);
  out << "\n";
  for (unsigned t = 0; t < iozone_nr_tests; ++t) {
    if (!r.config.selected[t]) continue;
    out << std::left << std::setw(16) << name(static_cast<iozone_test>(t)) << std::right;
    for (auto m : others) out << std::setw(22) << ratio_cell(r.parent_kbs, m, t);
    out << "\n";
  }
}

}  // namespace

nlohmann::json iozone_report::to_json() const {
  const iozone_config& c = config;
  nlohmann::json j;
  j["config"] = {{"threads", c.threads},       {"record", c.record},
                 {"size_per_thread", size_per_thread}, {"comp", c.comp},
                 {"compressibility", c.compress_pct}, {"rounds", c.rounds},
                 {"checksum", c.checksum},     {"verify", c.verify}};
  j["machine"] = machine;
  j["seed_reference"] = seed.source;
  j["unit"] = "KB/s (children see throughput, KB = 1024 bytes)";
  for (unsigned t = 0; t < iozone_nr_tests; ++t) {
    if (!c.selected[t]) continue;
    const char* test = name(static_cast<iozone_test>(t));
    nlohmann::json row;
    row["test"] = test;
    for (auto m : c.modes) {
      const std::string mn(to_string(m));
      row["modes"][mn] = {{"median_kbs", median(children_kbs.at(m)[t])},
                          {"rounds", children_kbs.at(m)[t]},
                          {"parent_median_kbs", median(parent_kbs.at(m)[t])},
                          {"parent_rounds", parent_kbs.at(m)[t]},
                          {"cpu_seconds_median", median(cpu_seconds.at(m)[t])},
                          {"cpu_seconds_rounds", cpu_seconds.at(m)[t]}};
      if (compare()) {
        row["parent_ratio_to_global_rwlock"][mn] = ratio_json(parent_kbs, m, t);
        row["ratio_to_global_rwlock"][mn] = ratio_json(children_kbs, m, t);
      }
    }
    if (const seed_row* s = find_seed_row(seed, test)) row["seed_ratio"] = s->ratio();
    j["tests"].push_back(row);
  }
  if (device) j["zram"] = device->to_json();
  j["load_average"] = load_average;
  return j;
}

void iozone_report::print(std::ostream& out) const {
  const iozone_config& c = config;
  out << "uswap iozone: " << c.threads << " threads, " << format_size(c.record) << " records, "
      << format_size(size_per_thread) << " per thread, " << c.comp << ", " << c.compress_pct
      << "% compressible" << (c.checksum ? "" : ", no checksums") << ", " << c.rounds
      << (c.rounds == 1 ? " round" : " rounds");
  if (compare())
    out << " (each test run once per mode back to back, A B C / B C A / C A B ..., fresh devices "
           "per round)";
  out << "\n"
      << "machine: " << machine << ", load average at the end " << load_average << "\n"
      << "KB/s = children see throughput (iozone -t), median of rounds\n";
  if (compare())
    out << "seed: Weijie Yang, seed 002 (4 threads, 4-core Core2 Q8400, kernel 3.15-rc3); "
        << "figures from " << seed.source << "\n";
  out << "\n";
  const auto others = compared_modes(c);
  out << std::left << std::setw(16) << "Test" << std::right;
  for (auto m : c.modes) out << std::setw(15) << to_string(m);
  if (compare()) {
    for (auto m : others) out << std::setw(22) << ratio_heading(m);
    out << std::setw(16) << "seed CAS/base";
  }
  out << "\n";
  for (unsigned t = 0; t < iozone_nr_tests; ++t) {
    if (!c.selected[t]) continue;
    const char* test = name(static_cast<iozone_test>(t));
    out << std::left << std::setw(16) << test << std::right << std::fixed << std::setprecision(2);
    for (auto m : c.modes) out << std::setw(15) << median(children_kbs.at(m)[t]);
    if (compare()) {
      for (auto m : others) out << std::setw(22) << ratio_cell(children_kbs, m, t);
      if (const seed_row* s = find_seed_row(seed, test))
        out << std::setw(16) << strprintf("%.3f", s->ratio());
    }
    out << std::defaultfloat << "\n";
  }
  if (compare()) print_parent_ratios(out, *this);
  if (device) {
    out << "\nzram device after the last round (" << device->lock_mode << "):\n";
    device->print(out);
  }
  if (locks) {
    // Every lock class still registered: the last device's slot locks or tb_lock, and its
    // zsmalloc pool's class and zspage locks, over the last round.
    out << "\nlock statistics of the last round's " << locks->device_lock_mode
        << " device (all classes):\n"
        << lockstat::format_table(locks->rows);
  }
}

namespace {

// The configuration the command line gave, checked where only the command line can be wrong.
status validate(config& c) {
  c.selected.fill(false);
  for (iozone_test t : c.tests) c.selected[test_index(t)] = true;
  if (c.modes.size() > 1 &&
      std::find(c.modes.begin(), c.modes.end(), base_mode) == c.modes.end())
    return error(EINVAL, "--lock: comparing modes needs global_rwlock, the baseline of the ratios");
  c.keep_last_device = c.stat || c.lockstat;
  return {};
}

result<iozone_report> measure_report(const config& c) {
  iozone_report rep;
  rep.seed = load_seed_rows(c.reference, "002");
  if (c.lockstat) lockstat::enable(true);
  progress_line::style look;
  look.plain_interval_s = -1;  // without a terminal, only the end of each round
  look.width = 78;
  progress_line progress(look);
  auto measured = measure(c, [&](const std::string& text, bool step) {
    if (step)
      progress.step(text);
    else
      progress.show(text);
  });
  progress.clear();
  if (!measured.ok()) return measured.error();
  rep.config = c;
  rep.size_per_thread = measured->size_per_thread;
  rep.machine = cpu_model() + ", " + std::to_string(cpu_count()) + " CPUs";
  rep.load_average = load_average();
  rep.children_kbs = std::move(measured->children_kbs);
  rep.parent_kbs = std::move(measured->parent_kbs);
  rep.cpu_seconds = std::move(measured->cpu_seconds);
  if (const auto& last = measured->last) {
    if (c.stat) rep.device = zram_report::of(*last);
    if (c.lockstat)
      rep.locks = iozone_report::lock_table{std::string(to_string(last->lock_mode())),
                                            lockstat::snapshot_all()};
  }
  return rep;
}

int run_iozone_cli(config& c) {
  if (status st = validate(c); !st.ok()) {
    std::cerr << "uswap iozone: " << st.message() << "\n";
    return 2;
  }
  auto rep = measure_report(c);
  if (!rep.ok()) {
    const bool bad_input = rep.error().code() == EINVAL;
    std::cerr << "uswap iozone: "
              << (bad_input ? std::string(rep.error().message()) : rep.error().to_string())
              << "\n";
    return bad_input ? 2 : 1;
  }
  if (!c.json_file.empty()) {
    if (status st = write_json_file(c.json_file, rep->to_json()); !st.ok()) {
      std::cerr << "uswap iozone: " << st.message() << "\n";
      return 1;
    }
  }
  print_report(std::cout, *rep, c.json);
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
  add_enum_list_option(*sub, "--lock", c.modes, zram_lock_mode_names, "zram lock mode",
                       "Lock mode");
  add_rounds_option(*sub, c.rounds, "Rounds (each mode once per round, on a fresh device)")
      ->check(CLI::PositiveNumber);
  add_enum_list_option(*sub, "--tests", c.tests, iozone_test_keys, "test",
                       "Tests (the initial write always runs)");
  sub->add_option("--reference", c.reference,
                  "Seed figures (seed_results.csv); compiled-in copy if unreadable")
      ->capture_default_str();
  sub->add_flag("--verify", c.verify, "Check every record read against what was written");
  sub->add_flag("--stat", c.stat, "Print the last device's zramctl summary and stat files");
  sub->add_flag("--lockstat", c.lockstat, "Collect lock statistics (shown with --stat)");
  sub->add_flag("!--no-checksum", c.checksum, "Store objects without checksums (as the kernel)");
  add_json_flag(*sub, c.json);
  sub->add_option("--json-file", c.json_file, "Also write the results as JSON to this file");
  table.add(sub, [] { return run_iozone_cli(c); });
}

const command_registrar reg{50, add_iozone_command};

}  // namespace

result<iozone_result> run_iozone(const iozone_config& cfg, const iozone_progress_fn& progress) {
  return measure(cfg, progress);
}

}  // namespace uswap::tools
