// `uswap rmap-bench`: reclaim against faults on pages shared by a fork tree and a shared file
// (see rmap_bench.h), with the rmap lock modes in alternating rounds.
#include "rmap_bench.h"

#include <atomic>
#include <barrier>
#include <chrono>
#include <iostream>
#include <memory>
#include <random>
#include <thread>

#include "cli.h"
#include "report.h"
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
    res.seconds = rmap_util::run_timed(start, stop, ts, cfg.seconds);
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

// --- The report -------------------------------------------------------------------------------

bool rmap_bench_report::clean() const {
  for (const auto& m : modes)
    for (const rmap_bench_result& r : m.samples)
      if (r.errors || r.mismatches) return false;
  return true;
}

nlohmann::json rmap_bench_report::to_json() const {
  const rmap_bench_config& c = config;
  nlohmann::json out;
  out["config"] = {{"threads", c.threads}, {"forks", c.forks}, {"anon_pages", c.anon_pages},
                   {"file_pages", c.file_pages}, {"ram_pages", c.ram_pages},
                   {"seconds", c.seconds}, {"swap_dev", to_string(c.swap_dev)}, {"rounds", rounds}};
  rmap_util::for_each_run(modes, [&](unsigned round, rmap_lock_mode md, const rmap_bench_result& r) {
    out["runs"].push_back({{"rmap_lock", to_string(md)}, {"round", round + 1},
                           {"accesses_per_s", r.accesses_per_s}, {"faults_per_s", r.faults_per_s},
                           {"reclaimed", r.walks_reclaimed}, {"mismatches", r.mismatches},
                           {"errors", r.errors}});
  });
  for (const auto& m : modes) {
    const auto v = m.values(&rmap_bench_result::accesses_per_s);
    out["median"][to_string(m.mode)] = {
        {"accesses_per_s", median(v)}, {"rounds", v},
        {"faults_per_s", median(m.values(&rmap_bench_result::faults_per_s))}};
  }
  out["locks_summed_over_rounds"] = rmap_util::locks_by_mode(modes);
  if (const auto ratio = rmap_util::rwsem_over_spin(modes, &rmap_bench_result::accesses_per_s))
    out["rwsem_over_spin"] = *ratio;
  return out;
}

void rmap_bench_report::print(std::ostream& out) const {
  const rmap_bench_config& c = config;
  rmap_util::for_each_run(modes, [&](unsigned round, rmap_lock_mode md, const rmap_bench_result& r) {
    out << strprintf("round %u, rmap %s: %.0f accesses/s, %.0f faults/s, %llu pages reclaimed%s\n",
                     round + 1, to_string(md), r.accesses_per_s, r.faults_per_s,
                     static_cast<unsigned long long>(r.walks_reclaimed),
                     (r.errors || r.mismatches) ? ", ERRORS OR MISMATCHES" : "");
  });
  out << strprintf("\nrmap-bench: %u threads faulting through %u forks of %llu anon + %llu shared "
                   "file pages on %llu pages of RAM, %u rounds alternating (median, min-max):\n",
                   c.threads, c.forks, static_cast<unsigned long long>(c.anon_pages),
                   static_cast<unsigned long long>(c.file_pages),
                   static_cast<unsigned long long>(c.ram_pages), rounds);
  for (const auto& m : modes) {
    const auto v = m.values(&rmap_bench_result::accesses_per_s);
    out << strprintf("  %-6s %12.0f accesses/s (%.0f - %.0f), %.0f faults/s\n", to_string(m.mode),
                     median(v), min_of(v), max_of(v),
                     median(m.values(&rmap_bench_result::faults_per_s)));
  }
  if (const auto ratio = rmap_util::rwsem_over_spin(modes, &rmap_bench_result::accesses_per_s))
    out << strprintf("  rwsem/spin: %.3fx\n", *ratio);
  rmap_util::print_lock_tables(out, modes, "\nlock contention, rmap ");
}

// --- The command ------------------------------------------------------------------------------

namespace {

using cli_options = rmap_util::options<rmap_bench_config>;

int run_cli(const cli_options& o) {
  rmap_bench_report rep;
  rep.config = o.cfg;
  return rmap_util::run_and_print("rmap-bench", rep, o, run_rmap_bench);
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
  sub->add_option("-t,--threads", o->cfg.threads, "Faulting threads")->capture_default_str();
  sub->add_option("--forks", o->cfg.forks, "Children sharing every page")->capture_default_str();
  sub->add_option("--anon-pages", o->cfg.anon_pages, "Anonymous pages")->capture_default_str();
  sub->add_option("--file-pages", o->cfg.file_pages, "Shared file pages")->capture_default_str();
  sub->add_option("--ram-pages", o->cfg.ram_pages, "RAM in pages")->capture_default_str();
  sub->add_option("--seconds", o->cfg.seconds, "Measured time per run")->default_str("2");
  add_enum_option(*sub, "--swap-dev", o->cfg.swap_dev, swap_dev_kind_names, "swap device",
                  "Swap device: " + valid_names(swap_dev_kind_names));
  rmap_util::add_round_options(*sub, *o);
  table.add(sub, [o] { return run_cli(*o); });
}

const command_registrar reg{62, add_rmap_bench_command};

}  // namespace
}  // namespace uswap::tools
