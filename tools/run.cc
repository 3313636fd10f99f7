// `uswap run --limit 256M [--comp lz4] -- PROGRAM ARGS`: runs any dynamically linked program
// with every anonymous byte of it routed into a uswap pager (src/uffd/preload/), so that at most
// --limit bytes of the whole process tree are resident at once (one job, as a memory cgroup's
// memory.max; --limit-per-process: each process on its own) and the rest is compressed in zram
// under swap slots. At exit it prints the job's totals and, for the processes that paged, peak
// resident, swap-outs, swap-ins, compression ratio, time in faults, and what stayed unrouted;
// --json gives the same as one JSON object, the last line on stderr; --stats-dir keeps cgroup v2
// and zram style files up to date while the job runs (run_job.h).
//
// The shim, libuswap-preload.so, is found next to this executable (the build puts both in
// build/bin). It is added to LD_PRELOAD; the settings go in USWAP_* variables; each process image
// appends a JSON line to a statistics file this command reads after the program exits. The exit
// status is the program's; a program killed by a signal, uswap run ends by the same signal
// once it has reported (cli.h end_by_signal; 128 + signal in the report). A program the shim cannot reach
// (statically linked, setuid, Go: uswap/uffd/routable.h) is refused with exit status 126, or run
// unrouted with --allow-unrouted; a routed program that execs one is named in the summary.
// An installed uswap finds the shim in <libdir>/uswap/ instead (find_shim).
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli.h"
#include "report.h"
#include "run_job.h"
#include "uswap/base/own_fd.h"
#include "uswap/base/units.h"
#include "uswap/compress/zcomp.h"
#include "uswap/uffd/pager.h"
#include "uswap/uffd/routable.h"
#include "uswap/uffd/shim_arena.h"

namespace uswap::tools {
namespace {

struct run_config {
  uint64_t limit = 256ull << 20;
  std::string comp = "lz4";
  uint64_t max_size = 0;  // 0: the shim's default (shim_arena::default_size)
  uint64_t swap = 0;      // 0: the arena, at most twice the RAM
  std::string fault_mode = "sigbus";
  std::string access = "auto";
  bool json = false;
  bool allow_unrouted = false;
  bool write_tracking = false;      // pager_options::track_writes (off: see the man page)
  bool no_write_tracking = false;   // the default, accepted by name (excludes --write-tracking)
  bool background_reclaim = false;  // pager_options::background_reclaim (off: see the man page)
  unsigned reclaim_cluster = 16;    // pager_options::reclaim_cluster
  bool per_process = false;         // --limit-per-process: no job, each process its own limit
  uint64_t pool_limit = 0;          // the job's compressed pools (0: none)
  std::string backing;              // the file pools write back into past pool_limit
  uint64_t backing_size = 0;
  unsigned backing_timeout = 30;  // seconds an unreachable --backing server is waited for
  std::string stats_dir;
  std::vector<std::string> command;
  bool no_shim = false;  // not an option: no arena fits the rlimits and --allow-unrouted was given
};

std::string self_dir() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string p(buf, static_cast<size_t>(n));
  const auto slash = p.rfind('/');
  return slash == std::string::npos ? "." : p.substr(0, slash);
}

// The shim: beside this executable (the build tree: build/bin/), else where `cmake --install`
// puts it relative to bindir (<prefix>/lib/.../uswap/, or an absolute directory the build was
// configured with; tools/CMakeLists.txt defines USWAP_PRELOADDIR_FROM_BINDIR). When neither
// exists, the build-tree path, for the error message.
std::string find_shim() {
  const std::string dir = self_dir();
  const std::string beside = dir + "/libuswap-preload.so";
  if (::access(beside.c_str(), R_OK) == 0) return beside;
  const std::string rel = USWAP_PRELOADDIR_FROM_BINDIR;
  const std::string installed =
      (rel.starts_with('/') ? rel : dir + "/" + rel) + "/libuswap-preload.so";
  if (::access(installed.c_str(), R_OK) == 0) return installed;
  return beside;
}

std::string mib(uint64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f MiB", double(bytes) / (1 << 20));
  return b;
}

uint64_t u64(const nlohmann::json& j, const char* k) { return j.value(k, uint64_t{0}); }

// The program being run: signals sent to uswap run alone (timeout's SIGTERM, a service
// manager's SIGHUP) are passed on to it, so that it ends as it would have and the statistics
// are still read and the statistics file removed.
volatile sig_atomic_t child_pid = 0;
void forward_signal(int sig) {
  if (child_pid > 0) ::kill(child_pid, sig);
}

// What the processes did, computed from the statistics lines as they are read: a build runs
// tens of thousands of process images, and only --json prints each one, so only --json keeps
// each one's line (keep_all); the text summary keeps the few it shows and running totals.
struct run_result {
  static constexpr size_t shown = 8;  // processes the text summary prints in full
  int exit_status = 0;
  bool keep_all = false;                  // --json
  std::optional<job_totals> job;          // the shared limit, unless --limit-per-process
  // Members still running when the program exited (a daemon's), and the process that watches
  // them from then on (0: none).
  std::vector<pid_t> running;
  pid_t watcher = 0;
  std::vector<nlohmann::json> processes;  // one per process image, with keep_all
  // Every image, whether kept or not.
  uint64_t images = 0, swap_outs = 0, swap_ins = 0, shmem_peak = 0;
  uint64_t paged = 0, quiet_peak = 0;          // images that paged; the others' largest peak
  std::vector<nlohmann::json> first;           // the first 4 images (a small job shows them all)
  std::vector<nlohmann::json> top_paged;       // the `shown` paged ones with the largest peaks
  std::vector<nlohmann::json> unrouted_execs;  // execs the shim could not follow
  std::vector<nlohmann::json> traced;          // images that started under a debugger or tracer
  std::vector<nlohmann::json> hints_honored;   // images whose hinted reservations stay unrouted
  struct {
    std::string program;
    int pid = 0;
    uint64_t limit = 0, bytes = 0, static_bytes = 0;
  } most_unrouted;  // the image with the largest unrouted anonymous peak

