// The shim's constructor (configuration, the pager, mimalloc's arena, kernel access), its
// statistics (one JSON line per process image) and the sampler that measures what stays
// unrouted.
//
// Configuration (set by `uswap run`; without USWAP_LIMIT the shim stays out of the way):
//   USWAP_LIMIT         resident limit in bytes
//   USWAP_MAX_SIZE      the arena's virtual size (rounded up to a power of two, >= 4 GiB)
//   USWAP_SWAP_SIZE     swap space (default: the arena, at most twice the machine's RAM)
//   USWAP_COMP          compression algorithm
//   USWAP_FAULT_MODE    sigbus (default) or handler-thread
//   USWAP_ACCESS        auto, full or user-mode-only
//   USWAP_TRACK_WRITES  1: write-protect sweeps (pager_options::track_writes; off by default
//                       here, see uswap(1) --write-tracking)
//   USWAP_RECLAIM_CLUSTER  eviction's unit in pages (pager_options::reclaim_cluster)
//   USWAP_BACKGROUND_RECLAIM  1: a background reclaim thread (pager_options::background_reclaim;
//                       off by default here, see uswap(1) --background-reclaim)
//   USWAP_STATS_FILE    where the JSON lines go (stderr summary without it)
//   USWAP_STATS_FD      that file, open ("N:dev:ino", own_fd.h): used when it is still the same
//   USWAP_ARENA_BASE    where the arena goes (default 48 TiB); every process of a job uses the
//                       same range, because a seccomp filter an ancestor installed is inherited
//                       and tests that range
//   USWAP_SECCOMP       set by the shim that installed the filter ("lo:hi:trampoline"), so that
//                       its descendants know it is there
//   USWAP_FAIL_INJECT   testing: fault points to arm in each process ("pager_map:3+,..."; see
//                       uswap/base/fault_inject.h), passed through from uswap run's environment
// The arena sits at a fixed address with unmapped guard pages on both sides, so that the filter's
// test (one mask and compare) sees every buffer that touches it.
#include <errno.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <inttypes.h>
#include <link.h>
#include <malloc.h>
#include <mimalloc.h>
#include <pthread.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <tuple>
#include <utility>

#include "uswap/base/raw_syscall.h"
#include "../kernel_access.h"
#include "../syscall_table.h"
#include "shim.h"
#include "uswap/base/atomic_max.h"
#include "uswap/base/fault_inject.h"
#include "uswap/base/own_fd.h"
#include "uswap/base/page.h"
#include "uswap/base/units.h"
#include "uswap/uffd/routable.h"
#include "uswap/uffd/shim_arena.h"

extern char** environ;

