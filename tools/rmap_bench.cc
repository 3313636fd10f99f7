// `uswap rmap-bench`: reclaim against faults on pages shared by a fork tree and a shared file
// (see rmap_bench.h), with the rmap lock modes in alternating rounds.
#include "rmap_bench.h"

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "cli.h"
#include "rmap_tool_util.h"
#include "uswap/mm/filemap.h"
#include "uswap/mm/machine.h"
#include "uswap/mm/mm_types.h"

namespace uswap::tools {
namespace {

constexpr uint64_t anon_tag = 0xa000'0000'0000'0000ull;
constexpr uint64_t file_tag = 0xf000'0000'0000'0000ull;

}  // namespace

result<rmap_bench_result> run_rmap_bench(const rmap_bench_config& cfg) {
  if (cfg.threads == 0) return error(EINVAL, "rmap-bench: at least one thread");
  if (cfg.anon_pages == 0 || cfg.file_pages == 0) return error(EINVAL, "rmap-bench: pages must be non-zero");
  if (cfg.ram_pages < 64) return error(EINVAL, "rmap-bench: RAM must be at least 64 pages");
  if (!(cfg.seconds > 0)) return error(EINVAL, "rmap-bench: the duration must be positive");
  machine_options mo;
  mo.ram = pages_to_bytes(cfg.ram_pages);
  mo.swap = pages_to_bytes(2 * cfg.anon_pages + 1024);
  mo.swap_dev = cfg.swap_dev;
  mo.rmap_lock = cfg.rmap_lock;
  mo.kswapd = true;
  lockstat::enable(true);
  auto mr = machine::create(mo);
  if (!mr) return mr.error();
  std::unique_ptr<machine> m = std::move(*mr);
  rmap_bench_result res;
  {
    auto fr = file::create(*m, pages_to_bytes(cfg.file_pages), "shared");
    if (!fr) return fr.error();
    std::shared_ptr<file> f = std::move(*fr);
    auto parent = m->mm_alloc();
    auto anon = parent->mmap(pages_to_bytes(cfg.anon_pages));
    auto shm = parent->mmap_file(f, 0, pages_to_bytes(cfg.file_pages), true);
    if (!anon || !shm) return error(ENOMEM, "rmap-bench: cannot map the parent's memory");
    auto tagger = [](uint64_t base, uint64_t tag) {
      return [base, tag](uint64_t a, std::span<std::byte, page_size> pg) {
        reinterpret_cast<uint64_t*>(pg.data())[0] = tag + ((a - base) >> page_shift);
      };
    };
    if (status st = parent->access(*anon, pages_to_bytes(cfg.anon_pages), access_type::write, tagger(*anon, anon_tag)); !st.ok())
      return st;
    if (status st = parent->access(*shm, pages_to_bytes(cfg.file_pages), access_type::write, tagger(*shm, file_tag)); !st.ok())
      return st;
    std::vector<std::unique_ptr<mm_struct>> kids;
    for (unsigned i = 0; i < cfg.forks; ++i) {
      auto c = parent->fork();
      if (!c) return c.error();
      kids.push_back(std::move(*c));
    }
    m->kswapd_quiesce();
    lockstat::reset_all();
    const vm_event_counts before = m->events();
    std::atomic<uint64_t> accesses{0}, mismatches{0}, errors{0};
    std::atomic<bool> stop{false};
    std::barrier start(static_cast<std::ptrdiff_t>(cfg.threads) + 1);
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < cfg.threads; ++t) {
      ts.emplace_back([&, t] {
        mm_struct& mm = cfg.forks ? *kids[t % cfg.forks] : *parent;
        std::mt19937_64 rng(0x5eed + t);
        const uint64_t total = cfg.anon_pages + cfg.file_pages;
        uint64_t mine = 0;
        start.arrive_and_wait();
        while (!stop.load(std::memory_order_relaxed)) {
          const uint64_t p = rng() % total;
          const bool is_anon = p < cfg.anon_pages;
          const uint64_t idx = is_anon ? p : p - cfg.anon_pages;
          const uint64_t want = (is_anon ? anon_tag : file_tag) + idx;
          bool same = true;
          status st = mm.access((is_anon ? *anon : *shm) + pages_to_bytes(idx), 8, access_type::read,
                                [&](uint64_t, std::span<std::byte, page_size> pg) {
                                  same = reinterpret_cast<const uint64_t*>(pg.data())[0] == want;
                                });
          if (!st.ok()) {
            errors.fetch_add(1);
            break;
          }
          if (!same) mismatches.fetch_add(1);
          ++mine;
        }
        accesses.fetch_add(mine);
      });
    }
    start.arrive_and_wait();
    const auto t0 = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::duration<double>(cfg.seconds));
    stop.store(true);
    for (auto& th : ts) th.join();
    res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const vm_event_counts after = m->events();
    res.accesses = accesses.load();
    res.faults = after[PGFAULT] - before[PGFAULT];
    res.walks_reclaimed = (after[PGSTEAL_KSWAPD] + after[PGSTEAL_DIRECT]) -
                          (before[PGSTEAL_KSWAPD] + before[PGSTEAL_DIRECT]);
    res.accesses_per_s = res.accesses / res.seconds;
    res.faults_per_s = res.faults / res.seconds;
    res.mismatches = mismatches.load();
    res.errors = errors.load();
    res.events = after;
    res.locks = rmap_util::active_locks();
    kids.clear();
    parent.reset();
  }
  return res;
}

