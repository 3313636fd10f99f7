// `uswap usemem`: vm-scalability's usemem on a uswap machine (see usemem.h), and its
// alternating-rounds mode comparing swap / zram lock modes side by side (seed 000's swap-w-seq).
#include "usemem.h"

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <condition_variable>
#include <iostream>
#include <mutex>
#include <numeric>
#include <optional>
#include <random>
#include <thread>

#include "alternate_rounds.h"
#include "cli.h"
#include "progress.h"
#include "report.h"
#include "seed_reference.h"
#include "uswap/base/atomic_max.h"
#include "uswap/base/units.h"
#include "uswap/mm/mm_types.h"
#include "uswap/swap/swap_system.h"

namespace uswap::tools {
namespace {

using clock_type = std::chrono::steady_clock;

uint64_t usecs_since(clock_type::time_point t0) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(clock_type::now() - t0).count());
}

// usemem's `p[idx] = idx`, with the task in the top bits so that a page of one task can never
// pass for another's.
inline uint64_t word_value(uint64_t salt, uint64_t page, unsigned i) {
  return salt ^ (page * (page_size / 8) + i);
}

}  // namespace

result<usemem_result> run_usemem(const usemem_config& cfg, const usemem_progress_fn& progress) {
  if (cfg.tasks == 0) return error(EINVAL, "usemem: at least one task");
  if (cfg.size == 0) return error(EINVAL, "usemem: size per task must be at least one page");
  const uint64_t pages = bytes_to_pages(round_up_to_page(cfg.size));
  machine_options mo;
  mo.ram = cfg.ram;
  mo.swap = cfg.swap ? cfg.swap : cfg.tasks * pages_to_bytes(pages) + cfg.ram;
  mo.swap_dev = cfg.swap_dev;
  mo.swap_lock = cfg.swap_lock;
  mo.slot_cache = cfg.slot_cache;
  mo.zram.lock_mode = cfg.zram_lock;
  mo.zram.comp_algorithm = cfg.comp;
  mo.kswapd = cfg.kswapd;
  lockstat::enable(true);
  auto mr = machine::create(mo);
  if (!mr) return mr.error();
  std::unique_ptr<machine> m = std::move(*mr);
  lockstat::reset_all();

  const unsigned n = cfg.tasks;
  std::vector<std::unique_ptr<mm_struct>> mms;
  for (unsigned i = 0; i < (cfg.separate_mms ? n : 1u); ++i) mms.push_back(m->mm_alloc());

  usemem_result res;
  res.tasks.resize(n);
  std::atomic<uint64_t> written{0}, verified{0};
  std::barrier phase(static_cast<std::ptrdiff_t>(n));
  std::atomic<bool> done{false};
  std::mutex progress_lock;
  std::condition_variable progress_wake;
  std::thread monitor;
  if (progress) {
    monitor = std::thread([&] {
      std::unique_lock lk(progress_lock);
      while (!progress_wake.wait_for(lk, std::chrono::milliseconds(200), [&] { return done.load(); }))
        progress(written.load(std::memory_order_relaxed), verified.load(std::memory_order_relaxed),
                 m->events());
    });
  }

  const clock_type::time_point start = clock_type::now();
  std::atomic<uint64_t> last_end_us{0};
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < n; ++t) {
    threads.emplace_back([&, t] {
      usemem_task_result& tr = res.tasks[t];
      mm_struct& mm = *mms[cfg.separate_mms ? t : 0];
      const uint64_t salt = (uint64_t{t} + 1) << 48;
      std::vector<uint64_t> order;
      if (cfg.random) {
        order.resize(pages);
        std::iota(order.begin(), order.end(), 0);
        std::shuffle(order.begin(), order.end(), std::mt19937_64(0x5eed0000u + t));
      }
      auto a = mm.mmap(pages_to_bytes(pages));
      uint64_t done_pages = 0;
      const clock_type::time_point t0 = clock_type::now();
      if (!a) {
        tr.error = a.error().to_string();
      } else {
        auto writer = [&](uint64_t addr, std::span<std::byte, page_size> pg) {
          auto* w = reinterpret_cast<uint64_t*>(pg.data());
          const uint64_t page = (addr - *a) >> page_shift;
          for (unsigned i = 0; i < page_size / 8; ++i) w[i] = word_value(salt, page, i);
        };
        // Sequential tasks write in 256 KiB strokes (one mmap_lock read section each); random
        // ones a page at a time.
        const uint64_t stroke = cfg.random ? 1 : 64;
        for (uint64_t i = 0; i < pages; i += stroke) {
          const uint64_t cnt = std::min(stroke, pages - i);
          const uint64_t page = cfg.random ? order[i] : i;
          status st = mm.access(*a + pages_to_bytes(page), pages_to_bytes(cnt), access_type::write, writer);
          if (!st.ok()) {
            tr.error = st.to_string();
            break;
          }
          done_pages += cnt;
          written.fetch_add(pages_to_bytes(cnt), std::memory_order_relaxed);
        }
      }
      tr.usecs = std::max<uint64_t>(usecs_since(t0), 1);
      tr.bytes = pages_to_bytes(done_pages);
      tr.kbps = static_cast<double>(tr.bytes) / 1024.0 / (static_cast<double>(tr.usecs) / 1e6);
      fetch_max(last_end_us, usecs_since(start));
      phase.arrive_and_wait();  // every task has written everything before any reads back
      if (cfg.verify && a) {
        const clock_type::time_point v0 = clock_type::now();
        for (uint64_t i = 0; i < done_pages; ++i) {
          const uint64_t page = cfg.random ? order[i] : i;
          bool same = true;
          status st = mm.access(*a + pages_to_bytes(page), page_size, access_type::read,
                                [&](uint64_t, std::span<std::byte, page_size> pg) {
                                  const auto* w = reinterpret_cast<const uint64_t*>(pg.data());
                                  for (unsigned k = 0; k < page_size / 8; ++k)
                                    if (w[k] != word_value(salt, page, k)) {
                                      same = false;
                                      break;
                                    }
                                });
          if (!st.ok()) {
            if (tr.error.empty()) tr.error = "verify: " + st.to_string();
            tr.mismatches += done_pages - i;
            break;
          }
          if (!same) ++tr.mismatches;
          ++tr.pages_verified;
          verified.fetch_add(page_size, std::memory_order_relaxed);
        }
        tr.verify_usecs = usecs_since(v0);
      }
      phase.arrive_and_wait();  // statistics are taken with every mapping still in place
    });
  }
  for (auto& th : threads) th.join();
  if (monitor.joinable()) {
    {
      std::lock_guard lk(progress_lock);
      done.store(true);
    }
    progress_wake.notify_all();
    monitor.join();
  }

  res.wall_usecs = last_end_us.load();
  for (const auto& tr : res.tasks) {
    res.total_kbps += tr.kbps;
    res.mismatches += tr.mismatches;
    if (!tr.error.empty()) ++res.errors;
  }
  res.events = m->events();
  res.swap = m->swap_stats();
  if (swap_backend* b = m->backend()) {
    if (auto st = b->stats().device.mm_stat) res.mm_stat = *st;
    res.mm_stat_text = b->device().mm_stat_text();
  }
  for (lock_stats& s : lockstat::snapshot_all())
    if (s.acquisitions) res.locks.push_back(std::move(s));

  // Exit: every slot and zram object must be freed again.
  mms.clear();
  m->kswapd_quiesce();
  m->lru_add_drain_all();
  m->swap_sys()->drain_swap_slots_cache();
  const swap_usage after = m->swap_stats();
  res.teardown_clean = after.inuse == 0 && after.cached == 0 &&
                       m->nr_free_pages() == m->mem().nr_pages() &&
                       (!m->backend() || (m->backend()->stats().device.stored_pages == 0 &&
                                             m->backend()->check_invariants().ok()));
  return res;
}

