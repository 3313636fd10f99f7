// The state the parts of libuswap-preload.so share (init.cc, malloc.cc, mmap.cc, signals.cc,
// spawn.cc, io.cc, rlimit.cc, altstack.cc). The shim is the LD_PRELOAD library of `uswap run`: it
// routes every anonymous byte of any dynamically linked program into one pager (pager.h) per
// process:
//   - the whole malloc family is mimalloc, whose only memory is the pager's arena (a managed
//     arena, mi_manage_os_memory_ex, and beyond it mimalloc's own mmap calls, which reach the
//     shim's mmap); glibc's malloc serves only the pager's own allocations and whatever was
//     allocated before the shim's constructor ran;
//   - every anonymous private mmap, of any protection, becomes a pager mapping; munmap,
//     mprotect, madvise and mremap of arena memory go to the pager; a file or shared mapping
//     placed MAP_FIXED inside the arena becomes a foreign range;
//   - kernel-mode access: where the userfaultfd resolves kernel-mode faults (handler threads on
//     a full descriptor) nothing is needed; otherwise a seccomp filter traps every system call
//     with a pointer into the arena and pins what it touches (kernel_access.h), and the libc
//     calls whose arena pointers hide behind other pointers (readv, sendmsg, exec, spawn) are
//     emulated or copied out of the arena here;
//   - fork: the pager's pthread_atfork handlers give the child a pager of its own;
//   - signals: the program's handlers for SIGBUS (sigbus mode) and SIGSYS (seccomp) are chained
//     behind the pager's, neither signal is ever blocked, and the pager's handlers run on an
//     alternate stack of the shim's, outside the arena (altstack.cc).
// See docs/design/uswap-run.md.
//
// Thread-safety: shim_state is written once by the constructor before `ready` is published
// (release); afterwards it is read-only but for the atomics. Every entry point may be called
// from any thread, and the signal-related ones from signal handlers.
#pragma once

#include <signal.h>
#include <stddef.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

#include "../kernel_access.h"
#include "../sigbus.h"
#include "uswap/base/page.h"
#include "uswap/uffd/job.h"
#include "uswap/uffd/pager.h"

#define USWAP_EXPORT extern "C" __attribute__((visibility("default")))

extern "C" {
void* __libc_malloc(size_t);
void __libc_free(void*);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
}

// The C library's syscall(), for the shim's own syscall() (mmap.cc) to jump to: set with
// libc_fns (the name is the assembly's, hence outside the namespace).
extern "C" __attribute__((visibility("hidden"))) long (*uswap_shim_next_syscall)(long, ...);
// fn(arg) with the stack pointer at `top` (16-byte aligned), then back on the caller's stack
// (altstack.cc). x86-64.
extern "C" __attribute__((visibility("hidden"))) void uswap_shim_call_on_stack(void* top,
                                                                               void (*fn)(void*),
                                                                               void* arg);

