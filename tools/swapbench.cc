// `uswap swapbench`: seed 000's slot allocator measured in its three lock forms side by side.
//
// N threads do to swap slots what swap-out and swap-in do, with the page work left out or
// simulated: each thread swaps out a batch of pages (get_swap_page, swap_duplicate for each page
// table mapping, put_swap_page once the write finished), keeps up to --resident pages swapped
// out, and swaps the oldest back in (swapcache_prepare, swap_free for each mapping,
// swapcache_clear as the page leaves the swap cache). Every call counts as one slot operation;
// --work bytes of a private page are written between page steps, standing in for the copy to
// the swap device.
//
// The lock modes run in alternating rounds (global cluster percpu global cluster percpu ...), a
// fresh swap_system per round; the figure per mode is the median over rounds with the min-max
// spread, and the ratio to global is the ratio of medians. After the timed rounds, one more round
// per mode runs with lockstat on (the timed rounds run without its counting) and gives the lock
// statistics that explain the ratios. Each round ends by releasing every slot and checking the
// areas' invariants, so a broken allocator cannot produce a figure.
//
// Thread-safety: the command runs on the main thread and starts the workers itself.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "alternate_rounds.h"
#include "cli.h"
#include "machine_facts.h"
#include "progress.h"
#include "report.h"
#include "swapbench.h"
#include "uswap/base/units.h"
#include "uswap/swap/swap_system.h"
#include "uswap/sync/lockstat.h"

