// `uswap aim9 fork|exec`: AIM9's fork_test and exec_test on a uswap machine (see aim9.h), with
// the rmap lock modes in alternating rounds and seed 001's AIM9 samples beside.
#include "aim9.h"

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
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

// The table's names are string literals, so data() is a NUL-terminated C string.
const char* to_string(aim9_test t) noexcept { return name_of(aim9_test_names, t).data(); }

namespace {

status touch_pages(mm_struct& mm, uint64_t base, uint64_t first, uint64_t n, access_type type) {
  for (uint64_t p = first; p < first + n; ++p)
    if (status st = mm.access(base + pages_to_bytes(p), 8, type,
                              [&](uint64_t, std::span<std::byte, page_size> pg) {
                                if (type == access_type::write)
                                  reinterpret_cast<uint64_t*>(pg.data())[0] = p;
                              });
        !st.ok())
      return st;
  return {};
}

}  // namespace

result<aim9_result> run_aim9(const aim9_config& cfg) {
  if (!(cfg.seconds > 0)) return error(EINVAL, "aim9: the duration must be positive");
  if (cfg.threads == 0) return error(EINVAL, "aim9: at least one thread");
  machine_options mo;
  mo.ram = uint64_t{256} << 20;
  mo.rmap_lock = cfg.rmap_lock;
  lockstat::enable(true);
  auto mr = machine::create(mo);
  if (!mr) return mr.error();
  std::unique_ptr<machine> m = std::move(*mr);
  aim9_result res;
  {
    auto text = file::create(*m, pages_to_bytes(64), "sh-text");
    auto data = file::create(*m, pages_to_bytes(16), "sh-data");
    auto prog = file::create(*m, pages_to_bytes(24), "prog");
    if (!text || !data || !prog) return error(ENOMEM, "aim9: cannot create the files");
    // The shell: text, data, heap and stack, all in use.
    auto shell = m->mm_alloc();
    auto t = shell->mmap_file(*text, 0, pages_to_bytes(64), false, PROT_READ);
    auto d = shell->mmap_file(*data, 0, pages_to_bytes(16), false, PROT_READ | PROT_WRITE);
    auto h = shell->mmap(pages_to_bytes(cfg.heap_pages));
    auto s = shell->mmap(pages_to_bytes(16));
    if (!t || !d || !h || !s) return error(ENOMEM, "aim9: cannot map the shell");
    for (status st : {touch_pages(*shell, *t, 0, 32, access_type::read),
                      touch_pages(*shell, *d, 0, 8, access_type::write),
                      touch_pages(*shell, *h, 0, cfg.heap_pages, access_type::write),
                      touch_pages(*shell, *s, 12, 4, access_type::write)})
      if (!st.ok()) return st;
    const std::vector<mm_struct::exec_mapping> image = {
        {*prog, 0, pages_to_bytes(16), false, PROT_READ, 0},
        {*prog, pages_to_bytes(16), pages_to_bytes(8), false, PROT_READ | PROT_WRITE, 0},
        {nullptr, 0, pages_to_bytes(8), false, PROT_READ | PROT_WRITE, 0},   // bss
        {nullptr, 0, pages_to_bytes(8), false, PROT_READ | PROT_WRITE, 0}};  // stack

    lockstat::reset_all();
    std::atomic<uint64_t> ops{0}, errors{0};
    std::atomic<double> cpu{0};
    std::barrier start(static_cast<std::ptrdiff_t>(cfg.threads) + 1);
    std::atomic<bool> stop{false};
    std::vector<std::thread> ts;
    for (unsigned i = 0; i < cfg.threads; ++i) {
      ts.emplace_back([&] {
        start.arrive_and_wait();
        const cpu_times c0 = thread_times();
        uint64_t mine = 0;
        while (!stop.load(std::memory_order_relaxed)) {
          auto child = shell->fork();
          if (!child) {
            errors.fetch_add(1);
            break;
          }
          mm_struct& c = **child;
          if (cfg.test == aim9_test::fork) {
            // The child runs briefly (one copy-on-write fault on its stack) and exits.
            if (!touch_pages(c, *s, 15, 1, access_type::write).ok()) errors.fetch_add(1);
          } else {
            auto a = c.exec(image);
            if (!a || !touch_pages(c, (*a)[0], 0, 8, access_type::read).ok() ||
                !touch_pages(c, (*a)[1], 0, 2, access_type::write).ok() ||
                !touch_pages(c, (*a)[2], 0, 2, access_type::write).ok() ||
                !touch_pages(c, (*a)[3], 7, 1, access_type::write).ok())
              errors.fetch_add(1);
          }
          child->reset();  // exit
          ++mine;
        }
        ops.fetch_add(mine);
        cpu.fetch_add((thread_times() - c0).total);
      });
    }
    res.seconds = rmap_util::run_timed(start, stop, ts, cfg.seconds);
    res.operations = ops.load();
    res.per_second = res.operations / res.seconds;
    res.cpu_s = cpu.load();
    res.errors = errors.load();
    res.events = m->events();
    res.locks = rmap_util::active_locks();
  }
  m->lru_add_drain_all();
  res.teardown_clean = m->nr_free_pages() == m->mem().nr_pages();
  return res;
}

// --- The report -------------------------------------------------------------------------------

