// `uswap bench seeds`: the three seed tables reproduced side by side (see bench_seeds.h).
#include "bench_seeds.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "aim9.h"
#include "alternate_rounds.h"
#include "cli.h"
#include "iozone.h"
#include "machine_facts.h"
#include "pft.h"
#include "progress.h"
#include "report.h"
#include "seed_reference.h"
#include "swapbench.h"
#include "usemem.h"
#include "uswap/base/units.h"

namespace uswap::tools {

namespace {

using clock_type = std::chrono::steady_clock;

// Four significant figures, with k / M for large values (KB/s figures run to 10^7).
std::string num(double v) {
  const double a = std::fabs(v);
  if (a >= 1e6) return strprintf("%.3fM", v / 1e6);
  if (a >= 1e4) return strprintf("%.1fk", v / 1e3);
  if (a >= 100) return strprintf("%.0f", v);
  if (a >= 10) return strprintf("%.1f", v);
  return strprintf("%.3f", v);
}

std::string pct(double p) { return strprintf("%+.1f%%", p); }

// The seed's figures for `row` of `experiment` (exact row name), or nothing.
std::optional<seed_figures> seed_for(const seed_table& t, const std::string& row,
                                     const std::string& unit) {
  const seed_row* r = find_seed_row(t, row);
  if (!r || r->baseline <= 0) return std::nullopt;
  seed_figures s;
  s.baseline = r->baseline;
  s.patched = r->patched;
  // The published change where the file has one (seed 000's "30.7%" is the author's, from
  // unrounded figures; 2.11 / 1.61 gives 31.1%).
  s.change_pct = r->change_pct != 0 ? r->change_pct : (r->patched / r->baseline - 1) * 100;
  s.unit = r->unit.empty() ? unit : r->unit;
  s.source_rows = r->row;
  return s;
}

// `run(form)` for every form in alternating rounds, the order rotating from round to round (A B C,
// B C A, C A B ...) so that no form always runs first or last; says "<what>, round r/R, <form>"
// before each run.
template <class Form, class Run>
auto alternate_forms(const std::vector<Form>& forms, unsigned rounds, const seeds_progress_fn& say,
                     const std::string& what, Run&& run) {
  return run_alternating_rounds(
      forms, rounds,
      [&](unsigned r, Form f) {
        say(what + ", round " + std::to_string(r + 1) + "/" + std::to_string(rounds) + ", " +
            to_string(f));
        return run(f);
      },
      no_round_progress{}, round_order::rotate);
}

// A seed's report before its rows: which seed, its subject, its baseline and patched forms.
seed_report titled(std::string id, std::string title, std::string baseline, std::string patched) {
  seed_report rep;
  rep.id = std::move(id);
  rep.title = std::move(title);
  rep.baseline_form = std::move(baseline);
  rep.patched_form = std::move(patched);
  return rep;
}

// --- seed 000 ---------------------------------------------------------------------------------

result<seed_report> run_seed000(const seeds_options& o, unsigned rounds, const seed_table& ref,
                                const seeds_progress_fn& say) {
  seed_report rep = titled("000", "mm/swap: Add cluster lock (Huang Ying, 2016, merged for 4.11)",
                           "global", "cluster");
  const std::vector<unsigned> threads = o.threads.empty() ? std::vector<unsigned>{16} : o.threads;
  const std::vector<swap_lock_mode> forms = {swap_lock_mode::global, swap_lock_mode::cluster,
                                             swap_lock_mode::percpu};
  const uint64_t ram = o.usemem_ram ? o.usemem_ram : (o.quick ? 32ull << 20 : 128ull << 20);
  const uint64_t total = 2 * ram;

  rep.notes.push_back("usemem -n N, N tasks (separate address spaces, as swap-w-seq's processes) "
                      "write " + format_size(total) + " together (" + format_size(total) +
                      "/N each) on a machine with " + format_size(ram) +
                      " of RAM, so half goes out to swap on an uncompressed RAM device (the "
                      "seed's RAM-simulated PMEM); figure = sum over tasks of bytes / own time "
                      "(swap-w-seq's), GB = 10^9 bytes");
  for (unsigned n : threads) {
    bench_row row;
    row.experiment = "usemem -n (swap-w-seq)";
    row.row = "swap-out throughput";
    row.threads = n;
    row.unit = "GB/s";
    if (n == 16) row.seed = seed_for(ref, "swap-out throughput", "GB/s");
    auto measured = alternate_forms(
        forms, rounds, say, "seed 000: usemem -n " + std::to_string(n),
        [&](swap_lock_mode f) -> result<double> {
          usemem_config c;
          c.tasks = n;
          c.separate_mms = true;
          c.size = std::max<uint64_t>(page_size, round_up_to_page(total / n));
          c.ram = ram;
          c.swap_dev = swap_dev_kind::ram;
          c.swap_lock = f;
          auto res = run_usemem(c);
          if (!res) return res.error();
          if (res->errors || res->mismatches || !res->teardown_clean)
            return error(EIO, "usemem (" + std::string(to_string(f)) + ", " +
                                  std::to_string(n) + " tasks) failed: " +
                                  std::to_string(res->errors) + " task errors, " +
                                  std::to_string(res->mismatches) + " mismatches" +
                                  (res->teardown_clean ? "" : ", not clean at exit"));
          return res->total_kbps * 1024.0 / 1e9;
        });
    if (!measured) return measured.error();
    for (const auto& m : *measured) row.forms.push_back({to_string(m.mode), m.samples});
    rep.rows.push_back(std::move(row));
  }

  swapbench_config sb;
  sb.threads = threads;
  sb.rounds = rounds;
  sb.duration_s = o.swapbench_duration > 0 ? o.swapbench_duration : (o.quick ? 0.2 : 0.5);
  sb.lockstat_round = false;
  for (const char* f : {"global", "cluster", "percpu"}) sb.modes.push_back(*parse_swapbench_mode(f));
  if (status st = validate_swapbench(sb); !st.ok()) return st;
  rep.notes.push_back("swapbench: N threads swap slots out and in (get_swap_page, "
                      "swap_duplicate, put_swap_page, swapcache_prepare, swap_free, "
                      "swapcache_clear) with no page copy, " + strprintf("%.2f", sb.duration_s) +
                      " s per round; figure = slot operations per second (the seed published "
                      "none: this isolates the lock the seed changed)");
  auto sbr = run_swapbench(sb, say);
  if (!sbr) return sbr.error();
  for (size_t k = 0; k < threads.size(); ++k) {
    bench_row row;
    row.experiment = "swapbench";
    row.row = "slot operations";
    row.threads = threads[k];
    row.unit = "Mops/s";
    for (const auto& mr : sbr->per[k]) {
      form_series fs{mr.spec.label, {}};
      for (double v : mr.ops_per_sec) fs.rounds.push_back(v / 1e6);
      row.forms.push_back(std::move(fs));
    }
    rep.rows.push_back(std::move(row));
  }
  rep.charts.push_back({"seed000_usemem.png",
                        "seed 000: usemem -n N swap-out throughput (swap on a RAM device)",
                        "GB/s (sum over tasks)", "usemem tasks (usemem -n N)", "usemem -n (swap-w-seq)",
                        "swap-out throughput"});
  rep.charts.push_back({"seed000_swapbench.png", "seed 000: swapbench slot operations",
                        "M slot operations/s", "threads", "swapbench", "slot operations"});
  return rep;
}

// --- seed 002 ---------------------------------------------------------------------------------

result<seed_report> run_seed002(const seeds_options& o, unsigned rounds, const seed_table& ref,
                                const seeds_progress_fn& say) {
  seed_report rep = titled("002", "zram: remove global tb_lock by using lock-free CAS (Weijie Yang, 2014)",
                           "global_rwlock", "slot_cas");
  const std::vector<unsigned> threads = o.threads.empty() ? std::vector<unsigned>{4} : o.threads;
  const uint64_t size = o.iozone_size ? o.iozone_size : (o.quick ? 8ull << 20 : 48ull << 20);
  // More children than 4 would need more memory per device than the seed's 800 MB: keep the
  // total per device at most 4 x size.
  std::ostringstream note;
  note << "iozone -t N -r 16K -s " << format_size(size)
       << " (at most " << format_size(4 * size) << " per device: -s shrinks above 4 children), "
       << "lzo, 50% compressible records (+Z), every test of the seed; each round runs every "
          "test once per form back to back on fresh devices; figure = children-see KB/s";
  rep.notes.push_back(note.str());
  for (unsigned n : threads) {
    iozone_config c;
    c.threads = n;
    c.size = std::max<uint64_t>(16 * 1024, (n > 4 ? 4 * size / n : size) / (16 * 1024) * (16 * 1024));
    c.rounds = rounds;
    c.modes = {zram_lock_mode::global_rwlock, zram_lock_mode::slot_cas, zram_lock_mode::slot_bitlock};
    auto res = run_iozone(c, [&](const std::string& text, bool) {
      say("seed 002: -t " + std::to_string(n) + ", " + text.substr(text.find(':') + 2));
    });
    if (!res) return res.error();
    for (unsigned t = 0; t < iozone_nr_tests; ++t) {
      bench_row row;
      row.experiment = "iozone";
      row.row = name_of(iozone_test_names, static_cast<iozone_test>(t));
      row.threads = n;
      row.unit = "KB/s";
      if (n == 4) row.seed = seed_for(ref, row.row, "KB/s");
      for (auto m : c.modes) row.forms.push_back({std::string(to_string(m)), res->children_kbs.at(m)[t]});
      rep.rows.push_back(std::move(row));
    }
  }
  rep.charts.push_back({"seed002_iozone_read.png", "seed 002: iozone Read", "KB/s (children see)",
                        "iozone children (iozone -t N)", "iozone", "Read"});
  rep.charts.push_back({"seed002_iozone_mixed.png", "seed 002: iozone Mixed workload",
                        "KB/s (children see)", "iozone children (iozone -t N)", "iozone",
                        "Mixed workload"});
  return rep;
}

// --- seed 001 ---------------------------------------------------------------------------------

// The seed's three AIM9 samples of `experiment` summarised by their medians (the seed posted
// three runs, not an average).
std::optional<seed_figures> seed_samples(const seed_table& t, const std::string& experiment,
                                         const std::string& unit) {
  std::vector<double> b, p, c;
  std::string changes;
  for (const auto& r : t.rows) {
    if (r.experiment != experiment || r.baseline <= 0) continue;
    b.push_back(r.baseline);
    p.push_back(r.patched);
    c.push_back(r.change_pct != 0 ? r.change_pct : (r.patched / r.baseline - 1) * 100);
    changes += (changes.empty() ? "" : ", ") + pct(c.back());
  }
  if (b.empty()) return std::nullopt;
  seed_figures s;
  s.baseline = median(b);
  s.patched = median(p);
  s.change_pct = median(c);
  s.unit = unit;
  s.source_rows = "median of " + std::to_string(b.size()) + " samples (changes " + changes + ")";
  return s;
}

result<seed_report> run_seed001(const seeds_options& o, unsigned rounds, const seed_table& ref,
                                const seeds_progress_fn& say) {
  seed_report rep = titled("001", "RFC Conversion of reverse map locks to semaphores (Christoph Lameter, 2008)",
                           "spin", "rwsem");
  const std::vector<rmap_lock_mode> forms = {rmap_lock_mode::spin, rmap_lock_mode::rwsem};
  const std::vector<unsigned> threads =
      o.threads.empty() ? std::vector<unsigned>{1, 2, 4, 8} : o.threads;
  const uint64_t pages = o.quick ? 1024 : 8192;
  const double aim9_s = o.quick ? 0.3 : 1.0;
  rep.notes.push_back("pft: N threads of one mm fault in " + std::to_string(pages) +
                      " pages each of a shared file mapping, 3 reps (mmap, write every page, "
                      "munmap); fault/wsec = faults / wall time, flt/cpu/s = faults / the "
                      "threads' CPU time (the seed's 250k faults per thread scaled down)");
  rep.notes.push_back("AIM9 fork_test / exec_test: one loop forking the shell (and exec'ing a "
                      "small program) for " + strprintf("%.1f", aim9_s) +
                      " s; the seed's three samples are summarised by their medians");
  for (unsigned n : threads) {
    bench_row wall, cpu;
    wall.experiment = cpu.experiment = "pft (file-backed)";
    wall.row = "fault/wsec";
    cpu.row = "flt/cpu/s";
    wall.threads = cpu.threads = n;
    wall.unit = "faults/wall-s";
    cpu.unit = "faults/cpu-s";
    const std::string th = std::to_string(n) + (n == 1 ? " thread " : " threads ");
    wall.seed = seed_for(ref, th + "fault/wsec", "faults/wall-second");
    cpu.seed = seed_for(ref, th + "flt/cpu/s", "faults/cpu-second");
    auto measured = alternate_forms(
        forms, rounds, say, "seed 001: pft " + std::to_string(n) + " threads",
        [&](rmap_lock_mode f) -> result<pft_result> {
          pft_config c;
          c.threads = n;
          c.pages_per_thread = pages;
          c.rmap_lock = f;
          auto res = run_pft(c);
          if (res && res->errors)
            return error(EIO, "pft (" + std::string(to_string(f)) + "): " +
                                  std::to_string(res->errors) + " failed accesses");
          return res;
        });
    if (!measured) return measured.error();
    for (const auto& m : *measured) {
      wall.forms.push_back({to_string(m.mode), m.values(&pft_result::faults_per_wall_s)});
      cpu.forms.push_back({to_string(m.mode), m.values(&pft_result::faults_per_cpu_s)});
    }
    rep.rows.push_back(std::move(wall));
    rep.rows.push_back(std::move(cpu));
  }
  for (aim9_test t : {aim9_test::exec, aim9_test::fork}) {
    bench_row row;
    row.experiment = "AIM9";
    row.row = t == aim9_test::exec ? "exec_test" : "fork_test";
    row.threads = 1;
    row.unit = t == aim9_test::exec ? "program loads/s" : "task creations/s";
    row.seed = seed_samples(ref, "AIM9 " + row.row, row.unit);
    auto measured = alternate_forms(
        forms, rounds, say, "seed 001: aim9 " + row.row, [&](rmap_lock_mode f) -> result<double> {
          aim9_config c;
          c.test = t;
          c.seconds = aim9_s;
          c.rmap_lock = f;
          auto res = run_aim9(c);
          if (!res) return res.error();
          if (res->errors || !res->teardown_clean)
            return error(EIO, "aim9 " + row.row + " (" + std::string(to_string(f)) + "): " +
                                  std::to_string(res->errors) + " errors" +
                                  (res->teardown_clean ? "" : ", not clean at exit"));
          return res->per_second;
        });
    if (!measured) return measured.error();
    for (const auto& m : *measured) row.forms.push_back({to_string(m.mode), m.samples});
    rep.rows.push_back(std::move(row));
  }
  rep.charts.push_back({"seed001_pft.png", "seed 001: pft faults per wall-second (file mapping)",
                        "faults / wall second", "threads", "pft (file-backed)", "fault/wsec"});
  return rep;
}

}  // namespace

// --- rows -------------------------------------------------------------------------------------

double form_series::median() const { return tools::median(rounds); }
double form_series::min() const { return min_of(rounds); }
double form_series::max() const { return max_of(rounds); }

namespace {
std::vector<double> round_ratios(const bench_row& r, size_t k) {
  std::vector<double> out;
  const auto& a = r.forms[k].rounds;
  const auto& b = r.forms[0].rounds;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    if (b[i] > 0) out.push_back(a[i] / b[i]);
  return out;
}
}  // namespace

double bench_row::change_pct(size_t k) const {
  const double b = forms[0].median();
  return b > 0 ? (forms[k].median() / b - 1) * 100 : 0;
}
double bench_row::change_min_pct(size_t k) const {
  const auto r = round_ratios(*this, k);
  return r.empty() ? 0 : (*std::min_element(r.begin(), r.end()) - 1) * 100;
}
double bench_row::change_max_pct(size_t k) const {
  const auto r = round_ratios(*this, k);
  return r.empty() ? 0 : (*std::max_element(r.begin(), r.end()) - 1) * 100;
}

result<seeds_run> run_seed_benchmarks(const seeds_options& o, const seeds_progress_fn& progress) {
  for (const auto& s : o.only)
    if (s != "000" && s != "001" && s != "002")
      return error(EINVAL, "--only: unknown seed '" + s + "' (valid: 000, 001, 002)");
  for (unsigned t : o.threads)
    if (t == 0 || t > 64)
      return error(EINVAL, "--threads: " + std::to_string(t) + " is outside 1..64");
  auto wanted = [&](const char* id) {
    return o.only.empty() || std::find(o.only.begin(), o.only.end(), id) != o.only.end();
  };
  auto say = [&](const std::string& text) {
    if (progress) progress(text);
  };
  seeds_run run;
  run.quick = o.quick;
  run.rounds = o.rounds ? o.rounds : (o.quick ? 3 : 5);
  run.machine = machine_description();
  run.load_before = load_average();
  const std::string path = o.reference.empty() ? default_seed_results_path() : o.reference;
  using runner_fn = result<seed_report> (*)(const seeds_options&, unsigned, const seed_table&,
                                            const seeds_progress_fn&);
  const std::pair<const char*, runner_fn> seeds[] = {
      {"000", run_seed000}, {"001", run_seed001}, {"002", run_seed002}};
  for (const auto& [id, fn] : seeds) {
    if (!wanted(id)) continue;
    const seed_table ref = load_seed_rows(path, id);
    run.reference_source = ref.source;
    const auto t0 = clock_type::now();
    auto rep = fn(o, run.rounds, ref, say);
    if (!rep) return error(rep.error().code(), "seed " + std::string(id) + ": " +
                                                   std::string(rep.error().message()));
    rep->seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
    run.seeds.push_back(std::move(*rep));
  }
  run.load_after = load_average();
  return run;
}

// --- output -----------------------------------------------------------------------------------

void print_seed_report(std::ostream& out, const seeds_run& run, const seed_report& rep) {
  out << "seed " << rep.id << ": " << rep.title << "\n";
  if (!rep.available) {
    out << "| seed " << rep.id << " | " << rep.unavailable_reason << " |\n\n";
    return;
  }
  out << "baseline = " << rep.baseline_form << ", patched = " << rep.patched_form;
  if (!rep.rows.empty() && rep.rows.front().forms.size() > 2) {
    out << "; uswap also measures";
    for (size_t k = 2; k < rep.rows.front().forms.size(); ++k)
      out << " " << rep.rows.front().forms[k].form;
  }
  out << "\n";
  for (const auto& n : rep.notes) out << "  " << n << "\n";
  out << "machine: " << run.machine << "; " << run.rounds
      << " rounds per form, alternating; load average " << run.load_before << " at the start, "
      << run.load_after << " at the end; " << strprintf("%.0f", rep.seconds) << " s\n";
  out << "uswap cells: median (min-max over rounds); change: ratio of medians - 1 [min..max of "
         "the per-round ratios]\n\n";
  const size_t nf = rep.rows.empty() ? 0 : rep.rows.front().forms.size();
  out << "| experiment | row | threads | unit | seed " << rep.baseline_form << " | seed "
      << rep.patched_form << " | seed change | uswap " << rep.baseline_form << " | uswap "
      << rep.patched_form << " | uswap change |";
  for (size_t k = 2; k < nf; ++k)
    out << " uswap " << rep.rows.front().forms[k].form << " | change |";
  out << "\n|---|---|--:|---|--:|--:|--:|--:|--:|--:|";
  for (size_t k = 2; k < nf; ++k) out << "--:|--:|";
  out << "\n";
  for (const auto& r : rep.rows) {
    out << "| " << r.experiment << " | " << r.row << " | " << r.threads << " | " << r.unit
        << " | ";
    if (r.seed)
      out << num(r.seed->baseline) << " | " << num(r.seed->patched) << " | "
          << pct(r.seed->change_pct) << " | ";
    else
      out << "- | - | - | ";
    for (size_t k = 0; k < r.forms.size() && k < 2; ++k) {
      const auto& f = r.forms[k];
      out << num(f.median()) << " (" << num(f.min()) << "-" << num(f.max()) << ") | ";
    }
    if (r.forms.size() > 1)
      out << "**" << pct(r.change_pct(1)) << "** [" << pct(r.change_min_pct(1)) << ".."
          << pct(r.change_max_pct(1)) << "] |";
    for (size_t k = 2; k < r.forms.size(); ++k) {
      const auto& f = r.forms[k];
      out << " " << num(f.median()) << " (" << num(f.min()) << "-" << num(f.max()) << ") | "
          << pct(r.change_pct(k)) << " [" << pct(r.change_min_pct(k)) << ".."
          << pct(r.change_max_pct(k)) << "] |";
    }
    out << "\n";
  }
  out << "\n";
}

nlohmann::json seeds_run::to_json() const {
  const seeds_run& run = *this;
  nlohmann::json j;
  j["command"] = "bench seeds";
  j["machine"] = run.machine;
  j["load_average_start"] = run.load_before;
  j["load_average_end"] = run.load_after;
  j["rounds"] = run.rounds;
  j["quick"] = run.quick;
  j["seed_reference"] = run.reference_source;
  j["seeds"] = nlohmann::json::array();
  for (const auto& rep : run.seeds) {
    nlohmann::json s;
    s["id"] = rep.id;
    s["title"] = rep.title;
    s["baseline_form"] = rep.baseline_form;
    s["patched_form"] = rep.patched_form;
    s["available"] = rep.available;
    if (!rep.available) s["unavailable_reason"] = rep.unavailable_reason;
    s["notes"] = rep.notes;
    s["seconds"] = rep.seconds;
    s["rows"] = nlohmann::json::array();
    for (const auto& r : rep.rows) {
      nlohmann::json row;
      row["experiment"] = r.experiment;
      row["row"] = r.row;
      row["threads"] = r.threads;
      row["unit"] = r.unit;
      if (r.seed)
        row["seed"] = {{"baseline", r.seed->baseline},
                       {"patched", r.seed->patched},
                       {"change_pct", r.seed->change_pct},
                       {"unit", r.seed->unit},
                       {"csv_row", r.seed->source_rows}};
      else
        row["seed"] = nullptr;
      nlohmann::json forms = nlohmann::json::array();
      for (size_t k = 0; k < r.forms.size(); ++k) {
        const auto& f = r.forms[k];
        nlohmann::json jf = {{"form", f.form},     {"median", f.median()}, {"min", f.min()},
                             {"max", f.max()},     {"rounds", f.rounds}};
        if (k > 0)
          jf["change_pct"] = r.change_pct(k), jf["change_min_pct"] = r.change_min_pct(k),
          jf["change_max_pct"] = r.change_max_pct(k);
        forms.push_back(jf);
      }
      row["measured"] = {{"baseline", forms[0]},
                         {"patched", forms.size() > 1 ? forms[1] : nlohmann::json()},
                         {"change_pct", r.forms.size() > 1 ? r.change_pct(1) : 0.0},
                         {"forms", forms}};
      s["rows"].push_back(row);
    }
    j["seeds"].push_back(s);
  }
  return j;
}

void seeds_run::print(std::ostream& out) const {
  out << "uswap bench seeds" << (quick ? " --quick" : "") << ": " << machine
      << "; seed figures from " << reference_source << "\n\n";
  for (const auto& rep : seeds) print_seed_report(out, *this, rep);
}

result<std::vector<std::string>> write_seed_charts(const seeds_run& run, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return error(EIO, "--plot: cannot create " + dir + ": " + ec.message());
  std::vector<std::string> written;
  for (const auto& rep : run.seeds) {
    for (const auto& ch : rep.charts) {
      std::vector<const bench_row*> rows;
      for (const auto& r : rep.rows)
        if (r.experiment == ch.experiment && r.row == ch.row) rows.push_back(&r);
      if (rows.empty()) continue;
      std::sort(rows.begin(), rows.end(),
                [](const bench_row* a, const bench_row* b) { return a->threads < b->threads; });
      const std::string base = dir + "/" + ch.file.substr(0, ch.file.rfind('.'));
      const std::string dat = base + ".dat", gp = base + ".gp", png = dir + "/" + ch.file;
      {
        std::ofstream d(dat);
        d << "# threads";
        for (const auto& f : rows.front()->forms) d << " " << f.form << "_median min max";
        d << "\n";
        for (const bench_row* r : rows) {
          d << r->threads;
          for (const auto& f : r->forms) d << " " << f.median() << " " << f.min() << " " << f.max();
          d << "\n";
        }
        if (!d) return error(EIO, "--plot: cannot write " + dat);
      }
      {
        std::ofstream g(gp);
        g << "set terminal png size 800,480\n"
          << "set output '" << png << "'\n"
          << "set title \"" << ch.title << "\\n" << run.machine << ", median and min-max of "
          << run.rounds << " alternating rounds\" noenhanced\n"
          << "set xlabel '" << ch.xlabel << "' noenhanced\nset ylabel '" << ch.ylabel << "' noenhanced\n"
          << "set key outside below horizontal noenhanced\nset grid\nset yrange [0:*]\n";
        if (rows.size() > 1) g << "set logscale x 2\n";
        g << "set xrange [" << std::max(0.5, rows.front()->threads / 1.5) << ":"
          << rows.back()->threads * 1.5 << "]\n";
        g << "plot ";
        for (size_t k = 0; k < rows.front()->forms.size(); ++k) {
          const size_t c = 2 + 3 * k;
          g << (k ? ", " : "") << "'" << dat << "' using 1:" << c << ":" << c + 1 << ":" << c + 2
            << " with yerrorlines lw 2 title '" << rows.front()->forms[k].form
            << (k == 0 ? " (baseline)" : k == 1 ? " (patched)" : "") << "'";
        }
        g << "\n";
        if (!g) return error(EIO, "--plot: cannot write " + gp);
      }
      const std::string cmd = "gnuplot '" + gp + "' 2>&1";
      FILE* p = popen(cmd.c_str(), "r");
      if (!p) return error(EIO, "--plot: cannot run gnuplot");
      std::string msg;
      char buf[256];
      while (fgets(buf, sizeof buf, p)) msg += buf;
      const int rc = pclose(p);
      if (rc != 0)
        return error(EIO, "--plot: gnuplot failed on " + gp + " (is gnuplot installed? "
                          "scripts/install-deps installs it): " + msg);
      written.push_back(png);
    }
  }
  return written;
}

// --- the command ------------------------------------------------------------------------------

namespace {

struct cli_options {
  seeds_options o;
  std::string json_file;
  std::string plot_dir;
};

int run_cli(cli_options& c) {
  result<seeds_run> run = error(EINVAL, "not run");
  {
    progress_line pl;
    run = run_seed_benchmarks(c.o, [&](const std::string& text) { pl.show(text); });
  }
  if (!run) {
    std::cerr << "uswap bench seeds: " << run.error().message() << "\n";
    return run.error().code() == EINVAL ? 2 : 1;
  }
  run->print(std::cout);
  if (!c.json_file.empty()) {
    if (status st = write_json_file(c.json_file, run->to_json()); !st.ok()) {
      std::cerr << "uswap bench seeds: " << st.message() << "\n";
      return 1;
    }
  }
  if (!c.plot_dir.empty()) {
    auto w = write_seed_charts(*run, c.plot_dir);
    if (!w) {
      std::cerr << "uswap bench seeds: " << w.error().message() << "\n";
      return 1;
    }
    for (const auto& f : *w) std::cout << "chart: " << f << "\n";
  }
  return 0;
}

void add_bench_command(CLI::App& app, command_table& table) {
  auto* bench = app.add_subcommand("bench", "Whole-system benchmarks (bench seeds)");
  bench->require_subcommand(1);
  auto c = std::make_shared<cli_options>();
  auto* sub = bench->add_subcommand(
      "seeds",
      "Each seed's experiment with its baseline and patched lock forms (and uswap's further "
      "forms) in alternating rounds, beside the seed's published figures");
  sub->footer(
      "Seed 000: usemem -n N (swap-w-seq, swap on a RAM device) and swapbench; forms global,\n"
      "cluster, percpu. Seed 001: pft and AIM9 fork/exec; forms spin, rwsem. Seed 002: iozone\n"
      "-t N -r 16K; forms global_rwlock, slot_cas, slot_bitlock. Default thread counts are the\n"
      "seeds' own (16, 1-8, 4); --threads replaces them (a sweep for --plot).");
  sub->add_flag("--quick", c->o.quick, "Short rounds and small sizes (under 2 minutes)");
  sub->add_option("--only", c->o.only, "Seeds to run: 000, 001, 002 (comma-separated)")
      ->delimiter(',');
  sub->add_option("--threads", c->o.threads, "Thread counts, comma-separated (e.g. 1,2,4,8,16)")
      ->delimiter(',');
  sub->add_option("--rounds", c->o.rounds, "Rounds per form (default 3 with --quick, else 5)");
  sub->add_option("--json", c->json_file, "Write the results as JSON to this file");
  sub->add_option("--plot", c->plot_dir, "Write PNG charts (threads vs throughput) with gnuplot");
  sub->add_option("--reference", c->o.reference, "Seed figures (seed_results.csv)");
  add_size_option(*sub, "--usemem-ram", c->o.usemem_ram,
                  "Seed 000: the usemem machine's RAM (usemem writes twice it); 0: 32M quick, "
                  "128M full");
  add_size_option(*sub, "--iozone-size", c->o.iozone_size,
                  "Seed 002: bytes per iozone child; 0: 8M quick, 48M full");
  sub->add_option("--swapbench-duration", c->o.swapbench_duration,
                  "Seed 000: seconds per swapbench round; 0: 0.2 quick, 0.5 full");
  table.add(sub, [c] { return run_cli(*c); });
}

const command_registrar reg{70, add_bench_command};

}  // namespace
}  // namespace uswap::tools
