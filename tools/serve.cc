// `uswap serve`: a uswap zram device as an NBD export. Starts nbdkit with the uswap plugin
// (build/lib/nbdkit-uswap-plugin.so) in the foreground, waits until it accepts connections,
// prints the NBD URI on stdout (one line, for scripts) and what it serves on stderr, and runs
// until Ctrl-C / SIGTERM, which it passes on to nbdkit before cleaning up.
//
//   uswap serve --size 4G --comp lz4                  # unix socket in a fresh run directory
//   uswap serve --size 4G --port 10809                # TCP on 127.0.0.1 (--ip to change)
//   uswap serve --size 1G --run 'nbdinfo "$uri"'      # nbdkit --run: serve while CMD runs
//
// Statistics: the plugin rewrites the device's stat files - mm_stat, io_stat, bd_stat,
// debug_stat (the kernel's /sys/block/zram0 formats) and nbd_stat (requests per NBD command) -
// in the statistics directory every --stats-interval-ms, so `cat DIR/mm_stat` shows the live
// device while clients use it, as it would for a kernel zram device. The directory is
// --stats-dir, or `stats` in the run directory, which is removed when serve exits.
//
// Thread-safety: single-threaded; the signal handler only forwards the signal to nbdkit.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "cli.h"
#include "uswap/base/units.h"
#include "uswap/nbd/nbd_export.h"
#include "uswap/zram/zram.h"