namespace {

struct cli_options {
  rmap_bench_config cfg;
  std::string modes = "all";
  std::string swap_dev = "ram";
  unsigned rounds = 5;
  bool json = false;
};

int run_cli(cli_options& o) {
  auto modes = rmap_util::parse_modes(o.modes);
  auto dev = parse_swap_dev_kind(o.swap_dev);
  if (!modes || !dev) {
    std::cerr << "rmap-bench: " << (modes ? dev.error() : modes.error()).to_string() << "\n";
    return 2;
  }
  o.cfg.swap_dev = *dev;
  if (o.rounds == 0) o.rounds = 1;
  nlohmann::json out;
  out["config"] = {{"threads", o.cfg.threads}, {"forks", o.cfg.forks}, {"anon_pages", o.cfg.anon_pages},
                   {"file_pages", o.cfg.file_pages}, {"ram_pages", o.cfg.ram_pages},
                   {"seconds", o.cfg.seconds}, {"swap_dev", to_string(o.cfg.swap_dev)}, {"rounds", o.rounds}};
  int rc = 0;
  auto all = rmap_util::run_rounds(
      *modes, o.rounds, o.cfg, run_rmap_bench,
      [&](unsigned round, rmap_lock_mode md, const rmap_bench_result& r) {
        if (r.errors || r.mismatches) rc = 1;
        if (!o.json)
          std::printf("round %u, rmap %s: %.0f accesses/s, %.0f faults/s, %llu pages reclaimed%s\n",
                      round + 1, to_string(md), r.accesses_per_s, r.faults_per_s,
                      (unsigned long long)r.walks_reclaimed,
                      (r.errors || r.mismatches) ? ", ERRORS OR MISMATCHES" : "");
        out["runs"].push_back({{"rmap_lock", to_string(md)}, {"round", round + 1},
                               {"accesses_per_s", r.accesses_per_s}, {"faults_per_s", r.faults_per_s},
                               {"reclaimed", r.walks_reclaimed}, {"mismatches", r.mismatches},
                               {"errors", r.errors}});
      });
  if (!all) {
    std::cerr << "rmap-bench: " << all.error().to_string() << "\n";
    return 1;
  }
  if (!o.json)
    std::printf("\nrmap-bench: %u threads faulting through %u forks of %llu anon + %llu shared file "
                "pages on %llu pages of RAM, %u rounds alternating (median, min-max):\n",
                o.cfg.threads, o.cfg.forks, (unsigned long long)o.cfg.anon_pages,
                (unsigned long long)o.cfg.file_pages, (unsigned long long)o.cfg.ram_pages, o.rounds);
  for (const auto& m : *all) {
    const auto v = m.values(&rmap_bench_result::accesses_per_s);
    const double faults = median(m.values(&rmap_bench_result::faults_per_s));
    if (!o.json)
      std::printf("  %-6s %12.0f accesses/s (%.0f - %.0f), %.0f faults/s\n", to_string(m.mode),
                  median(v), min_of(v), max_of(v), faults);
    out["median"][to_string(m.mode)] = {{"accesses_per_s", median(v)}, {"rounds", v},
                                        {"faults_per_s", faults}};
  }
  rmap_util::add_locks_json(out, *all);
  if (const auto ratio = rmap_util::rwsem_over_spin(*all, &rmap_bench_result::accesses_per_s)) {
    out["rwsem_over_spin"] = *ratio;
    if (!o.json) std::printf("  rwsem/spin: %.3fx\n", *ratio);
  }
  if (o.json)
    std::cout << out.dump(2) << "\n";
  else
    rmap_util::print_lock_tables(*all);
  return rc;
}

void add_rmap_bench_command(CLI::App& app, command_table& table) {
  auto o = std::make_shared<cli_options>();
  auto* sub = app.add_subcommand(
      "rmap-bench", "Reclaim vs faults on pages shared by a fork tree and a file: rmap lock spin vs rwsem");
  sub->footer(
      "A parent with anonymous memory and a shared file mapping forks --forks children that share\n"
      "every page; --threads threads read random pages through the children while RAM holds only\n"
      "part of them, so kswapd and direct reclaim walk the same pages' reverse maps (anon_vma root\n"
      "lock, i_mmap lock) all the time. Prints accesses/s per rmap lock mode and lock statistics.");
  sub->add_option("-t,--threads", o->cfg.threads, "Faulting threads")->default_str("4");
  sub->add_option("--forks", o->cfg.forks, "Children sharing every page")->default_str("16");
  sub->add_option("--anon-pages", o->cfg.anon_pages, "Anonymous pages")->default_str("4096");
  sub->add_option("--file-pages", o->cfg.file_pages, "Shared file pages")->default_str("4096");
  sub->add_option("--ram-pages", o->cfg.ram_pages, "RAM in pages")->default_str("4096");
  sub->add_option("--seconds", o->cfg.seconds, "Measured time per run")->default_str("2");
  sub->add_option("--swap-dev", o->swap_dev, "Swap device: ram or zram")->default_str("ram");
  sub->add_option("--rmap-lock", o->modes, "rmap lock mode: spin, rwsem, a comma list, or all")
      ->default_str("all");
  sub->add_option("--rounds", o->rounds, "Rounds, alternating the lock modes in each")->default_str("5");
  sub->add_flag("--json", o->json, "Print the results as JSON");
  table.add(sub, [o] { return run_cli(*o); });
}

const command_registrar reg{62, add_rmap_bench_command};

}  // namespace
}  // namespace uswap::tools