  nlohmann::json to_json() const {
    nlohmann::json j = {{"exit_status", exit_status},
                        {"processes", processes},
                        {"unrouted_execs", unrouted_execs},
                        {"traced", traced},
                        {"hints_honored", hints_honored}};
    if (job) j["job"] = job->to_json();
    if (!running.empty()) j["job_running"] = {{"pids", running}, {"watcher_pid", watcher}};
    return j;
  }
  // Every process that paged (the largest first), a count of the others, the unrouted execs.
  void print(std::ostream& os) const;
  void add_process(nlohmann::json&& p);
};

bool paged_image(const nlohmann::json& p) { return u64(p, "swap_outs") || u64(p, "overcharges"); }

uint64_t peak_of(const nlohmann::json& p) { return u64(p, "peak_resident_bytes"); }

void run_result::add_process(nlohmann::json&& p) {
  ++images;
  swap_outs += u64(p, "swap_outs");
  swap_ins += u64(p, "swap_ins");
  shmem_peak = std::max(shmem_peak, u64(p, "shmem_peak_bytes"));
  if (const uint64_t u = u64(p, "unrouted_anon_peak_bytes"); u > most_unrouted.bytes)
    most_unrouted = {p.value("program", std::string("?")), p.value("pid", 0), u64(p, "limit_bytes"),
                     u, u64(p, "static_data_bytes")};
  if (paged_image(p)) {
    ++paged;
    // A min-heap on the peak: the smallest of the kept ones goes when a larger one comes.
    auto smaller_first = [](const nlohmann::json& a, const nlohmann::json& b) {
      return peak_of(a) > peak_of(b);
    };
    if (top_paged.size() < shown || peak_of(p) > peak_of(top_paged.front())) {
      if (top_paged.size() == shown) {
        std::pop_heap(top_paged.begin(), top_paged.end(), smaller_first);
        top_paged.pop_back();
      }
      top_paged.push_back(p);
      std::push_heap(top_paged.begin(), top_paged.end(), smaller_first);
    }
  } else {
    quiet_peak = std::max(quiet_peak, peak_of(p));
  }
  if (first.size() < 4) first.push_back(p);
  if (keep_all) processes.push_back(std::move(p));
}

// A page that cannot be read back is never replaced: the process that needed it took a real
// SIGBUS (fault.cc). Names how many and where they were; nothing when none was lost.
void print_lost_pages(std::ostream& os, const job_totals& t) {
  if (!t.stat[JOB_FAILED_READS]) return;
  os << "uswap run: " << t.stat[JOB_FAILED_READS]
     << (t.stat[JOB_FAILED_READS] == 1 ? " page" : " pages") << " could not be read back"
     << (t.backing.empty()
             ? std::string(" (a corrupt compressed object)")
             : " from --backing " + t.backing + " (its server lost them or could not be reached)")
     << ": the process that needed one was stopped with SIGBUS rather than given other bytes\n";
}

void print_process(std::ostream& os, const nlohmann::json& p) {
  const uint64_t out_bytes = u64(p, "swap_out_bytes"), comp_bytes = u64(p, "compressed_bytes");
  char ratio[32] = "-";
  if (comp_bytes)
    std::snprintf(ratio, sizeof ratio, "%.2fx", double(out_bytes) / double(comp_bytes));
  os << "uswap run: " << p.value("program", std::string("?")) << " (pid " << p.value("pid", 0)
     << (p.value("event", std::string()) == "exec" ? ", until exec" : "") << ", "
     << p.value("mode", std::string("?")) << ", " << p.value("uffd", std::string("?")) << ", "
     << p.value("kernel_access", std::string("?")) << ")\n"
     << "  peak resident   " << mib(u64(p, "peak_resident_bytes")) << " of a "
     << mib(u64(p, "limit_bytes")) << " limit; unrouted anonymous memory at peak "
     << mib(u64(p, "unrouted_anon_peak_bytes")) << "; compressed pool at peak "
     << mib(u64(p, "zram_mem_used_max")) << "; VmHWM " << mib(u64(p, "vm_hwm_bytes"));
  if (u64(p, "shmem_peak_bytes"))
    os << "; shared memory at peak " << mib(u64(p, "shmem_peak_bytes")) << " (not limited)";
  os << "\n"
     << "  swap-outs       " << u64(p, "swap_outs") << " pages (" << mib(out_bytes)
     << " compressed to " << mib(comp_bytes) << ", ratio " << ratio << "); "
     << u64(p, "clean_evictions") << " clean and " << u64(p, "zero_evictions")
     << " zero pages dropped\n"
     << "  swap-ins        " << u64(p, "swap_ins") << " pages\n"
     << "  faults          " << u64(p, "faults") << " missing + " << u64(p, "wp_faults")
     << " write-protect, " << double(u64(p, "fault_ns")) / 1e6 << " ms in faults of "
     << double(u64(p, "run_ns")) / 1e6 << " ms";
  if (u64(p, "fault_p50_ns"))
    os << " (p50 " << double(u64(p, "fault_p50_ns")) / 1e3 << " us, p99 "
       << double(u64(p, "fault_p99_ns")) / 1e3 << " us)";
  if (u64(p, "trapped_syscalls") || u64(p, "emulated_syscalls"))
    os << "; " << u64(p, "emulated_syscalls") << " system calls pinned ("
       << u64(p, "trapped_syscalls") << " trapped)";
  os << "\n";
  if (u64(p, "overcharges"))
    os << "  overcharges     " << u64(p, "overcharges")
       << " (faults mapped above the limit: everything else was pinned)\n";
}

void run_result::print(std::ostream& os) const {
  const run_result& r = *this;
  if (r.images == 0 && r.unrouted_execs.empty()) {
    os << "uswap run: no statistics (the program paged nothing, or ended without running its "
          "exit handlers)\n";
  }
  // Every process that paged, the largest first; of the others (short-lived helpers of a build,
  // shells), a count. A job of four images or fewer shows each.
  const bool small = r.images <= 4;
  std::vector<const nlohmann::json*> show;
  for (const auto& p : small ? r.first : r.top_paged) show.push_back(&p);
  std::sort(show.begin(), show.end(), [](auto* a, auto* b) { return peak_of(*a) > peak_of(*b); });
  for (size_t i = 0; i < show.size() && i < shown; ++i) print_process(os, *show[i]);
  const uint64_t shown_paged = small ? r.images : r.paged;
  if (shown_paged > shown)
    os << "uswap run: " << shown_paged - shown << " more processes paged (--json lists all)\n";
  if (!small && r.images > r.paged)
    os << "uswap run: " << r.images - r.paged
       << " more processes stayed under the limit (largest peak " << mib(r.quiet_peak) << ")\n";
  if (r.images > 1)
    os << "uswap run: " << r.images << " process images in all: " << r.swap_outs << " swap-outs, "
       << r.swap_ins << " swap-ins\n";
  // One line per image, or per reason once there are many (a script whose every image failed to
  // make its pager).
  std::map<std::string, std::vector<const nlohmann::json*>> by_reason;
  for (const auto& u : r.unrouted_execs)
    by_reason[u.value("reason", std::string("?"))].push_back(&u);
  for (const auto& [reason, images] : by_reason) {
    if (images.size() <= 3) {
      for (const nlohmann::json* u : images)
        os << "uswap run: unrouted: " << u->value("path", std::string("?")) << " (pid "
           << u->value("pid", 0) << ") is " << reason << "\n";
      continue;
    }
    std::vector<std::string> names;
    for (const nlohmann::json* u : images) {
      std::string path = u->value("path", std::string("?"));
      path = path.substr(path.rfind('/') + 1);
      if (std::find(names.begin(), names.end(), path) == names.end()) names.push_back(path);
    }
    os << "uswap run: unrouted: " << images.size() << " process images (";
    for (size_t i = 0; i < std::min<size_t>(names.size(), 4); ++i)
      os << (i ? ", " : "") << names[i];
    if (names.size() > 4) os << " and " << names.size() - 4 << " more programs";
    os << ") are " << reason << "\n";
  }
  for (const auto& h : r.hints_honored)
    os << "uswap run: unrouted: " << h.value("program", std::string("?")) << " (pid "
       << h.value("pid", 0) << ") rejected " << h.value("rejected", 0u)
       << " reservations placed elsewhere than its mmap hint; its later hinted reservations "
          "stayed with the kernel\n";
  // One line per tracer (strace -f of a build traces hundreds of images).
  std::map<uint64_t, std::vector<const nlohmann::json*>> by_tracer;
  for (const auto& t : r.traced) by_tracer[u64(t, "tracer_pid")].push_back(&t);
  for (const auto& [tracer_pid, images] : by_tracer) {
    const nlohmann::json& first = *images.front();
    const std::string sigs = first.value("signals", std::string("?"));
    os << "uswap run: traced: ";
    for (size_t i = 0; i < images.size() && i < 3; ++i)
      os << (i ? ", " : "") << images[i]->value("program", std::string("?")) << " (pid "
         << images[i]->value("pid", 0) << ")";
    if (images.size() > 3) os << " and " << images.size() - 3 << " more process images";
    os << " ran under " << first.value("tracer", std::string("?")) << " (pid " << tracer_pid
       << "), which saw the pager's " << sigs << " (gdb: handle " << sigs
       << " nostop noprint pass) and could not read pages that were swapped out\n";
  }
  if (r.job) {
    const job_totals& t = *r.job;
    os << "uswap run: job: peak resident " << mib(t.peak_charge_bytes) << " of a "
       << mib(t.limit_bytes) << " limit shared by " << t.members_joined
       << " process images; peak footprint (resident + compressed pools) "
       << mib(t.peak_footprint_bytes) << "; " << t.stat[JOB_SWAP_OUTS] << " swap-outs, "
       << t.stat[JOB_SWAP_INS] << " swap-ins";
    if (t.reclaim_requests)
      os << "; " << t.reclaim_requests << " times a process asked another for room";
    if (t.members_reaped)
      os << "; " << t.members_reaped << " ended without leaving (their share came back)";
    if (t.stat[JOB_OVERCHARGES]) os << "; " << t.stat[JOB_OVERCHARGES] << " overcharges";
    // Shared memory is mapped by several members at once (a database's buffer pool): the
    // largest one process had is what the job had at least.
    if (r.shmem_peak)
      os << "; shared memory, not limited, at least " << mib(r.shmem_peak) << " at peak";
    os << "\n";
    if (t.pool_limit_bytes)
      os << "uswap run: job: compressed pools held to " << mib(t.pool_limit_bytes);
    if (t.pool_limit_bytes && t.backing_bytes)
      os << "; " << t.stat[JOB_BD_WRITES] << " pages written back to the backing file ("
         << mib(t.backing_bytes) << "), " << t.stat[JOB_BD_READS] << " read back";
    if (t.pool_limit_bytes) os << "\n";
    if (!t.stopped.empty()) os << "uswap run: the job was stopped: " << t.stopped << "\n";
    print_lost_pages(os, t);
  }
  if (!r.running.empty()) {
    os << "uswap run: the job goes on: " << r.running.size() << " of its processes still run (pid";
    for (size_t i = 0; i < r.running.size() && i < 4; ++i) os << (i ? ", " : " ") << r.running[i];
    if (r.running.size() > 4) os << ", ...";
    os << "), held to the limit; ";
    if (r.watcher)
      os << "process " << r.watcher << " watches them until they end (the figures above are "
         << "the job's so far)\n";
    else
      os << "nothing watches them (a fork failed): a member killed now keeps its share\n";
  }
  // Anonymous memory the shim never saw (thread stacks, which glibc maps itself; a runtime's own
  // mmap system calls, as SBCL makes them; MAP_32BIT; brk) is not held to the limit: named when it is a real part of the job's memory,
  // more than the loader's and the C library's few MiB.
  // An executable's static data (.bss) is mapped by the kernel at exec: named when it makes up
  // most of it (a Fortran program's SAVE and COMMON arrays, STREAM's static arrays).
  if (const auto& m = r.most_unrouted; m.bytes > (uint64_t{32} << 20) && m.bytes > m.limit / 4) {
    os << "uswap run: not limited: " << m.program << " (pid " << m.pid << ") had " << mib(m.bytes)
       << " of unrouted anonymous memory at peak, ";
    if (m.static_bytes >= m.bytes / 2)
      os << "most of it its executable's static data (" << mib(m.static_bytes)
         << " of .bss), which the kernel maps at exec, before the shim\n";
    else
      os << "mapped past the shim (thread stacks, its own mmap system calls, MAP_32BIT or brk)\n";
  }
}

// The options only this command checks; an exit status (2) and the message, or 0.
int check_options(const run_config& c) {
  std::string problem;
  if (c.command.empty())
    problem = "no program given (uswap run --limit SIZE -- PROGRAM ARGS)";
  else if (auto m = parse_fault_mode(c.fault_mode); !m)
    problem = m.error().to_string();
  else if (auto a = parse_uffd_access(c.access); !a)
    problem = a.error().to_string();
  else if (!zcomp::available_algorithm(c.comp))
    problem = "unknown compression algorithm '" + c.comp + "'";
  else if (c.limit < 64 * 4096)
    problem = "--limit must be at least 256K";
  else if (c.per_process && (!c.stats_dir.empty() || c.pool_limit || !c.backing.empty()))
    problem =
        "--stats-dir, --pool-limit and --backing are the job's: they do not go with "
        "--limit-per-process";
  else if (!c.backing.empty() && c.pool_limit == 0)
    problem = "--backing takes what the compressed pools cannot hold: it needs --pool-limit";
  else if (c.pool_limit && c.pool_limit < 64 * 4096)
    problem = "--pool-limit must be at least 256K";
  else if (c.max_size && (c.max_size < shim_arena::min_size || c.max_size > (uint64_t{8} << 40)))
    problem =
        "--max-size must be 4G..8T (the arena is rounded up to a power of two, and its "
        "pages are numbered in 32 bits)";
  else if (c.swap >= (uint64_t{16} << 40))
    problem = "--swap must be below 16T (swap slots are numbered in 32 bits, as the kernel's)";
  else if (c.backing_timeout == 0)
    problem = "--backing-timeout must be at least 1 second";
  else if (c.reclaim_cluster < 1 || c.reclaim_cluster > 64 ||
           (c.reclaim_cluster & (c.reclaim_cluster - 1)) != 0)
    problem = "--reclaim-cluster must be a power of two, 1..64";
  if (problem.empty()) return 0;
  std::cerr << "uswap run: " << problem << "\n";
  return 2;
}

// The shim reserves each process's arena (--max-size) and the part of it mimalloc manages at
// start, and the kernel counts them against RLIMIT_AS and RLIMIT_DATA as if used. Under a
// finite soft limit (`ulimit -v`, `ulimit -d`, a batch system's h_vmem) a 4 TiB arena cannot be
// reserved, and the program would run without a pager, unlimited. So the arena is sized to fit
// (a limit the program sets later is rlimit.cc's business): the largest power of two that leaves
// the program's other mappings (libraries, stacks, files) an eighth of the limit, at least 1 GiB;
// almost all of what a program maps is anonymous memory, which the arena holds. An explicit
// --max-size must fit under the limits. An exit status and the message when no arena fits (2
// for a --max-size that does not, 126 as for a program the shim cannot reach), else 0.
constexpr uint64_t min_arena = shim_arena::min_size;
constexpr uint64_t default_arena = shim_arena::default_size;

// What a pager with an arena of `arena` bytes adds to a process's VmSize and VmData, its
// tables included (about 1%: the margin of a sixteenth covers them). Of the arena, VmData counts
// the part mimalloc manages, mapped writable.
uint64_t arena_vm(uint64_t arena) { return arena + arena / 16; }
uint64_t arena_data(uint64_t arena) { return shim_arena::managed_heap(arena) + arena / 16; }
// What a limit keeps for the program's mappings beside the arena, when uswap run sizes it.
uint64_t room_beside(uint64_t limit) { return std::max(uint64_t{1} << 30, limit / 8); }

uint64_t soft_limit(int resource) {
  struct rlimit r {};
  return ::getrlimit(resource, &r) == 0 ? r.rlim_cur : RLIM_INFINITY;
}

int fit_arena_to_rlimits(run_config& c) {
  const uint64_t as = soft_limit(RLIMIT_AS), data = soft_limit(RLIMIT_DATA);
  if (as == RLIM_INFINITY && data == RLIM_INFINITY) return 0;
  const auto within = [](uint64_t need, uint64_t limit, bool keep_room) {
    return limit == RLIM_INFINITY || need + (keep_room ? room_beside(limit) : 0) <= limit;
  };
  const auto fits = [&](uint64_t arena, bool keep_room) {
    return within(arena_vm(arena), as, keep_room) && within(arena_data(arena), data, keep_room);
  };
  const std::string limits =
      (as != RLIM_INFINITY ? "ulimit -v (RLIMIT_AS) " + format_size(as) : std::string()) +
      (as != RLIM_INFINITY && data != RLIM_INFINITY ? ", " : "") +
      (data != RLIM_INFINITY ? "ulimit -d (RLIMIT_DATA) " + format_size(data) : std::string());
  if (c.max_size) {
    uint64_t arena = min_arena;
    while (arena < c.max_size) arena <<= 1;
    if (fits(arena, false)) return 0;
    std::cerr << "uswap run: --max-size " << format_size(arena) << " needs "
              << format_size(arena_vm(arena)) << " of address space and "
              << format_size(arena_data(arena)) << " of data in each process, more than " << limits
              << " allows: pass a smaller --max-size, or raise the limit\n";
    return 2;
  }
  uint64_t arena = default_arena;
  while (arena > min_arena && !fits(arena, true)) arena >>= 1;
  if (!fits(arena, true)) {
    std::cerr << "uswap run: " << limits << " leaves no room for the pager: it reserves "
              << format_size(arena_vm(min_arena)) << " of address space and "
              << format_size(arena_data(min_arena))
              << " of data in each process (--max-size 4G, the least), and the program needs at "
                 "least 1 GiB beside it: raise the limit; "
              << (c.allow_unrouted ? "running the program unrouted (--allow-unrouted), its memory "
                                     "is not limited\n"
                                   : "--allow-unrouted runs it anyway, unlimited\n");
    c.no_shim = c.allow_unrouted;  // not preloaded: each process would fail to make its pager
    return c.allow_unrouted ? 0 : 126;
  }
  if (arena < default_arena) {
    c.max_size = arena;
    std::cerr << "uswap run: under " << limits << ", each process's arena, all its routed memory, "
              << "is " << format_size(arena) << " (--max-size)\n";
  }
  return 0;
}

// A program the shim cannot reach is named before it runs, never silently left unlimited:
// 126 unless --allow-unrouted, else 0.
// *preload_breaks: the program cannot start with the shim preloaded (it then runs without).
int check_routable(const run_config& c, bool* preload_breaks) {
  char found[PATH_MAX];
  const char* path = search_path(c.command[0].c_str(), found, sizeof found);
  *preload_breaks = false;
  const char* why = path ? unroutable_reason(path, preload_breaks) : nullptr;
  if (!why) return 0;
  if (!c.allow_unrouted) {
    std::cerr << "uswap run: " << path << " is " << why
              << ": its memory cannot be limited; --allow-unrouted runs it anyway, unlimited\n";
    return 126;
  }
  std::cerr << "uswap run: " << path << " is " << why
            << ": running it unrouted (--allow-unrouted), its memory is not limited\n";
  return 0;
}

// Hands `fd` to the program, inherited and named in `var` (own_fd.h), at the number the shim
// would move it to anyway; unnamed without it.
void pass_fd(int fd, const char* var) {
  char name[64];
  const int high = fd < 0 ? -1 : ::fcntl(fd, F_DUPFD, own_fd_floor());
  if (high >= 0 && own_fd_pass_on(high, name, sizeof name))
    ::setenv(var, name, 1);
  else
    ::unsetenv(var);
}

// The child: the program with the shim preloaded and its settings in USWAP_* variables.
[[noreturn]] void exec_program(const run_config& c, const std::string& preload,
                               const char* stats_path, const std::string& job_path,
                               const std::string& backing_path, int job_fd, int guest_fd,
                               int backing_fd) {
  if (preload.empty())
    ::unsetenv("LD_PRELOAD");
  else
    ::setenv("LD_PRELOAD", preload.c_str(), 1);
  ::setenv("USWAP_LIMIT", std::to_string(c.limit).c_str(), 1);
  ::setenv("USWAP_COMP", c.comp.c_str(), 1);
  if (c.max_size) ::setenv("USWAP_MAX_SIZE", std::to_string(c.max_size).c_str(), 1);
  if (c.swap) ::setenv("USWAP_SWAP_SIZE", std::to_string(c.swap).c_str(), 1);
  ::setenv("USWAP_FAULT_MODE", c.fault_mode.c_str(), 1);
  ::setenv("USWAP_ACCESS", c.access.c_str(), 1);
  ::setenv("USWAP_TRACK_WRITES", c.write_tracking ? "1" : "0", 1);
  ::setenv("USWAP_BACKGROUND_RECLAIM", c.background_reclaim ? "1" : "0", 1);
  ::setenv("USWAP_RECLAIM_CLUSTER", std::to_string(c.reclaim_cluster).c_str(), 1);
  ::setenv("USWAP_STATS_FILE", stats_path, 1);
  // Open too, for the members that chroot or change their user (init.cc open_stats).
  pass_fd(::open(stats_path, O_WRONLY | O_APPEND | O_CLOEXEC), "USWAP_STATS_FD");
  ::unsetenv("USWAP_SECCOMP");  // a filter of an outer job is not this job's
  if (job_path.empty())
    ::unsetenv("USWAP_JOB");
  else
    ::setenv("USWAP_JOB", job_path.c_str(), 1);
  pass_fd(job_fd, "USWAP_JOB_FD");
  pass_fd(guest_fd, "USWAP_JOB_SOCK_FD");
  pass_fd(backing_fd, "USWAP_BACKING_FD");
  if (backing_path.empty())
    ::unsetenv("USWAP_BACKING");
  else
    ::setenv("USWAP_BACKING", backing_path.c_str(), 1);
  ::setenv("USWAP_BACKING_TIMEOUT_MS", std::to_string(uint64_t{c.backing_timeout} * 1000).c_str(),
           1);
  std::vector<char*> argv;
  for (const std::string& a : c.command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  std::fprintf(stderr, "uswap run: cannot run %s: %s\n", argv[0], std::strerror(errno));
  ::_exit(127);
}

// Waits for the program, passing on the signals sent to uswap run; its wait status. The terminal's signals reach the program through its process group.
// Meanwhile the job's watch runs (a killed member's share comes back at once).
int wait_for(pid_t pid, job_supervisor* sup) {
  ::signal(SIGINT, SIG_IGN);
  ::signal(SIGQUIT, SIG_IGN);
  child_pid = pid;
  for (int sig : {SIGTERM, SIGHUP, SIGUSR1, SIGUSR2, SIGALRM}) {
    struct sigaction sa {};
    sa.sa_handler = forward_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    ::sigaction(sig, &sa, nullptr);
  }
  int status = 0;
  for (;;) {
    const pid_t done = ::waitpid(pid, &status, sup ? WNOHANG : 0);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) break;
    if (sup) sup->poll(20);
  }
  return status;
}

// Forks the job's watch, which goes on until the last member ends, detached from the caller:
// its own session, no terminal signals, no hold on the caller's pipes (a `$(uswap run ...)`
// must not wait for a daemon). Its stderr stays only when it is a terminal, where a stop at
// --pool-limit is said. Returns the watcher's pid, 0 when the fork failed.
pid_t watch_in_background(job_supervisor& sup, const char* stats_path) {
  const pid_t w = ::fork();
  if (w != 0) return w < 0 ? 0 : w;
  ::setsid();
  for (int sig : {SIGTERM, SIGHUP, SIGUSR1, SIGUSR2, SIGALRM, SIGINT, SIGQUIT}) ::signal(sig, SIG_DFL);
  if (const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC); null >= 0) {
    ::dup2(null, 0);
    ::dup2(null, 1);
    if (!::isatty(2)) ::dup2(null, 2);
    ::close(null);
  }
  while (!sup.running_members().empty()) sup.poll(200);
  sup.finish();
  ::unlink(stats_path);
  ::_exit(0);
}

