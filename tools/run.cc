// `uswap run --limit 256M [--comp lz4] -- PROGRAM ARGS`: runs a program with its large anonymous
// memory paged by a uswap pager (src/uffd/preload/preload.cc), so that at most --limit bytes of
// it are resident and the rest is compressed in zram under swap slots. At exit, prints for every
// process of the program that paged memory: peak resident, swap-outs, swap-ins, compression
// ratio, time spent in faults.
//
// The shim, libuswap-preload.so, is found next to this executable (the build puts both in
// build/bin). It is added to LD_PRELOAD; the settings go in USWAP_* variables; each process
// appends a JSON line to a statistics file this command reads after the program exits. The exit
// status is the program's (128 + signal if it was killed).
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli.h"
#include "uswap/compress/zcomp.h"
#include "uswap/uffd/pager.h"

namespace uswap::tools {
namespace {

struct run_config {
  uint64_t limit = 256ull << 20;
  std::string comp = "lz4";
  uint64_t threshold = 1ull << 20;
  uint64_t max_size = 0;  // 0: the pager's default
  uint64_t swap = 0;      // 0: max_size
  std::string fault_mode = "sigbus";
  std::string access = "auto";
  bool json = false;
  std::vector<std::string> command;
};

std::string self_dir() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string p(buf, static_cast<size_t>(n));
  const auto slash = p.rfind('/');
  return slash == std::string::npos ? "." : p.substr(0, slash);
}

std::string mib(uint64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f MiB", double(bytes) / (1 << 20));
  return b;
}

int run_program(const run_config& c) {
  if (c.command.empty()) {
    std::cerr << "uswap run: no program given (uswap run --limit SIZE -- PROGRAM ARGS)\n";
    return 2;
  }
  if (auto m = parse_fault_mode(c.fault_mode); !m) {
    std::cerr << "uswap run: " << m.error().to_string() << "\n";
    return 2;
  }
  if (auto a = parse_uffd_access(c.access); !a) {
    std::cerr << "uswap run: " << a.error().to_string() << "\n";
    return 2;
  }
  if (!zcomp::available_algorithm(c.comp)) {
    std::cerr << "uswap run: unknown compression algorithm '" << c.comp << "'\n";
    return 2;
  }
  if (c.limit < 64 * 4096) {
    std::cerr << "uswap run: --limit must be at least 256K\n";
    return 2;
  }
  const std::string shim = self_dir() + "/libuswap-preload.so";
  if (::access(shim.c_str(), R_OK) != 0) {
    std::cerr << "uswap run: " << shim << " not found: the preload shim is built next to uswap "
              << "(not in sanitizer builds)\n";
    return 1;
  }
  char stats_path[] = "/tmp/uswap-run-XXXXXX";
  const int sfd = ::mkstemp(stats_path);
  if (sfd < 0) {
    std::cerr << "uswap run: cannot create a statistics file: " << std::strerror(errno) << "\n";
    return 1;
  }
  ::close(sfd);

  std::string preload = shim;
  if (const char* old = ::getenv("LD_PRELOAD"); old && *old) preload += std::string(":") + old;
  const pid_t pid = ::fork();
  if (pid < 0) {
    std::cerr << "uswap run: fork: " << std::strerror(errno) << "\n";
    ::unlink(stats_path);
    return 1;
  }
  if (pid == 0) {
    ::setenv("LD_PRELOAD", preload.c_str(), 1);
    ::setenv("USWAP_LIMIT", std::to_string(c.limit).c_str(), 1);
    ::setenv("USWAP_COMP", c.comp.c_str(), 1);
    ::setenv("USWAP_THRESHOLD", std::to_string(c.threshold).c_str(), 1);
    if (c.max_size) ::setenv("USWAP_MAX_SIZE", std::to_string(c.max_size).c_str(), 1);
    if (c.swap) ::setenv("USWAP_SWAP_SIZE", std::to_string(c.swap).c_str(), 1);
    ::setenv("USWAP_FAULT_MODE", c.fault_mode.c_str(), 1);
    ::setenv("USWAP_ACCESS", c.access.c_str(), 1);
    ::setenv("USWAP_STATS_FILE", stats_path, 1);
    std::vector<char*> argv;
    for (const std::string& a : c.command) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr, "uswap run: cannot run %s: %s\n", argv[0], std::strerror(errno));
    ::_exit(127);
  }
  // The program gets the terminal's signals; uswap run waits for it and reports.
  ::signal(SIGINT, SIG_IGN);
  ::signal(SIGQUIT, SIG_IGN);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);

  std::vector<nlohmann::json> procs;
  std::ifstream in(stats_path);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    try {
      procs.push_back(nlohmann::json::parse(line));
    } catch (const std::exception&) {
      std::cerr << "uswap run: unreadable statistics line: " << line << "\n";
    }
  }
  ::unlink(stats_path);

  if (c.json) {
    nlohmann::json out{{"exit_status", rc}, {"processes", procs}};
    std::cerr << out.dump() << "\n";
    return rc;
  }
  if (procs.empty()) {
    std::cerr << "uswap run: no statistics (the program paged nothing, or ended without running "
                 "its exit handlers)\n";
    return rc;
  }
  for (const auto& p : procs) {
    const uint64_t out_bytes = p.value("swap_out_bytes", uint64_t{0});
    const uint64_t comp_bytes = p.value("compressed_bytes", uint64_t{0});
    char ratio[32] = "-";
    if (comp_bytes) std::snprintf(ratio, sizeof ratio, "%.2fx", double(out_bytes) / double(comp_bytes));
    std::cerr << "uswap run: " << p.value("program", std::string("?")) << " (pid "
              << p.value("pid", 0) << ", " << p.value("mode", std::string("?")) << ", "
              << p.value("uffd", std::string("?")) << ")\n"
              << "  peak resident   " << mib(p.value("peak_resident_bytes", uint64_t{0}))
              << " of a " << mib(p.value("limit_bytes", uint64_t{0})) << " limit\n"
              << "  swap-outs       " << p.value("swap_outs", uint64_t{0}) << " pages ("
              << mib(out_bytes) << " compressed to " << mib(comp_bytes) << ", ratio " << ratio
              << "); " << p.value("clean_evictions", uint64_t{0}) << " clean and "
              << p.value("zero_evictions", uint64_t{0}) << " zero pages dropped\n"
              << "  swap-ins        " << p.value("swap_ins", uint64_t{0}) << " pages\n"
              << "  faults          " << p.value("faults", uint64_t{0}) << " missing + "
              << p.value("wp_faults", uint64_t{0}) << " write-protect, "
              << double(p.value("fault_ns", uint64_t{0})) / 1e6 << " ms in faults of "
              << double(p.value("run_ns", uint64_t{0})) / 1e6 << " ms\n";
    if (p.value("overcharges", uint64_t{0}))
      std::cerr << "  overcharges     " << p.value("overcharges", uint64_t{0})
                << " (faults mapped above the limit: everything else was pinned)\n";
  }
  return rc;
}