namespace uswap::shim {

shim_state g;

namespace {

// 48 TiB: clear of fixed reservations runtimes make below 32 TiB (clisp reserves 16..32 TiB with
// MAP_FIXED) and far below where the kernel places mappings (just under 128 TiB, downwards).
constexpr uintptr_t default_arena_base = uintptr_t{0x3000} << 32;  // 48 TiB

uint64_t now_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

// The C library's environment, read and changed without the program's getenv and setenv: a
// program may define its own, and the constructor runs before the program's main. bash does,
// over its shell variables: its setenv before its main made a table of that one variable, and
// its getenv then found nothing else, so that bash read no job (nor its subshells), and its
// children found the job's descriptors under numbers the shim had left. Reading `environ`
// itself allocates nothing, which the mmap wrapper needs inside the program's malloc.
const char* env_get(const char* name) noexcept {
  const size_t n = strlen(name);
  for (char** e = environ; e && *e; ++e)
    if (strncmp(*e, name, n) == 0 && (*e)[n] == '=') return *e + n + 1;
  return nullptr;
}

void env_set(const char* name, const char* value) noexcept {
  static const auto libc_setenv =
      reinterpret_cast<int (*)(const char*, const char*, int)>(dlsym(RTLD_NEXT, "setenv"));
  if (libc_setenv) (void)libc_setenv(name, value, 1);
}

// `say`: name a bad value on stderr (the constructor); quiet before it (the mmap wrapper may run
// inside the program's malloc, where stdio must not).
uint64_t env_size(const char* name, uint64_t dflt, bool say = true) {
  const char* v = env_get(name);
  if (!v || !*v) return dflt;
  auto r = uswap::parse_size(v);
  if (!r) {
    if (say) fprintf(stderr, "uswap: bad %s=%s, using the default\n", name, v);
    return dflt;
  }
  return *r;
}

uint64_t round_up_pow2(uint64_t v) {
  uint64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

// --- What stays unrouted, sampled. RssAnon of the process minus the routed pages it maps (its
// charge, and the frames a forked child shares with the parent that charged them, which RssAnon
// counts in both), the compressed pool and the pager's tables (pager::metadata_bytes) is
// anonymous memory the pager does not hold: thread stacks, glibc-internal mappings, memory from
// before the constructor, the pager's other bookkeeping.
// Samples are taken after reclaim passes (when memory is tightest), on mapping changes and at
// exit, at most every 10 ms. No sampler thread: a thread of its own would make every program
// multi-threaded, and glibc's fork then walks structures (stdio's FILE list, the NSS state) in
// the child before any pthread_atfork handler can give the child its pager.
std::atomic<uint64_t> peak_anon{0}, peak_unrouted{0};
// Shared memory the process has resident (MAP_SHARED anonymous, memfd, /dev/shm, SysV shm:
// RssShmem). It is never routed: a page two processes map cannot be one process's to evict. Not
// limited, but reported, so that a job whose memory is mostly shared (a database's buffer pool,
// the JVM's ZGC heap) does not read as small.
std::atomic<uint64_t> peak_shmem{0};
std::atomic<uint64_t> last_sample_ns{0};

// /proc/self/status, read once: the kernel renders every line at each read, so a caller that
// needs several fields reads it once (this runs at every exec and exit of a job's processes).
struct proc_status {
  char buf[4096];
  proc_status() noexcept {
    buf[0] = 0;
    const int fd = ::open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    const ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    buf[n > 0 ? n : 0] = 0;
  }
  // The number on a "Field: N [kB]" line (KiB for sizes), or 0.
  uint64_t number(const char* field) const noexcept {
    const char* at = strstr(buf, field);
    return at ? strtoull(at + strlen(field), nullptr, 10) : 0;
  }
};

// One read of /proc/self/status for both figures a sample needs.
void sample_with(uint64_t routed, uint64_t pool) noexcept {
  const proc_status status;
  const uint64_t anon = status.number("RssAnon:") * 1024;
  fetch_max(peak_anon, anon);
  // The pager's tables grow with what it pages (about 1% of it): not the program's memory.
  const uint64_t held = routed + pool + (g.pg ? g.pg->metadata_bytes() : 0);
  fetch_max(peak_unrouted, anon > held ? anon - held : 0);
  // Less the job's own segment, which every member maps (mincore only when there is shmem).
  const uint64_t shmem = status.number("RssShmem:") * 1024;
  const uint64_t own = shmem && g.job ? (*g.job)->resident_bytes() : 0;
  fetch_max(peak_shmem, shmem > own ? shmem - own : 0);
}

uint64_t coarse_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

// Whether 10 ms passed since the last sample (and claims this one).
bool sample_due() noexcept {
  const uint64_t now = coarse_ns();
  uint64_t last = last_sample_ns.load(std::memory_order_relaxed);
  return now - last >= 10 * 1000 * 1000 &&
         last_sample_ns.compare_exchange_strong(last, now, std::memory_order_relaxed);
}

// No sample once the program sandboxed itself: it opens /proc and calls mincore, which a
// sandbox refuses (sandbox.cc: the shim makes no call of its own from then on).
void reclaim_sample(void*, uint64_t mapped_pages, uint64_t pool_bytes) {
  if (!program_sandboxed.load(std::memory_order_relaxed) && sample_due())
    sample_with(mapped_pages * uswap::page_size, pool_bytes);
}

// --- Statistics lines.
void program_name(char* out, size_t len) noexcept {
  snprintf(out, len, "?");
  const int fd = ::open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    // No /proc after a chroot: the calling thread's name, usually the main thread's.
    char name[17] = {};
    if (::prctl(PR_GET_NAME, name) == 0 && name[0]) snprintf(out, len, "%s", name);
  } else {
    const ssize_t n = ::read(fd, out, len - 1);
    ::close(fd);
    if (n <= 0) return;
    out[n] = 0;
  }
  out[strcspn(out, "\n")] = 0;
  for (char* p = out; *p; ++p)
    if (*p == '"' || *p == '\\' || static_cast<unsigned char>(*p) < 0x20) *p = '_';
}

void append_line(const char* line, size_t n) noexcept {
  if (!g.stats_file) {
    (void)write_line(2, line, n);
    return;
  }
  if (g.stats_fd >= 0) {
    (void)write_line(g.stats_fd, line, n);
    return;
  }
  const int fd = ::open(g.stats_file, O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) return;
  (void)write_line(fd, line, n);
  ::close(fd);
}

void at_exit() { image_ends("exit"); }

}  // namespace

ssize_t write_line(int fd, const void* buf, size_t n) noexcept {
  if (program_sandboxed.load(std::memory_order_relaxed)) return -1;
  rlimit fsize{};
  if (::getrlimit(RLIMIT_FSIZE, &fsize) != 0 || fsize.rlim_cur == RLIM_INFINITY)
    return ::write(fd, buf, n);
  // SIGXFSZ ignored for the call: a signal sent while it is ignored is dropped, not kept
  // pending. Another thread's own SIGXFSZ in that moment is dropped too (the write that raised
  // it still fails with EFBIG).
  kernel_sigaction ign{reinterpret_cast<void*>(SIG_IGN), 0, nullptr, 0}, old{};
  if (uswap::raw_syscall(SYS_rt_sigaction, SIGXFSZ, reinterpret_cast<long>(&ign),
                         reinterpret_cast<long>(&old), 8) != 0)
    return -1;  // the line is lost rather than the process
  const ssize_t r = ::write(fd, buf, n);
  uswap::raw_syscall(SYS_rt_sigaction, SIGXFSZ, reinterpret_cast<long>(&old), 0, 8);
  return r;
}

namespace {

// The executable's .bss beyond the page its file data ends in: the first object
// dl_iterate_phdr reports is the main program.
int static_data_of_program(struct dl_phdr_info* info, size_t, void* out) {
  uint64_t bytes = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || ph.p_memsz <= ph.p_filesz) continue;
    const uint64_t file_end = uswap::round_up_to_page(ph.p_vaddr + ph.p_filesz);
    const uint64_t mem_end = uswap::round_up_to_page(ph.p_vaddr + ph.p_memsz);
    if (mem_end > file_end) bytes += mem_end - file_end;
  }
  *static_cast<uint64_t*>(out) = bytes;
  return 1;  // the main program only
}

