// `uswap demo`: what `make demo` runs. In about a minute on 2 cores it shows the whole stack
// working, with figures measured in this run and nothing else:
//   1. usemem: tasks write more anonymous memory than the machine has RAM; reclaim pushes it
//      out through swap to zram, and every page is read back (swapped in) and compared.
//   2. short versions of the three seed tables (`uswap bench seeds --quick`-style, fewer
//      rounds, smaller sizes), each seed's published figures beside uswap's.
//   3. a summary: zram's compression ratio, swap-outs and swap-ins, and the three most
//      contended lock classes of the usemem run (lockstat).
// A progress line per phase is rewritten in place on a terminal; plain lines otherwise. The
// phases run first and the report is printed once they are done.
// --ram, --size, --tasks and --rounds scale it down for the tests.
#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench_seeds.h"
#include "cli.h"
#include "machine_facts.h"
#include "progress.h"
#include "report.h"
#include "usemem.h"
#include "uswap/base/units.h"

namespace uswap::tools {
namespace {

using clock_type = std::chrono::steady_clock;
using ull = unsigned long long;

struct demo_options {
  uint64_t ram = 64ull << 20;        // the usemem machine's RAM
  uint64_t size = 64ull << 20;       // bytes per usemem task
  unsigned tasks = 4;                // usemem tasks (threads of one address space)
  unsigned rounds = 3;               // rounds per form in the seed tables
  bool seeds = true;                 // run phase 2
};

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// What the demo measured, printed once every phase is done.
struct demo_report {
  std::string machine, load_average;   // at the start
  usemem_config usemem;                // phase 1's configuration
  usemem_result run;                   // and its result
  double usemem_seconds = 0;
  bool seed_phase = false;             // phase 2 ran
  std::optional<seeds_run> seeds;      // its tables (none if it failed)
  unsigned seed_rounds = 0;
  double seconds = 0;                  // the whole demo