namespace {

// Operations per CPU-second of the loops.
double per_cpu_second(const aim9_result& r) { return r.operations / std::max(r.cpu_s, 1e-9); }

}  // namespace

bool aim9_report::clean() const {
  for (const auto& m : modes)
    for (const aim9_result& r : m.samples)
      if (r.errors || !r.teardown_clean) return false;
  return true;
}

const char* aim9_report::unit() const {
  return config.test == aim9_test::fork ? "Task Creations/second" : "Program Loads/second";
}

nlohmann::json aim9_report::to_json() const {
  nlohmann::json out;
  out["config"] = {{"test", std::string(to_string(config.test)) + "_test"},
                   {"seconds", config.seconds}, {"threads", config.threads},
                   {"heap_pages", config.heap_pages}, {"rounds", rounds}};
  rmap_util::for_each_run(modes, [&](unsigned round, rmap_lock_mode md, const aim9_result& r) {
    out["runs"].push_back({{"rmap_lock", to_string(md)}, {"round", round + 1},
                           {"operations", r.operations}, {"seconds", r.seconds},
                           {"per_second", r.per_second}, {"cpu_s", r.cpu_s},
                           {"errors", r.errors}, {"teardown_clean", r.teardown_clean}});
  });
  for (const auto& m : modes) {
    const auto v = m.values(&aim9_result::per_second);
    out["median"][to_string(m.mode)] = {{"per_second", median(v)}, {"rounds", v},
                                        {"per_cpu_second", median(m.values(per_cpu_second))}};
  }
  out["locks_summed_over_rounds"] = rmap_util::locks_by_mode(modes);
  if (const auto ratio = rmap_util::rwsem_over_spin(modes, &aim9_result::per_second)) {
    out["rwsem_over_spin"] = *ratio;
    for (const seed_row& r : seed)
      out["seed_001"].push_back(
          {{"row", r.row}, {"before", r.baseline}, {"after", r.patched}, {"ratio", r.ratio()}});
  }
  return out;
}

void aim9_report::print(std::ostream& out) const {
  const char* test = to_string(config.test);
  rmap_util::for_each_run(modes, [&](unsigned round, rmap_lock_mode md, const aim9_result& r) {
    out << strprintf("round %u, rmap %s: %s_test %.2f %s (%llu in %.2f s)%s\n", round + 1,
                     to_string(md), test, r.per_second, unit(),
                     static_cast<unsigned long long>(r.operations), r.seconds,
                     r.errors ? ", ERRORS" : (r.teardown_clean ? "" : ", NOT CLEAN"));
  });
  out << strprintf("\naim9 %s_test, %u rounds alternating (median, min-max):\n", test, rounds);
  for (const auto& m : modes) {
    const auto v = m.values(&aim9_result::per_second);
    out << strprintf("  %-6s %12.2f %s  (%.2f - %.2f), %.2f per CPU-second\n", to_string(m.mode),
                     median(v), unit(), min_of(v), max_of(v),
                     median(m.values(per_cpu_second)));
  }
  if (const auto ratio = rmap_util::rwsem_over_spin(modes, &aim9_result::per_second)) {
    out << strprintf("  rwsem/spin: %+.2f%%\n", (*ratio - 1) * 100);
    for (const seed_row& r : seed)
      out << strprintf("  seed 001 %s: %.2f -> %.2f %s (%+.2f%%)\n", r.row.c_str(), r.baseline,
                       r.patched, unit(), (r.ratio() - 1) * 100);
  }
  rmap_util::print_lock_tables(out, modes, "\nlock contention, rmap ");
}

// --- The command ------------------------------------------------------------------------------

namespace {

using cli_options = rmap_util::options<aim9_config>;

int run_cli(const cli_options& o, aim9_test test) {
  aim9_report rep;
  rep.config = o.cfg;
  rep.config.test = test;
  rep.seed = rmap_util::seed001_rows(test == aim9_test::fork ? "AIM9 fork_test" : "AIM9 exec_test");
  return rmap_util::run_and_print("aim9", rep, o, run_aim9);
}

void add_options(CLI::App* sub, cli_options& o) {
  sub->add_option("--seconds", o.cfg.seconds, "Duration of each measurement")->default_str("1");
  sub->add_option("-t,--threads", o.cfg.threads, "Concurrent loops on the same shell")
      ->capture_default_str();
  sub->add_option("--heap-pages", o.cfg.heap_pages, "The shell's touched heap pages")
      ->capture_default_str();
  rmap_util::add_round_options(*sub, o);
}

void add_aim9_command(CLI::App& app, command_table& table) {
  auto* sub = app.add_subcommand("aim9", "AIM9's fork_test and exec_test (seed 001), rmap lock spin vs rwsem");
  sub->require_subcommand(1);
  auto of = std::make_shared<cli_options>();
  auto* f = sub->add_subcommand("fork", "fork_test: fork the shell, the child writes its stack and exits");
  add_options(f, *of);
  table.add(f, [of] { return run_cli(*of, aim9_test::fork); });
  auto oe = std::make_shared<cli_options>();
  auto* e = sub->add_subcommand("exec", "exec_test: fork the shell, the child execs a small program and exits");
  add_options(e, *oe);
  table.add(e, [oe] { return run_cli(*oe, aim9_test::exec); });
}

const command_registrar reg{61, add_aim9_command};

}  // namespace
}  // namespace uswap::tools