// ---------------------------------------------------------------------------------------------
// The report.

std::string usemem_combo::name(swap_dev_kind dev) const {
  std::string n = std::string("swap ") + to_string(swap_lock);
  if (dev == swap_dev_kind::zram) n += " / zram " + std::string(to_string(zram_lock));
  return n;
}

nlohmann::json to_json(const usemem_result& r) {
  nlohmann::json j;
  j["total_kbps"] = r.total_kbps;
  j["wall_usecs"] = r.wall_usecs;
  j["mismatches"] = r.mismatches;
  j["errors"] = r.errors;
  j["teardown_clean"] = r.teardown_clean;
  for (const auto& t : r.tasks)
    j["tasks"].push_back({{"bytes", t.bytes}, {"usecs", t.usecs}, {"kbps", t.kbps},
                          {"verify_usecs", t.verify_usecs}, {"pages_verified", t.pages_verified},
                          {"mismatches", t.mismatches}, {"error", t.error}});
  for (const auto& [name, v] : r.events.items()) j["vmstat"][name] = v;
  j["swap"] = {{"total_pages", r.swap.total}, {"free_pages", r.swap.free},
               {"inuse_pages", r.swap.inuse}, {"swap_cache_pages", r.swap.cached},
               {"write_errors", r.swap.write_errors}};
  if (r.mm_stat) {
    const zram_mm_stat& s = *r.mm_stat;
    j["mm_stat"] = {{"orig_data_size", s.orig_data_size}, {"compr_data_size", s.compr_data_size},
                    {"mem_used_total", s.mem_used_total}, {"mem_limit", s.mem_limit},
                    {"mem_used_max", s.mem_used_max}, {"same_pages", s.same_pages},
                    {"pages_compacted", s.pages_compacted}, {"huge_pages", s.huge_pages},
                    {"huge_pages_since", s.huge_pages_since}};
  }
  j["locks"] = r.locks;
  return j;
}