// The statistics lines the process images appended to `path`.
void read_statistics(const char* path, run_result& r) {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    try {
      auto j = nlohmann::json::parse(line);
      const std::string event = j.value("event", std::string());
      if (event == "unrouted_exec")
        r.unrouted_execs.push_back(std::move(j));
      else if (event == "traced")
        r.traced.push_back(std::move(j));
      else if (event == "hints_honored")
        r.hints_honored.push_back(std::move(j));
      else
        r.add_process(std::move(j));
    } catch (const std::exception&) {
      std::cerr << "uswap run: unreadable statistics line: " << line << "\n";
    }
  }
}

int run_sized(const run_config& c);

int run_program(const run_config& c) {
  if (int rc = check_options(c)) return rc;
  run_config sized = c;
  if (int rc = fit_arena_to_rlimits(sized)) return rc;
  return run_sized(sized);
}

int run_sized(const run_config& c) {
  const std::string shim = find_shim();
  if (::access(shim.c_str(), R_OK) != 0) {
    std::cerr << "uswap run: " << shim << " not found: the preload shim is built next to uswap "
              << "(not in sanitizer builds) and installed in " << USWAP_PRELOADDIR_FROM_BINDIR
              << " from uswap's directory\n";
    return 1;
  }
  bool preload_breaks = false;
  if (int rc = check_routable(c, &preload_breaks)) return rc;
  char stats_path[] = "/tmp/uswap-run-XXXXXX";
  const int sfd = ::mkstemp(stats_path);
  if (sfd < 0) {
    std::cerr << "uswap run: cannot create a statistics file: " << std::strerror(errno) << "\n";
    return 1;
  }
  ::close(sfd);
  // Processes of the job may run as another user (su, setpriv): they must be able to append.
  ::chmod(stats_path, 0622);
  std::string preload = preload_breaks || c.no_shim ? std::string() : shim;
  if (const char* old = ::getenv("LD_PRELOAD"); old && *old)
    preload += (preload.empty() ? "" : ":") + std::string(old);
  std::unique_ptr<job_supervisor> sup;
  if (!c.per_process) {
    job_supervisor::options o;
    o.limit = c.limit;
    o.pool_limit = c.pool_limit;
    o.backing = c.backing;
    o.backing_size = c.backing_size;
    o.stats_dir = c.stats_dir;
    auto s = job_supervisor::create(o);
    if (!s) {
      std::cerr << "uswap run: " << s.error().to_string() << "\n";
      ::unlink(stats_path);
      return 1;
    }
    sup = std::move(*s);
  }
  const std::string job_path = sup ? sup->member_path() : std::string();  // names this process
  const std::string backing_path = sup ? sup->backing_path() : std::string();
  const pid_t pid = ::fork();
  if (pid < 0) {
    std::cerr << "uswap run: fork: " << std::strerror(errno) << "\n";
    ::unlink(stats_path);
    return 1;
  }
  if (pid == 0)
    exec_program(c, preload, stats_path, job_path, backing_path, sup ? sup->member_fd() : -1,
                 sup ? sup->guest_socket() : -1, sup ? sup->backing_fd() : -1);
  run_result r;
  r.keep_all = c.json;
  const int status = wait_for(pid, sup.get());
  r.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (WIFSIGNALED(status)) end_by_signal(WTERMSIG(status));
  // Members that end with the program (killed with it, or exiting a moment later) are not a
  // daemon: a tenth of a second for them.
  for (int i = 0; sup && i < 5; ++i) {
    sup->poll(i ? 20 : 0);
    if ((r.running = sup->running_members()).empty()) break;
  }
  if (!r.running.empty()) {
    // A daemon's processes: uswap run returns as the program did, and a process of its own
    // watches the job on (its killed members' shares, --stats-dir, a stop at --pool-limit).
    r.watcher = watch_in_background(*sup, stats_path);
    r.job = sup->totals();
  } else if (sup) {
    r.job = sup->finish();
  }
  read_statistics(stats_path, r);
  if (!r.watcher) ::unlink(stats_path);  // else the watcher's, whose members still write to it
  // The report goes to stderr: stdout is the program's. --json: one line, the last on stderr,
  // and lost pages said in words before it too, as a stopped job is (whatever the format).
  if (c.json && r.job) print_lost_pages(std::cerr, *r.job);
  print_report(std::cerr, r, c.json, -1);
  return r.exit_status;
}

