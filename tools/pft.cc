// `uswap pft`: seed 001's page-fault test on a uswap machine (see pft.h), with the rmap lock
// modes in alternating rounds and the seed's table beside.
#include "pft.h"

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli.h"
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
    std::vector<rmap_util::cpu_times> cpu(cfg.threads);
    std::atomic<uint64_t> errors{0};
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < cfg.threads; ++t) {
      ts.emplace_back([&, t] {
        const uint64_t base = *a + pages_to_bytes(uint64_t{t} * cfg.pages_per_thread);
        start.arrive_and_wait();
        const rmap_util::cpu_times c0 = rmap_util::thread_times();
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
        const rmap_util::cpu_times c1 = rmap_util::thread_times();
        cpu[t] = {c1.user - c0.user, c1.sys - c0.sys, c1.total - c0.total};
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

namespace {

struct cli_options {
  pft_config cfg;
  std::string threads = "1,2,4,8";
  std::string modes = "all";
  unsigned rounds = 3;
  bool json = false;
};

int run_cli(cli_options& o) {
  auto modes = rmap_util::parse_modes(o.modes);
  if (!modes) {
    std::cerr << "pft: " << modes.error().to_string() << "\n";
    return 2;
  }
  std::vector<unsigned> threads;
  {
    std::stringstream ss(o.threads);
    std::string item;
    while (std::getline(ss, item, ',')) {
      char* end = nullptr;
      const unsigned long v = std::strtoul(item.c_str(), &end, 10);
      if (item.empty() || *end || v == 0 || v > 1024) {
        std::cerr << "pft: bad thread count '" << item << "' (1..1024, comma separated)\n";
        return 2;
      }
      threads.push_back(static_cast<unsigned>(v));
    }
  }
  if (o.rounds == 0) o.rounds = 1;
  nlohmann::json out;
  out["config"] = {{"threads", threads}, {"pages_per_thread", o.cfg.pages_per_thread},
                   {"reps", o.cfg.reps}, {"mapping", o.cfg.anon ? "anonymous" : "shared file"},
                   {"rounds", o.rounds}};
  const auto seed = rmap_util::seed001_rows("page fault test");
  int rc = 0;
  if (!o.json)
    std::printf("pft: %s mapping, %llu pages per thread, %u reps, %u rounds alternating the rmap "
                "lock modes (median per mode)\n",
                o.cfg.anon ? "anonymous" : "shared file",
                (unsigned long long)o.cfg.pages_per_thread, o.cfg.reps, o.rounds);
  for (unsigned thr : threads) {
    nlohmann::json jt;
    jt["threads"] = thr;
    pft_config cfg = o.cfg;
    cfg.threads = thr;
    auto all = rmap_util::run_rounds(
        *modes, o.rounds, cfg, run_pft,
        [&](unsigned round, rmap_lock_mode md, const pft_result& r) {
          if (r.errors) rc = 1;
          jt["runs"].push_back({{"rmap_lock", to_string(md)}, {"round", round + 1},
                                {"faults", r.faults}, {"wall_s", r.wall_s}, {"user_s", r.user_s},
                                {"sys_s", r.sys_s}, {"fault_per_wsec", r.faults_per_wall_s},
                                {"flt_per_cpu_s", r.faults_per_cpu_s}, {"errors", r.errors}});
        });
    if (!all) {
      std::cerr << "pft: " << all.error().to_string() << "\n";
      return 1;
    }
    if (!o.json) {
      std::printf("\n  %-6s %4s %4s %8s %8s %8s %14s %14s\n", "rmap", "Rep", "Thr", "User", "System",
                  "Wall", "flt/cpu/s", "fault/wsec");
    }
    for (const auto& m : *all) {
      const auto wsec = m.values(&pft_result::faults_per_wall_s);
      const auto cpus = m.values(&pft_result::faults_per_cpu_s);
      const double mw = median(wsec), mc = median(cpus);
      if (!o.json)
        std::printf("  %-6s %4u %4u %7.2fs %7.2fs %7.2fs %14.3f %14.3f\n", to_string(m.mode), o.cfg.reps,
                    thr, median(m.values(&pft_result::user_s)), median(m.values(&pft_result::sys_s)),
                    median(m.values(&pft_result::wall_s)), mc, mw);
      jt["median"][to_string(m.mode)] = {{"fault_per_wsec", mw}, {"flt_per_cpu_s", mc},
                                         {"fault_per_wsec_rounds", wsec},
                                         {"flt_per_cpu_s_rounds", cpus}};
    }
    rmap_util::add_locks_json(jt, *all);
    const auto rw = rmap_util::rwsem_over_spin(*all, &pft_result::faults_per_wall_s);
    const auto rc2 = rmap_util::rwsem_over_spin(*all, &pft_result::faults_per_cpu_s);
    if (rw && rc2) {
      jt["rwsem_over_spin"] = {{"fault_per_wsec", *rw}, {"flt_per_cpu_s", *rc2}};
      std::string key = std::to_string(thr) + (thr == 1 ? " thread " : " threads ");
      const seed_row* sw = nullptr;
      const seed_row* sc = nullptr;
      for (const auto& r : seed)
        if (r.row == key + "fault/wsec") sw = &r;
        else if (r.row == key + "flt/cpu/s") sc = &r;
      if (!o.json) {
        std::printf("  rwsem/spin: fault/wsec %+.1f%%, flt/cpu/s %+.1f%%", (*rw - 1) * 100, (*rc2 - 1) * 100);
        if (sw && sc)
          std::printf("   (seed 001, %u threads: %+.1f%%, %+.1f%%)", thr, (sw->ratio() - 1) * 100,
                      (sc->ratio() - 1) * 100);
        std::printf("\n");
      }
      if (sw && sc)
        jt["seed_001"] = {{"fault_per_wsec", {sw->baseline, sw->patched, sw->ratio()}},
                          {"flt_per_cpu_s", {sc->baseline, sc->patched, sc->ratio()}}};
    }
    if (!o.json)
      for (const auto& m : *all)
        std::printf("  lock contention, %s (summed over rounds):\n%s", to_string(m.mode),
                    lockstat::format_table(m.locks).c_str());
    out["results"].push_back(jt);
  }
  if (o.json) std::cout << out.dump(2) << "\n";
  return rc;
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
  sub->add_option("-t,--threads", o->threads, "Thread counts, comma separated")->default_str("1,2,4,8");
  sub->add_option("--pages", o->cfg.pages_per_thread, "Pages each thread faults per rep")
      ->default_str("16384");
  sub->add_option("--reps", o->cfg.reps, "mmap / fault / munmap repetitions")->default_str("3");
  sub->add_flag("--anon", o->cfg.anon, "Fault anonymous memory instead of a shared file mapping");
  sub->add_option("--rmap-lock", o->modes, "rmap lock mode: spin, rwsem, a comma list, or all")
      ->default_str("all");
  sub->add_option("--rounds", o->rounds, "Rounds, alternating the lock modes in each")->default_str("3");
  sub->add_flag("--json", o->json, "Print the results as JSON");
  table.add(sub, [o] { return run_cli(*o); });
}

const command_registrar reg{60, add_pft_command};

}  // namespace
}  // namespace uswap::tools