void after_fork_child() {
  // The child's own figures start now.
  g.pid = getpid();
  g.stats_written.store(false);
  g.start_ns = now_ns();
  peak_anon.store(0);
  peak_unrouted.store(0);
  peak_shmem.store(0);
}

}  // namespace

void sample() noexcept {
  if (!ready()) return;
  shim_scope s;
  const pager_stats st = g.pg->stats();
  sample_with((st.resident_pages + st.shared_pages) * uswap::page_size, st.zram_mem_used_total);
}

void sample_if_due() noexcept {
  if (ready() && !program_sandboxed.load(std::memory_order_relaxed) && sample_due())
    pager_call([] { sample(); });  // off a stack in the arena
}

void write_stats(const char* event) noexcept {
  // Once per image; never for a vfork child, whose pager is its parent's.
  if (!ready() || program_sandboxed.load(std::memory_order_relaxed) || getpid() != g.pid ||
      g.stats_written.exchange(true))
    return;
  sample();
  shim_scope s;
  const pager_stats st = g.pg->stats();
  char prog[64];
  program_name(prog, sizeof prog);
  const kernel_access_stats ka = kernel_access_get_stats();
  const proc_status status;
  // A guest is named by the supervisor at its watch's next round, which a short-lived process
  // (an ls) may just outlive: its line waits a moment for the name.
  pid_t job_pid = g.pg->job_pid();
  for (int i = 0; job_pid == 0 && g.pg->in_job() && i < 50; ++i) {
    const timespec one_ms{0, 1000 * 1000};
    uswap::raw_syscall(SYS_nanosleep, reinterpret_cast<uintptr_t>(&one_ms), 0);  // no wrapper's
    job_pid = g.pg->job_pid();
  }
  char line[2048];
  const int n = snprintf(
      line, sizeof line,
      "{\"pid\":%d,\"ppid\":%d,\"event\":\"%s\",\"program\":\"%s\",\"mode\":\"%s\",\"uffd\":\"%s\","
      "\"kernel_access\":\"%s\",\"limit_bytes\":%" PRIu64 ",\"peak_resident_bytes\":%" PRIu64
      ",\"routed_peak_bytes\":%" PRIu64 ",\"unrouted_anon_peak_bytes\":%" PRIu64
      ",\"anon_peak_bytes\":%" PRIu64 ",\"vm_hwm_bytes\":%" PRIu64 ",\"faults\":%" PRIu64
      ",\"wp_faults\":%" PRIu64 ",\"zero_fills\":%" PRIu64 ",\"swap_ins\":%" PRIu64
      ",\"swap_outs\":%" PRIu64 ",\"clean_evictions\":%" PRIu64 ",\"zero_evictions\":%" PRIu64
      ",\"swap_out_bytes\":%" PRIu64 ",\"compressed_bytes\":%" PRIu64 ",\"fault_ns\":%" PRIu64
      ",\"fault_p50_ns\":%" PRIu64 ",\"fault_p99_ns\":%" PRIu64 ",\"overcharges\":%" PRIu64
      ",\"swap_out_failures\":%" PRIu64 ",\"store_refusals\":%" PRIu64
      ",\"eviction_batches\":%" PRIu64 ",\"zram_mem_used_max\":%" PRIu64
      ",\"mapped_bytes\":%" PRIu64 ",\"mappings\":%" PRIu64 ",\"foreign_bytes\":%" PRIu64
      ",\"forks\":%" PRIu64 ",\"trapped_syscalls\":%" PRIu64 ",\"emulated_syscalls\":%" PRIu64
      ",\"restarted_waits\":%" PRIu64 ",\"retrapped_waits\":%" PRIu64
      ",\"program_signals_deferred\":%" PRIu64
      ",\"run_ns\":%" PRIu64 ",\"reclaim_passes\":%" PRIu64 ",\"wp_sweeps\":%" PRIu64
      ",\"evict_wp_pages\":%" PRIu64 ",\"evict_wp_calls\":%" PRIu64 ",\"file_rss_bytes\":%" PRIu64
      ",\"pgsteal_kswapd\":%" PRIu64 ",\"pgsteal_direct\":%" PRIu64 ",\"shmem_peak_bytes\":%" PRIu64
      ",\"job_requests_served\":%" PRIu64 ",\"job_signals\":%" PRIu64
      ",\"job_signals_deferred\":%" PRIu64 ",\"member_faults_served\":%" PRIu64
      ",\"member_faults_asked\":%" PRIu64 ",\"static_data_bytes\":%" PRIu64
      ",\"shared_spared\":%" PRIu64 "}\n",
      // A guest (another pid namespace's process) by the pid the job knows it by; its parent's
      // pid there is not known.
      static_cast<int>(job_pid > 0 ? job_pid : getpid()),
      static_cast<int>(job_pid > 0 && job_pid != getpid() ? 0 : getppid()), event, prog,
      std::string(uswap::to_string(g.pg->mode())).c_str(), g.pg->uffd_origin(),
      g.seccomp ? "seccomp" : "kernel-faults", st.limit_pages * uswap::page_size,
      st.peak_resident_pages * uswap::page_size, st.peak_resident_pages * uswap::page_size,
      peak_unrouted.load(), peak_anon.load(), status.number("VmHWM:") * 1024, st.faults,
      st.wp_faults, st.zero_fills, st.swap_ins, st.swap_outs, st.clean_evictions, st.zero_evictions,
      st.swap_out_bytes, st.compressed_bytes, st.fault_ns, st.fault_p50_ns, st.fault_p99_ns,
      st.overcharges, st.swap_out_failures, st.store_refusals, st.eviction_batches,
      st.zram_mem_used_max, st.mapped_bytes, st.mappings,
      st.foreign_bytes, st.forks, ka.trapped, ka.emulated, ka.restarted, ka.retrapped,
      ka.deferred_signals, now_ns() - g.start_ns, st.reclaim_passes,
      st.wp_sweeps, st.evict_wp_pages, st.evict_wp_calls, status.number("RssFile:") * 1024,
      st.pgsteal_kswapd, st.pgsteal_direct, peak_shmem.load(), st.job_requests_served,
      st.job_signals, st.job_signals_deferred, st.member_faults_served, st.member_faults_asked,
      g.static_bytes, st.shared_spared);
  if (n > 0) append_line(line, std::min<size_t>(static_cast<size_t>(n), sizeof line - 1));
}

