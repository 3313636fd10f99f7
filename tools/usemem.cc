// `uswap usemem`: vm-scalability's usemem on a uswap machine (see usemem.h), and its
// alternating-rounds mode comparing swap / zram lock modes side by side (seed 000's swap-w-seq).
#include "usemem.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include "alternate_rounds.h"
#include "cli.h"
#include "seed_reference.h"
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
      const uint64_t end_us = usecs_since(start);
      uint64_t prev = last_end_us.load();
      while (prev < end_us && !last_end_us.compare_exchange_weak(prev, end_us)) {
      }
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
// The command.

namespace {

struct cli_options {
  usemem_config cfg;
  unsigned threads = 0, procs = 0;
  uint64_t size_pos = 0;
  std::string swap_locks = "cluster";
  std::string zram_locks = "slot_bitlock";
  std::string swap_dev = "zram";
  std::string slot_cache = "by-mode";
  unsigned rounds = 1;
  bool json = false;
  bool quiet = false;
  bool no_kswapd = false;
};

// "all" or a comma-separated list, each parsed by `parse`.
template <class T, class Parse>
result<std::vector<T>> parse_list(const std::string& text, const std::vector<T>& all, Parse parse) {
  if (text == "all") return all;
  std::vector<T> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    auto r = parse(item);
    if (!r) return r.error();
    out.push_back(*r);
  }
  if (out.empty()) return error(EINVAL, "empty list");
  return out;
}


struct combo {
  swap_lock_mode swap_lock;
  zram_lock_mode zram_lock;
  std::string name(swap_dev_kind dev) const {
    std::string n = std::string("swap ") + to_string(swap_lock);
    if (dev == swap_dev_kind::zram) n += " / zram " + std::string(to_string(zram_lock));
    return n;
  }
};

// A progress line on stderr once a run has taken more than a second: rewritten in place on a
// terminal, one line a second otherwise.
class progress_printer {
 public:
  explicit progress_printer(uint64_t total, bool verify) : total_(total), verify_(verify),
      tty_(isatty(STDERR_FILENO)), start_(clock_type::now()) {}
  void operator()(uint64_t written, uint64_t verified, const vm_event_counts& ev) {
    const uint64_t ms = usecs_since(start_) / 1000;
    if (ms < 1000) return;
    if (!tty_ && ms < last_ms_ + 1000) return;
    last_ms_ = ms;
    std::ostringstream os;
    os << "usemem: " << std::fixed << std::setprecision(1) << ms / 1000.0 << " s, written "
       << format_size(written) << " / " << format_size(total_);
    if (verify_) os << ", verified " << format_size(verified);
    os << ", swap-out " << ev[PSWPOUT] << ", swap-in " << ev[PSWPIN];
    std::lock_guard lk(lock_);
    if (tty_) {
      std::cerr << "\r" << os.str() << "\033[K" << std::flush;
      shown_ = true;
    } else {
      std::cerr << os.str() << "\n";
    }
  }
  ~progress_printer() {
    if (tty_ && shown_) std::cerr << "\r\033[K" << std::flush;
  }

 private:
  uint64_t total_;
  bool verify_;
  bool tty_;
  clock_type::time_point start_;
  uint64_t last_ms_ = 0;
  bool shown_ = false;
  std::mutex lock_;
};

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
  j["locks"] = nlohmann::json::parse(lockstat::to_json(r.locks));
  return j;
}