namespace uswap::tools {
namespace {

namespace fs = std::filesystem;

struct config {
  uint64_t size = 4ull << 30;
  std::string comp = "lz4";
  std::string lock = "slot_bitlock";
  uint64_t mem_limit = 0;
  std::string backing;
  uint64_t backing_size = 0;
  uint32_t writeback_idle = 0;
  std::string unix_socket;
  int port = 0;
  std::string ip = "127.0.0.1";
  std::string stats_dir;
  uint32_t stats_interval_ms = 1000;
  unsigned threads = 0;
  std::string plugin;
  std::string nbdkit = "nbdkit";
  std::string run;
  bool verbose = false;
};

volatile sig_atomic_t child_pid = 0;
volatile sig_atomic_t got_signal = 0;

void forward_signal(int sig) {
  got_signal = sig;
  if (child_pid > 0) ::kill(child_pid, sig);
}

// The plugin: --plugin, $USWAP_NBDKIT_PLUGIN, lib/ beside the bin/ holding this executable
// (the build tree's layout: build/bin/uswap, build/lib/nbdkit-uswap-plugin.so), or the plugin
// directory `cmake --install` put it in, relative to bindir (tools/CMakeLists.txt defines
// USWAP_PLUGINDIR_FROM_BINDIR; an absolute directory replaces the executable's, as / does).
std::string find_plugin(const config& c) {
  if (!c.plugin.empty()) return c.plugin;
  if (const char* env = std::getenv("USWAP_NBDKIT_PLUGIN"); env && *env) return env;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  for (const fs::path& dir : {exe.parent_path().parent_path() / "lib",
                              exe.parent_path() / USWAP_PLUGINDIR_FROM_BINDIR}) {
    const fs::path p = dir / "nbdkit-uswap-plugin.so";
    if (fs::exists(p, ec)) return p.lexically_normal().string();
  }
  return {};
}

int fail(std::string msg) {
  if (msg.rfind("uswap: ", 0) == 0) msg.erase(0, 7);  // the plugin's messages name uswap already
  std::cerr << "uswap serve: " << msg << "\n";
  return 1;
}

// The plugin's key=value parameters, checked here with the plugin's own parser so that a
// mistake is reported before nbdkit starts (nbdkit would report it too, less directly).
result<std::vector<std::pair<std::string, std::string>>> plugin_params(const config& c,
                                                                       nbd_config& check) {
  std::vector<std::pair<std::string, std::string>> params = {
      {"size", std::to_string(c.size)},
      {"comp", c.comp},
      {"lock", c.lock},
      {"stats_interval_ms", std::to_string(c.stats_interval_ms)}};
  if (c.mem_limit) params.emplace_back("mem_limit", std::to_string(c.mem_limit));
  if (!c.backing.empty())
    params.emplace_back("backing", zram_backing_is_remote(c.backing)
                                       ? c.backing
                                       : fs::absolute(c.backing).string());
  if (c.backing_size) params.emplace_back("backing_size", std::to_string(c.backing_size));
  if (c.writeback_idle) params.emplace_back("writeback_idle", std::to_string(c.writeback_idle));
  for (const auto& [k, v] : params)
    if (status st = check.set(k, v); !st.ok()) return st;
  if (status st = check.complete(); !st.ok()) return st;
  return params;
}

// Where nbdkit listens, as an NBD URI; `socket` is set for a unix socket.
std::string listen_uri(const config& c, const std::string& run_dir, std::string& socket) {
  if (c.port)
    return "nbd://" + (c.ip.find(':') != std::string::npos ? "[" + c.ip + "]" : c.ip) + ":" +
           std::to_string(c.port) + "/";
  socket = c.unix_socket.empty() ? run_dir + "/nbd.sock" : fs::absolute(c.unix_socket).string();
  return "nbd+unix:///?socket=" + socket;
}

std::vector<std::string> nbdkit_args(const config& c, const std::string& pidfile,
                                     const std::string& socket, const std::string& plugin,
                                     const std::vector<std::pair<std::string, std::string>>& params) {
  std::vector<std::string> args = {c.nbdkit, "--exit-with-parent", "-f", "-P", pidfile};
  if (c.port)
    args.insert(args.end(), {"-p", std::to_string(c.port), "-i", c.ip});
  else
    args.insert(args.end(), {"-U", socket});
  if (c.threads) args.insert(args.end(), {"-t", std::to_string(c.threads)});
  if (c.verbose) args.push_back("-v");
  if (!c.run.empty()) args.insert(args.end(), {"--run", c.run});
  args.push_back(plugin);
  for (const auto& [k, v] : params) args.push_back(k + "=" + v);
  return args;
}

// Starts nbdkit with `args`, forwarding SIGINT, SIGTERM and SIGHUP to it.
pid_t start_nbdkit(std::vector<std::string> args) {
  struct sigaction sa{};
  sa.sa_handler = forward_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &sa, nullptr);
  std::cout.flush();
  const pid_t pid = ::fork();
  if (pid != 0) {
    child_pid = pid;
    return pid;
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  std::fprintf(stderr, "uswap serve: cannot run %s: %s\n", argv[0], std::strerror(errno));
  ::_exit(127);
}

// nbdkit writes its pidfile once it listens: only then is the URI worth printing. False when
// nbdkit exited first (its status in `wstatus`).
bool wait_until_listening(pid_t pid, const std::string& pidfile, int& wstatus) {
  struct stat sb{};
  while (::stat(pidfile.c_str(), &sb) != 0 || sb.st_size == 0) {
    if (::waitpid(pid, &wstatus, WNOHANG) == pid) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

void announce(const config& c, const nbd_config& check, pid_t pid, const std::string& uri,
              const std::string& stats_dir) {
  std::cout << uri << std::endl;
  std::cerr << "uswap serve: " << format_size(check.size) << " zram device (" << c.comp << ", "
            << c.lock << ", mem_limit "
            << (c.mem_limit ? format_size(c.mem_limit) : std::string("none"))
            << (c.backing.empty() ? std::string() : ", writeback to " + c.backing)
            << ") served by nbdkit (pid " << pid << ") at " << uri << "\n"
            << "uswap serve: statistics in " << stats_dir
            << "/{mm_stat,io_stat,bd_stat,debug_stat,nbd_stat}, rewritten every "
            << c.stats_interval_ms << " ms\n"
            << "uswap serve: Ctrl-C or SIGTERM stops it" << std::endl;
}

// nbdkit's end as serve's exit status.
int exit_status(const config& c, int wstatus) {
  if (WIFSIGNALED(wstatus)) {
    // nbdkit handles SIGINT/SIGTERM itself and exits 0; dying of one means it was not ready yet.
    if (got_signal && WTERMSIG(wstatus) == got_signal) return 0;
    return fail("nbdkit died of signal " + std::to_string(WTERMSIG(wstatus)));
  }
  const int rc = WEXITSTATUS(wstatus);
  if (rc != 0 && c.run.empty()) return fail("nbdkit exited with status " + std::to_string(rc));
  return rc;
}

int run_serve(const config& c) {
  if (!c.unix_socket.empty() && c.port)
    return fail("--unix and --port are alternatives: give one");
  nbd_config check;
  auto params = plugin_params(c, check);
  if (!params) return fail(std::string(params.error().message()));
  const std::string plugin = find_plugin(c);
  if (plugin.empty())
    return fail(std::string("cannot find nbdkit-uswap-plugin.so beside this executable (../lib/ or ") +
                USWAP_PLUGINDIR_FROM_BINDIR + "/); build it or pass --plugin PATH");
  char tmpl[] = "/tmp/uswap-serve.XXXXXX";
  if (!::mkdtemp(tmpl)) return fail(std::string("cannot create a run directory: ") + std::strerror(errno));
  const std::string run_dir = tmpl;
  struct cleanup {
    std::string dir;
    ~cleanup() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } cleanup_run_dir{run_dir};
  const std::string stats_dir =
      c.stats_dir.empty() ? run_dir + "/stats" : fs::absolute(c.stats_dir).string();
  params->emplace_back("statsdir", stats_dir);
  const std::string pidfile = run_dir + "/nbdkit.pid";
  std::string socket;
  const std::string uri = listen_uri(c, run_dir, socket);
  const pid_t pid = start_nbdkit(nbdkit_args(c, pidfile, socket, plugin, *params));
  if (pid < 0) return fail(std::string("fork: ") + std::strerror(errno));
  int wstatus = 0;
  bool exited = false;
  if (c.run.empty()) {
    exited = !wait_until_listening(pid, pidfile, wstatus);
    if (!exited) announce(c, check, pid, uri, stats_dir);
  }
  while (!exited) {
    const pid_t w = ::waitpid(pid, &wstatus, 0);
    if (w == pid) exited = true;
    else if (w < 0 && errno != EINTR) return fail(std::string("waitpid: ") + std::strerror(errno));
  }
  child_pid = 0;
  return exit_status(c, wstatus);
}

void add_serve_command(CLI::App& app, command_table& table) {
  static config c;
  auto* sub = app.add_subcommand(
      "serve",
      "Serve a zram device over NBD (nbdkit with the uswap plugin); prints the NBD URI, keeps "
      "mm_stat / io_stat / nbd_stat files up to date while it runs");
  add_size_option(*sub, "--size", c.size, "Device size");
  sub->add_option("--comp", c.comp, "Compression algorithm: lz4, zstd, lzo, lz4hc")
      ->capture_default_str();
  sub->add_option("--lock", c.lock, "Slot lock mode: slot_bitlock, slot_cas, global_rwlock")
      ->capture_default_str();
  add_size_option(*sub, "--mem-limit", c.mem_limit,
                  "Most memory the compressed pool may hold; writes beyond fail with ENOSPC "
                  "(0: none)");
  sub->add_option("--backing", c.backing,
                  "Writeback file (created if missing), or an NBD export's URI (nbd://HOST/NAME, "
                  "nbd+unix:///?socket=PATH) through libnbd");
  add_size_option(*sub, "--backing-size", c.backing_size,
                  "Writeback file size (0: the device size)");
  sub->add_option("--writeback-idle", c.writeback_idle,
                  "Every S seconds write pages idle for S seconds to --backing (0: never)")
      ->capture_default_str();
  auto* unix_opt = sub->add_option("--unix", c.unix_socket,
                                   "Listen on this unix socket (default: one in a fresh run "
                                   "directory under /tmp)");
  auto* port_opt = sub->add_option("--port", c.port, "Listen on this TCP port instead")
                       ->check(CLI::Range(1, 65535));
  unix_opt->excludes(port_opt);
  sub->add_option("--ip", c.ip, "Address to listen on with --port")->capture_default_str();
  sub->add_option("--stats-dir", c.stats_dir,
                  "Directory for the statistics files (default: stats/ in the run directory)");
  sub->add_option("--stats-interval-ms", c.stats_interval_ms, "How often they are rewritten")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub->add_option("-t,--threads", c.threads, "nbdkit worker threads per connection (0: default)");
  sub->add_option("--plugin", c.plugin,
                  "Path of nbdkit-uswap-plugin.so (default: ../lib/ beside uswap)");
  sub->add_option("--nbdkit", c.nbdkit, "The nbdkit executable")->capture_default_str();
  sub->add_option("--run", c.run,
                  "Serve only while this shell command runs ($uri, $unixsocket... set), and "
                  "exit with its status (nbdkit --run)");
  sub->add_flag("-v,--verbose", c.verbose, "nbdkit -v: log every request");
  table.add(sub, [] { return run_serve(c); });
}

const command_registrar reg{60, add_serve_command};

}  // namespace
}  // namespace uswap::tools