void image_ends(const char* event) noexcept {
  // A child that shares this memory and is not this image (vfork; a clone with CLONE_VM and a
  // thread pointer of its own, as Chromium's chroot helper, whose TLS block is zeros): nothing
  // here is its to do, and pager code, which reads TLS first thing, would crash in it.
  if (!ready() || uswap::raw_syscall(SYS_getpid) != g.pid) return;
  pager_call([event] {  // off a stack in the arena
    write_stats(event);
    // Not in a vfork child, which shares its parent's pager.
    if (getpid() == g.pid && g.pg->in_job()) g.pg->leave_job();
  });
}

void image_goes_on() noexcept {
  g.stats_written.store(false);
  if (ready() && getpid() == g.pid && g.job && !g.pg->in_job())
    pager_call([] { (void)g.pg->join_job(*g.job); });  // off a stack in the arena
}

void note_unrouted_exec(const char* path, const char* reason) noexcept {
  fprintf(stderr, "uswap: %s is %s: it runs unrouted, its memory is not limited\n", path, reason);
  char line[1024], p[512], r[400];
  // JSON strings: the path is the program's, the reason may quote an error message.
  for (auto [to, size, from] : {std::tuple{p, sizeof p, path}, std::tuple{r, sizeof r, reason}}) {
    snprintf(to, size, "%s", from);
    for (char* c = to; *c; ++c)
      if (*c == '"' || *c == '\\' || static_cast<unsigned char>(*c) < 0x20) *c = '_';
  }
  const int n =
      snprintf(line, sizeof line,
               "{\"pid\":%d,\"event\":\"unrouted_exec\",\"path\":\"%s\",\"reason\":\"%s\"}\n",
               static_cast<int>(getpid()), p, r);
  if (n > 0) append_line(line, std::min<size_t>(static_cast<size_t>(n), sizeof line - 1));
}

namespace {
// The same for this image, named by /proc/self/exe (under valgrind, the client's).
void note_unrouted_self(const char* reason) noexcept {
  char exe[512];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[n > 0 ? n : 0] = 0;
  note_unrouted_exec(n > 0 ? exe : "?", reason);
}
}  // namespace

void note_hints_honored(unsigned rejected) noexcept {
  char prog[64];
  program_name(prog, sizeof prog);
  fprintf(stderr,
          "uswap: %s unmapped %u reservations the arena placed elsewhere than the address it "
          "asked for (mmap hints): its reservations at addresses of its own choosing now stay "
          "with the kernel, unrouted\n",
          prog, rejected);
  char line[256];
  const int n = snprintf(line, sizeof line,
                         "{\"pid\":%d,\"event\":\"hints_honored\",\"program\":\"%s\","
                         "\"rejected\":%u}\n",
                         static_cast<int>(getpid()), prog, rejected);
  if (n > 0) append_line(line, std::min<size_t>(static_cast<size_t>(n), sizeof line - 1));
}