void print_run(const usemem_config& cfg, const usemem_result& r) {
  for (const auto& t : r.tasks) {
    std::printf("%llu bytes / %llu usecs = %.0f KB/s\n", static_cast<unsigned long long>(t.bytes),
                static_cast<unsigned long long>(t.usecs), t.kbps);
    if (!t.error.empty()) std::printf("  task failed: %s\n", t.error.c_str());
  }
  const uint64_t bytes = std::accumulate(r.tasks.begin(), r.tasks.end(), uint64_t{0},
                                         [](uint64_t s, const auto& t) { return s + t.bytes; });
  std::printf("total: %llu bytes, %u tasks, %.0f KB/s (sum of tasks), wall %llu usecs\n",
              static_cast<unsigned long long>(bytes), cfg.tasks, r.total_kbps,
              static_cast<unsigned long long>(r.wall_usecs));
  if (cfg.verify) {
    uint64_t pv = 0, us = 0;
    for (const auto& t : r.tasks) pv += t.pages_verified, us = std::max(us, t.verify_usecs);
    std::printf("verify: %llu mismatches in %llu pages read back (%llu usecs)\n",
                static_cast<unsigned long long>(r.mismatches), static_cast<unsigned long long>(pv),
                static_cast<unsigned long long>(us));
  }
  const auto& ev = r.events;
  std::printf("swap-outs (pswpout) %llu, swap-ins (pswpin) %llu, pgmajfault %llu, swap cache hits %llu\n",
              (unsigned long long)ev[PSWPOUT], (unsigned long long)ev[PSWPIN],
              (unsigned long long)ev[PGMAJFAULT], (unsigned long long)ev[SWAP_RA_HIT]);
  std::printf("reclaim: pgsteal_kswapd %llu, pgsteal_direct %llu, pgscan %llu, allocstall %llu, "
              "oom %llu\n",
              (unsigned long long)ev[PGSTEAL_KSWAPD], (unsigned long long)ev[PGSTEAL_DIRECT],
              (unsigned long long)(ev[PGSCAN_KSWAPD] + ev[PGSCAN_DIRECT]),
              (unsigned long long)ev[ALLOCSTALL], (unsigned long long)ev[OOM_KILL]);
  std::printf("swap: %llu of %llu slots in use, %llu pages in the swap cache, %llu write errors\n",
              (unsigned long long)r.swap.inuse, (unsigned long long)r.swap.total,
              (unsigned long long)r.swap.cached, (unsigned long long)r.swap.write_errors);
  if (r.mm_stat) {
    std::printf("mm_stat: %s", r.mm_stat_text.c_str());
    std::printf("  (orig_data_size compr_data_size mem_used_total mem_limit mem_used_max "
                "same_pages pages_compacted huge_pages huge_pages_since)\n");
  }
  std::printf("exit: %s\n", r.teardown_clean ? "every frame, swap slot and zram object freed"
                                             : "NOT CLEAN: something was left allocated");
  std::printf("lock contention:\n%s", lockstat::format_table(r.locks).c_str());
}