namespace {

using ull = unsigned long long;

bool run_clean(const usemem_result& r) { return !r.mismatches && !r.errors && r.teardown_clean; }

// usemem's own lines for one run, then the machine's counters.
void print_run(std::ostream& out, const usemem_config& cfg, const usemem_result& r) {
  for (const auto& t : r.tasks) {
    out << strprintf("%llu bytes / %llu usecs = %.0f KB/s\n", ull(t.bytes), ull(t.usecs), t.kbps);
    if (!t.error.empty()) out << "  task failed: " << t.error << "\n";
  }
  const uint64_t bytes = std::accumulate(r.tasks.begin(), r.tasks.end(), uint64_t{0},
                                         [](uint64_t s, const auto& t) { return s + t.bytes; });
  out << strprintf("total: %llu bytes, %u tasks, %.0f KB/s (sum of tasks), wall %llu usecs\n",
                   ull(bytes), cfg.tasks, r.total_kbps, ull(r.wall_usecs));
  if (cfg.verify) {
    uint64_t pv = 0, us = 0;
    for (const auto& t : r.tasks) pv += t.pages_verified, us = std::max(us, t.verify_usecs);
    out << strprintf("verify: %llu mismatches in %llu pages read back (%llu usecs)\n",
                     ull(r.mismatches), ull(pv), ull(us));
  }
  const auto& ev = r.events;
  out << strprintf("swap-outs (pswpout) %llu, swap-ins (pswpin) %llu, pgmajfault %llu, swap "
                   "cache hits %llu\n",
                   ull(ev[PSWPOUT]), ull(ev[PSWPIN]), ull(ev[PGMAJFAULT]), ull(ev[SWAP_RA_HIT]));
  out << strprintf("reclaim: pgsteal_kswapd %llu, pgsteal_direct %llu, pgscan %llu, allocstall "
                   "%llu, oom %llu\n",
                   ull(ev[PGSTEAL_KSWAPD]), ull(ev[PGSTEAL_DIRECT]),
                   ull(ev[PGSCAN_KSWAPD] + ev[PGSCAN_DIRECT]), ull(ev[ALLOCSTALL]),
                   ull(ev[OOM_KILL]));
  out << strprintf("swap: %llu of %llu slots in use, %llu pages in the swap cache, %llu write "
                   "errors\n",
                   ull(r.swap.inuse), ull(r.swap.total), ull(r.swap.cached),
                   ull(r.swap.write_errors));
  if (r.mm_stat)
    out << "mm_stat: " << r.mm_stat_text
        << "  (orig_data_size compr_data_size mem_used_total mem_limit mem_used_max "
           "same_pages pages_compacted huge_pages huge_pages_since)\n";
  out << "exit: "
      << (r.teardown_clean ? "every frame, swap slot and zram object freed"
                           : "NOT CLEAN: something was left allocated")
      << "\n";
  out << "lock contention:\n" << lockstat::format_table(r.locks);
}

// Alternating rounds: each round's line, the summary table, the seed, the lock tables.
void print_rounds(std::ostream& out, const usemem_report& rep) {
  const usemem_config& cfg = rep.config;
  if (rep.round_lines)
    for (unsigned round = 0; round < rep.rounds; ++round)
      for (const auto& m : rep.combos) {
        const usemem_result& r = m.samples[round];
        out << strprintf("round %u, %s: %.0f KB/s, %llu swap-outs, %llu swap-ins, %llu "
                         "mismatches%s\n",
                         round + 1, m.mode.name(cfg.swap_dev).c_str(), r.total_kbps,
                         ull(r.events[PSWPOUT]), ull(r.events[PSWPIN]), ull(r.mismatches),
                         r.errors ? ", TASK ERRORS" : "");
      }
  out << strprintf("\nusemem %s %u x %s on %s RAM, swap on %s, %u rounds alternating (median, "
                   "min-max):\n",
                   cfg.separate_mms ? "-n" : "-t", cfg.tasks,
                   format_size(round_up_to_page(cfg.size)).c_str(), format_size(cfg.ram).c_str(),
                   to_string(cfg.swap_dev), rep.rounds);
  out << strprintf("  %-40s %12s %12s %12s %8s\n", "lock modes", "KB/s", "min", "max", "ratio");
  const double base = median(rep.combos.front().values(&usemem_result::total_kbps));
  for (const auto& m : rep.combos) {
    const auto v = m.values(&usemem_result::total_kbps);
    out << strprintf("  %-40s %12.0f %12.0f %12.0f %8.3f\n", m.mode.name(cfg.swap_dev).c_str(),
                     median(v), min_of(v), max_of(v), base > 0 ? median(v) / base : 0);
  }
  if (const auto& s = rep.seed)
    out << strprintf("  seed 000 (%s, 16 processes, RAM-simulated PMEM): global %.2f -> cluster "
                     "%.2f GB/s, ratio %.3f (+%.1f%%)\n",
                     s->experiment.c_str(), s->baseline, s->patched, s->ratio(),
                     (s->ratio() - 1) * 100);
  for (const auto& m : rep.combos)
    out << "\nlock contention, " << m.mode.name(cfg.swap_dev) << " (summed over " << rep.rounds
        << " rounds):\n"
        << lockstat::format_table(m.locks);
}

}  // namespace

