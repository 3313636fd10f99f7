// `uswap pft`: seed 001's page-fault test on a uswap machine (see pft.h), with the rmap lock
// modes in alternating rounds and the seed's table beside.
#include "pft.h"

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <thread>

#include "cli.h"
#include "machine_facts.h"
#include "report.h"
#include "rmap_tool_util.h"
#include "uswap/mm/filemap.h"
#include "uswap/mm/machine.h"
#include "uswap/mm/mm_types.h"

namespace uswap::tools {

result<pft_result> run_pft(const pft_config& cfg) {
  if (cfg.threads == 0) return error(EINVAL, "pft: at least one thread");
  if (cfg.pages_per_thread == 0) return error(EINVAL, "pft: at least one page per thread");
  if (cfg.reps == 0) return error(EINVAL, "pft: at least one rep");
  const uint64_t total = uint64_t{cfg.threads} * cfg.pages_per_thread;
  machine_options mo;
  // Everything fits: the test measures faults, not reclaim.
  mo.ram = pages_to_bytes(total + total / 8 + 1024);
  mo.rmap_lock = cfg.rmap_lock;
  lockstat::enable(true);
  auto mr = machine::create(mo);
  if (!mr) return mr.error();
  std::unique_ptr<machine> m = std::move(*mr);
  std::shared_ptr<file> f;
  if (!cfg.anon) {
    auto fr = file::create(*m, pages_to_bytes(total), "pft");
    if (!fr) return fr.error();
    f = *fr;
  }
  auto mm = m->mm_alloc();
  lockstat::reset_all();
  const vm_event_counts before = m->events();

  pft_result res;
  using clk = std::chrono::steady_clock;
  for (unsigned rep = 0; rep < cfg.reps; ++rep) {
    auto a = cfg.anon ? mm->mmap(pages_to_bytes(total))
                      : mm->mmap_file(f, 0, pages_to_bytes(total), /*shared=*/true);
    if (!a) return a.error();
    std::barrier start(static_cast<std::ptrdiff_t>(cfg.threads));
    std::vector<clk::time_point> t0(cfg.threads), t1(cfg.threads);
    std::vector<cpu_times> cpu(cfg.threads);
    std::atomic<uint64_t> errors{0};
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < cfg.threads; ++t) {
      ts.emplace_back([&, t] {
        const uint64_t base = *a + pages_to_bytes(uint64_t{t} * cfg.pages_per_thread);
        start.arrive_and_wait();
        const cpu_times c0 = thread_times();
        t0[t] = clk::now();
        // One fault per page, each a separate access (the mmap_lock taken per fault, as a
        // hardware fault takes mmap_sem), writing one word as pft does.
        for (uint64_t p = 0; p < cfg.pages_per_thread; ++p) {
          status st = mm->access(base + pages_to_bytes(p), 8, access_type::write,
                                 [&](uint64_t, std::span<std::byte, page_size> pg) {
                                   reinterpret_cast<uint64_t*>(pg.data())[0] = p;
                                 });
          if (!st.ok()) errors.fetch_add(1, std::memory_order_relaxed);
        }
        t1[t] = clk::now();
        cpu[t] = thread_times() - c0;
      });
    }
    for (auto& th : ts) th.join();
    const auto first = *std::min_element(t0.begin(), t0.end());
    const auto last = *std::max_element(t1.begin(), t1.end());
    res.wall_s += std::chrono::duration<double>(last - first).count();
    for (const auto& c : cpu) res.user_s += c.user, res.sys_s += c.sys, res.cpu_s += c.total;
    res.errors += errors.load();
    if (status st = mm->munmap(*a, pages_to_bytes(total)); !st.ok()) return st;
  }
  const vm_event_counts after = m->events();
  res.faults = after[PGFAULT] - before[PGFAULT];
  res.events = after;
  res.faults_per_wall_s = res.wall_s > 0 ? res.faults / res.wall_s : 0;
  res.faults_per_cpu_s = res.cpu_s > 0 ? res.faults / res.cpu_s : 0;
  res.locks = rmap_util::active_locks();
  mm.reset();
  f.reset();
  return res;
}

// --- The report -------------------------------------------------------------------------------