void add_run_command(CLI::App& app, command_table& table) {
  static run_config c;
  auto* sub = app.add_subcommand(
      "run",
      "Run any dynamically linked program with its anonymous memory paged through uswap "
      "(userfaultfd + zram): uswap run --limit 256M -- PROGRAM ARGS");
  add_size_option(*sub, "--limit", c.limit,
                  "Most bytes of the job's memory (every process it starts) resident at once");
  sub->add_flag("--limit-per-process", c.per_process,
                "--limit applies to each process on its own, not to the whole job");
  add_size_option(
      *sub, "--pool-limit", c.pool_limit,
      "Most bytes the job's compressed pools may hold (zram's mem_limit, for the whole "
      "job); past it cold pages go to --backing, or the job is stopped, named (0: none)");
  sub->add_option(
      "--backing", c.backing,
      "File the pools write cold pages back into past --pool-limit (zram's backing_dev, "
      "one for the job; created if missing), or an NBD export's URI (nbd://HOST/NAME, "
      "nbd+unix:///?socket=PATH): far memory on another machine");
  add_size_option(*sub, "--backing-size", c.backing_size,
                  "Size of the --backing file (0: its size, or 1G for a new one; an export's own)");
  sub->add_option("--backing-timeout", c.backing_timeout,
                  "Seconds an --backing NBD server that stopped answering is waited for (a read "
                  "of a page it holds, a pool with no room) before the read fails and the job is "
                  "stopped, named: a server back within it loses nothing")
      ->capture_default_str();
  sub->add_option("--stats-dir", c.stats_dir,
                  "Keep memory.current, memory.max, memory.peak, memory.swap.current, memory.stat, "
                  "mm_stat, io_stat and bd_stat (cgroup v2 and zram formats) up to date in this "
                  "directory while the job runs (made if missing; one it cannot write to is an "
                  "error before the program starts)");
  sub->add_option("--comp", c.comp, "zram compression: lz4, lz4hc, zstd, lzo")
      ->capture_default_str();
  add_size_option(
      *sub, "--max-size", c.max_size,
      "Virtual size of each process's arena, all its routed memory, rounded up to a power "
      "of two, 4G..8T (0: 4T, or under ulimit -v or -d the largest that leaves an eighth of "
      "the limit, at least 1G, to the program's other mappings)");
  add_size_option(*sub, "--swap", c.swap, "Swap space in zram (0: the arena, at most 2x RAM)");
  sub->add_option("--fault-mode", c.fault_mode,
                  "sigbus (faults resolved in the faulting thread) or handler-thread (by a thread "
                  "per CPU)")
      ->capture_default_str();
  sub->add_option("--access", c.access,
                  "userfaultfd to ask for: auto, full (kernel-mode faults), user-mode-only")
      ->capture_default_str();
  sub->add_flag("--allow-unrouted", c.allow_unrouted,
                "Run a program the shim cannot reach (static, setuid, Go, Free Pascal, sanitizer-built) "
                "unlimited instead of "
                "refusing it");
  sub->add_flag("--write-tracking", c.write_tracking,
                "Write-protect sweeps twice per lap of the clock, so that it sees writes as "
                "references (write-protect faults); off by default: for real programs the faults "
                "cost more than the refaults they save");
  sub->add_flag("--no-write-tracking", c.no_write_tracking,
                "No write-protect sweeps (the default): the clock sees references through faults "
                "only")
      ->excludes("--write-tracking");
  sub->add_flag("--background-reclaim", c.background_reclaim,
                "A reclaim thread in each process evicts ahead of its faults (kswapd), so that "
                "compression runs beside the program");
  sub->add_option("--reclaim-cluster", c.reclaim_cluster,
                  "Eviction's unit in pages (1, 2, 4 ... 64): a victim takes the neighbours of "
                  "its aligned window that are not active, write-protected with one call")
      ->capture_default_str();
  sub->add_flag("--json", c.json, "Print the statistics as JSON (the last line on stderr)");
  sub->add_option("command", c.command, "PROGRAM and its arguments, after --")->required();
  table.add(sub, [] { return run_program(c); });
}

const command_registrar reg{70, add_run_command};

}  // namespace
}  // namespace uswap::tools