namespace {

// A debugger or tracer that had the process when the shim loaded (gdb --args, strace -f):
// it sees the pager's signals and cannot read pages that are swapped out (the arena is
// user-mode-only to the kernel, and a stopped process's pager serves nobody). Said on a
// terminal, where someone debugs, and in the run's statistics for the summary.
void note_tracer(int job_signal, uint64_t tracer) noexcept {
  if (tracer == 0) return;
  char path[64], comm[64] = "?", prog[64];
  snprintf(path, sizeof path, "/proc/%llu/comm", static_cast<unsigned long long>(tracer));
  if (const int fd = ::open(path, O_RDONLY | O_CLOEXEC); fd >= 0) {
    const ssize_t n = ::read(fd, comm, sizeof comm - 1);
    ::close(fd);
    comm[n > 0 ? n : 0] = 0;
    comm[strcspn(comm, "\n")] = 0;
    for (char* c = comm; *c; ++c)
      if (*c == '"' || *c == '\\' || static_cast<unsigned char>(*c) < 0x20) *c = '_';
  }
  program_name(prog, sizeof prog);
  char sigs[48];
  if (job_signal)
    snprintf(sigs, sizeof sigs, "SIGBUS SIGSYS SIG%d", job_signal);
  else
    snprintf(sigs, sizeof sigs, "SIGBUS SIGSYS");
  if (isatty(2))
    fprintf(stderr,
            "uswap: %s (pid %d) runs under %s (pid %llu): the pager's %s reach it (gdb: handle %s "
            "nostop noprint pass), and memory that is swapped out cannot be read through it\n",
            prog, static_cast<int>(getpid()), comm, static_cast<unsigned long long>(tracer), sigs,
            sigs);
  char line[256];
  const int n = snprintf(line, sizeof line,
                         "{\"pid\":%d,\"event\":\"traced\",\"program\":\"%s\",\"tracer\":"
                         "\"%s\",\"tracer_pid\":%llu,\"signals\":\"%s\"}\n",
                         static_cast<int>(getpid()), prog, comm,
                         static_cast<unsigned long long>(tracer), sigs);
  if (n > 0) append_line(line, std::min<size_t>(static_cast<size_t>(n), sizeof line - 1));
}

// Valgrind runs its client on its own CPU: every access the program makes is valgrind's, and
// valgrind emulates neither userfaultfd nor seccomp filters, so a pager under it would serve
// nothing (and the shim's first system calls there never return). Valgrind puts its vgpreload
// objects first in its client's LD_PRELOAD and takes them out again for the children it does
// not trace, so their presence means this process runs on valgrind.
bool on_valgrind() noexcept {
  const char* p = env_get("LD_PRELOAD");
  return p && strstr(p, "/vgpreload_core-");
}

// A Go program built with cgo (the only kind that loads the shim: the others are static). Its
// runtime maps its heap through the C library's mmap, which the shim would route, but it blocks
// every signal with system calls of its own (a thread's exit, a callback from a C thread) while
// it touches that heap: a fault with SIGBUS blocked, or a trap with SIGSYS blocked, kills the
// process. So it runs unrouted, as uswap run and the exec wrappers have said (routable.h), with
// the shim out of its way; its environment still names the shim for the programs it starts.
bool go_runtime() noexcept {
  return dlsym(RTLD_DEFAULT, "_cgo_topofstack") != nullptr ||
         dlsym(RTLD_DEFAULT, "crosscall2") != nullptr;
}

int pin_cb(void* ctx, const void* addr, uint64_t len, bool write) {
  auto* p = static_cast<pager*>(ctx);
  shim_scope s;
  const uswap::status st = p->pin(addr, len, write);
  return st.ok() ? 0 : st.code();
}

}  // namespace

std::pair<uintptr_t, uintptr_t> object_text(uintptr_t fn) noexcept {
  struct search {
    uintptr_t fn;
    std::pair<uintptr_t, uintptr_t> text;
  } c{fn, {0, 0}};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* p) -> int {
        auto* c = static_cast<search*>(p);
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
          const uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
          if (c->fn >= lo && c->fn < lo + ph.p_memsz) {
            c->text = {lo, lo + ph.p_memsz};
            return 1;
          }
        }
        return 0;
      },
      &c);
  return c.text;
}