bool usemem_report::clean() const {
  for (const auto& m : combos)
    for (const usemem_result& r : m.samples)
      if (!run_clean(r)) return false;
  return true;
}

void usemem_report::print(std::ostream& out) const {
  if (single())
    print_run(out, config, combos.front().samples.front());
  else
    print_rounds(out, *this);
}

nlohmann::json usemem_report::to_json() const {
  const usemem_config& cfg = config;
  nlohmann::json out;
  out["config"] = {{"tasks", cfg.tasks}, {"mode", cfg.separate_mms ? "processes (-n)" : "threads (-t)"},
                   {"size_per_task", cfg.size}, {"ram", cfg.ram}, {"swap", cfg.swap},
                   {"swap_dev", to_string(cfg.swap_dev)}, {"comp", cfg.comp},
                   {"random", cfg.random}, {"verify", cfg.verify}, {"rounds", rounds},
                   {"slot_cache", to_string(cfg.slot_cache)}};
  if (single()) {
    out["run"] = tools::to_json(combos.front().samples.front());
    return out;
  }
  const double base = median(combos.front().values(&usemem_result::total_kbps));
  for (const auto& m : combos) {
    const auto v = m.values(&usemem_result::total_kbps);
    nlohmann::json jc;
    jc["swap_lock"] = to_string(m.mode.swap_lock);
    if (cfg.swap_dev == swap_dev_kind::zram) jc["zram_lock"] = to_string(m.mode.zram_lock);
    jc["kbps_rounds"] = v;
    jc["kbps_median"] = median(v);
    jc["ratio_to_first"] = base > 0 ? median(v) / base : 0;
    jc["locks_summed_over_rounds"] = m.locks;
    for (const auto& r : m.samples) jc["runs"].push_back(tools::to_json(r));
    out["combos"].push_back(jc);
  }
  if (seed)
    out["seed_000"] = {{"row", seed->row},         {"baseline", seed->baseline},
                       {"patched", seed->patched}, {"ratio", seed->ratio()},
                       {"source", seed_source}};
  return out;
}

