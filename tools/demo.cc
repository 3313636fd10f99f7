// `uswap demo`: what `make demo` runs. In about a minute on 2 cores it shows the whole stack
// working, with figures measured in this run and nothing else:
//   1. usemem: tasks write more anonymous memory than the machine has RAM; reclaim pushes it
//      out through swap to zram, and every page is read back (swapped in) and compared.
//   2. short versions of the three seed tables (`uswap bench seeds --quick`-style, fewer
//      rounds, smaller sizes), each seed's published figures beside uswap's.
//   3. a summary: zram's compression ratio, swap-outs and swap-ins, and the three most
//      contended lock classes of the usemem run (lockstat).
// A progress line per phase is rewritten in place on a terminal; plain lines otherwise.
// --ram, --size, --tasks and --rounds scale it down for the tests.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <mutex>
#include <sstream>

#include "bench_seeds.h"
#include "cli.h"
#include "usemem.h"
#include "uswap/base/units.h"

namespace uswap::tools {
namespace {

using clock_type = std::chrono::steady_clock;

struct demo_options {
  uint64_t ram = 64ull << 20;        // the usemem machine's RAM
  uint64_t size = 64ull << 20;       // bytes per usemem task
  unsigned tasks = 4;                // usemem tasks (threads of one address space)
  unsigned rounds = 3;               // rounds per form in the seed tables
  bool seeds = true;                 // run phase 2
};

// The phase's progress line: rewritten in place on a terminal, at most one plain line a second
// otherwise (so a log stays readable).
class phase_line {
 public:
  explicit phase_line(std::string phase)
      : phase_(std::move(phase)), tty_(isatty(STDERR_FILENO)), start_(clock_type::now()) {}
  void operator()(const std::string& text) {
    std::lock_guard lk(lock_);
    const double s = std::chrono::duration<double>(clock_type::now() - start_).count();
    char head[64];
    std::snprintf(head, sizeof head, "[%s %4.1f s] ", phase_.c_str(), s);
    if (tty_) {
      std::cerr << "\r\033[K" << (head + text).substr(0, 110) << std::flush;
      shown_ = true;
    } else if (s >= last_ + 1.0 || last_ < 0) {
      std::cerr << head << text << "\n";
      last_ = s;
    }
  }
  ~phase_line() {
    if (tty_ && shown_) std::cerr << "\r\033[K" << std::flush;
  }