namespace {

using rmap_util::for_each_run;
using rmap_util::rwsem_over_spin;

// The seed's row "<n> thread(s) <figure>", or nullptr.
const seed_row* seed_for(const std::vector<seed_row>& seed, unsigned threads, const char* figure) {
  const std::string row = std::to_string(threads) + (threads == 1 ? " thread " : " threads ") + figure;
  for (const auto& r : seed)
    if (r.row == row) return &r;
  return nullptr;
}

nlohmann::json thread_count_json(const pft_report::thread_count& tc,
                                 const std::vector<seed_row>& seed) {
  nlohmann::json jt;
  jt["threads"] = tc.threads;
  for_each_run(tc.modes, [&](unsigned round, rmap_lock_mode md, const pft_result& r) {
    jt["runs"].push_back({{"rmap_lock", to_string(md)}, {"round", round + 1},
                          {"faults", r.faults}, {"wall_s", r.wall_s}, {"user_s", r.user_s},
                          {"sys_s", r.sys_s}, {"fault_per_wsec", r.faults_per_wall_s},
                          {"flt_per_cpu_s", r.faults_per_cpu_s}, {"errors", r.errors}});
  });
  for (const auto& m : tc.modes) {
    const auto wsec = m.values(&pft_result::faults_per_wall_s);
    const auto cpus = m.values(&pft_result::faults_per_cpu_s);
    jt["median"][to_string(m.mode)] = {{"fault_per_wsec", median(wsec)},
                                       {"flt_per_cpu_s", median(cpus)},
                                       {"fault_per_wsec_rounds", wsec},
                                       {"flt_per_cpu_s_rounds", cpus}};
  }
  jt["locks_summed_over_rounds"] = rmap_util::locks_by_mode(tc.modes);
  const auto rw = rwsem_over_spin(tc.modes, &pft_result::faults_per_wall_s);
  const auto rc = rwsem_over_spin(tc.modes, &pft_result::faults_per_cpu_s);
  if (rw && rc) {
    jt["rwsem_over_spin"] = {{"fault_per_wsec", *rw}, {"flt_per_cpu_s", *rc}};
    const seed_row* sw = seed_for(seed, tc.threads, "fault/wsec");
    const seed_row* sc = seed_for(seed, tc.threads, "flt/cpu/s");
    if (sw && sc)
      jt["seed_001"] = {{"fault_per_wsec", {sw->baseline, sw->patched, sw->ratio()}},
                        {"flt_per_cpu_s", {sc->baseline, sc->patched, sc->ratio()}}};
  }
  return jt;
}

void print_thread_count(std::ostream& out, const pft_report& rep,
                        const pft_report::thread_count& tc) {
  out << strprintf("\n  %-6s %4s %4s %8s %8s %8s %14s %14s\n", "rmap", "Rep", "Thr", "User",
                   "System", "Wall", "flt/cpu/s", "fault/wsec");
  for (const auto& m : tc.modes)
    out << strprintf("  %-6s %4u %4u %7.2fs %7.2fs %7.2fs %14.3f %14.3f\n", to_string(m.mode),
                     rep.config.reps, tc.threads, median(m.values(&pft_result::user_s)),
                     median(m.values(&pft_result::sys_s)), median(m.values(&pft_result::wall_s)),
                     median(m.values(&pft_result::faults_per_cpu_s)),
                     median(m.values(&pft_result::faults_per_wall_s)));
  const auto rw = rwsem_over_spin(tc.modes, &pft_result::faults_per_wall_s);
  const auto rc = rwsem_over_spin(tc.modes, &pft_result::faults_per_cpu_s);
  if (rw && rc) {
    out << strprintf("  rwsem/spin: fault/wsec %+.1f%%, flt/cpu/s %+.1f%%", (*rw - 1) * 100,
                     (*rc - 1) * 100);
    const seed_row* sw = seed_for(rep.seed, tc.threads, "fault/wsec");
    const seed_row* sc = seed_for(rep.seed, tc.threads, "flt/cpu/s");
    if (sw && sc)
      out << strprintf("   (seed 001, %u threads: %+.1f%%, %+.1f%%)", tc.threads,
                       (sw->ratio() - 1) * 100, (sc->ratio() - 1) * 100);
    out << "\n";
  }
  rmap_util::print_lock_tables(out, tc.modes, "  lock contention, ");
}

}  // namespace

