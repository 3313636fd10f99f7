// `uswap uffdbench`: usemem-style writes over real memory paged by a uswap region, side by side
// with the kernel's own swap to a zram device under a memory cgroup of the same limit, on the
// same data, in alternating rounds (A B A B ...).
//
// The workload is vm-scalability's usemem: every 8-byte word of SIZE bytes of fresh anonymous
// memory gets its index (usemem's p[idx] = idx), page by page, in address order (seq) or in one
// fixed random permutation of the pages (rand; each page once, as usemem -R). With a limit of a
// quarter of SIZE, three quarters of what is written must be swapped out while it is written:
// the throughput is SIZE / time of the write pass.
//   uswap side   a region with a pager of its own (uswap::region), limit --limit, zram --comp;
//   kernel side  a child process in a memory cgroup (v1 memory.limit_in_bytes, or v2
//                memory.max) of the same limit, with swap on a kernel zram device (--comp) as
//                the only swap, mapping SIZE bytes with mmap and writing them the same way.
// Set-up needs root; the command uses /sys/block/zram0 if it is unused, else hot-adds a zram
// device, and undoes everything afterwards (swapoff, zram reset / hot_remove, cgroup removed),
// also when SIGINT, SIGTERM or SIGHUP ends the run (undo_record).
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/swap.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "alternate_rounds.h"
#include "cli.h"
#include "machine_facts.h"
#include "progress.h"
#include "report.h"
#include "uffdbench.h"
#include "uswap/base/page.h"
#include "uswap/uffd/region.h"