 private:
  std::string phase_;
  bool tty_;
  clock_type::time_point start_;
  double last_ = -1;
  bool shown_ = false;
  std::mutex lock_;
};

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

int run_demo(const demo_options& d) {
  const auto t_all = clock_type::now();
  std::cout << "uswap demo: Linux's swap stack in userspace, measured on this machine ("
            << machine_description() << ", load average " << load_average_text() << ")\n\n";

  // --- 1. usemem through reclaim, swap and zram, every page verified.
  usemem_config uc;
  uc.tasks = d.tasks;
  uc.size = d.size;
  uc.ram = d.ram;
  uc.verify = true;
  uc.swap_dev = swap_dev_kind::zram;
  uc.swap_lock = swap_lock_mode::cluster;
  uc.zram_lock = zram_lock_mode::slot_bitlock;
  const uint64_t total = uint64_t{uc.tasks} * round_up_to_page(uc.size);
  if (total <= uc.ram) {
    std::cerr << "uswap demo: --tasks x --size (" << format_size(total)
              << ") must be more than --ram (" << format_size(uc.ram)
              << "), or nothing goes out to swap\n";
    return 2;
  }
  std::cout << "1. usemem: " << uc.tasks << " tasks write " << format_size(total)
            << " of anonymous memory on a machine with " << format_size(uc.ram)
            << " of RAM; reclaim swaps the excess out to zram (" << uc.comp
            << ", cluster swap lock, per-slot zram lock), then every page is read back and "
               "compared\n";
  const auto t1 = clock_type::now();
  result<usemem_result> um = error(EINVAL, "not run");
  {
    phase_line pl("usemem");
    um = run_usemem(uc, [&](uint64_t written, uint64_t verified, const vm_event_counts& ev) {
      std::ostringstream os;
      os << "written " << format_size(written) << " / " << format_size(total) << ", verified "
         << format_size(verified) << ", swap-outs " << ev[PSWPOUT] << ", swap-ins " << ev[PSWPIN];
      pl(os.str());
    });
  }
  if (!um) {
    std::cerr << "uswap demo: usemem: " << um.error().to_string() << "\n";
    return 1;
  }
  const usemem_result& r = *um;
  uint64_t pages_verified = 0;
  for (const auto& t : r.tasks) pages_verified += t.pages_verified;
  const auto& ev = r.events;
  std::printf("   write: %.0f MB/s (sum over tasks); %llu swap-outs, %llu swap-ins, %llu major "
              "faults, kswapd reclaimed %llu pages, direct reclaim %llu\n",
              r.total_kbps * 1024 / 1e6, (unsigned long long)ev[PSWPOUT],
              (unsigned long long)ev[PSWPIN], (unsigned long long)ev[PGMAJFAULT],
              (unsigned long long)ev[PGSTEAL_KSWAPD], (unsigned long long)ev[PGSTEAL_DIRECT]);
  std::printf("   verify: %llu pages read back, %llu mismatches; %s; %.1f s\n",
              (unsigned long long)pages_verified, (unsigned long long)r.mismatches,
              r.teardown_clean ? "at exit every frame, swap slot and zram object was freed"
                               : "NOT CLEAN at exit",
              seconds_since(t1));
  for (const auto& t : r.tasks)
    if (!t.error.empty()) std::printf("   task error: %s\n", t.error.c_str());
  const bool usemem_ok = r.mismatches == 0 && r.errors == 0 && r.teardown_clean &&
                         ev[PSWPOUT] > 0 && ev[PSWPIN] > 0;

  // --- 2. The seed tables, short.
  bool seeds_ok = true;
  if (d.seeds) {
    std::cout << "\n2. the seed tables, short (" << d.rounds
              << " rounds per form; `uswap bench seeds` runs the full ones)\n\n";
    seeds_options so;
    so.quick = true;
    so.rounds = d.rounds;
    // --quick's sizes at the default scale (usemem 2 x 32M, iozone 8M per child), smaller
    // with --ram / --size.
    so.usemem_ram = std::max<uint64_t>(d.ram / 2, 8ull << 20);
    so.iozone_size = std::max<uint64_t>(d.size / 8, 256ull << 10);
    so.swapbench_duration = 0.2;
    result<seeds_run> run = error(EINVAL, "not run");
    {
      phase_line pl("seeds");
      run = run_seed_benchmarks(so, std::ref(pl));
    }
    if (!run) {
      std::cerr << "uswap demo: seed tables: " << run.error().to_string() << "\n";
      seeds_ok = false;
    } else {
      for (const auto& rep : run->seeds) print_seed_report(std::cout, *run, rep);
    }
  }

  // --- 3. Summary.
  std::cout << (d.seeds ? "3" : "2") << ". summary\n";
  if (r.mm_stat && r.mm_stat->compr_data_size > 0) {
    const auto& m = *r.mm_stat;
    std::printf("   zram: %s stored in %s compressed (ratio %.2f), pool %s, %llu same-filled "
                "pages, %llu huge\n",
                format_size(m.orig_data_size).c_str(), format_size(m.compr_data_size).c_str(),
                static_cast<double>(m.orig_data_size) / static_cast<double>(m.compr_data_size),
                format_size(m.mem_used_total).c_str(), (unsigned long long)m.same_pages,
                (unsigned long long)m.huge_pages);
  }
  std::printf("   swap: %llu swap-outs, %llu swap-ins; %llu slots in use while the tasks still mapped "
              "their memory, %s after they exited\n",
              (unsigned long long)ev[PSWPOUT], (unsigned long long)ev[PSWPIN],
              (unsigned long long)r.swap.inuse, r.teardown_clean ? "none" : "SOME");
  std::vector<lock_stats> locks = r.locks;
  std::sort(locks.begin(), locks.end(), [](const lock_stats& a, const lock_stats& b) {
    return a.contended != b.contended ? a.contended > b.contended
                                      : a.wait_total_ns > b.wait_total_ns;
  });
  std::cout << "   most contended locks in the usemem run (lockstat):\n";
  for (size_t i = 0; i < locks.size() && i < 3; ++i)
    std::printf("     %-24s %12llu acquisitions, %10llu contended (%.2f%%), wait avg %.1f us, "
                "max %.1f us\n",
                locks[i].name.c_str(), (unsigned long long)locks[i].acquisitions,
                (unsigned long long)locks[i].contended, locks[i].contended_pct(),
                locks[i].wait_avg_ns() / 1e3, static_cast<double>(locks[i].wait_max_ns) / 1e3);
  std::printf("   demo time: %.1f s\n", seconds_since(t_all));
  if (!usemem_ok) std::cout << "FAILED: the usemem run did not verify cleanly\n";
  return usemem_ok && seeds_ok ? 0 : 1;
}

void add_demo_command(CLI::App& app, command_table& table) {
  auto d = std::make_shared<demo_options>();
  auto* sub =
      app.add_subcommand("demo", "Show the whole stack working, with real figures, in a minute");
  sub->footer("The defaults are what `make demo` runs; the options scale the demo down (tests).");
  add_size_option(*sub, "--ram", d->ram, "RAM of the usemem machine");
  add_size_option(*sub, "--size", d->size, "Bytes each usemem task writes");
  sub->add_option("--tasks", d->tasks, "usemem tasks")->capture_default_str()->check(
      CLI::Range(1, 64));
  sub->add_option("--rounds", d->rounds, "Rounds per form in the seed tables")
      ->capture_default_str()
      ->check(CLI::Range(1, 20));
  sub->add_flag("!--no-seeds", d->seeds, "Skip the seed tables");
  table.add(sub, [d] { return run_demo(*d); });
}

const command_registrar reg{0, add_demo_command};

}  // namespace
}  // namespace uswap::tools