namespace uswap::tools {
namespace {

// Seed 000's published figure (/work/shared/reference/seed_results.csv, row
// "000,vm-scalability swap-w-seq,swap-out throughput,1.61,2.11,30.7,GB/s"): 16 processes
// sequentially write anonymous pages until RAM and part of swap are used; Xeon E5 v3; swap on
// RAM-simulated PMEM; baseline si->lock, patched the cluster lock.
constexpr double seed000_baseline_gbs = 1.61;
constexpr double seed000_patched_gbs = 2.11;
constexpr double seed000_change_pct = 30.7;
constexpr const char* seed000_source = "/work/shared/reference/seed_results.csv (seed 000)";

using mode_spec = swapbench_mode;

// The command line's options: the measurement's configuration and how to print it.
struct config : swapbench_config {
  config() { modes = *parse_swapbench_modes("global,cluster,percpu"); }
  bool json = false;
};

struct round_result {
  double seconds = 0;
  double cpu_seconds = 0;  // CPU time of the workers in the timed part
  uint64_t ops = 0;
  uint64_t pages = 0;  // swap-outs
  double ops_per_sec() const { return seconds > 0 ? static_cast<double>(ops) / seconds : 0; }
  // Operations per CPU-second of the workers: what one operation costs in CPU time, lock waits
  // (spinning) included. On a shared machine whose scheduler gives the workers less than a core
  // this stays meaningful where ops_per_sec mostly measures the share the workers got.
  double ops_per_cpu_sec() const {
    return cpu_seconds > 0 ? static_cast<double>(ops) / cpu_seconds : 0;
  }
  // Cores the workers actually got: on a shared machine, less than min(threads, CPUs).
  double cores() const { return seconds > 0 ? cpu_seconds / seconds : 0; }
  double pages_per_sec() const { return seconds > 0 ? static_cast<double>(pages) / seconds : 0; }
};

// The lock classes of one mode, shared by all of its rounds.
struct mode_classes {
  explicit mode_classes(const std::string& label)
      : device(label + ": si->lock"), cluster(label + ": cluster_lock"),
        cache(label + ": slots_cache") {}
  lock_class device, cluster, cache;
};

// Simulated page work: write `bytes` of the thread's private page, then make sure the compiler
// keeps the stores.
void page_work(unsigned char* buf, uint64_t bytes, unsigned char v) {
  if (!bytes) return;
  std::memset(buf, v, bytes);
  asm volatile("" : : "r"(buf) : "memory");
}

// One round of one mode: a fresh system, `nthreads` workers for cfg.duration_s.
result<round_result> run_round(const swapbench_config& cfg, const mode_spec& spec, unsigned nthreads,
                               mode_classes& cls) {
  const swap_lock_mode mode = spec.mode;
  swap_options so;
  so.lock_mode = mode;
  so.percpu_inuse_counter = spec.percpu_inuse_counter;
  so.freer_tag = spec.freer_tag;
  so.slot_cache = cfg.slot_cache;
  so.nr_cpu_slots = std::max(64u, nthreads);
  so.device_lock_class = &cls.device;
  so.cluster_lock_class = &cls.cluster;
  so.slot_cache_lock_class = &cls.cache;
  swap_system sys(so);
  for (unsigned a = 0; a < cfg.areas; ++a) {
    swap_area_options ao;
    ao.size_pages = bytes_to_pages(cfg.size) / cfg.areas;
    ao.priority = 0;  // equal priorities: used in turn
    auto t = sys.swapon(ao);
    if (!t.ok()) return t.error();
  }

  std::atomic<bool> go{false}, stop{false};
  std::atomic<unsigned> ready{0};
  std::vector<round_result> per(nthreads);
  std::vector<std::string> failures(nthreads);
  std::vector<std::chrono::steady_clock::time_point> ends(nthreads);
  std::vector<std::thread> workers;
  workers.reserve(nthreads);
  for (unsigned t = 0; t < nthreads; ++t) {
    workers.emplace_back([&, t] {
      std::vector<unsigned char> page(std::max<uint64_t>(cfg.work, 1));
      const size_t cap = cfg.resident + cfg.batch;
      std::vector<swap_entry> ring(cap);
      size_t head = 0, n = 0;  // ring[head .. head + n) are swapped out, oldest first
      uint64_t ops = 0, pages = 0;
      std::string& fail = failures[t];
      auto check = [&](const status& st, const char* what) {
        if (!st.ok() && fail.empty()) fail = std::string(what) + ": " + st.to_string();
        return st.ok();
      };
      // swap-in of the oldest page: fault, map it for every page table, drop it from the cache.
      auto swap_in_oldest = [&]() {
        const swap_entry e = ring[head];
        head = (head + 1) % cap;
        --n;
        page_work(page.data(), cfg.work, static_cast<unsigned char>(e.val));
        check(sys.swapcache_prepare(e), "swapcache_prepare");
        for (unsigned m = 0; m < cfg.mappings; ++m) {
          auto r = sys.swap_free(e);
          check(r.ok() ? status{} : r.error(), "swap_free");
        }
        check(sys.swapcache_clear(e), "swapcache_clear");
        ops += 2 + cfg.mappings;
      };
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      const double cpu0 = thread_cpu_seconds();
      while (!stop.load(std::memory_order_relaxed) && fail.empty()) {
        // Swap-out of one reclaim batch.
        for (unsigned i = 0; i < cfg.batch; ++i) {
          const swap_entry e = sys.get_swap_page();
          ++ops;
          if (e.empty()) {
            fail = "get_swap_page: the swap area is full (--size too small for --resident)";
            break;
          }
          page_work(page.data(), cfg.work, static_cast<unsigned char>(e.val));
          for (unsigned m = 0; m < cfg.mappings; ++m) check(sys.swap_duplicate(e), "swap_duplicate");
          check(sys.put_swap_page(e), "put_swap_page");
          ops += 1 + cfg.mappings;
          ++pages;
          ring[(head + n) % cap] = e;
          ++n;
        }
        // Swap-in of what exceeds the resident set.
        while (n > cfg.resident) swap_in_oldest();
      }
      ends[t] = std::chrono::steady_clock::now();
      per[t].cpu_seconds = thread_cpu_seconds() - cpu0;
      per[t].ops = ops;
      per[t].pages = pages;
      // Untimed: give every slot back (munmap of the swapped-out pages).
      while (n) {
        const swap_entry e = ring[head];
        head = (head + 1) % cap;
        --n;
        for (unsigned m = 0; m < cfg.mappings; ++m) {
          auto r = sys.swap_free(e);
          check(r.ok() ? status{} : r.error(), "swap_free at exit");
        }
      }
    });
  }
  while (ready.load() < nthreads) std::this_thread::yield();
  const auto start = std::chrono::steady_clock::now();
  go.store(true, std::memory_order_release);
  std::this_thread::sleep_for(std::chrono::duration<double>(cfg.duration_s));
  stop.store(true, std::memory_order_relaxed);
  for (auto& w : workers) w.join();

  for (unsigned t = 0; t < nthreads; ++t)
    if (!failures[t].empty())
      return error(EIO, spec.label + " thread " + std::to_string(t) + ": " + failures[t]);
  round_result r;
  const auto end = *std::max_element(ends.begin(), ends.end());
  r.seconds = std::chrono::duration<double>(end - start).count();
  for (const auto& p : per) {
    r.cpu_seconds += p.cpu_seconds;
    r.ops += p.ops;
    r.pages += p.pages;
  }
  // Every slot was released: the areas must be empty and consistent.
  sys.drain_swap_slots_cache();
  if (status st = sys.check_invariants(); !st.ok()) return st;
  if (sys.nr_swap_pages() != sys.total_swap_pages())
    return error(EIO, spec.label + ": " +
                          std::to_string(sys.total_swap_pages() - sys.nr_swap_pages()) +
                          " slots still in use after every thread released its slots");
  return r;
}

using mode_result = swapbench_mode_result;

std::string ns_text(double ns) {
  if (ns < 10'000) return strprintf("%.0f ns", ns);
  if (ns < 10'000'000) return strprintf("%.1f us", ns / 1e3);
  return strprintf("%.1f ms", ns / 1e6);
}

status validate_impl(swapbench_config& cfg) {
  if (cfg.threads.empty()) return error(EINVAL, "--threads: give at least one thread count");
  for (unsigned t : cfg.threads)
    if (t == 0 || t > 1024)
      return error(EINVAL, "--threads: " + std::to_string(t) + " is outside 1..1024");
  if (cfg.rounds == 0 || cfg.rounds > 1000)
    return error(EINVAL, "--rounds: " + std::to_string(cfg.rounds) + " is outside 1..1000");
  if (!(cfg.duration_s > 0) || cfg.duration_s > 3600)
    return error(EINVAL, "--duration: " + strprintf("%.3f", cfg.duration_s) +
                             " s is outside (0, 3600] seconds");
  if (cfg.batch == 0 || cfg.batch > 4096)
    return error(EINVAL, "--batch: " + std::to_string(cfg.batch) + " is outside 1..4096");
  if (cfg.mappings == 0 || cfg.mappings > 1000)
    return error(EINVAL, "--mappings: " + std::to_string(cfg.mappings) + " is outside 1..1000");
  if (cfg.areas == 0 || cfg.areas > MAX_SWAPFILES)
    return error(EINVAL, "--areas: " + std::to_string(cfg.areas) + " is outside 1.." +
                             std::to_string(MAX_SWAPFILES));
  if (cfg.work > (uint64_t{1} << 20))
    return error(EINVAL, "--work: " + format_size(cfg.work) + " is more than 1 MiB per page");
  if (cfg.modes.empty()) cfg.modes = *parse_swapbench_modes("global,cluster,percpu");
  // Each thread holds resident + batch slots, and its slot cache up to 64 more; the caches
  // switch off below 2 x 64 free slots per thread. Ask for that with a margin per area.
  const unsigned most = *std::max_element(cfg.threads.begin(), cfg.threads.end());
  const uint64_t need = uint64_t{most} * (cfg.resident + cfg.batch + 4 * SWAP_SLOTS_CACHE_SIZE) +
                        cfg.areas * 2 * SWAPFILE_CLUSTER;
  const uint64_t have = bytes_to_pages(cfg.size);
  if (have < need)
    return error(EINVAL, "--size: " + format_size(cfg.size) + " is too small for " +
                             std::to_string(most) + " threads x (" + std::to_string(cfg.resident) +
                             " resident + " + std::to_string(cfg.batch) +
                             " batch) pages: use at least " + format_size(pages_to_bytes(need)));
  return {};
}

result<swapbench_result> measure(const swapbench_config& cfg, const swapbench_progress_fn& progress) {
  std::vector<std::unique_ptr<mode_classes>> classes;
  for (const mode_spec& m : cfg.modes) classes.push_back(std::make_unique<mode_classes>(m.label));
  auto say = [&](const std::string& text) {
    if (progress) progress(text);
  };
  swapbench_result out;
  for (unsigned nthreads : cfg.threads) {
    // A mode and its lock classes (shared by all of its rounds).
    struct form {
      const mode_spec* spec;
      mode_classes* cls;
    };
    std::vector<form> forms;
    for (size_t i = 0; i < cfg.modes.size(); ++i) forms.push_back({&cfg.modes[i], classes[i].get()});
    lockstat::enable(false);
    auto rounds = run_alternating_rounds(
        forms, cfg.rounds,
        [&](unsigned, const form& f) { return run_round(cfg, *f.spec, nthreads, *f.cls); },
        [&](unsigned r, const form& f, const round_result& rr) {
          say("swapbench: " + std::to_string(nthreads) + " threads, round " +
              std::to_string(r + 1) + "/" + std::to_string(cfg.rounds) + ", " + f.spec->label +
              ": " + strprintf("%.2f", rr.ops_per_sec() / 1e6) + " Mops/s");
        });
    if (!rounds) return rounds.error();
    std::vector<mode_result> res;
    for (const auto& m : *rounds)
      res.push_back({*m.mode.spec, m.values(&round_result::ops_per_sec),
                     m.values(&round_result::pages_per_sec), m.values(&round_result::cores),
                     m.values(&round_result::ops_per_cpu_sec), {}, 0});
    if (cfg.lockstat_round) {
      for (size_t i = 0; i < cfg.modes.size(); ++i) {
        classes[i]->device.reset();
        classes[i]->cluster.reset();
        classes[i]->cache.reset();
        lockstat::enable(true);
        auto rr = run_round(cfg, cfg.modes[i], nthreads, *classes[i]);
        lockstat::enable(false);
        if (!rr.ok()) return rr.error();
        res[i].lockstat_ops = rr->ops;
        res[i].locks = {classes[i]->device.snapshot(), classes[i]->cluster.snapshot(),
                        classes[i]->cache.snapshot()};
        say("swapbench: " + std::to_string(nthreads) + " threads, lockstat round, " +
            cfg.modes[i].label);
      }
    }
    out.per.push_back(std::move(res));
  }
  return out;
}

// Slot operations per acquisition of a lock class in the lockstat round.
double per_op(const mode_result& mr, const lock_stats& s) {
  return mr.lockstat_ops ? static_cast<double>(s.acquisitions) / static_cast<double>(mr.lockstat_ops)
                         : 0.0;
}

nlohmann::json mode_json(const swapbench_config& cfg, const mode_result& mr, double base_med) {
  nlohmann::json locks = nlohmann::json::array();
  for (const lock_stats& s : mr.locks) {
    nlohmann::json row = s;
    row["contended_pct"] = s.contended_pct();
    row["wait_avg_ns"] = s.wait_avg_ns();
    row["per_op"] = per_op(mr, s);
    locks.push_back(std::move(row));
  }
  return {{"mode", mr.spec.label},
          {"lock_mode", to_string(mr.spec.mode)},
          {"percpu_inuse_counter",
           mr.spec.mode == swap_lock_mode::percpu && mr.spec.percpu_inuse_counter},
          {"freer_tag", mr.spec.freer_tag},
          {"slot_cache", to_string(effective_slot_cache(cfg.slot_cache, mr.spec.mode))},
          {"ops_per_sec", mr.ops_per_sec},
          {"pages_per_sec", mr.pages_per_sec},
          {"median_ops_per_sec", mr.med()},
          {"min_ops_per_sec", mr.lo()},
          {"max_ops_per_sec", mr.hi()},
          {"median_pages_per_sec", median(mr.pages_per_sec)},
          {"cores", mr.cores},
          {"median_cores", median(mr.cores)},
          {"ops_per_cpu_sec", mr.ops_per_cpu_sec},
          {"median_ops_per_cpu_sec", median(mr.ops_per_cpu_sec)},
          {"ratio_to_baseline", base_med > 0 ? mr.med() / base_med : 0.0},
          {"lockstat_round_ops", mr.lockstat_ops},
          {"locks", locks}};
}

// One thread count's table: a row per form, the notes under it, the lock classes.
void print_thread_count(std::ostream& out, const swapbench_report& rep, size_t k) {
  const swapbench_config& cfg = rep.config;
  const auto& forms = rep.result.per[k];
  const double base_med = forms[rep.base_index()].med();
  out << "\n" << cfg.threads[k] << " threads\n";
  out << strprintf("  %-13s %-10s %9s %17s %10s %12s %7s %11s\n", "mode", "slot cache", "Mops/s",
                   "min-max", "ratio", "pages/s", "cores", "Mops/CPU-s");
  for (const mode_result& mr : forms)
    out << strprintf("  %-13s %-10s %9.2f %8.2f-%-8.2f %9.2fx %11.2fM %7.2f %11.2f\n",
                     mr.spec.label.c_str(),
                     to_string(effective_slot_cache(cfg.slot_cache, mr.spec.mode)), mr.med() / 1e6,
                     mr.lo() / 1e6, mr.hi() / 1e6, base_med > 0 ? mr.med() / base_med : 0.0,
                     median(mr.pages_per_sec) / 1e6, median(mr.cores),
                     median(mr.ops_per_cpu_sec) / 1e6);
  out << "  cores = CPU time the workers got / wall time (median; less than min(threads, CPUs) "
         "when other work shares the machine); Mops/CPU-s = operations per CPU-second of the "
         "workers (median), the cost of an operation including lock spinning\n";
  out << "  ratio = median / median of " << cfg.modes[rep.base_index()].label
      << strprintf(". seed 000: cluster/global = %.2f/%.2f GB/s = %.2fx (+%.1f%%)",
                   seed000_patched_gbs, seed000_baseline_gbs,
                   seed000_patched_gbs / seed000_baseline_gbs, seed000_change_pct)
      << ", vm-scalability swap-w-seq, 16 processes, Xeon E5 v3, RAM-simulated PMEM\n";
  if (!cfg.lockstat_round) return;
  out << "  lock contention (one more round per mode, lockstat on):\n";
  out << strprintf("  %-28s %13s %8s %11s %10s %10s %10s\n", "lock class", "acquisitions",
                   "per op", "contended", "contended%", "wait avg", "wait max");
  for (const mode_result& mr : forms)
    for (const lock_stats& s : mr.locks) {
      if (s.acquisitions == 0) continue;
      out << strprintf("  %-28s %13llu %8.3f %11llu %9.2f%% %10s %10s\n", s.name.c_str(),
                       static_cast<unsigned long long>(s.acquisitions), per_op(mr, s),
                       static_cast<unsigned long long>(s.contended), s.contended_pct(),
                       ns_text(s.wait_avg_ns()).c_str(),
                       ns_text(static_cast<double>(s.wait_max_ns)).c_str());
    }
}

int run_swapbench_cli(config& cfg) {
  if (status st = validate_impl(cfg); !st.ok()) {
    std::cerr << "uswap swapbench: " << st.message() << "\n";
    return 2;
  }
  swapbench_report rep;
  rep.cpu_model = cpu_model();
  rep.cpus = cpu_count();
  {
    progress_line progress;
    auto measured = measure(cfg, [&](const std::string& text) { progress.show(text); });
    if (!measured.ok()) {
      progress.clear();
      std::cerr << "uswap swapbench: " << measured.error().to_string() << "\n";
      return 1;
    }
    rep.result = std::move(*measured);
  }
  rep.config = cfg;
  print_report(std::cout, rep, cfg.json);
  return 0;
}

void add_swapbench_command(CLI::App& app, command_table& table) {
  auto cfg = std::make_shared<config>();
  auto* sub = app.add_subcommand(
      "swapbench",
      "Swap slot allocation by N threads under the global, cluster (seed 000) and percpu locks, "
      "in alternating rounds, with lock contention");
  sub->add_option("-t,--threads", cfg->threads, "Thread counts to measure, comma-separated")
      ->delimiter(',')
      ->capture_default_str();
  add_parsed_option(*sub, "--modes", cfg->modes, parse_swapbench_modes, "global,cluster,percpu",
                    "Lock modes, comma-separated: global, cluster, percpu, percpu-atomic (percpu "
                    "with the kernel's single shared inuse_pages counter); a -notag suffix (e.g. "
                    "percpu-notag) picks new clusters in the kernel's order, without the freer "
                    "tag");
  add_enum_option(*sub, "--slot-cache", cfg->slot_cache, slot_cache_policy_names,
                  "slot cache policy",
                  "Per-CPU slot caches: by-mode (as each mode's kernel: global off, cluster on, "
                  "percpu alloc), on (allocation and freeing side, 4.11), alloc (allocation side "
                  "only, 6.14), off (6.15 on)");
  add_rounds_option(*sub, cfg->rounds, "Rounds per mode");
  sub->add_option("--duration", cfg->duration_s, "Seconds per round")->capture_default_str();
  add_size_option(*sub, "--size", cfg->size, "Swap space (split over --areas areas)");
  add_size_option(*sub, "--work", cfg->work,
                  "Bytes of a private page written per page step (simulated page copy)");
  sub->add_option("--batch", cfg->batch, "Pages per swap-out batch")->capture_default_str();
  sub->add_option("--resident", cfg->resident, "Pages each thread keeps swapped out")
      ->capture_default_str();
  sub->add_option("--mappings", cfg->mappings,
                  "Page table entries per swapped page (swap_duplicate / swap_free each)")
      ->capture_default_str();
  sub->add_option("--areas", cfg->areas, "Swap areas of equal priority")->capture_default_str();
  sub->add_flag("!--no-lockstat", cfg->lockstat_round,
                "Skip the extra round per mode that collects lock statistics");
  add_json_flag(*sub, cfg->json);
  table.add(sub, [cfg] { return run_swapbench_cli(*cfg); });
}

const command_registrar reg{60, add_swapbench_command};

}  // namespace

result<swapbench_mode> parse_swapbench_mode(std::string_view text) {
  constexpr std::string_view notag = "-notag";
  std::string_view base = text;
  const bool tag = !(base.size() > notag.size() && base.ends_with(notag));
  if (!tag) base.remove_suffix(notag.size());
  if (base == "percpu-atomic")
    return mode_spec{std::string(text), swap_lock_mode::percpu, false, tag};
  auto m = parse_swap_lock_mode(base);
  if (!m.ok())
    return error(EINVAL, "unknown swap lock mode '" + std::string(text) +
                             "' (valid: global, cluster, percpu, percpu-atomic, each optionally "
                             "with -notag)");
  return mode_spec{std::string(text), *m, true, tag};
}

result<std::vector<swapbench_mode>> parse_swapbench_modes(std::string_view text) {
  std::vector<swapbench_mode> out;
  size_t at = 0;
  while (true) {
    const size_t comma = text.find(',', at);
    auto m = parse_swapbench_mode(text.substr(at, comma == text.npos ? text.npos : comma - at));
    if (!m.ok()) return m.error();
    out.push_back(std::move(*m));
    if (comma == text.npos) break;
    at = comma + 1;
  }
  return out;
}

status validate_swapbench(swapbench_config& cfg) { return validate_impl(cfg); }

double swapbench_mode_result::med() const { return tools::median(ops_per_sec); }

result<swapbench_result> run_swapbench(const swapbench_config& cfg,
                                       const swapbench_progress_fn& progress) {
  return measure(cfg, progress);
}

size_t swapbench_report::base_index() const {
  for (size_t i = 0; i < config.modes.size(); ++i)
    if (config.modes[i].mode == swap_lock_mode::global) return i;
  return 0;
}

nlohmann::json swapbench_report::to_json() const {
  const swapbench_config& cfg = config;
  std::vector<std::string> labels;
  for (const auto& m : cfg.modes) labels.push_back(m.label);
  nlohmann::json j;
  j["command"] = "swapbench";
  j["machine"] = {{"cpus", cpus}, {"cpu_model", cpu_model}};
  j["config"] = {{"threads", cfg.threads},
                 {"modes", labels},
                 {"slot_cache", to_string(cfg.slot_cache)},
                 {"rounds", cfg.rounds},
                 {"duration_s", cfg.duration_s},
                 {"size_bytes", cfg.size},
                 {"areas", cfg.areas},
                 {"work_bytes", cfg.work},
                 {"batch", cfg.batch},
                 {"resident", cfg.resident},
                 {"mappings", cfg.mappings}};
  j["seed"] = {{"id", "000"},
               {"experiment", "vm-scalability swap-w-seq, 16 processes"},
               {"baseline", seed000_baseline_gbs},
               {"patched", seed000_patched_gbs},
               {"unit", "GB/s"},
               {"ratio", seed000_patched_gbs / seed000_baseline_gbs},
               {"change_pct", seed000_change_pct},
               {"source", seed000_source}};
  j["ratio_baseline"] = cfg.modes[base_index()].label;
  nlohmann::json results = nlohmann::json::array();
  for (size_t k = 0; k < cfg.threads.size(); ++k) {
    nlohmann::json modes = nlohmann::json::array();
    const double base_med = result.per[k][base_index()].med();
    for (const mode_result& mr : result.per[k]) modes.push_back(mode_json(cfg, mr, base_med));
    results.push_back({{"threads", cfg.threads[k]}, {"modes", modes}});
  }
  j["results"] = results;
  return j;
}

void swapbench_report::print(std::ostream& out) const {
  out << "uswap swapbench: swap slot allocation, ";
  for (size_t i = 0; i < config.modes.size(); ++i) out << (i ? " vs " : "") << config.modes[i].label;
  out << "\n";
  out << "machine: " << cpus << " CPUs, " << cpu_model << "\n";
  out << "area: " << config.areas << " x " << format_size(config.size / config.areas)
      << ", slot cache " << to_string(config.slot_cache) << "; per thread: batch " << config.batch
      << ", resident " << config.resident << " pages, " << config.mappings
      << " mapping(s) per page, work " << format_size(config.work) << " per page step\n";
  out << "rounds: " << config.rounds << " per mode, alternating, "
      << strprintf("%.2f", config.duration_s)
      << " s each; Mops/s = slot operations (get_swap_page, swap_duplicate, put_swap_page, "
         "swapcache_prepare, swap_free, swapcache_clear) per second, median and min-max\n";
  for (size_t k = 0; k < config.threads.size(); ++k) print_thread_count(out, *this, k);
}

}  // namespace uswap::tools