namespace uswap::shim {

struct shim_state {
  std::atomic<bool> ready{false};
  pager* pg = nullptr;                      // owned by owner, set once before `ready`
  std::shared_ptr<pager>* owner = nullptr;  // never destroyed: the program may run past exit
  uintptr_t arena_lo = 0, arena_hi = 0;
  bool seccomp = false;       // kernel access through kernel_access.h (no kernel-mode faults)
  bool sigbus_mode = false;   // the pager owns SIGBUS
  const char* stats_file = nullptr;
  int stats_fd = -1;  // the statistics file, kept open (init.cc open_stats)
  uint64_t start_ns = 0;
  uint64_t limit = 0;
  // What the pager had reserved when the constructor ended, as the kernel counts it against
  // RLIMIT_DATA (VmData) and RLIMIT_AS (VmSize), in bytes (rlimit.cc).
  uint64_t reserved_data = 0, reserved_vm = 0;
  // The executable's zero-initialized static data past its file's pages (.bss, Fortran's SAVE
  // and COMMON arrays): anonymous memory the kernel maps at exec, before the shim; unrouted.
  uint64_t static_bytes = 0;
  pid_t pid = 0;  // the process the pager belongs to (a vfork child shares it, and is not it)
  std::atomic<bool> stats_written{false};  // this image's line is out (exit, or exec)
  // The job (uswap run's shared limit, USWAP_JOB) the pager is a member of, and the signal its
  // reclaim requests come with; none: nullptr, 0.
  std::shared_ptr<uswap::job>* job = nullptr;  // never destroyed, as owner
  int job_signal = 0;
  const std::atomic<bool>* kswapd_wanted = nullptr;  // pager::kswapd_wanted, set before `ready`
};
extern shim_state g;

// The calling thread's alternate signal stack, the shim's (altstack.cc): installed once per
// thread (the main thread by the constructor, the others by pthread_create's start), so that the
// pager's handlers never push a frame onto a stack in the arena.
void install_thread_altstack() noexcept;
bool has_thread_altstack() noexcept;
bool on_thread_altstack(const void* sp) noexcept;
// fn(arg) on the calling thread's pager stack (altstack.cc), outside the arena; false, without
// calling it, if the thread has none or is on it already (a signal handler that interrupted a
// call there and entered the pager again).
bool call_on_pager_stack(void (*fn)(void*), void* arg);
// Whether `sp` (an interrupted context's) lies on the calling thread's pager stack while a
// call_on_pager_stack of its own runs there. Async-signal-safe.
bool in_call_on_pager_stack(const void* sp) noexcept;

// Pager code (the SIGBUS handler, handler threads, the shim's own calls into the pager) must
// never be routed into the pager: a thread-local depth marks it.
using shim_scope = uswap::pager_scope;
inline bool in_pager_code() noexcept { return uswap::pager_depth() != 0; }
inline bool ready() noexcept { return g.ready.load(std::memory_order_acquire); }
// Routing applies: the shim is configured and the caller is the program, not pager code.
inline bool active() noexcept { return ready() && !in_pager_code(); }
// The pager's threads it asked for (pager::start_wanted_threads), made from the program's own
// malloc calls (not the loader's, which may hold its TLS lock) and event-loop waits (poll,
// select, epoll_wait: signals.cc), where creating a thread is safe: outside a signal handler
// (malloc is not async-signal-safe, and nothing waits for events in one) and outside pager code.
inline void start_wanted_threads() noexcept {
  if (g.kswapd_wanted && g.kswapd_wanted->load(std::memory_order_relaxed)) [[unlikely]]
    if (active()) g.pg->start_wanted_threads();
}
inline bool in_arena(const void* p) noexcept {
  const auto a = reinterpret_cast<uintptr_t>(p);
  return ready() && a >= g.arena_lo && a < g.arena_hi;
}
// Whether [p, p + len) touches the arena.
inline bool overlaps_arena(const void* p, size_t len) noexcept {
  const auto a = reinterpret_cast<uintptr_t>(p);
  return ready() && len != 0 && a < g.arena_hi && a + len > g.arena_lo;
}
// The pager's pages just below the arena: the seccomp trampoline (16 pages below) and the lower
// guard page. A program's MAP_FIXED, munmap or mprotect over them would take them away, and
// the process would die at its next trapped system call (clisp reserves everything up to 32 TiB
// with MAP_FIXED): such a call is refused (mmap.cc), named.
inline constexpr uintptr_t pager_pages_below_arena = 16 * 4096;
inline bool over_pager_pages(const void* p, size_t len) noexcept {
  const auto a = reinterpret_cast<uintptr_t>(p);
  return ready() && len != 0 && a < g.arena_lo && a + len > g.arena_lo - pager_pages_below_arena;
}
// Whether [p, p + len) touches the range the arena takes, or will once the constructor has run
// (init.cc: an ancestor's filter's range, else USWAP_ARENA_BASE and USWAP_MAX_SIZE), its guard
// pages and trampoline included; false when the shim is not configured. For the memory calls
// made before the constructor (a library's constructor that maps at a hint, as Chromium's
// PartitionAlloc does at its first malloc), which must leave the range alone (mmap.cc).
bool in_planned_arena(const void* p, size_t len) noexcept;
inline bool inside_arena(const void* p, size_t len) noexcept {
  const auto a = reinterpret_cast<uintptr_t>(p);
  return ready() && a >= g.arena_lo && len <= g.arena_hi - a;
}

// The global locale's LC_CTYPE data and the bytes of it a new thread reads as it starts
// (__ctype_init: its header and the first three values, class, toupper, tolower), or nullptr
// when it is not in the arena (the C locale's is in libc). setlocale allocates it with malloc:
// in the arena, where a thread that starts may fault on it (threads.cc, spawn.cc). The value the
// shim's setlocale recorded: takes no lock, reads no arena memory.
inline constexpr size_t ctype_bytes_read = 0x60;
const void* global_ctype_data() noexcept;

// The libc functions the shim wraps, resolved (dlsym RTLD_NEXT) by the constructor; the memory
// ones through a guard (see tls_passing_on).
struct libc_fns {
  void* (*mmap)(void*, size_t, int, int, int, off_t);
  int (*munmap)(void*, size_t);
  int (*mprotect)(void*, size_t, int);
  int (*madvise)(void*, size_t, int);
  void* (*mremap)(void*, size_t, size_t, int, ...);
  int (*mlockall)(int);
  size_t (*malloc_usable_size)(void*);
  int (*sigaction)(int, const struct sigaction*, struct sigaction*);
  int (*sigprocmask)(int, const sigset_t*, sigset_t*);
  int (*pthread_sigmask)(int, const sigset_t*, sigset_t*);
  int (*sigsuspend)(const sigset_t*);
  int (*sigaltstack)(const stack_t*, stack_t*);
  long (*syscall)(long, ...);
};
extern libc_fns libc;
void resolve_libc();  // malloc.cc
// The libc functions, resolved on first use: a library the program links (jemalloc in
// redis-server) may call mmap from its own constructor, before the shim's has run.
inline const libc_fns& lc() noexcept {
  if (__builtin_expect(libc.mmap == nullptr, 0)) resolve_libc();
  return libc;
}

// The memory functions of libc_fns pass each call on to the next definition, the C library's
// or that of another library between the shim and it: gperftools' tcmalloc (SWI-Prolog links it)
// defines mmap, munmap and mremap for its hooks and makes the call with syscall(SYS_mmap, ...),
// which the shim's syscall() would send back to the shim's wrapper, which would pass it on again,
// forever. While a thread passes a call on (tls_passing_on > 0, set by those functions,
// malloc.cc), the memory calls it makes through syscall() go to the kernel (mmap.cc).
extern thread_local int tls_passing_on [[gnu::tls_model("initial-exec")]];

// The function `name` as the loaded object holding `in_object` defines it, read from its dynamic
// symbol table (dlopen.cc), or nullptr. Allocates nothing: it may run inside the program's own
// malloc (the C library's dlopen and dlsym with a handle call malloc).
void* object_function(const void* in_object, const char* name) noexcept;

// The executable segment of the loaded object whose text holds `fn`: [lo, hi), or {0, 0}.
std::pair<uintptr_t, uintptr_t> object_text(uintptr_t fn) noexcept;

// Sets errno from a uswap status (its code) and returns `fail`.
template <class T>
T fail_with(int err, T fail) noexcept {
  errno = err;
  return fail;
}

// A set without the signals the pager needs delivered (SIGBUS in sigbus mode, SIGSYS with
// seccomp: the kernel kills a thread that takes a forced one while blocking it; the job's
// reclaim signal: an idle member must hear it). Returns `set` itself when nothing had to go,
// else `copy` filled in.
const sigset_t* without_pager_signals(const sigset_t* set, sigset_t* copy) noexcept;
// Asynchronous signals wait while the shim is in the pager on the program's behalf (mmap and its
// relatives, fork), as they wait while the kernel runs those calls: a handler of the program's
// that waits for another thread (a stop-the-world collector's: SBCL, Boehm GC) would park this
// thread holding map_lock, and the collector's next fault would wait for it forever. The
// synchronous signals, the pager's own and glibc's internal ones stay deliverable. RAII.
class signals_deferred {
 public:
  signals_deferred() noexcept;
  ~signals_deferred();
  signals_deferred(const signals_deferred&) = delete;
  signals_deferred& operator=(const signals_deferred&) = delete;