// ---------------------------------------------------------------------------------------------
// The command.

namespace {

struct cli_options {
  usemem_config cfg;
  unsigned threads = 0, procs = 0;
  uint64_t size_pos = 0;
  std::vector<swap_lock_mode> swap_locks{swap_lock_mode::cluster};
  std::vector<zram_lock_mode> zram_locks{zram_lock_mode::slot_bitlock};
  unsigned rounds = 1;
  bool json = false;
  bool quiet = false;
  bool no_kswapd = false;
};

// Every swap lock mode with every zram lock mode (only the first when swapping to RAM).
std::vector<usemem_combo> combos_of(const cli_options& o) {
  std::vector<usemem_combo> out;
  for (swap_lock_mode s : o.swap_locks)
    for (zram_lock_mode z : o.zram_locks) {
      out.push_back({s, z});
      if (o.cfg.swap_dev != swap_dev_kind::zram) break;
    }
  return out;
}

// The runs, in alternating rounds; a progress line on stderr while each runs (unless -q).
result<usemem_report> measure(const cli_options& o, const usemem_config& cfg) {
  usemem_report rep;
  rep.config = cfg;
  rep.rounds = std::max(o.rounds, 1u);
  rep.round_lines = !o.quiet;
  const std::vector<usemem_combo> combos = combos_of(o);
  const bool single = combos.size() == 1 && rep.rounds == 1;
  const uint64_t total = cfg.tasks * round_up_to_page(cfg.size);
  auto all = run_alternating_rounds(combos, rep.rounds, [&](unsigned round, const usemem_combo& cb) {
    usemem_config c = cfg;
    c.swap_lock = cb.swap_lock;
    c.zram_lock = cb.zram_lock;
    if (o.quiet) return run_usemem(c);
    const std::string what =
        single ? "usemem: "
               : "usemem: round " + std::to_string(round + 1) + ", " + cb.name(cfg.swap_dev) + ": ";
    // Shown once a run has taken a second: rewritten in place on a terminal, a line a second
    // otherwise.
    progress_line::style look;
    look.delay_s = 1;
    look.plain_interval_s = 1;
    progress_line pl(look);
    return run_usemem(c, [&](uint64_t written, uint64_t verified, const vm_event_counts& ev) {
      std::string text = what + strprintf("%.1f s, written ", pl.elapsed_s()) +
                         format_size(written) + " / " + format_size(total);
      if (cfg.verify) text += ", verified " + format_size(verified);
      pl.show(text + ", swap-out " + std::to_string(ev[PSWPOUT]) + ", swap-in " +
              std::to_string(ev[PSWPIN]));
    });
  });
  if (!all) return all.error();
  rep.combos = std::move(*all);
  if (!rep.single()) {
    const seed_table seed = load_seed_rows(default_seed_results_path(), "000");
    if (const seed_row* r = find_seed_row(seed, "swap-out throughput")) rep.seed = *r;
    rep.seed_source = seed.source;
  }
  return rep;
}

int run_cli(const cli_options& o) {
  if (o.threads && o.procs) {
    std::cerr << "usemem: give -t (threads of one mm) or -n (separate mms), not both\n";
    return 2;
  }
  usemem_config cfg = o.cfg;
  cfg.tasks = o.procs ? o.procs : (o.threads ? o.threads : 1);
  cfg.separate_mms = o.procs != 0;
  if (o.size_pos) cfg.size = o.size_pos;
  cfg.kswapd = !o.no_kswapd;
  auto rep = measure(o, cfg);
  if (!rep) {
    std::cerr << "usemem: " << rep.error().to_string() << "\n";
    return 1;
  }
  print_report(std::cout, *rep, o.json);
  return rep->clean() ? 0 : 1;
}

void add_usemem_command(CLI::App& app, command_table& table) {
  auto o = std::make_shared<cli_options>();
  auto* sub = app.add_subcommand(
      "usemem", "vm-scalability's usemem through reclaim, swap and zram (seed 000's swap-w-seq)");
  sub->footer(
      "Tasks write anonymous memory larger than the machine's RAM, so reclaim pushes it out\n"
      "through swap to zram or to an uncompressed RAM device; -t runs the tasks as threads of one\n"
      "address space, -n as separate address spaces. Prints 'N bytes / T usecs = X KB/s' per task\n"
      "and the total, swap-outs and swap-ins, mm_stat and lock contention. Giving several lock\n"
      "modes (a comma list, or all) or --rounds runs alternating rounds side by side and prints\n"
      "each form's median throughput, its ratio to the first, and seed 000's figures beside them.");
  sub->add_option("-t,--threads", o->threads, "Tasks as threads of one address space");
  sub->add_option("-n,--nproc", o->procs, "Tasks as separate address spaces (usemem -n)");
  add_size_option(*sub, "--size", o->cfg.size, "Bytes per task");
  auto* pos = add_size_option(*sub, "size", o->size_pos, "Bytes per task (as usemem's argument)");
  pos->required(false);
  pos->default_str("");
  sub->add_flag("-R,--random", o->cfg.random, "Write the pages in random order (each once)");
  sub->add_flag("--verify", o->cfg.verify, "Read every page back after all tasks wrote, compare every word");
  add_size_option(*sub, "--ram", o->cfg.ram, "The machine's RAM");
  add_size_option(*sub, "--swap", o->cfg.swap, "Swap space (0: tasks x size + RAM)");
  add_enum_option(*sub, "--swap-dev", o->cfg.swap_dev, swap_dev_kind_names, "swap device",
                  "Swap device: zram, or ram (uncompressed, like the seed's RAM-simulated PMEM)");
  add_enum_list_option(*sub, "--swap-lock", o->swap_locks, swap_lock_mode_names, "swap lock mode",
                       "Swap lock mode");
  add_enum_list_option(*sub, "--zram-lock", o->zram_locks, zram_lock_mode_names, "zram lock mode",
                       "zram lock mode");
  add_enum_option(*sub, "--slot-cache", o->cfg.slot_cache, slot_cache_policy_names,
                  "slot cache policy",
                  "Swap slot cache: by-mode, on, alloc (allocation side only), off");
  sub->add_option("--comp", o->cfg.comp, "zram codec: lz4, lz4hc, zstd, lzo")->capture_default_str();
  add_rounds_option(*sub, o->rounds, "Rounds, alternating the lock modes in each");
  sub->add_flag("--no-kswapd", o->no_kswapd, "Run without kswapd (direct reclaim only)");
  add_json_flag(*sub, o->json);
  sub->add_flag("-q,--quiet", o->quiet, "No progress line");
  table.add(sub, [o] { return run_cli(*o); });
}

const command_registrar reg{40, add_usemem_command};

}  // namespace
}  // namespace uswap::tools