namespace {

// The C library's text: raw forks made from it (its clone() and syscall()) are trapped.
std::pair<uintptr_t, uintptr_t> libc_text() noexcept {
  return object_text(reinterpret_cast<uintptr_t>(&::clone));
}

// Raw forks (kernel_access.h): what fork() and its pthread_atfork handlers do for the pager and
// the shim, around a clone the program makes itself.
bool raw_fork_prepare(void*) {
  shim_scope s;
  return uswap::pager_fork_prepare();
}

void raw_fork_parent(void*, long result) {
  shim_scope s;
  uswap::pager_fork_parent();
  g.pg->fork_returned(static_cast<pid_t>(result));
}

void raw_fork_child(void*) {
  shim_scope s;
  uswap::pager_fork_child();
  after_fork_child();
}

// A copy with another process of the job stopped at a page of that process's that was not
// resident: that member's pager makes it resident (pager::fault_in_member). Not for a copy
// the pager makes itself.
long remote_fault(void* ctx, pid_t pid, uintptr_t addr, uint64_t len, bool write) {
  if (in_pager_code()) return 0;
  return static_cast<uswap::pager*>(ctx)->fault_in_member(pid, addr, len, write);
}

// The program's sandbox refused a call. The program's own: its handler decides (Firefox's
// brokers the file opens). The pager's (a statistics sample's open of /proc, a job's nudge): it
// fails with EPERM here, as a sandbox that denies it would make it fail, and the program's
// handler never runs inside the pager, where it could wait forever for a lock the pager holds
// (Firefox's content processes hung so: the handler touched an evicted page during a reclaim
// pass's sample). Said once.
int foreign_trap(void*, int nr) {
  if (!in_pager_code()) return 0;
  static std::atomic<bool> said{false};
  if (said.exchange(true)) return EPERM;
  // Plain writes: this is a signal handler.
  const syscall_table::syscall_spec* s = syscall_table::lookup(nr);
  char num[24];
  char* p = num + sizeof num - 1;
  *p = 0;
  unsigned v = static_cast<unsigned>(nr);
  do *--p = static_cast<char>('0' + v % 10);
  while (v /= 10);
  const char* parts[] = {"uswap: a seccomp filter the program installed refused the pager's ",
                         s && s->name ? s->name : "system call", " (", p,
                         "): the pager goes on without it (EPERM); if paging fails for it, run "
                         "the program with its sandbox off (chromium: --no-sandbox, firefox: "
                         "MOZ_DISABLE_CONTENT_SANDBOX=1)\n"};
  for (const char* part : parts) (void)!::write(2, part, strlen(part));
  return EPERM;
}

void unpin_cb(void* ctx, const void* addr, uint64_t len) {
  auto* p = static_cast<pager*>(ctx);
  shim_scope s;
  (void)p->unpin(addr, len);
}

// A descriptor of the job (its segment, its backing file) this process inherited, named in
// `var` (own_fd.h), or -1.
int inherited(const char* var) { return uswap::own_fd_inherited(env_get(var)); }

// Keeps `fd` for this process and the programs it execs: out of the program's reach (own_fd.h)
// and named again in `var`, its number being new.
int hand_on(int fd, const char* var) {
  fd = uswap::own_fd_take(fd);
  char name[64];
  if (uswap::own_fd_pass_on(fd, name, sizeof name)) env_set(var, name);
  return fd;
}

// The statistics file: inherited (USWAP_STATS_FD) or opened now by its path, and kept open, so
// that a process that chroots (dovecot's imap-login and anvil) or becomes a user who may not open
// it still writes its line at exit; -1 when neither works (the path is tried at each line then).
int open_stats() {
  int fd = inherited("USWAP_STATS_FD");
  if (fd < 0 && g.stats_file) fd = ::open(g.stats_file, O_WRONLY | O_APPEND | O_CLOEXEC);
  return fd < 0 ? -1 : hand_on(fd, "USWAP_STATS_FD");
}

// uswap run's job: the segment's descriptor inherited (USWAP_JOB_FD), else opened by its path
// (USWAP_JOB, /proc/PID/fd/N of the supervisor: found by a process whose parent closed the
// descriptor, but not by one that changed its user, nor after the supervisor is gone). Without
// either the process is limited on its own, and says so.
std::shared_ptr<uswap::job>* attach_job(const char* path) {
  int fd = inherited("USWAP_JOB_FD");
  if (fd < 0 && (!path || (fd = ::open(path, O_RDWR | O_CLOEXEC)) < 0)) {
    fprintf(stderr,
            "uswap: cannot open the job's segment %s (%s): this process is limited on its own\n",
            path ? path : "(none)", path ? strerror(errno) : "no descriptor inherited");
    return nullptr;
  }
  auto j = uswap::job::attach(fd);
  if (!j) {
    ::close(fd);
    fprintf(stderr, "uswap: %s: this process is limited on its own\n",
            j.error().to_string().c_str());
    return nullptr;
  }
  hand_on(fd, "USWAP_JOB_FD");
  // The job's socket, for a process in another pid namespace to be named by (job.h, guests).
  if (const int sock = inherited("USWAP_JOB_SOCK_FD"); sock >= 0)
    (*j)->set_guest_socket(hand_on(sock, "USWAP_JOB_SOCK_FD"));
  return new std::shared_ptr<uswap::job>(std::move(j).value());
}

void join_job(std::shared_ptr<uswap::job>* shared) {
  // The main thread serves reclaim requests that come with the job's signal: its compression
  // stream and swap slot are made now, so that serving one allocates nothing.
  g.pg->warm_up();
  install_job_signal((*shared)->signal());
  if (auto st = g.pg->join_job(*shared); !st.ok()) {
    // Once per tree: in a container or sandbox (a pid namespace of its own) every process
    // would say the same (USWAP_ALONE_SAID is inherited, and kept as the job's variables are).
    const char* said = env_get("USWAP_ALONE_SAID");
    if (!said || strcmp(said, st.to_string().c_str()) != 0) {
      fprintf(stderr,
              "uswap: cannot join the job (%s): this process is limited on its own (and so is "
              "each it starts for the same reason, not said again)\n",
              st.to_string().c_str());
      env_set("USWAP_ALONE_SAID", st.to_string().c_str());
    }
    return;
  }
  g.job = shared;
}

// The guard pages on both sides of the arena (kernel_access.h's invariant): a buffer that ends
// in the arena starts in it. The upper one becomes the first page of the kernel's part of a
// reservation placed across the arena's end (mmap.cc), and is mapped again after its unmap.
void map_guards(uintptr_t lo, uintptr_t hi) {
  for (uintptr_t a : {lo - uswap::page_size, hi})
    uswap::raw_syscall(SYS_mmap, a, uswap::page_size, PROT_NONE,
              MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
}

// The arena's place as the environment gives it: an ancestor's filter's range (USWAP_SECCOMP,
// which fixes it), or USWAP_ARENA_BASE aligned down to the size USWAP_MAX_SIZE asks for. `say`
// as env_size's: the constructor names a bad value, the mmap wrapper asks quietly.
struct arena_plan {
  uintptr_t lo = 0, hi = 0;  // [lo, hi): the arena
  uint64_t asked = 0;        // the size this image asks for (USWAP_MAX_SIZE, rounded)
  bool inherited = false;    // an ancestor's filter tests [lo, hi)
  uintptr_t tramp = 0;       // its trampoline
};
arena_plan plan_arena(bool say) noexcept {
  arena_plan a;
  a.asked =
      std::max(round_up_pow2(env_size("USWAP_MAX_SIZE", uswap::shim_arena::default_size, say)),
               uswap::shim_arena::min_size);
  if (const char* sc = env_get("USWAP_SECCOMP"); sc && *sc) {
    unsigned long long lo = 0, hi = 0, tr = 0;
    if (sscanf(sc, "%llx:%llx:%llx", &lo, &hi, &tr) == 3 && lo < hi) {
      a.lo = lo;
      a.hi = hi;
      a.inherited = true;
      a.tramp = tr;
      return a;
    }
  }
  a.lo = env_size("USWAP_ARENA_BASE", default_arena_base, say) & ~(a.asked - 1);
  a.hi = a.lo + a.asked;
  return a;
}

}  // namespace

bool in_planned_arena(const void* addr, size_t len) noexcept {
  // Computed once (the environment is the one the image started with); a race computes the
  // same twice. hi == 0: not yet; lo == hi: the shim is not configured.
  static std::atomic<uintptr_t> plan_lo{0}, plan_hi{0};
  uintptr_t hi = plan_hi.load(std::memory_order_acquire);
  if (hi == 0) {
    const char* limit = env_get("USWAP_LIMIT");
    arena_plan a;
    if (limit && *limit) a = plan_arena(/*say=*/false);
    // The guard pages and the trampoline below, the guard page above (kernel_access.h).
    const uintptr_t lo = a.hi ? a.lo - pager_pages_below_arena - uswap::page_size : 1;
    hi = a.hi ? a.hi + uswap::page_size : 1;
    plan_lo.store(lo, std::memory_order_relaxed);
    plan_hi.store(hi, std::memory_order_release);
  }
  const auto p = reinterpret_cast<uintptr_t>(addr);
  return len != 0 && p < hi && p + len > plan_lo.load(std::memory_order_relaxed);
}

namespace {

__attribute__((constructor)) void shim_init() {
  shim_scope s;
  resolve_libc();
  const char* limit = env_get("USWAP_LIMIT");
  if (!limit || !*limit) return;  // not under uswap run: stay out of the way

  uswap::pager_options o;
  o.limit = env_size("USWAP_LIMIT", 0);
  const arena_plan plan = plan_arena(/*say=*/true);
  const uint64_t size = plan.asked;
  o.max_size = size;
  struct sysinfo si {};
  const uint64_t ram = ::sysinfo(&si) == 0 ? uint64_t{si.totalram} * si.mem_unit : size;
  o.swap_size = env_size("USWAP_SWAP_SIZE", std::min<uint64_t>(size, 2 * ram));
  o.reclaim_hook = reclaim_sample;
  if (const char* c = env_get("USWAP_COMP"); c && *c) o.comp_algorithm = c;
  o.mode = uswap::fault_mode::sigbus;
  if (const char* m = env_get("USWAP_FAULT_MODE"); m && *m)
    if (auto fm = uswap::parse_fault_mode(m)) o.mode = *fm;
  const char* tw = env_get("USWAP_TRACK_WRITES");
  o.track_writes = tw && strcmp(tw, "1") == 0;
  const char* br = env_get("USWAP_BACKGROUND_RECLAIM");
  o.background_reclaim = br && strcmp(br, "1") == 0;
  if (const char* rc = env_get("USWAP_RECLAIM_CLUSTER"); rc && *rc)
    o.reclaim_cluster = static_cast<unsigned>(strtoul(rc, nullptr, 10));
  if (const char* a = env_get("USWAP_ACCESS"); a && *a)
    if (auto ac = uswap::parse_uffd_access(a)) o.access = *ac;
  // A copy: programs that set their process title (redis, postgres) overwrite the memory their
  // environment strings were in.
  if (const char* f = env_get("USWAP_STATS_FILE"); f && *f) g.stats_file = strdup(f);
  g.stats_fd = open_stats();
  if (on_valgrind()) {
    note_unrouted_self("run on valgrind, which emulates neither userfaultfd nor seccomp filters");
    return;
  }
  // Named unrouted by whoever started it.
  if (go_runtime() || uswap::own_runtime_reason()) return;
  // Fault injection for tests (uswap/base/fault_inject.h): armed before the pager exists, so
  // that its creation counts too.
  if (const char* fi = env_get("USWAP_FAIL_INJECT"); fi && *fi) {
    if (auto st = uswap::fault_inject_setup(fi); !st.ok())
      fprintf(stderr, "uswap: USWAP_FAIL_INJECT ignored: %s\n", st.to_string().c_str());
  }
  // The job, and with it the backing file all its processes write back into.
  std::shared_ptr<uswap::job>* job = nullptr;
  if (const char* jp = env_get("USWAP_JOB"); (jp && *jp) || env_get("USWAP_JOB_FD"))
    job = attach_job(jp && *jp ? jp : nullptr);
  if (const char* b = env_get("USWAP_BACKING"); job && b && *b && (*job)->backing_blocks()) {
    // A backing file inherited is reopened through this process's own descriptor table, which
    // whatever its user it may read.
    if (const int fd = inherited("USWAP_BACKING_FD"); fd >= 0)
      o.backing_dev = "/proc/self/fd/" + std::to_string(hand_on(fd, "USWAP_BACKING_FD"));
    else
      o.backing_dev = b;
    o.backing_allocator = new uswap::job_blocks(**job);  // as long as the process
    if (const char* t = env_get("USWAP_BACKING_TIMEOUT_MS"); t && *t)
      if (const uint64_t ms = strtoull(t, nullptr, 10)) o.backing_timeout_ms = ms;
  }

  // The arena's place: the one an ancestor's filter tests, if there is one.
  const uintptr_t inherited_lo = plan.inherited ? plan.lo : 0,
                  inherited_hi = plan.inherited ? plan.hi : 0, inherited_tramp = plan.tramp;
  o.arena_base = plan.lo;
  if (inherited_lo && inherited_hi - inherited_lo != size) {
    fprintf(stderr,
            "uswap: an ancestor's arena is %llu MiB, this process asks for %llu MiB: "
            "using the ancestor's\n",
            static_cast<unsigned long long>((inherited_hi - inherited_lo) >> 20),
            static_cast<unsigned long long>(size >> 20));
    o.max_size = inherited_hi - inherited_lo;
  }
  auto p = uswap::pager::create(o);
  if (!p) {
    // Named in the job's summary too: a limit that holds nothing must not pass unnoticed.
    char why[400];
    snprintf(why, sizeof why, "without a pager (%s)", p.error().to_string().c_str());
    note_unrouted_self(why);
    return;
  }
  g.owner = new std::shared_ptr<uswap::pager>(std::move(p).value());
  g.pg = g.owner->get();
  g.kswapd_wanted = &g.pg->kswapd_wanted();
  g.arena_lo = g.pg->arena_start();
  g.arena_hi = g.arena_lo + g.pg->arena_size();
  g.limit = o.limit;
  g.sigbus_mode = o.mode == uswap::fault_mode::sigbus;
  map_guards(g.arena_lo, g.arena_hi);
  install_thread_altstack();
  if (job) join_job(job);

  if (!g.pg->kernel_faults()) {
    // System calls into the arena need their pages pinned: the seccomp filter. The trampoline
    // sits 64 KiB below the arena, the same address in every process of the job.
    uswap::kernel_access_config kc;
    kc.arena_lo = g.arena_lo;
    kc.arena_hi = g.arena_hi;
    kc.trampoline_addr = inherited_tramp ? inherited_tramp : g.arena_lo - 16 * uswap::page_size;
    kc.pin = pin_cb;
    kc.unpin = unpin_cb;
    kc.ctx = g.pg;
    std::tie(kc.fork_trap_lo, kc.fork_trap_hi) = libc_text();
    kc.fork_prepare = raw_fork_prepare;
    kc.fork_parent = raw_fork_parent;
    kc.fork_child = raw_fork_child;
    kc.foreign_trap = foreign_trap;
    kc.remote_fault = remote_fault;
    kc.max_pin_bytes = std::max<uint64_t>(o.limit / 8, 16 * uswap::page_size) & uswap::page_mask;
    const bool inherited = inherited_lo == g.arena_lo && inherited_hi == g.arena_hi;
    if (auto st = uswap::kernel_access_install(kc, inherited); !st.ok()) {
      char why[400];
      snprintf(why, sizeof why,
               "without the seccomp filter that lets system calls reach paged memory (%s)",
               st.to_string().c_str());
      note_unrouted_self(why);
      return;  // the pager stays, unused: nothing is routed into it
    }
    g.seccomp = true;
    if (!inherited) {
      char v[96];
      snprintf(v, sizeof v, "%llx:%llx:%llx", static_cast<unsigned long long>(kc.arena_lo),
               static_cast<unsigned long long>(kc.arena_hi),
               static_cast<unsigned long long>(kc.trampoline_addr));
      setenv("USWAP_SECCOMP", v, 1);  // before `ready`: glibc's malloc, outside the arena
    }
  }

  // mimalloc's memory: a managed arena inside the pager's (shim_arena.h says how large).
  const uint64_t heap = uswap::shim_arena::managed_heap(g.pg->arena_size());
  if (auto h = g.pg->map(heap, uint64_t{32} << 20); h.ok()) {
    mi_arena_id_t id;
    if (!mi_manage_os_memory_ex(*h, heap, /*is_committed=*/true, /*is_large=*/false,
                                /*is_zero=*/true, /*numa_node=*/-1, /*exclusive=*/false, &id))
      (void)g.pg->unmap(*h, heap);  // mimalloc then maps its own, through the shim, into the pager
  }

  // glibc's malloc serves pager code only (and what came before): one arena, not one per thread
  // that ever resolved a fault (each a 64 MiB reservation with its own partly used heap).
  mallopt(M_ARENA_MAX, 1);

  // glibc's fork reads and resets its NSS state in the child before any pthread_atfork handler
  // runs (stdio.cc says why that matters): allocate it now, from glibc's malloc, rather than at
  // the program's first user or host lookup, from the arena.
  endpwent();

  // What the pager reserved, as the kernel counts it against RLIMIT_DATA and RLIMIT_AS
  // (rlimit.cc): all of it but the little the program had mapped before this constructor.
  const proc_status status;
  g.reserved_data = status.number("VmData:") * 1024;
  g.reserved_vm = status.number("VmSize:") * 1024;
  dl_iterate_phdr(static_data_of_program, &g.static_bytes);

  g.start_ns = now_ns();
  g.pid = getpid();
  // Registered after the pager's own pthread_atfork handlers, so that the pager is rebuilt
  // before the sampler restarts.
  pthread_atfork(nullptr, nullptr, after_fork_child);
  // Registered before any of the program's exit handlers, so it runs after all of them.
  atexit(at_exit);
  keep_job_environment();
  g.ready.store(true, std::memory_order_release);
  note_tracer(job ? (*job)->signal() : 0, status.number("TracerPid:"));
}

}  // namespace
}  // namespace uswap::shim