int run_cli(cli_options& o) {
  usemem_config& cfg = o.cfg;
  if (o.threads && o.procs) {
    std::cerr << "usemem: give -t (threads of one mm) or -n (separate mms), not both\n";
    return 2;
  }
  cfg.tasks = o.procs ? o.procs : (o.threads ? o.threads : 1);
  cfg.separate_mms = o.procs != 0;
  if (o.size_pos) cfg.size = o.size_pos;
  cfg.kswapd = !o.no_kswapd;
  auto dev = parse_swap_dev_kind(o.swap_dev);
  auto sc = parse_slot_cache_policy(o.slot_cache);
  auto swap_modes = parse_list<swap_lock_mode>(
      o.swap_locks, {swap_lock_mode::global, swap_lock_mode::cluster, swap_lock_mode::percpu},
      parse_swap_lock_mode);
  auto zram_modes = parse_list<zram_lock_mode>(
      o.zram_locks, {all_zram_lock_modes.begin(), all_zram_lock_modes.end()}, parse_zram_lock_mode);
  for (const status* st : {dev ? nullptr : &dev.error(), sc ? nullptr : &sc.error(),
                           swap_modes ? nullptr : &swap_modes.error(),
                           zram_modes ? nullptr : &zram_modes.error()})
    if (st) {
      std::cerr << "usemem: " << st->to_string() << "\n";
      return 2;
    }
  cfg.swap_dev = *dev;
  cfg.slot_cache = *sc;
  std::vector<combo> combos;
  for (swap_lock_mode s : *swap_modes)
    for (zram_lock_mode z : (cfg.swap_dev == swap_dev_kind::zram ? *zram_modes
                                                                  : std::vector<zram_lock_mode>{zram_modes->front()}))
      combos.push_back({s, z});
  if (o.rounds == 0) o.rounds = 1;

  nlohmann::json out;
  out["config"] = {{"tasks", cfg.tasks}, {"mode", cfg.separate_mms ? "processes (-n)" : "threads (-t)"},
                   {"size_per_task", cfg.size}, {"ram", cfg.ram}, {"swap", cfg.swap},
                   {"swap_dev", to_string(cfg.swap_dev)}, {"comp", cfg.comp},
                   {"random", cfg.random}, {"verify", cfg.verify}, {"rounds", o.rounds},
                   {"slot_cache", to_string(cfg.slot_cache)}};
  int rc = 0;
  const bool single = combos.size() == 1 && o.rounds == 1;
  // The progress line lives from the start of a run until its result line is printed.
  std::optional<progress_printer> pp;
  auto all = run_alternating_rounds(
      combos, o.rounds,
      [&](unsigned round, const combo& cb) {
        usemem_config rc_cfg = cfg;
        rc_cfg.swap_lock = cb.swap_lock;
        rc_cfg.zram_lock = cb.zram_lock;
        if (!o.quiet && !o.json && !single)
          std::printf("round %u, %s: ", round + 1, cb.name(cfg.swap_dev).c_str()), std::fflush(stdout);
        pp.emplace(cfg.tasks * round_up_to_page(cfg.size), cfg.verify);
        return run_usemem(rc_cfg, o.quiet ? usemem_progress_fn{} : usemem_progress_fn(std::ref(*pp)));
      },
      [&](unsigned, const combo&, const usemem_result& r) {
        if (r.mismatches || r.errors || !r.teardown_clean) rc = 1;
        if (!o.json && single) print_run(cfg, r);
        if (!o.quiet && !o.json && !single)
          std::printf("%.0f KB/s, %llu swap-outs, %llu swap-ins, %llu mismatches%s\n", r.total_kbps,
                      (unsigned long long)r.events[PSWPOUT], (unsigned long long)r.events[PSWPIN],
                      (unsigned long long)r.mismatches, r.errors ? ", TASK ERRORS" : "");
        pp.reset();
      });
  if (!all) {
    std::cerr << "usemem: " << all.error().to_string() << "\n";
    return 1;
  }

  if (single) {
    if (o.json) {
      out["run"] = to_json(all->front().samples.front());
      std::cout << out.dump(2) << "\n";
    }
    return rc;
  }
  // Alternating rounds: the summary table.
  const seed_table seed = load_seed_rows(default_seed_results_path(), "000");
  const seed_row* srow = find_seed_row(seed, "swap-out throughput");
  const double base = median(all->front().values(&usemem_result::total_kbps));
  if (!o.json) {
    std::printf("\nusemem %s %u x %s on %s RAM, swap on %s, %u rounds alternating (median, "
                "min-max):\n",
                cfg.separate_mms ? "-n" : "-t", cfg.tasks, format_size(round_up_to_page(cfg.size)).c_str(),
                format_size(cfg.ram).c_str(), to_string(cfg.swap_dev), o.rounds);
    std::printf("  %-40s %12s %12s %12s %8s\n", "lock modes", "KB/s", "min", "max", "ratio");
  }
  for (const auto& m : *all) {
    const auto v = m.values(&usemem_result::total_kbps);
    const double med = median(v);
    if (!o.json)
      std::printf("  %-40s %12.0f %12.0f %12.0f %8.3f\n", m.mode.name(cfg.swap_dev).c_str(), med,
                  min_of(v), max_of(v), base > 0 ? med / base : 0);
    nlohmann::json jc;
    jc["swap_lock"] = to_string(m.mode.swap_lock);
    if (cfg.swap_dev == swap_dev_kind::zram) jc["zram_lock"] = to_string(m.mode.zram_lock);
    jc["kbps_rounds"] = v;
    jc["kbps_median"] = med;
    jc["ratio_to_first"] = base > 0 ? med / base : 0;
    jc["locks_summed_over_rounds"] = nlohmann::json::parse(lockstat::to_json(m.locks));
    for (const auto& r : m.samples) jc["runs"].push_back(to_json(r));
    out["combos"].push_back(jc);
  }
  if (srow) {
    out["seed_000"] = {{"row", srow->row},   {"baseline", srow->baseline},
                       {"patched", srow->patched}, {"ratio", srow->ratio()},
                       {"source", seed.source}};
    if (!o.json)
      std::printf("  seed 000 (%s, 16 processes, RAM-simulated PMEM): global %.2f -> cluster %.2f "
                  "GB/s, ratio %.3f (+%.1f%%)\n",
                  srow->experiment.c_str(), srow->baseline, srow->patched, srow->ratio(),
                  (srow->ratio() - 1) * 100);
  }
  if (o.json) {
    std::cout << out.dump(2) << "\n";
  } else {
    for (const auto& m : *all) {
      std::printf("\nlock contention, %s (summed over %u rounds):\n%s",
                  m.mode.name(cfg.swap_dev).c_str(), o.rounds,
                  lockstat::format_table(m.locks).c_str());
    }
  }
  return rc;
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
  sub->add_option("--swap-dev", o->swap_dev, "Swap device: zram, or ram (uncompressed, like the "
                                             "seed's RAM-simulated PMEM)")
      ->default_str("zram");
  sub->add_option("--swap-lock", o->swap_locks,
                  "Swap lock mode: global, cluster, percpu, a comma list, or all")
      ->default_str("cluster");
  sub->add_option("--zram-lock", o->zram_locks,
                  "zram lock mode: global_rwlock, slot_cas, slot_bitlock, a comma list, or all")
      ->default_str("slot_bitlock");
  sub->add_option("--slot-cache", o->slot_cache,
                  "Swap slot cache: by-mode, on, alloc (allocation side only), off")
      ->default_str("by-mode");
  sub->add_option("--comp", o->cfg.comp, "zram codec: lz4, lz4hc, zstd, lzo")->default_str("lzo");
  sub->add_option("--rounds", o->rounds, "Rounds, alternating the lock modes in each")
      ->default_str("1");
  sub->add_flag("--no-kswapd", o->no_kswapd, "Run without kswapd (direct reclaim only)");
  sub->add_flag("--json", o->json, "Print the results as JSON");
  sub->add_flag("-q,--quiet", o->quiet, "No progress line");
  table.add(sub, [o] { return run_cli(*o); });
}

const command_registrar reg{40, add_usemem_command};

}  // namespace
}  // namespace uswap::tools