namespace uswap::tools {
namespace {

struct bench_config {
  uint64_t size = 1ull << 30;
  uint64_t limit = 0;  // 0: size / 4
  uffdbench_pattern pattern = uffdbench_pattern::both;
  unsigned rounds = 5;
  std::string comp = "lz4";
  fault_mode fault = fault_mode::sigbus;
  unsigned reclaim_batch = pager_options{}.reclaim_batch;
  bool no_background_reclaim = false;
  bool no_kernel = false;
  bool verify = false;
  bool json = false;
};

// ---------------------------------------------------------------------------------------------
// The workload, shared by both sides.

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// usemem's write pass: word idx gets idx, page by page in `order` (null: address order).
double write_pass(uint64_t* base, uint64_t pages, const std::vector<uint32_t>* order) {
  constexpr uint64_t words = page_size / 8;
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t k = 0; k < pages; ++k) {
    const uint64_t p = order ? (*order)[k] : k;
    volatile uint64_t* w = base + p * words;
    for (uint64_t i = 0; i < words; ++i) w[i] = p * words + i;
  }
  return seconds_since(t0);
}

uint64_t verify_pass(const uint64_t* base, uint64_t pages) {
  constexpr uint64_t words = page_size / 8;
  uint64_t bad = 0;
  for (uint64_t p = 0; p < pages; ++p)
    for (uint64_t i = 0; i < words; ++i)
      if (base[p * words + i] != p * words + i) {
        ++bad;
        break;
      }
  return bad;
}

double cpu_seconds(const rusage& r) {
  return double(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
         double(r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
}

struct side_result {
  double seconds = 0;
  double cpu = 0;
  uint64_t swapped_out = 0;  // pages: pager swap_outs, or the kernel's pswpout delta
  uint64_t bad_pages = 0;
  std::string error;
  double mbps(uint64_t bytes) const { return seconds > 0 ? double(bytes) / seconds / 1e6 : 0; }
};

// ---------------------------------------------------------------------------------------------
// The uswap side.

side_result uswap_round(const bench_config& c, const std::vector<uint32_t>* order) {
  side_result res;
  pager_options o;
  o.limit = c.limit;
  o.comp_algorithm = c.comp;
  o.mode = c.fault;
  o.reclaim_batch = c.reclaim_batch;
  o.background_reclaim = !c.no_background_reclaim;
  auto r = region::create(c.size, o);
  if (!r) {
    res.error = r.error().to_string();
    return res;
  }
  const uint64_t pages = (*r)->size() / page_size;
  rusage r0{}, r1{};
  ::getrusage(RUSAGE_SELF, &r0);
  res.seconds = write_pass(static_cast<uint64_t*>((*r)->data()), pages, order);
  ::getrusage(RUSAGE_SELF, &r1);
  res.cpu = cpu_seconds(r1) - cpu_seconds(r0);
  res.swapped_out = (*r)->owner().stats().swap_outs;
  if (c.verify) res.bad_pages = verify_pass(static_cast<const uint64_t*>((*r)->data()), pages);
  const pager_stats s = (*r)->owner().stats();
  if (s.overcharges) res.error = std::to_string(s.overcharges) + " overcharges";
  return res;
}

// ---------------------------------------------------------------------------------------------
// The kernel side: zram swap device and memory cgroup.

bool write_file(const std::string& path, const std::string& value, std::string* err) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    *err = "open " + path + ": " + std::strerror(errno);
    return false;
  }
  const ssize_t n = ::write(fd, value.data(), value.size());
  const int e = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(value.size())) {
    *err = "write '" + value + "' to " + path + ": " + std::strerror(e);
    return false;
  }
  return true;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

uint64_t vmstat(const char* key) {
  std::ifstream f("/proc/vmstat");
  std::string k;
  uint64_t v;
  while (f >> k >> v)
    if (k == key) return v;
  return 0;
}

// What the kernel side set up, the one record of it: the destructor undoes it, and so does a
// SIGINT, SIGTERM or SIGHUP that ends the run first (an interrupted benchmark left zram0
// swapped on, and the next one found it in use), with system calls alone on the paths copied
// here beforehand, before it dies of the signal. Written only with those signals blocked.
struct undo_record {
  static constexpr size_t path_max = 256;
  pid_t owner = 0;                       // the process that set up (a forked child does not undo)
  std::atomic<pid_t> child{0};           // the kernel side's child, while it runs
  char cgroup[path_max] = {};            // rmdir
  char swap[path_max] = {};              // swapoff
  char reset[path_max] = {};             // write "1"
  char hot_remove_id[32] = {};           // written to /sys/class/zram-control/hot_remove
};
undo_record undo;

void write_raw(const char* path, const char* value) noexcept {
  const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return;
  (void)!::write(fd, value, std::strlen(value));
  ::close(fd);
}

// Undoes what `undo` records, with system calls alone (the signal handler runs it too), and
// forgets it. Each step is recorded before it is taken, so a step that never happened is undone
// harmlessly (a swapoff of a device not swapped on fails with EINVAL). Returns swapoff's errno,
// 0 if it succeeded or had nothing to do.
int undo_now() noexcept {
  const timespec ten_ms{0, 10'000'000};
  if (undo.cgroup[0])
    for (int i = 0; i < 100 && ::rmdir(undo.cgroup) != 0 && errno == EBUSY; ++i)
      ::nanosleep(&ten_ms, nullptr);
  int swapoff_error = 0;
  if (undo.swap[0] && ::swapoff(undo.swap) != 0 && errno != EINVAL) swapoff_error = errno;
  if (undo.reset[0]) write_raw(undo.reset, "1");
  if (undo.hot_remove_id[0]) write_raw("/sys/class/zram-control/hot_remove", undo.hot_remove_id);
  undo.cgroup[0] = undo.swap[0] = undo.reset[0] = undo.hot_remove_id[0] = '\0';
  return swapoff_error;
}

void undo_and_die(int sig) {
  if (::getpid() == undo.owner) {
    if (const pid_t c = undo.child.load(); c > 0) {
      ::kill(c, SIGKILL);
      while (::waitpid(c, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
    (void)undo_now();
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

constexpr int undo_signals[] = {SIGINT, SIGTERM, SIGHUP};

// Runs f with the undo signals blocked: the handler never sees a half-written path.
template <class F>
void with_undo_signals_blocked(F&& f) {
  sigset_t set, old;
  sigemptyset(&set);
  for (int sig : undo_signals) sigaddset(&set, sig);
  ::pthread_sigmask(SIG_BLOCK, &set, &old);
  f();
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

void copy_path(char (&to)[undo_record::path_max], const std::string& from) {
  std::snprintf(to, sizeof to, "%s", from.size() < sizeof to ? from.c_str() : "");
}

class kernel_swap {
 public:
  kernel_swap() {
    undo.owner = ::getpid();
    struct sigaction sa {};
    sa.sa_handler = undo_and_die;
    sigemptyset(&sa.sa_mask);
    for (int sig : undo_signals) sigaddset(&sa.sa_mask, sig);
    for (int sig : undo_signals) ::sigaction(sig, &sa, nullptr);
  }
  ~kernel_swap() {
    teardown();
    for (int sig : undo_signals) ::signal(sig, SIG_DFL);
  }

  bool setup(const bench_config& c, std::string* err) {
    if (::geteuid() != 0) {
      *err = "the kernel side needs root (swapon, zram, cgroups); use --no-kernel";
      return false;
    }
    // A zram device nobody uses: zram0 if it is unused, else a new one.
    if (exists("/sys/block/zram0") && read_file("/sys/block/zram0/disksize") == "0") {
      dev_ = "zram0";
    } else if (exists("/sys/class/zram-control/hot_add")) {
      const std::string id = read_file("/sys/class/zram-control/hot_add");
      if (id.empty()) {
        *err = "zram hot_add failed";
        return false;
      }
      dev_ = "zram" + id;
      with_undo_signals_blocked([&] {
        std::snprintf(undo.hot_remove_id, sizeof undo.hot_remove_id, "%s", id.c_str());
      });
    } else {
      *err = "no unused zram device (is the zram module loaded?)";
      return false;
    }
    const std::string sys = "/sys/block/" + dev_;
    with_undo_signals_blocked([&] { copy_path(undo.reset, sys + "/reset"); });
    if (!write_file(sys + "/comp_algorithm", c.comp, err)) return false;
    if (!write_file(sys + "/disksize", std::to_string(c.size + (64ull << 20)), err)) return false;
    const std::string node = "/dev/" + dev_;
    const std::string cmd = "mkswap " + node + " >/dev/null 2>&1";
    if (std::system(cmd.c_str()) != 0) {
      *err = "mkswap " + node + " failed";
      return false;
    }
    with_undo_signals_blocked([&] { copy_path(undo.swap, node); });
    if (::swapon(node.c_str(), SWAP_FLAG_PREFER | (32767 << SWAP_FLAG_PRIO_SHIFT)) != 0) {
      *err = "swapon " + node + ": " + std::strerror(errno);
      return false;
    }
    // The memory cgroup: v1's memory controller if it is mounted, else v2.
    const std::string name = "uswap-uffdbench-" + std::to_string(::getpid());
    if (exists("/sys/fs/cgroup/memory/memory.limit_in_bytes")) {
      cgroup_ = "/sys/fs/cgroup/memory/" + name;
      with_undo_signals_blocked([&] { copy_path(undo.cgroup, cgroup_); });
      if (::mkdir(cgroup_.c_str(), 0755) != 0) {
        *err = "mkdir " + cgroup_ + ": " + std::strerror(errno);
        cgroup_.clear();
        return false;
      }
      if (!write_file(cgroup_ + "/memory.limit_in_bytes", std::to_string(c.limit), err))
        return false;
      cgroup_version_ = "v1 memory.limit_in_bytes";
    } else {
      std::string root = "/sys/fs/cgroup";
      if (read_file(root + "/cgroup.controllers").find("memory") == std::string::npos)
        root = "/sys/fs/cgroup/unified";
      if (read_file(root + "/cgroup.controllers").find("memory") == std::string::npos) {
        *err = "no memory cgroup controller (neither v1 nor v2)";
        return false;
      }
      (void)write_file(root + "/cgroup.subtree_control", "+memory", err);
      cgroup_ = root + "/" + name;
      with_undo_signals_blocked([&] { copy_path(undo.cgroup, cgroup_); });
      if (::mkdir(cgroup_.c_str(), 0755) != 0) {
        *err = "mkdir " + cgroup_ + ": " + std::strerror(errno);
        cgroup_.clear();
        return false;
      }
      if (!write_file(cgroup_ + "/memory.max", std::to_string(c.limit), err)) return false;
      cgroup_version_ = "v2 memory.max";
    }
    return true;
  }

  const std::string& device() const { return dev_; }
  const std::string& cgroup_version() const { return cgroup_version_; }

  side_result round(const bench_config& c, const std::vector<uint32_t>* order) {
    side_result res;
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      res.error = std::string("pipe: ") + std::strerror(errno);
      return res;
    }
    const uint64_t out0 = vmstat("pswpout");
    pid_t pid = -1;
    // Known to the handler from its first instruction: a signal finds the child to kill.
    with_undo_signals_blocked([&] {
      pid = ::fork();
      if (pid > 0) undo.child.store(pid);
      if (pid == 0)
        for (int sig : undo_signals) ::signal(sig, SIG_DFL);  // the child just dies
    });
    if (pid < 0) {
      res.error = std::string("fork: ") + std::strerror(errno);
      ::close(fds[0]);
      ::close(fds[1]);
      return res;
    }
    if (pid == 0) {
      // The child joins the cgroup, then maps and writes its memory. Only system calls and the
      // plain workload run here (the parent may have threads).
      double out[2] = {-1, 0};
      const std::string self = std::to_string(::getpid());
      std::string e;
      if (write_file(cgroup_ + "/cgroup.procs", self, &e)) {
        void* m = ::mmap(nullptr, c.size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                         -1, 0);
        if (m != MAP_FAILED) {
          ::madvise(m, c.size, MADV_NOHUGEPAGE);
          const uint64_t pages = c.size / page_size;
          out[0] = write_pass(static_cast<uint64_t*>(m), pages, order);
          if (c.verify) out[1] = double(verify_pass(static_cast<const uint64_t*>(m), pages));
        }
      }
      (void)!::write(fds[1], out, sizeof out);
      ::_exit(0);
    }
    ::close(fds[1]);
    double got[2] = {-1, 0};
    const ssize_t n = ::read(fds[0], got, sizeof got);
    ::close(fds[0]);
    int status = 0;
    rusage ru{};
    while (::wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {
    }
    undo.child.store(0);
    if (n != sizeof got || got[0] < 0) {
      res.error = "the kernel-side child failed (killed by the OOM killer?)";
      return res;
    }
    res.seconds = got[0];
    res.bad_pages = static_cast<uint64_t>(got[1]);
    res.cpu = cpu_seconds(ru);
    res.swapped_out = vmstat("pswpout") - out0;
    return res;
  }

  void teardown() {
    // Signals blocked: the handler never undoes the same a second time.
    int swapoff_error = 0;
    with_undo_signals_blocked([&] { swapoff_error = undo_now(); });
    if (swapoff_error)
      std::cerr << "uswap uffdbench: swapoff /dev/" << dev_ << ": " << std::strerror(swapoff_error)
                << "\n";
  }

 private:
  std::string dev_;
  std::string cgroup_;
  std::string cgroup_version_;
};

// ---------------------------------------------------------------------------------------------

std::string today() {
  char b[32];
  const std::time_t t = std::time(nullptr);
  std::strftime(b, sizeof b, "%Y-%m-%d", std::gmtime(&t));
  return b;
}

uffdbench_side side_of(const side_result& r, uint64_t bytes) {
  return {r.mbps(bytes), r.cpu, r.swapped_out};
}

// A failed or wrong round is said at once on stderr; it makes the exit status 1.
bool check_round(const side_result& r, const char* side, unsigned round) {
  if (r.error.empty() && !r.bad_pages) return true;
  std::cerr << "uswap uffdbench: " << side << " round " << round + 1 << ": " << r.error
            << (r.bad_pages ? " " + std::to_string(r.bad_pages) + " pages wrong" : "") << "\n";
  return false;
}

// Every round of every pattern: uswap, then the kernel (unless --no-kernel). Returns whether
// every round ran cleanly.
bool measure(const bench_config& c, kernel_swap& ks, uffdbench_report& rep) {
  const uint64_t pages = c.size / page_size;
  std::vector<uint32_t> perm(pages);
  for (uint64_t i = 0; i < pages; ++i) perm[i] = static_cast<uint32_t>(i);
  std::shuffle(perm.begin(), perm.end(), std::mt19937_64(20240611));
  std::vector<std::string> patterns;
  if (c.pattern != uffdbench_pattern::rand) patterns.push_back("seq");
  if (c.pattern != uffdbench_pattern::seq) patterns.push_back("rand");
  progress_line progress;
  bool clean = true;
  for (const std::string& pat : patterns) {
    const std::vector<uint32_t>* order = pat == "rand" ? &perm : nullptr;
    uffdbench_report::pattern p{pat, {}};
    for (unsigned i = 0; i < c.rounds; ++i) {
      progress.show("uffdbench: " + pat + " round " + std::to_string(i + 1) + "/" +
                    std::to_string(c.rounds));
      const side_result a = uswap_round(c, order);
      clean &= check_round(a, "uswap", i);
      uffdbench_report::round r{side_of(a, c.size), std::nullopt};
      if (!c.no_kernel) {
        const side_result b = ks.round(c, order);
        clean &= check_round(b, "kernel", i);
        r.kernel = side_of(b, c.size);
      }
      p.rounds.push_back(r);
    }
    rep.patterns.push_back(std::move(p));
  }
  return clean;
}

int run_uffdbench(bench_config c) {
  if (c.limit == 0) c.limit = c.size / 4;
  c.size = round_up_to_page(c.size);
  if (c.size < (4ull << 20) || c.limit < (256ull << 10) || c.limit > c.size) {
    std::cerr << "uswap uffdbench: need --size >= 4M and 256K <= --limit <= --size\n";
    return 2;
  }
  if (c.rounds == 0) {
    std::cerr << "uswap uffdbench: --rounds must be positive\n";
    return 2;
  }
  kernel_swap ks;
  if (!c.no_kernel) {
    std::string err;
    if (!ks.setup(c, &err)) {
      std::cerr << "uswap uffdbench: kernel side: " << err << "\n";
      return 1;
    }
  }
  uffdbench_report rep;
  rep.machine = std::to_string(cpu_count()) + "-core " + cpu_model();
  rep.date = today();
  rep.size = c.size;
  rep.limit = c.limit;
  rep.comp = c.comp;
  rep.fault_mode = std::string(to_string(c.fault));
  rep.reclaim_batch = c.reclaim_batch;
  rep.background_reclaim = !c.no_background_reclaim;
  rep.kernel = !c.no_kernel;
  if (rep.kernel) {
    rep.kernel_device = ks.device();
    rep.kernel_cgroup = ks.cgroup_version();
  }
  const bool clean = measure(c, ks, rep);
  print_report(std::cout, rep, c.json);
  return clean ? 0 : 1;
}

void add_uffdbench_command(CLI::App& app, command_table& table) {
  static bench_config c;
  auto* sub = app.add_subcommand(
      "uffdbench",
      "usemem writes over a uswap region vs the kernel's swap to zram under a memory cgroup of "
      "the same limit, alternating rounds (kernel side needs root)");
  add_size_option(*sub, "--size", c.size, "Bytes written per round");
  add_size_option(*sub, "--limit", c.limit, "Resident limit of both sides (0: size/4)");
  add_enum_option(*sub, "--pattern", c.pattern, uffdbench_pattern_names, "pattern",
                  valid_names(uffdbench_pattern_names));
  add_rounds_option(*sub, c.rounds, "Rounds per pattern (each: uswap, then kernel)");
  sub->add_option("--comp", c.comp, "Compression on both sides: lz4, lzo, zstd")
      ->capture_default_str();
  add_parsed_option(*sub, "--fault-mode", c.fault, parse_fault_mode,
                    std::string(to_string(c.fault)), "uswap side: sigbus or handler-thread");
  sub->add_flag("--no-background-reclaim", c.no_background_reclaim,
                "uswap side: no background reclaim thread (on here, off in the library's "
                "defaults): faults over the limit evict for themselves");
  sub->add_option("--reclaim-batch", c.reclaim_batch, "uswap side: pages evicted per reclaim pass")
      ->capture_default_str();
  sub->add_flag("--no-kernel", c.no_kernel, "Run the uswap side only (no root needed)");
  sub->add_flag("--verify", c.verify, "Read every page back after each round (not timed)");
  add_json_flag(*sub, c.json);
  table.add(sub, [] { return run_uffdbench(c); });
}

const command_registrar reg{71, add_uffdbench_command};

}  // namespace

std::vector<double> uffdbench_report::pattern::uswap_mbps() const {
  std::vector<double> out;
  for (const round& r : rounds) out.push_back(r.uswap.mbps);
  return out;
}

std::vector<double> uffdbench_report::pattern::kernel_mbps() const {
  std::vector<double> out;
  for (const round& r : rounds)
    if (r.kernel) out.push_back(r.kernel->mbps);
  return out;
}

std::vector<double> uffdbench_report::pattern::ratios() const {
  std::vector<double> out;
  for (const round& r : rounds)
    if (r.kernel && r.kernel->mbps > 0) out.push_back(r.uswap.mbps / r.kernel->mbps);
  return out;
}

nlohmann::json uffdbench_report::to_json() const {
  nlohmann::json out{{"machine", machine},
                     {"date", date},
                     {"size_bytes", size},
                     {"limit_bytes", limit},
                     {"comp", comp},
                     {"fault_mode", fault_mode},
                     {"reclaim_batch", reclaim_batch},
                     {"background_reclaim", background_reclaim},
                     {"kernel_device", kernel_device},
                     {"kernel_cgroup", kernel_cgroup},
                     {"patterns", nlohmann::json::object()}};
  for (const pattern& p : patterns) {
    nlohmann::json rounds_json = nlohmann::json::array();
    for (const round& r : p.rounds) {
      const uffdbench_side k = r.kernel.value_or(uffdbench_side{});
      rounds_json.push_back({{"uswap_mbps", r.uswap.mbps},
                             {"uswap_cpu_s", r.uswap.cpu_s},
                             {"uswap_swap_outs", r.uswap.swapped_out},
                             {"kernel_mbps", k.mbps},
                             {"kernel_cpu_s", k.cpu_s},
                             {"kernel_pswpout", k.swapped_out}});
    }
    const auto ratio = p.ratios();
    out["patterns"][p.name] = {{"rounds", rounds_json},
                               {"uswap_median_mbps", median(p.uswap_mbps())},
                               {"kernel_median_mbps", median(p.kernel_mbps())},
                               {"ratio_median", median(ratio)},
                               {"ratio_min", min_of(ratio)},
                               {"ratio_max", max_of(ratio)}};
  }
  return out;
}

void uffdbench_report::print(std::ostream& out) const {
  out << "uswap uffdbench: usemem writes of " << (size >> 20) << " MiB, limit " << (limit >> 20)
      << " MiB, " << comp << ", fault mode " << fault_mode << ", background reclaim "
      << (background_reclaim ? "on" : "off") << "; kernel: swap on /dev/"
      << (kernel ? kernel_device : "-") << ", cgroup " << (kernel ? kernel_cgroup : "-") << "\n"
      << machine << ", " << date << "; rounds alternate uswap, kernel\n\n"
      << "pattern round  uswap MB/s (cpu s, swap-outs)   kernel MB/s (cpu s, pswpout)\n";
  for (const pattern& p : patterns) {
    for (size_t i = 0; i < p.rounds.size(); ++i) {
      const round& r = p.rounds[i];
      const uffdbench_side k = r.kernel.value_or(uffdbench_side{});
      out << strprintf("%-7s %5zu  %8.1f (%5.2f, %7lu)        %8.1f (%5.2f, %7lu)\n",
                       p.name.c_str(), i + 1, r.uswap.mbps, r.uswap.cpu_s,
                       static_cast<unsigned long>(r.uswap.swapped_out), k.mbps, k.cpu_s,
                       static_cast<unsigned long>(k.swapped_out));
    }
    const auto ratio = p.ratios();
    out << strprintf("%-7s median uswap %.1f MB/s, kernel %.1f MB/s: uswap/kernel %.2f (rounds "
                     "%.2f-%.2f)\n\n",
                     p.name.c_str(), median(p.uswap_mbps()), median(p.kernel_mbps()),
                     median(ratio), min_of(ratio), max_of(ratio));
  }
}

}  // namespace uswap::tools