void add_run_command(CLI::App& app, command_table& table) {
  static run_config c;
  auto* sub = app.add_subcommand(
      "run",
      "Run a program with its large anonymous memory paged through uswap (userfaultfd + zram): "
      "uswap run --limit 256M -- PROGRAM ARGS");
  add_size_option(*sub, "--limit", c.limit, "Most bytes of routed memory resident at once");
  sub->add_option("--comp", c.comp, "zram compression: lz4, lz4hc, zstd, lzo")
      ->capture_default_str();
  add_size_option(*sub, "--threshold", c.threshold,
                  "Route malloc/mmap requests of at least this size");
  add_size_option(*sub, "--max-size", c.max_size, "Virtual size of the arena (0: 4G)");
  add_size_option(*sub, "--swap", c.swap, "Swap space in zram (0: the arena size)");
  sub->add_option("--fault-mode", c.fault_mode,
                  "sigbus (faults resolved in the faulting thread) or handler-thread")
      ->capture_default_str();
  sub->add_option("--access", c.access,
                  "userfaultfd to ask for: auto, full (kernel-mode faults), user-mode-only")
      ->capture_default_str();
  sub->add_flag("--json", c.json, "Print the statistics as JSON (on stderr)");
  sub->add_option("command", c.command, "PROGRAM and its arguments, after --")->required();
  table.add(sub, [] { return run_program(c); });
}

const command_registrar reg{70, add_run_command};

}  // namespace
}  // namespace uswap::tools