  uint64_t total() const { return uint64_t{usemem.tasks} * round_up_to_page(usemem.size); }
  bool usemem_ok() const {
    return run.mismatches == 0 && run.errors == 0 && run.teardown_clean &&
           run.events[PSWPOUT] > 0 && run.events[PSWPIN] > 0;
  }
  bool ok() const { return usemem_ok() && (!seed_phase || seeds); }
  void print(std::ostream& out) const;
};

void print_usemem_phase(std::ostream& out, const demo_report& d) {
  const usemem_result& r = d.run;
  out << "1. usemem: " << d.usemem.tasks << " tasks write " << format_size(d.total())
      << " of anonymous memory on a machine with " << format_size(d.usemem.ram)
      << " of RAM; reclaim swaps the excess out to zram (" << d.usemem.comp
      << ", cluster swap lock, per-slot zram lock), then every page is read back and "
         "compared\n";
  uint64_t pages_verified = 0;
  for (const auto& t : r.tasks) pages_verified += t.pages_verified;
  const auto& ev = r.events;
  out << strprintf("   write: %.0f MB/s (sum over tasks); %llu swap-outs, %llu swap-ins, %llu "
                   "major faults, kswapd reclaimed %llu pages, direct reclaim %llu\n",
                   r.total_kbps * 1024 / 1e6, ull(ev[PSWPOUT]), ull(ev[PSWPIN]),
                   ull(ev[PGMAJFAULT]), ull(ev[PGSTEAL_KSWAPD]), ull(ev[PGSTEAL_DIRECT]));
  out << strprintf("   verify: %llu pages read back, %llu mismatches; %s; %.1f s\n",
                   ull(pages_verified), ull(r.mismatches),
                   r.teardown_clean ? "at exit every frame, swap slot and zram object was freed"
                                    : "NOT CLEAN at exit",
                   d.usemem_seconds);
  for (const auto& t : r.tasks)
    if (!t.error.empty()) out << "   task error: " << t.error << "\n";
}

void print_summary(std::ostream& out, const demo_report& d) {
  const usemem_result& r = d.run;
  out << (d.seed_phase ? "3" : "2") << ". summary\n";
  if (r.mm_stat && r.mm_stat->compr_data_size > 0) {
    const auto& m = *r.mm_stat;
    out << strprintf("   zram: %s stored in %s compressed (ratio %.2f), pool %s, %llu same-filled "
                     "pages, %llu huge\n",
                     format_size(m.orig_data_size).c_str(), format_size(m.compr_data_size).c_str(),
                     static_cast<double>(m.orig_data_size) / static_cast<double>(m.compr_data_size),
                     format_size(m.mem_used_total).c_str(), ull(m.same_pages), ull(m.huge_pages));
  }
  out << strprintf("   swap: %llu swap-outs, %llu swap-ins; %llu slots in use while the tasks "
                   "still mapped their memory, %s after they exited\n",
                   ull(r.events[PSWPOUT]), ull(r.events[PSWPIN]), ull(r.swap.inuse),
                   r.teardown_clean ? "none" : "SOME");
  std::vector<lock_stats> locks = r.locks;
  std::sort(locks.begin(), locks.end(), [](const lock_stats& a, const lock_stats& b) {
    return a.contended != b.contended ? a.contended > b.contended
                                      : a.wait_total_ns > b.wait_total_ns;
  });
  out << "   most contended locks in the usemem run (lockstat):\n";
  for (size_t i = 0; i < locks.size() && i < 3; ++i)
    out << strprintf("     %-24s %12llu acquisitions, %10llu contended (%.2f%%), wait avg %.1f "
                     "us, max %.1f us\n",
                     locks[i].name.c_str(), ull(locks[i].acquisitions), ull(locks[i].contended),
                     locks[i].contended_pct(), locks[i].wait_avg_ns() / 1e3,
                     static_cast<double>(locks[i].wait_max_ns) / 1e3);
  out << strprintf("   demo time: %.1f s\n", d.seconds);
  if (!d.usemem_ok()) out << "FAILED: the usemem run did not verify cleanly\n";
}

void demo_report::print(std::ostream& out) const {
  out << "uswap demo: Linux's swap stack in userspace, measured on this machine (" << machine
      << ", load average " << load_average << ")\n\n";
  print_usemem_phase(out, *this);
  if (seed_phase) {
    out << "\n2. the seed tables, short (" << seed_rounds
        << " rounds per form; `uswap bench seeds` runs the full ones)\n\n";
    if (seeds)
      for (const auto& rep : seeds->seeds) print_seed_report(out, *seeds, rep);
  }
  print_summary(out, *this);
}

// Phase 1: usemem through reclaim, swap and zram, every page verified.
status run_usemem_phase(const demo_options& d, demo_report& rep) {
  usemem_config& uc = rep.usemem;
  uc.tasks = d.tasks;
  uc.size = d.size;
  uc.ram = d.ram;
  uc.verify = true;
  uc.swap_dev = swap_dev_kind::zram;
  uc.swap_lock = swap_lock_mode::cluster;
  uc.zram_lock = zram_lock_mode::slot_bitlock;
  const auto t1 = clock_type::now();
  progress_line::style look;
  look.phase = "usemem";
  look.plain_interval_s = 1;
  look.width = 110;
  progress_line pl(look);
  auto um = run_usemem(uc, [&](uint64_t written, uint64_t verified, const vm_event_counts& ev) {
    pl.show("written " + format_size(written) + " / " + format_size(rep.total()) + ", verified " +
            format_size(verified) + ", swap-outs " + std::to_string(ev[PSWPOUT]) +
            ", swap-ins " + std::to_string(ev[PSWPIN]));
  });
  if (!um) return um.error();
  rep.run = std::move(*um);
  rep.usemem_seconds = seconds_since(t1);
  return {};
}

// Phase 2: the seed tables, short: --quick's sizes at the default scale (usemem 2 x 32M, iozone
// 8M per child), smaller with --ram / --size.
result<seeds_run> run_seed_phase(const demo_options& d) {
  seeds_options so;
  so.quick = true;
  so.rounds = d.rounds;
  so.usemem_ram = std::max<uint64_t>(d.ram / 2, 8ull << 20);
  so.iozone_size = std::max<uint64_t>(d.size / 8, 256ull << 10);
  so.swapbench_duration = 0.2;
  progress_line::style look;
  look.phase = "seeds";
  look.plain_interval_s = 1;
  look.width = 110;
  progress_line pl(look);
  return run_seed_benchmarks(so, [&](const std::string& text) { pl.show(text); });
}

int run_demo(const demo_options& d) {
  const auto t_all = clock_type::now();
  const uint64_t total = uint64_t{d.tasks} * round_up_to_page(d.size);
  if (total <= d.ram) {
    std::cerr << "uswap demo: --tasks x --size (" << format_size(total)
              << ") must be more than --ram (" << format_size(d.ram)
              << "), or nothing goes out to swap\n";
    return 2;
  }
  demo_report rep;
  rep.machine = machine_description();
  rep.load_average = load_average();
  if (status st = run_usemem_phase(d, rep); !st.ok()) {
    std::cerr << "uswap demo: usemem: " << st.to_string() << "\n";
    return 1;
  }
  rep.seed_phase = d.seeds;
  rep.seed_rounds = d.rounds;
  if (d.seeds) {
    auto run = run_seed_phase(d);
    if (run)
      rep.seeds = std::move(*run);
    else
      std::cerr << "uswap demo: seed tables: " << run.error().to_string() << "\n";
  }
  rep.seconds = seconds_since(t_all);
  rep.print(std::cout);
  return rep.ok() ? 0 : 1;
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
  add_rounds_option(*sub, d->rounds, "Rounds per form in the seed tables")
      ->check(CLI::Range(1, 20));
  sub->add_flag("!--no-seeds", d->seeds, "Skip the seed tables");
  table.add(sub, [d] { return run_demo(*d); });
}

const command_registrar reg{0, add_demo_command};

}  // namespace
}  // namespace uswap::tools