 private:
  sigset_t saved_;
};
// body(), and its result, on the thread's pager stack when the caller runs on a stack in the
// arena (a coroutine's, SBCL's threads'); where it is called otherwise, or when there is no pager
// stack to use. Pager code must never run on a stack in the arena: its locals there are paged
// memory. Each system call naming them (a UFFDIO argument, a saved signal mask) traps, and the
// trap's pin runs nested inside the pager, taking map_lock for reading while this thread holds it
// (behind a queued writer, for ever); and reclaim may evict the very page it runs on, whose
// fault then waits for the LRU lock that reclaim holds.
template <class F>
auto off_arena_stack(F&& body) {
  using result = std::invoke_result_t<F&>;
  struct call {
    F* body;
    std::conditional_t<std::is_void_v<result>, char, result> r{};
  } c{&body};
  void (*run)(void*) = [](void* p) {
    auto* c = static_cast<call*>(p);
    if constexpr (std::is_void_v<result>)
      (*c->body)();
    else
      c->r = (*c->body)();
  };
  if (!inside_arena(__builtin_frame_address(0), 1) || !call_on_pager_stack(run, &c)) run(&c);
  if constexpr (!std::is_void_v<result>) return c.r;
}
// A call into the pager from a wrapper: body() runs as pager code with the asynchronous signals
// deferred, off a stack in the arena, and its result is returned. A program signal that lands
// on the pager stack on either side of the deferral (the program's handler would find the
// pager's stack pointer in its context) is kept (signals.cc) and delivered once the thread is
// back on its own stack.
template <class F>
auto pager_call(F&& body) {
  struct redeliver_kept {
    bool switched;  // only then can a signal have been kept for this call
    ~redeliver_kept() {
      if (switched) (void)uswap::kernel_access_redeliver_deferred();
    }
  } after{inside_arena(__builtin_frame_address(0), 1)};
  return off_arena_stack([&] {
    signals_deferred deferred;
    shim_scope scope;
    return body();
  });
}

// From now on every signal handler takes SA_ONSTACK (signals.cc): a thread runs on a stack in
// the arena. Idempotent.
void handlers_on_signal_stack() noexcept;
// Takes the job's reclaim signal over (signals.cc): the pager serves requests that come with it,
// the program's own handler for that number gets the rest.
void install_job_signal(int sig) noexcept;

// Statistics (init.cc): one JSON line for this process image to USWAP_STATS_FILE, at exit or
// just before an exec replaces the image; and a line naming an exec the shim cannot follow.
void write_stats(const char* event) noexcept;
// The end of this process image (exit, _exit, exec): its statistics line, and its share of the
// job back at once. image_goes_on: an exec failed, the image is still there (and in the job).
void image_ends(const char* event) noexcept;
void image_goes_on() noexcept;
// A sample of the unrouted-memory peak, if 10 ms passed since the last one.
void sample_if_due() noexcept;
void note_unrouted_exec(const char* path, const char* reason) noexcept;
// The job's environment (spawn.cc): this image's USWAP_* variables and the shim's LD_PRELOAD
// entry, kept at the end of the shim's start, so that a program started with an environment
// without them (env -i, a daemon that scrubs its children's) gets them back and stays in the job.
void keep_job_environment() noexcept;
// rt_sigaction(2) and rt_sigprocmask(2) as a program makes them through syscall() (signals.cc),
// routed as sigaction and pthread_sigmask are; they return as syscall(2) does.
long rt_sigaction_call(long sig, long act, long old, long set_size) noexcept;
long rt_sigprocmask_call(long how, long set, long old, long set_size) noexcept;
// struct sigaction as rt_sigaction(2) takes it (the shim's raw calls, past its own wrapper).
struct kernel_sigaction {
  void* handler;
  unsigned long flags;
  void* restorer;
  uint64_t mask;
};
// write(2) of the shim's own lines (statistics, messages) that cannot kill the process: past a
// RLIMIT_FSIZE the program set (OpenSSH's sandbox sets it to 0) the kernel sends SIGXFSZ, whose
// default ends the process; the line is lost instead (EFBIG).
ssize_t write_line(int fd, const void* buf, size_t n) noexcept;
// The program installed a seccomp filter of its own (sandbox.cc): the shim's own system calls
// beyond the pager's (its statistics at exit: getppid, /proc reads, rt_sigaction) may kill it,
// so it makes none; its statistics line is not written.
inline std::atomic<bool> program_sandboxed{false};
// seccomp(2) as the program calls it through syscall() (sandbox.cc): a filter it installs gets
// the pager's allowance in front. Returns as syscall(2) does (-1 with errno set on failure).
long seccomp_filter_call(long op, long flags, long args) noexcept;
// prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, prog, a4, a5) with the same allowance; as syscall(2).
long prctl_filter_call(unsigned long prog, unsigned long a4, unsigned long a5) noexcept;
// The process unmapped `rejected` reservations placed elsewhere than their mmap hint (mmap.cc):
// its hinted reservations go to the kernel from now on. Said once, on stderr and as an event.
void note_hints_honored(unsigned rejected) noexcept;

// Converts a raw result to the libc convention (-1 and errno).
inline long libc_result(long r) noexcept {
  if (r < 0 && r > -4096) {
    errno = static_cast<int>(-r);
    return -1;
  }
  return r;
}

}  // namespace uswap::shim
