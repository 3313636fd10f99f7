// The `uswap` subcommands' reports (tools/*.h): each report's to_json() carries the fields it was
// given, its text printer shows them as the subcommand prints them, and the command-line helpers
// (enum options and lists) accept, default and refuse as the name tables say.
//
// The reports are built from made-up figures here, so every expected value is known; the
// subcommands' end-to-end runs are tested by tests/cli/*.sh.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "aim9.h"
#include "bench_seeds.h"
#include "cli.h"
#include "iozone.h"
#include "machine_facts.h"
#include "pft.h"
#include "report.h"
#include "rmap_bench.h"
#include "swapbench.h"
#include "uffdbench.h"
#include "usemem.h"
#include "uswap/sync/lockstat.h"
#include "uswap/zram/zram.h"
#include "zram_report.h"

namespace uswap::tools {
namespace {

template <class Report>
std::string text_of(const Report& r) {
  std::ostringstream out;
  r.print(out);
  return out.str();
}

bool contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

lock_stats lock_row(std::string name, uint64_t acq, uint64_t cont, uint64_t total, uint64_t max) {
  lock_stats s;
  s.name = std::move(name);
  s.acquisitions = acq;
  s.contended = cont;
  s.wait_total_ns = total;
  s.wait_max_ns = max;
  return s;
}

// --- shared pieces ----------------------------------------------------------------------------

TEST(tools_report, lock_stats_json_is_the_rows_fields) {
  const lock_stats s = lock_row("zram->table[index].lock", 1000, 7, 7000, 3000);
  const nlohmann::json j = s;
  EXPECT_EQ(j.size(), 5u);
  EXPECT_EQ(j["name"], "zram->table[index].lock");
  EXPECT_EQ(j["acquisitions"], 1000u);
  EXPECT_EQ(j["contended"], 7u);
  EXPECT_EQ(j["wait_total_ns"], 7000u);
  EXPECT_EQ(j["wait_max_ns"], 3000u);
  // The same document the sync layer's text form gives (what the tools used to parse back).
  const std::vector<lock_stats> rows = {s, lock_row("a \"quoted\" name", 1, 0, 0, 0)};
  EXPECT_EQ(nlohmann::json(rows), nlohmann::json::parse(lockstat::to_json(rows)));
}

TEST(tools_report, strprintf_formats_like_printf) {
  EXPECT_EQ(strprintf("%-6s|%5.2f|%llu", "spin", 3.14159, 42ull), "spin  | 3.14|42");
  EXPECT_EQ(strprintf("%s", ""), "");
  const std::string longer(300, 'x');
  EXPECT_EQ(strprintf("%s!", longer.c_str()), longer + "!");
}

TEST(tools_report, print_report_prints_json_or_text_once) {
  struct fake {
    nlohmann::json to_json() const { return {{"a", 1}}; }
    void print(std::ostream& out) const { out << "text\n"; }
  };
  std::ostringstream json, compact, text;
  print_report(json, fake{}, true);
  print_report(compact, fake{}, true, -1);
  print_report(text, fake{}, false);
  EXPECT_EQ(json.str(), "{\n  \"a\": 1\n}\n");
  EXPECT_EQ(compact.str(), "{\"a\":1}\n");
  EXPECT_EQ(text.str(), "text\n");
}

TEST(tools_report, machine_facts) {
  EXPECT_FALSE(cpu_model().empty());
  EXPECT_NE(cpu_model().front(), ' ');
  EXPECT_GE(cpu_count(), 1u);
  EXPECT_EQ(machine_description(), std::to_string(cpu_count()) + " CPUs, " + cpu_model());
  std::istringstream load(load_average());
  double a = -1, b = -1, c = -1;
  load >> a >> b >> c;
  EXPECT_TRUE(load.eof() && a >= 0 && b >= 0 && c >= 0) << load_average();
  const cpu_times t0 = thread_times();
  volatile uint64_t spin = 0;
  for (uint64_t i = 0; i < 20'000'000; ++i) spin = spin + i;
  const cpu_times d = thread_times() - t0;
  EXPECT_GT(d.total, 0);
  EXPECT_GE(d.user, 0);
  EXPECT_GE(d.sys, 0);
}

// --- command-line helpers ---------------------------------------------------------------------

TEST(tools_cli, enum_list_option_parses_all_lists_and_refuses_with_status_2) {
  std::vector<zram_lock_mode> modes = {zram_lock_mode::slot_bitlock};
  CLI::App app;
  auto* opt = add_enum_list_option(app, "--lock", modes, zram_lock_mode_names, "zram lock mode",
                                   "Lock mode");
  EXPECT_EQ(opt->get_default_str(), "slot_bitlock");
  EXPECT_EQ(opt->get_description(),
            "Lock mode: global_rwlock, slot_cas, slot_bitlock, a comma list, or all");
  app.parse("--lock slot_cas,global_rwlock", false);
  EXPECT_EQ(modes, (std::vector{zram_lock_mode::slot_cas, zram_lock_mode::global_rwlock}));
  app.clear();
  app.parse("--lock all", false);
  EXPECT_EQ(modes, all_values(zram_lock_mode_names));
  app.clear();
  try {
    app.parse("--lock spin", false);
    FAIL() << "--lock spin was accepted";
  } catch (const CLI::ParseError& e) {
    EXPECT_EQ(e.get_exit_code(), 2);
    EXPECT_STREQ(e.what(),
                 "--lock: unknown zram lock mode 'spin' (valid: global_rwlock, slot_cas, "
                 "slot_bitlock)");
  }
  EXPECT_EQ(modes, all_values(zram_lock_mode_names)) << "a refused value changes nothing";
}

TEST(tools_cli, enum_option_sets_a_value_or_an_optional) {
  swap_dev_kind dev = swap_dev_kind::ram;
  std::optional<zram_writeback_type> wb;
  CLI::App app;
  auto* d = add_enum_option(app, "--swap-dev", dev, swap_dev_kind_names, "swap device", "Device");
  auto* w = add_enum_option(app, "--writeback", wb, zram_writeback_type_names, "writeback type",
                            "Writeback");
  EXPECT_EQ(d->get_default_str(), "ram");
  EXPECT_EQ(w->get_default_str(), "");
  app.parse("--swap-dev zram", false);
  EXPECT_EQ(dev, swap_dev_kind::zram);
  EXPECT_FALSE(wb.has_value());
  app.clear();
  app.parse("--writeback huge_idle", false);
  EXPECT_EQ(wb, zram_writeback_type::huge_idle);
  app.clear();
  EXPECT_THROW(app.parse("--swap-dev disk", false), CLI::ParseError);
}

TEST(tools_cli, option_label_is_the_long_name) {
  EXPECT_EQ(option_label("-r,--record"), "--record");
  EXPECT_EQ(option_label("--lock"), "--lock");
}

// --- zram -------------------------------------------------------------------------------------

zram_report made_up_zram_report() {
  zram_report r;
  r.name = "zram7";
  r.algorithm = "lz4";
  r.recomp_algorithms = {"zstd"};
  r.lock_mode = "slot_cas";
  r.disksize = 8 << 20;
  r.mm.orig_data_size = 4 << 20;
  r.mm.compr_data_size = 1 << 20;
  r.mm.mem_used_total = 2 << 20;
  r.mm.same_pages = 12;
  r.io.failed_reads = 1;
  r.bd.bd_writes = 3;
  r.requests.reads = 100;
  r.requests.writes = 200;
  r.requests.rmw_retries = 4;
  r.mm_stat_text = "4194304 1048576 2097152 0 2097152 12 0 0 0";
  r.io_stat_text = "1 0 0 0";
  r.bd_stat_text = "0 0 3";
  r.debug_stat_text = "version: 1\n0\n";
  r.slot_locks = lock_row("zram7: table[index].lock", 300, 2, 900, 500);
  return r;
}

TEST(tools_report, zram_report_json_and_text) {
  const zram_report r = made_up_zram_report();
  const nlohmann::json j = r.to_json();
  EXPECT_EQ(j["name"], "zram7");
  EXPECT_EQ(j["algorithm"], "lz4");
  EXPECT_EQ(j["recomp_algorithms"], nlohmann::json({"zstd"}));
  EXPECT_EQ(j["lock_mode"], "slot_cas");
  EXPECT_EQ(j["disksize"], 8u << 20);
  EXPECT_EQ(j["mm_stat"]["orig_data_size"], 4u << 20);
  EXPECT_EQ(j["mm_stat"]["same_pages"], 12u);
  EXPECT_EQ(j["io_stat"]["failed_reads"], 1u);
  EXPECT_EQ(j["bd_stat"]["bd_writes"], 3u);
  EXPECT_EQ(j["requests"]["rmw_retries"], 4u);
  EXPECT_EQ(j["text"]["mm_stat"], r.mm_stat_text);
  EXPECT_EQ(j["lockstat"], nlohmann::json::array({r.slot_locks}));
  const std::string t = text_of(r);
  EXPECT_TRUE(contains(t, "zram7   lz4,zstd         8M      4M      1M      2M      12  slot_cas\n"))
      << t;
  EXPECT_TRUE(contains(t, "compression ratio 2.00 (DATA / TOTAL)")) << t;
  EXPECT_TRUE(contains(t, "  mm_stat    " + r.mm_stat_text)) << t;
  EXPECT_TRUE(contains(t, "  debug_stat version: 1 0 (version, miss_free)")) << t;
  EXPECT_TRUE(contains(t, "partial-write retries 4")) << t;
  EXPECT_TRUE(contains(t, "zram7: table[index].lock")) << t;
  zram_report quiet = r;
  quiet.slot_locks = lock_row("x", 0, 0, 0, 0);
  EXPECT_TRUE(contains(text_of(quiet), "lockstat: not collected (run with --lockstat)"));
}

TEST(tools_report, zram_report_of_a_device_reads_its_counters) {
  zram_options o;
  o.disksize = 1 << 20;
  o.name = "zram_report_test";
  auto dev = zram_device::create(o);
  ASSERT_TRUE(dev.ok()) << dev.error().to_string();
  std::vector<uint8_t> page(page_size);
  for (uint64_t i = 0; i < 16; ++i) {
    for (size_t k = 0; k < page.size(); ++k) page[k] = static_cast<uint8_t>(k * (i + 3) >> 5);
    ASSERT_TRUE((*dev)->write_page(i, page.data()).ok());
  }
  const zram_report r = zram_report::of(**dev);
  EXPECT_EQ(r.name, "zram_report_test");
  EXPECT_EQ(r.disksize, 1u << 20);
  EXPECT_EQ(r.mm.orig_data_size, 16 * page_size);
  EXPECT_EQ(r.requests.writes, 16u);
  EXPECT_EQ(r.mm_stat_text, (*dev)->mm_stat_text());
  EXPECT_EQ(r.lock_mode, to_string((*dev)->lock_mode()));
}

TEST(tools_report, zram_fill_report_adds_the_workload) {
  zram_fill_report f;
  f.pages = 2048;
  f.threads = 2;
  f.same_pct = 10;
  f.huge_pct = 5;
  f.compress_pct = 50;
  f.refused = 3;
  f.verify_failures = 0;
  f.write_seconds = 0.5;
  f.read_seconds = 0.25;
  f.steps = {"discarded 9 pages", "compaction freed 1 pages"};
  f.device = made_up_zram_report();
  const nlohmann::json j = f.to_json();
  EXPECT_EQ(j["name"], "zram7");
  EXPECT_EQ(j["workload"]["pages"], 2048u);
  EXPECT_EQ(j["workload"]["refused_enospc"], 3u);
  EXPECT_EQ(j["workload"]["verify_failures"], 0u);
  EXPECT_EQ(j["workload"]["read_seconds"], 0.25);
  EXPECT_EQ(j["workload"]["steps"], nlohmann::json(f.steps));
  const std::string t = text_of(f);
  EXPECT_TRUE(contains(t, "uswap zram: wrote 2048 pages (10% same-filled, 5% incompressible, the "
                          "rest 50% compressible) from 2 threads in 0.5 s; read back and checked "
                          "in 0.25 s: all match; 3 writes refused at mem_limit (ENOSPC)\n"))
      << t;
  EXPECT_TRUE(contains(t, "  then discarded 9 pages\n  then compaction freed 1 pages\n")) << t;
  f.verify_failures = 7;
  EXPECT_TRUE(contains(text_of(f), ": 7 MISMATCHES"));
}

// --- iozone -----------------------------------------------------------------------------------

iozone_report made_up_iozone_report(std::vector<zram_lock_mode> modes) {
  iozone_report r;
  r.config.threads = 2;
  r.config.record = 16 << 10;
  r.config.rounds = 2;
  r.config.modes = modes;
  r.config.selected.fill(false);
  r.config.selected[static_cast<unsigned>(iozone_test::read)] = true;
  r.config.selected[static_cast<unsigned>(iozone_test::mixed)] = true;
  r.size_per_thread = 1 << 20;
  r.machine = "Test CPU, 2 CPUs";
  r.load_average = "0.10 0.20 0.30";
  r.seed.source = "made up";
  r.seed.rows.push_back({"002", "iozone", "Read", 100, 150, 50, "KB/s"});
  double base = 1000;
  for (zram_lock_mode m : modes) {
    for (auto* s : {&r.children_kbs, &r.parent_kbs, &r.cpu_seconds}) (*s)[m].assign(11, {});
    const unsigned read = static_cast<unsigned>(iozone_test::read);
    const unsigned mixed = static_cast<unsigned>(iozone_test::mixed);
    r.children_kbs[m][read] = {base, 3 * base};         // median 2 x base
    r.children_kbs[m][mixed] = {base, base};
    r.parent_kbs[m][read] = {base / 2, base / 2};
    r.parent_kbs[m][mixed] = {base / 4, base / 4};
    r.cpu_seconds[m][read] = {0.5, 0.7};
    r.cpu_seconds[m][mixed] = {0.1, 0.1};
    base *= 2;
  }
  return r;
}

TEST(tools_report, iozone_report_compares_every_mode_with_global_rwlock) {
  const iozone_report r = made_up_iozone_report(all_values(zram_lock_mode_names));
  const nlohmann::json j = r.to_json();
  EXPECT_EQ(j["config"]["threads"], 2u);
  EXPECT_EQ(j["config"]["size_per_thread"], 1u << 20);
  EXPECT_EQ(j["machine"], "Test CPU, 2 CPUs");
  EXPECT_EQ(j["load_average"], "0.10 0.20 0.30");
  ASSERT_EQ(j["tests"].size(), 2u);
  const auto& read = j["tests"][0];
  EXPECT_EQ(read["test"], "Read");
  EXPECT_EQ(read["modes"]["global_rwlock"]["median_kbs"], 2000.0);
  EXPECT_EQ(read["modes"]["slot_cas"]["rounds"], nlohmann::json({2000.0, 6000.0}));
  EXPECT_EQ(read["modes"]["slot_bitlock"]["cpu_seconds_median"], 0.6);
  EXPECT_EQ(read["ratio_to_global_rwlock"]["slot_cas"]["ratio"], 2.0);
  EXPECT_EQ(read["ratio_to_global_rwlock"]["slot_bitlock"]["min"], 4.0);
  EXPECT_EQ(read["parent_ratio_to_global_rwlock"]["slot_bitlock"]["ratio"], 4.0);
  EXPECT_EQ(read["seed_ratio"], 1.5);
  EXPECT_FALSE(j["tests"][1].contains("seed_ratio")) << "the seed has no Mixed workload row here";
  EXPECT_FALSE(j.contains("zram"));
  const std::string t = text_of(r);
  EXPECT_TRUE(contains(t, "uswap iozone: 2 threads, 16.00 KiB records, 1.00 MiB per thread, lzo, "
                          "50% compressible, 2 rounds (each test run once per mode")) << t;
  EXPECT_TRUE(contains(t, "machine: Test CPU, 2 CPUs, load average at the end 0.10 0.20 0.30\n"));
  EXPECT_TRUE(contains(t, "Test              global_rwlock       slot_cas   slot_bitlock"
                          "       slot_cas/global   slot_bitlock/global   seed CAS/base\n"))
      << t;
  EXPECT_TRUE(contains(t, "Read                    2000.00        4000.00        8000.00"
                          "     2.000 [2.00-2.00]     4.000 [4.00-4.00]           1.500\n"))
      << t;
  EXPECT_TRUE(contains(t, "parent sees (all bytes / wall time), ratio to global_rwlock:")) << t;
  EXPECT_FALSE(contains(t, "Initial write"));
}

TEST(tools_report, iozone_report_of_one_mode_has_no_ratios_and_shows_device_and_locks) {
  iozone_report r = made_up_iozone_report({zram_lock_mode::slot_cas});
  r.device = made_up_zram_report();
  r.locks = iozone_report::lock_table{"slot_cas", {lock_row("zram0: slot lock", 5, 1, 10, 10)}};
  const nlohmann::json j = r.to_json();
  EXPECT_FALSE(j["tests"][0].contains("ratio_to_global_rwlock"));
  EXPECT_EQ(j["zram"]["name"], "zram7");
  const std::string t = text_of(r);
  EXPECT_FALSE(contains(t, "/global")) << t;
  EXPECT_FALSE(contains(t, "seed:")) << t;
  EXPECT_TRUE(contains(t, "zram device after the last round (slot_cas):\nNAME")) << t;
  EXPECT_TRUE(contains(t, "lock statistics of the last round's slot_cas device (all classes):\n"));
  EXPECT_TRUE(contains(t, "zram0: slot lock")) << t;
}

// --- swapbench --------------------------------------------------------------------------------

TEST(tools_report, swapbench_report_ratios_against_global) {
  swapbench_report r;
  r.cpus = 2;
  r.cpu_model = "Test CPU";
  r.config.threads = {4};
  r.config.rounds = 3;
  r.config.modes = *parse_swapbench_modes("cluster,global");
  swapbench_mode_result cluster{r.config.modes[0], {3e6, 6e6, 9e6}, {1e5, 2e5, 3e5},
                                {1.0, 1.5, 2.0}, {4e6, 5e6, 6e6}, {}, 1000};
  cluster.locks = {lock_row("cluster: cluster_lock", 2000, 10, 5000, 900),
                   lock_row("cluster: slots_cache", 0, 0, 0, 0)};
  swapbench_mode_result global{r.config.modes[1], {2e6, 3e6, 4e6}, {1e5, 1e5, 1e5},
                               {1.0, 1.0, 1.0}, {3e6, 3e6, 3e6}, {}, 0};
  r.result.per = {{cluster, global}};
  EXPECT_EQ(r.base_index(), 1u);
  const nlohmann::json j = r.to_json();
  EXPECT_EQ(j["machine"]["cpus"], 2u);
  EXPECT_EQ(j["config"]["modes"], nlohmann::json({"cluster", "global"}));
  EXPECT_EQ(j["ratio_baseline"], "global");
  const auto& m = j["results"][0]["modes"][0];
  EXPECT_EQ(m["mode"], "cluster");
  EXPECT_EQ(m["median_ops_per_sec"], 6e6);
  EXPECT_EQ(m["ratio_to_baseline"], 2.0);
  EXPECT_EQ(m["slot_cache"], "on");
  EXPECT_EQ(m["locks"][0]["per_op"], 2.0);
  EXPECT_EQ(m["locks"][0]["wait_avg_ns"], 500.0);
  EXPECT_EQ(m["locks"][0]["acquisitions"], 2000u);
  EXPECT_EQ(j["results"][0]["modes"][1]["ratio_to_baseline"], 1.0);
  const std::string t = text_of(r);
  EXPECT_TRUE(contains(t, "uswap swapbench: swap slot allocation, cluster vs global\n")) << t;
  EXPECT_TRUE(contains(t, "machine: 2 CPUs, Test CPU\n")) << t;
  EXPECT_TRUE(contains(t, "  cluster       on              6.00     3.00-9.00          2.00x")) << t;
  EXPECT_TRUE(contains(t, "ratio = median / median of global. seed 000: cluster/global = "
                          "2.11/1.61 GB/s = 1.31x (+30.7%)")) << t;
  EXPECT_TRUE(contains(t, "cluster: cluster_lock")) << t;
  EXPECT_FALSE(contains(t, "slots_cache")) << "a class never acquired is left out";
}

TEST(tools_report, swapbench_modes_parse) {
  auto m = parse_swapbench_modes("percpu-atomic-notag,global");
  ASSERT_TRUE(m.ok());
  ASSERT_EQ(m->size(), 2u);
  EXPECT_EQ((*m)[0].mode, swap_lock_mode::percpu);
  EXPECT_FALSE((*m)[0].percpu_inuse_counter);
  EXPECT_FALSE((*m)[0].freer_tag);
  EXPECT_EQ((*m)[1].label, "global");
  EXPECT_FALSE(parse_swapbench_modes("global,,cluster").ok());
  EXPECT_FALSE(parse_swapbench_modes("spin").ok());
}

// --- usemem -----------------------------------------------------------------------------------

usemem_result made_up_usemem_run(double kbps, bool clean) {
  usemem_result r;
  r.tasks = {{1 << 20, 1000, kbps / 2, 0, 256, 0, ""}, {1 << 20, 1000, kbps / 2, 0, 256, 0, ""}};
  r.total_kbps = kbps;
  r.wall_usecs = 1200;
  r.mismatches = clean ? 0 : 3;
  r.events.v[PSWPOUT] = 77;
  r.events.v[PSWPIN] = 55;
  r.swap.total = 1000;
  r.swap.inuse = 10;
  r.teardown_clean = true;
  r.locks = {lock_row("swap cluster_lock", 40, 1, 100, 100)};
  return r;
}

TEST(tools_report, usemem_report_of_one_run) {
  usemem_report r;
  r.config.tasks = 2;
  r.config.verify = true;
  r.combos = {{{swap_lock_mode::cluster, zram_lock_mode::slot_bitlock},
               {made_up_usemem_run(2048, true)}, {}}};
  ASSERT_TRUE(r.single());
  EXPECT_TRUE(r.clean());
  const nlohmann::json j = r.to_json();
  EXPECT_EQ(j["config"]["tasks"], 2u);
  EXPECT_EQ(j["config"]["mode"], "threads (-t)");
  EXPECT_FALSE(j.contains("combos"));
  EXPECT_EQ(j["run"]["total_kbps"], 2048.0);
  EXPECT_EQ(j["run"]["tasks"].size(), 2u);
  EXPECT_EQ(j["run"]["vmstat"]["pswpout"], 77u);
  EXPECT_EQ(j["run"]["swap"]["inuse_pages"], 10u);
  EXPECT_EQ(j["run"]["locks"][0]["name"], "swap cluster_lock");
  const std::string t = text_of(r);
  EXPECT_TRUE(contains(t, "1048576 bytes / 1000 usecs = 1024 KB/s\n")) << t;
  EXPECT_TRUE(contains(t, "total: 2097152 bytes, 2 tasks, 2048 KB/s (sum of tasks), wall 1200 "
                          "usecs\n")) << t;
  EXPECT_TRUE(contains(t, "verify: 0 mismatches in 512 pages read back")) << t;
  EXPECT_TRUE(contains(t, "swap-outs (pswpout) 77, swap-ins (pswpin) 55,")) << t;
  EXPECT_TRUE(contains(t, "exit: every frame, swap slot and zram object freed\n")) << t;
}

TEST(tools_report, usemem_report_of_alternating_rounds) {
  usemem_report r;
  r.config.tasks = 2;
  r.rounds = 2;
  r.combos = {{{swap_lock_mode::global, zram_lock_mode::slot_bitlock},
               {made_up_usemem_run(1000, true), made_up_usemem_run(3000, true)}, {}},
              {{swap_lock_mode::cluster, zram_lock_mode::slot_bitlock},
               {made_up_usemem_run(4000, true), made_up_usemem_run(4000, false)}, {}}};
  r.seed = seed_row{"000", "vm-scalability swap-w-seq", "swap-out throughput", 1.61, 2.11, 30.7,
                    "GB/s"};
  r.seed_source = "made up";
  ASSERT_FALSE(r.single());
  EXPECT_FALSE(r.clean()) << "a round with mismatches";
  const nlohmann::json j = r.to_json();
  ASSERT_EQ(j["combos"].size(), 2u);
  EXPECT_EQ(j["combos"][0]["swap_lock"], "global");
  EXPECT_EQ(j["combos"][0]["zram_lock"], "slot_bitlock");
  EXPECT_EQ(j["combos"][0]["kbps_median"], 2000.0);
  EXPECT_EQ(j["combos"][1]["ratio_to_first"], 2.0);
  EXPECT_EQ(j["combos"][1]["runs"].size(), 2u);
  EXPECT_EQ(j["seed_000"]["source"], "made up");
  std::string t = text_of(r);
  EXPECT_TRUE(contains(t, "round 1, swap global / zram slot_bitlock: 1000 KB/s, 77 swap-outs, 55 "
                          "swap-ins, 0 mismatches\nround 1, swap cluster / zram slot_bitlock: "))
      << t;
  EXPECT_TRUE(contains(t, "round 2, swap cluster / zram slot_bitlock: 4000 KB/s, 77 swap-outs, 55 "
                          "swap-ins, 3 mismatches\n")) << t;
  EXPECT_TRUE(contains(t, "  swap cluster / zram slot_bitlock                 4000         4000"
                          "         4000    2.000\n")) << t;
  EXPECT_TRUE(contains(t, "seed 000 (vm-scalability swap-w-seq, 16 processes, RAM-simulated PMEM): "
                          "global 1.61 -> cluster 2.11 GB/s")) << t;
  EXPECT_TRUE(contains(t, "lock contention, swap global / zram slot_bitlock (summed over 2 rounds)"));
  r.round_lines = false;
  EXPECT_FALSE(contains(text_of(r), "round 1,"));
}

// --- pft, aim9, rmap-bench --------------------------------------------------------------------

pft_result made_up_pft(double wall_rate, double cpu_rate, uint64_t errors = 0) {
  pft_result r;
  r.faults = 1000;
  r.wall_s = 0.5;
  r.user_s = 0.1;
  r.sys_s = 0.2;
  r.faults_per_wall_s = wall_rate;
  r.faults_per_cpu_s = cpu_rate;
  r.errors = errors;
  return r;
}

TEST(tools_report, pft_report_per_thread_count) {
  pft_report r;
  r.config.pages_per_thread = 512;
  r.config.reps = 2;
  r.rounds = 2;
  r.seed = {{"001", "page fault test", "2 threads fault/wsec", 100, 90, -10, ""},
            {"001", "page fault test", "2 threads flt/cpu/s", 100, 80, -20, ""}};
  r.results = {{2,
                {{rmap_lock_mode::spin, {made_up_pft(100, 10), made_up_pft(300, 30)}, {}},
                 {rmap_lock_mode::rwsem, {made_up_pft(300, 20), made_up_pft(500, 20)}, {}}}}};
  EXPECT_TRUE(r.clean());
  const nlohmann::json j = r.to_json();
  EXPECT_EQ(j["config"]["threads"], nlohmann::json({2}));
  EXPECT_EQ(j["config"]["mapping"], "shared file");
  const auto& res = j["results"][0];
  ASSERT_EQ(res["runs"].size(), 4u);
  // The runs in the order they ran: round 1 spin, round 1 rwsem, round 2 spin, round 2 rwsem.
  EXPECT_EQ(res["runs"][1]["rmap_lock"], "rwsem");
  EXPECT_EQ(res["runs"][1]["round"], 1u);
  EXPECT_EQ(res["runs"][2]["rmap_lock"], "spin");
  EXPECT_EQ(res["runs"][2]["fault_per_wsec"], 300.0);
  EXPECT_EQ(res["median"]["rwsem"]["fault_per_wsec"], 400.0);
  EXPECT_EQ(res["rwsem_over_spin"]["fault_per_wsec"], 2.0);
  EXPECT_EQ(res["rwsem_over_spin"]["flt_per_cpu_s"], 1.0);
  EXPECT_EQ(res["seed_001"]["flt_per_cpu_s"], nlohmann::json({100.0, 80.0, 0.8}));
  EXPECT_TRUE(res["locks_summed_over_rounds"]["spin"].is_array());
  const std::string t = text_of(r);
  EXPECT_TRUE(contains(t, "pft: shared file mapping, 512 pages per thread, 2 reps, 2 rounds")) << t;
  EXPECT_TRUE(contains(t, "  spin      2    2    0.10s    0.20s    0.50s         20.000"
                          "        200.000\n")) << t;
  EXPECT_TRUE(contains(t, "  rwsem/spin: fault/wsec +100.0%, flt/cpu/s +0.0%   (seed 001, 2 "
                          "threads: -10.0%, -20.0%)\n")) << t;
  EXPECT_TRUE(contains(t, "  lock contention, rwsem (summed over rounds):\n")) << t;
  r.results[0].modes[1].samples[1].errors = 1;
  EXPECT_FALSE(r.clean());
}

TEST(tools_report, aim9_report_with_and_without_both_modes) {
  aim9_result a;
  a.operations = 100;
  a.seconds = 0.5;
  a.per_second = 200;
  a.cpu_s = 0.25;
  a.teardown_clean = true;
  aim9_result b = a;
  b.per_second = 300;
  aim9_report r;
  r.config.test = aim9_test::exec;
  r.rounds = 1;
  r.seed = {{"001", "AIM9 exec_test", "sample 1", 10, 11, 10, ""}};
  r.modes = {{rmap_lock_mode::spin, {a}, {}}, {rmap_lock_mode::rwsem, {b}, {}}};
  EXPECT_TRUE(r.clean());
  EXPECT_STREQ(r.unit(), "Program Loads/second");
  nlohmann::json j = r.to_json();
  EXPECT_EQ(j["config"]["test"], "exec_test");
  EXPECT_EQ(j["runs"].size(), 2u);
  EXPECT_EQ(j["median"]["rwsem"]["per_cpu_second"], 400.0);
  EXPECT_EQ(j["rwsem_over_spin"], 1.5);
  EXPECT_EQ(j["seed_001"][0]["after"], 11.0);
  const std::string t = text_of(r);
  EXPECT_TRUE(contains(t, "round 1, rmap rwsem: exec_test 300.00 Program Loads/second (100 in "
                          "0.50 s)\n")) << t;
  EXPECT_TRUE(contains(t, "  rwsem/spin: +50.00%\n")) << t;
  EXPECT_TRUE(contains(t, "  seed 001 sample 1: 10.00 -> 11.00 Program Loads/second (+10.00%)\n"));
  EXPECT_TRUE(contains(t, "\nlock contention, rmap spin (summed over rounds):\n")) << t;
  r.modes.pop_back();
  j = r.to_json();
  EXPECT_FALSE(j.contains("rwsem_over_spin"));
  EXPECT_FALSE(j.contains("seed_001"));
  EXPECT_FALSE(contains(text_of(r), "rwsem/spin"));
  r.modes[0].samples[0].teardown_clean = false;
  EXPECT_FALSE(r.clean());
  EXPECT_TRUE(contains(text_of(r), ", NOT CLEAN\n"));
}

TEST(tools_report, rmap_bench_report) {
  rmap_bench_result a;
  a.accesses_per_s = 1000;
  a.faults_per_s = 100;
  a.walks_reclaimed = 5;
  rmap_bench_result b = a;
  b.accesses_per_s = 3000;
  rmap_bench_report r;
  r.config.threads = 3;
  r.config.forks = 4;
  r.rounds = 1;
  r.modes = {{rmap_lock_mode::spin, {a}, {lock_row("anon_vma->lock", 9, 1, 1, 1)}},
             {rmap_lock_mode::rwsem, {b}, {}}};
  EXPECT_TRUE(r.clean());
  const nlohmann::json j = r.to_json();
  EXPECT_EQ(j["config"]["swap_dev"], "ram");
  EXPECT_EQ(j["runs"][0]["reclaimed"], 5u);
  EXPECT_EQ(j["median"]["rwsem"]["accesses_per_s"], 3000.0);
  EXPECT_EQ(j["rwsem_over_spin"], 3.0);
  EXPECT_EQ(j["locks_summed_over_rounds"]["spin"][0]["name"], "anon_vma->lock");
  const std::string t = text_of(r);
  EXPECT_TRUE(contains(t, "round 1, rmap spin: 1000 accesses/s, 100 faults/s, 5 pages reclaimed\n"));
  EXPECT_TRUE(contains(t, "rmap-bench: 3 threads faulting through 4 forks of 4096 anon + 4096 "
                          "shared file pages on 4096 pages of RAM, 1 rounds alternating")) << t;
  EXPECT_TRUE(contains(t, "  rwsem/spin: 3.000x\n")) << t;
  r.modes[1].samples[0].mismatches = 1;
  EXPECT_FALSE(r.clean());
  EXPECT_TRUE(contains(text_of(r), ", ERRORS OR MISMATCHES\n"));
}

// --- uffdbench, bench seeds -------------------------------------------------------------------

TEST(tools_report, uffdbench_report_ratios_of_the_rounds_both_sides_ran) {
  uffdbench_report r;
  r.machine = "2-core Test CPU";
  r.date = "2026-01-01";
  r.size = 8 << 20;
  r.limit = 2 << 20;
  r.comp = "lz4";
  r.fault_mode = "sigbus";
  r.kernel = true;
  r.kernel_device = "zram0";
  r.patterns = {{"seq", {{{100, 0.1, 10}, uffdbench_side{50, 0.2, 20}},
                         {{300, 0.1, 10}, uffdbench_side{100, 0.2, 20}}}}};
  EXPECT_EQ(r.patterns[0].ratios(), (std::vector<double>{2.0, 3.0}));
  nlohmann::json j = r.to_json();
  EXPECT_EQ(j["patterns"]["seq"]["ratio_median"], 2.5);
  EXPECT_EQ(j["patterns"]["seq"]["ratio_min"], 2.0);
  EXPECT_EQ(j["patterns"]["seq"]["kernel_median_mbps"], 75.0);
  EXPECT_EQ(j["patterns"]["seq"]["rounds"][1]["kernel_pswpout"], 20u);
  std::string t = text_of(r);
  EXPECT_TRUE(contains(t, "kernel: swap on /dev/zram0, cgroup \n2-core Test CPU, 2026-01-01;"));
  EXPECT_TRUE(contains(t, "seq         2     300.0 ( 0.10,      10)           100.0 ( 0.20,      "
                          "20)\n")) << t;
  EXPECT_TRUE(contains(t, "seq     median uswap 200.0 MB/s, kernel 75.0 MB/s: uswap/kernel 2.50 "
                          "(rounds 2.00-3.00)\n")) << t;
  r.kernel = false;
  r.patterns = {{"rand", {{{100, 0.1, 10}, std::nullopt}}}};
  j = r.to_json();
  EXPECT_EQ(j["patterns"]["rand"]["kernel_median_mbps"], 0.0);
  EXPECT_EQ(j["patterns"]["rand"]["rounds"][0]["kernel_mbps"], 0.0);
  EXPECT_TRUE(contains(text_of(r), "swap on /dev/-, cgroup -\n"));
}

TEST(tools_report, seeds_run_json_and_text) {
  seeds_run run;
  run.machine = "2 CPUs, Test CPU";
  run.reference_source = "made up";
  run.rounds = 2;
  run.quick = true;
  seed_report s;
  s.id = "002";
  s.title = "zram: per-slot lock";
  s.baseline_form = "global_rwlock";
  s.patched_form = "slot_cas";
  bench_row row;
  row.experiment = "iozone";
  row.row = "Read";
  row.threads = 4;
  row.unit = "KB/s";
  row.forms = {{"global_rwlock", {100, 300}}, {"slot_cas", {300, 300}}};
  s.rows = {row};
  run.seeds = {s};
  const nlohmann::json j = run.to_json();
  EXPECT_EQ(j["command"], "bench seeds");
  EXPECT_EQ(j["quick"], true);
  const auto& m = j["seeds"][0]["rows"][0]["measured"];
  EXPECT_EQ(m["baseline"]["median"], 200.0);
  EXPECT_EQ(m["patched"]["form"], "slot_cas");
  EXPECT_EQ(m["change_pct"], 50.0);
  EXPECT_TRUE(j["seeds"][0]["rows"][0]["seed"].is_null());
  const std::string t = text_of(run);
  EXPECT_TRUE(contains(t, "uswap bench seeds --quick: 2 CPUs, Test CPU; seed figures from made "
                          "up\n\nseed 002: zram: per-slot lock\n")) << t;
  EXPECT_TRUE(contains(t, "| iozone | Read | 4 | KB/s | - | - | - | 200 (100-300) | 300 (300-300) "
                          "| **+50.0%** [+0.0%..+200.0%] |\n")) << t;
}

}  // namespace
}  // namespace uswap::tools