bool pft_report::clean() const {
  for (const auto& tc : results)
    for (const auto& m : tc.modes)
      for (const pft_result& r : m.samples)
        if (r.errors) return false;
  return true;
}

nlohmann::json pft_report::to_json() const {
  std::vector<unsigned> threads;
  for (const auto& tc : results) threads.push_back(tc.threads);
  nlohmann::json out;
  out["config"] = {{"threads", threads}, {"pages_per_thread", config.pages_per_thread},
                   {"reps", config.reps}, {"mapping", config.anon ? "anonymous" : "shared file"},
                   {"rounds", rounds}};
  for (const auto& tc : results) out["results"].push_back(thread_count_json(tc, seed));
  return out;
}

void pft_report::print(std::ostream& out) const {
  out << strprintf("pft: %s mapping, %llu pages per thread, %u reps, %u rounds alternating the "
                   "rmap lock modes (median per mode)\n",
                   config.anon ? "anonymous" : "shared file",
                   static_cast<unsigned long long>(config.pages_per_thread), config.reps, rounds);
  for (const auto& tc : results) print_thread_count(out, *this, tc);
}

// --- The command ------------------------------------------------------------------------------

namespace {

struct cli_options : rmap_util::options<pft_config> {
  cli_options() { rounds = 3; }
  std::vector<unsigned> threads{1, 2, 4, 8};
};

// "1,2,4": thread counts of 1..1024.
result<std::vector<unsigned>> parse_thread_counts(std::string_view text) {
  std::vector<unsigned> out;
  size_t at = 0;
  while (true) {
    const size_t comma = text.find(',', at);
    const std::string item(text.substr(at, comma == text.npos ? text.npos : comma - at));
    char* end = nullptr;
    const unsigned long v = std::strtoul(item.c_str(), &end, 10);
    if (item.empty() || *end || v == 0 || v > 1024)
      return error(EINVAL, "bad thread count '" + item + "' (1..1024, comma separated)");
    out.push_back(static_cast<unsigned>(v));
    if (comma == text.npos) return out;
    at = comma + 1;
  }
}

result<pft_report> measure(const cli_options& o) {
  pft_report rep;
  rep.config = o.cfg;
  rep.rounds = std::max(o.rounds, 1u);
  rep.seed = rmap_util::seed001_rows("page fault test");
  for (unsigned thr : o.threads) {
    pft_config cfg = o.cfg;
    cfg.threads = thr;
    auto all = rmap_util::run_rounds(o.modes, rep.rounds, cfg, run_pft);
    if (!all) return all.error();
    rep.results.push_back({thr, std::move(*all)});
  }
  return rep;
}

int run_cli(const cli_options& o) {
  auto rep = measure(o);
  if (!rep) {
    std::cerr << "pft: " << rep.error().to_string() << "\n";
    return 1;
  }
  print_report(std::cout, *rep, o.json);
  return rep->clean() ? 0 : 1;
}

void add_pft_command(CLI::App& app, command_table& table) {
  auto o = std::make_shared<cli_options>();
  auto* sub = app.add_subcommand("pft", "Seed 001's page-fault test: threads fault in a shared file "
                                        "mapping, rmap lock spin vs rwsem");
  sub->footer(
      "Each thread faults in its own part of one shared file mapping (or anonymous memory with\n"
      "--anon), one write fault per page, --reps times (mmap, fault, munmap). Prints the seed's\n"
      "columns (User System Wall flt/cpu/s fault/wsec) per rmap lock mode, median over\n"
      "alternating rounds, the rwsem/spin change and seed 001's change beside it.");
  add_parsed_option(*sub, "-t,--threads", o->threads, parse_thread_counts, "1,2,4,8",
                    "Thread counts, comma separated");
  sub->add_option("--pages", o->cfg.pages_per_thread, "Pages each thread faults per rep")
      ->capture_default_str();
  sub->add_option("--reps", o->cfg.reps, "mmap / fault / munmap repetitions")->capture_default_str();
  sub->add_flag("--anon", o->cfg.anon, "Fault anonymous memory instead of a shared file mapping");
  rmap_util::add_round_options(*sub, *o);
  table.add(sub, [o] { return run_cli(*o); });
}

const command_registrar reg{60, add_pft_command};

}  // namespace
}  // namespace uswap::tools
